package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveTable is a table of this machine's /proc that holds files; a test
// of the held files needs procfs (CI has it: no skip there).
func liveTable(t *testing.T) *Table {
	t.Helper()
	tb := New("/proc")
	if tb.held == nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("/proc is not procfs: the held files cannot be tested")
		}
		t.Skip("/proc is not procfs")
	}
	t.Cleanup(tb.Close)
	return tb
}

// child starts `sh -c 'read x; exec sleep 30'`: its cmdline changes when
// a line is written to the returned pipe (an exec, same pid).
func child(t *testing.T) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x; exec sleep 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, in
}

func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHeldFollowsTheProcess: a held file answers what a fresh open would.
// It shows an exec of its process (the same held descriptor, no new one),
// and once the process is reaped its pid is gone (ESRCH from the held
// file, then ENOENT from the fresh open), with the files closed.
func TestHeldFollowsTheProcess(t *testing.T) {
	tb := liveTable(t)
	before := fds(t)
	cmd, in := child(t)
	pid := cmd.Process.Pid

	deadline := time.Now().Add(10 * time.Second)
	var argv []string
	for {
		var err error
		if argv, err = tb.Argv(pid); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(argv, "read x; exec sleep 30") || time.Now().After(deadline) {
			break // the fork has exec'd sh
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(argv, "read x; exec sleep 30") {
		t.Fatalf("argv before the exec: %q", argv)
	}
	if _, err := tb.Ident(pid); err != nil {
		t.Fatal(err)
	}
	held := tb.Held()
	if held < 3 {
		t.Fatalf("%d files held after reading cmdline, stat and status, want 3 or more", held)
	}
	open := fds(t)

	in.Write([]byte("go\n"))
	for {
		var err error
		if argv, err = tb.Argv(pid); err != nil {
			t.Fatal(err)
		}
		if strings.Join(argv, " ") == "sleep 30" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.Join(argv, " "); got != "sleep 30" {
		t.Fatalf("argv after the exec: %q, want the new command line", got)
	}
	p, err := tb.Ident(pid)
	if err != nil || p.Comm != "sleep" {
		t.Fatalf("after the exec: %+v, %v, want comm sleep", p, err)
	}
	if fds(t) != open || tb.Held() != held {
		t.Fatalf("the exec was read through new descriptors: %d open, %d held; before %d, %d", fds(t), tb.Held(), open, held)
	}

	cmd.Process.Kill()
	cmd.Wait()
	if _, err := tb.Argv(pid); !errors.Is(err, ErrGone) {
		t.Fatalf("argv of a reaped process: %v, want ErrGone", err)
	}
	if _, err := tb.IdentStat(pid); !errors.Is(err, ErrGone) {
		t.Fatalf("stat of a reaped process: %v, want ErrGone", err)
	}
	if tb.Held() != held-3 {
		t.Fatalf("%d files held after the process went, want %d", tb.Held(), held-3)
	}
	tb.Close()
	if after := fds(t); after != before {
		t.Fatalf("descriptors: %d before, %d after Close", before, after)
	}
}

// TestHeldRetain: a listing of the table closes the files of processes
// that have gone, without reading them.
func TestHeldRetain(t *testing.T) {
	tb := liveTable(t)
	cmd, _ := child(t)
	pid := cmd.Process.Pid
	if _, err := tb.Ident(pid); err != nil {
		t.Fatal(err)
	}
	held := tb.Held()
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := tb.PIDs(); err != nil {
		t.Fatal(err)
	}
	if got := tb.Held(); got != held-2 {
		t.Fatalf("%d files held after a listing without the reaped process, want %d", got, held-2)
	}
}

// TestHeldBound: no more files are held than the bound, and a read beyond
// it is answered by a fresh open.
func TestHeldBound(t *testing.T) {
	tb := liveTable(t)
	tb.held.max = 4
	pids, err := tb.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, pid := range pids {
		if _, err := tb.Argv(pid); err == nil {
			read++
		}
	}
	if read < 5 {
		t.Fatalf("only %d processes read", read)
	}
	if got := tb.Held(); got != 4 {
		t.Fatalf("%d files held, want the bound, 4", got)
	}
	self := os.Getpid()
	a1, err1 := tb.Argv(self)
	a2, err2 := tb.Argv(self)
	if err1 != nil || err2 != nil || !slices.Equal(a1, a2) || len(a1) == 0 {
		t.Fatalf("reads beyond the bound: %q %v, %q %v", a1, err1, a2, err2)
	}
}

// TestUIDByPidfd: the uid read through a held pidfd (PIDFD_GET_INFO) is
// the one status gives, for a process of another uid too; the pidfd is
// what the table holds; once the process is reaped the pidfd answers
// ErrGone, never a later process's uid.
func TestUIDByPidfd(t *testing.T) {
	tb := liveTable(t)
	if !tb.held.pidfds {
		if os.Getenv("CI") == "true" {
			t.Fatal("the kernel answers no PIDFD_GET_INFO (Linux 6.13 and later): the pidfd path cannot be tested")
		}
		t.Log("the kernel answers no PIDFD_GET_INFO: only the status path is tested")
	}
	cmd := exec.Command("sleep", "30")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 4242}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	want, ok := parseUID(status)
	if !ok {
		t.Fatalf("no Uid in status: %q", status)
	}
	if os.Geteuid() == 0 && want != 65534 {
		t.Fatalf("status says uid %d, want 65534", want)
	}

	bystatus := New("/proc")
	bystatus.held.pidfds = false
	t.Cleanup(bystatus.Close)
	for _, c := range []struct {
		name string
		tb   *Table
	}{{"pidfd", tb}, {"status", bystatus}} {
		for range 2 { // the open, then the held descriptor
			if got, err := c.tb.UID(pid); err != nil || got != want {
				t.Fatalf("%s: UID = %d, %v; status says %d", c.name, got, err, want)
			}
		}
	}
	if tb.held.pidfds {
		fd := tb.held.fds[pid][heldStatus] - 1
		if link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); link != "anon_inode:[pidfd]" {
			t.Fatalf("the uid's held descriptor is %q, want a pidfd", link)
		}
	}

	held := tb.Held()
	cmd.Process.Kill()
	cmd.Wait()
	for _, c := range []*Table{tb, bystatus} {
		if uid, err := c.UID(pid); !errors.Is(err, ErrGone) {
			t.Fatalf("UID of a reaped process: %d, %v, want ErrGone", uid, err)
		}
	}
	if got := tb.Held(); got != held-1 {
		t.Fatalf("%d files held after the process went, want %d", got, held-1)
	}
}
