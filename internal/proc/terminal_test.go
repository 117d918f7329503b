package proc_test

import (
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// pts3 is /dev/pts/3's device number as tty_nr shows it.
const pts3 = 136<<8 | 3

func TestTTYPath(t *testing.T) {
	for dev, want := range map[uint32]string{
		pts3:               "/dev/pts/3",
		137<<8 | 4:         "/dev/pts/260",
		136<<8 | 0x500<<12: "/dev/pts/1280",
		4<<8 | 2:           "/dev/tty2",
		4<<8 | 64:          "", // ttyS0: no one to answer on it here
		0:                  "",
	} {
		if got := proc.TTYPath(dev); got != want {
			t.Errorf("TTYPath(%#x) = %q, want %q", dev, got, want)
		}
	}
}

// TestTTYHeld: on a fixture table, the agent's controlling terminal is
// held by the shell that shares it, by the terminal window holding its
// master, not by the agent's own children, not by another user's process.
func TestTTYHeld(t *testing.T) {
	const uid = 1000
	agent := proctest.Proc{PID: 100, PPID: 90, UID: uid, Start: 500, Argv: []string{"claude"}, TTY: pts3,
		FDs: []string{"/dev/pts/3", "/dev/pts/3", "/dev/pts/3"}}
	child := proctest.Proc{PID: 101, PPID: 100, UID: uid, Start: 510, Argv: []string{"bash", "-c", "make"}, TTY: pts3,
		FDs: []string{"/dev/pts/3"}}
	shell := proctest.Proc{PID: 90, PPID: 80, UID: uid, Start: 400, Argv: []string{"-bash"}, TTY: pts3,
		FDs: []string{"/dev/pts/3"}}
	window := func(index string) proctest.Proc {
		return proctest.Proc{PID: 80, PPID: 1, UID: uid, Start: 300, Argv: []string{"foot"},
			FDs: []string{"/dev/null", "/dev/ptmx"}, FDInfo: []string{"", "pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t2\ntty-index:\t" + index + "\n"}}
	}
	other := proctest.Proc{PID: 70, PPID: 1, UID: 0, Start: 200, Argv: []string{"sshd"}, TTY: pts3, FDs: []string{"/dev/pts/3"}}
	noTTY := agent
	noTTY.TTY, noTTY.FDs = 0, []string{"/dev/null", "/dev/null", "/dev/null"}
	for _, tc := range []struct {
		name  string
		procs []proctest.Proc
		held  bool
	}{
		{"shell shares it", []proctest.Proc{agent, child, shell}, true},
		{"window holds the master", []proctest.Proc{agent, child, window("3")}, true},
		{"window holds another's master", []proctest.Proc{agent, child, window("4")}, false},
		{"only its own children", []proctest.Proc{agent, child}, false},
		{"another user's process", []proctest.Proc{agent, other}, false},
		{"no terminal", []proctest.Proc{noTTY, shell}, false},
	} {
		dir := t.TempDir()
		if err := proctest.Write(dir, tc.procs...); err != nil {
			t.Fatal(err)
		}
		tb := proc.New(dir)
		held, err := tb.TTYHeld(100, 500)
		if err != nil || held != tc.held {
			t.Errorf("%s: held %v (%v), want %v", tc.name, held, err, tc.held)
		}
	}
	// A reused pid is not the agent.
	dir := t.TempDir()
	if err := proctest.Write(dir, agent, shell); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	if _, err := tb.TTYHeld(100, 501); err == nil {
		t.Error("another start time: no error")
	}
	if dev, err := tb.CtrlTTY(100, 500); err != nil || dev != pts3 {
		t.Errorf("CtrlTTY = %#x, %v", dev, err)
	}
}
