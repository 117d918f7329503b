package tree

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// TestReach: from a fixture process table, each agent's reach file, in
// its directory and its table row; a grantee has neither reach nor limits.
func TestReach(t *testing.T) {
	const pts = 136 << 8 // /dev/pts/N is pts|N
	uid := uint32(os.Getuid())
	dir, home := t.TempDir(), t.TempDir()
	agent := func(pid, ppid int, tty uint32, env ...string) proctest.Proc {
		return proctest.Proc{PID: pid, PPID: ppid, UID: uid, Start: uint64(pid), Argv: []string{"claude"}, Cwd: "/w", TTY: tty, Env: env}
	}
	procs := []proctest.Proc{
		agent(100, 1, 0), // setsid, or its terminal closed
		agent(101, 1, pts|1, "TMUX=/tmp/tmux-0/default,77,0", "TMUX_PANE=%1"),
		agent(102, 90, pts|2), // started by a shell at a terminal
		{PID: 90, PPID: 1, UID: uid, Start: 90, Argv: []string{"-bash"}, TTY: pts | 2, FDs: []string{"/dev/pts/2"}},
		agent(103, 1, pts|3), // its terminal held by its own child only
		{PID: 104, PPID: 103, UID: uid, Start: 104, Argv: []string{"bash", "-c", "make"}, TTY: pts | 3, FDs: []string{"/dev/pts/3"}},
		agent(105, 1, pts|4, "ZMX_SESSION=work"),
		agent(106, 1, 0, "TMUX=/tmp/tmux-0/default,77,0", "TMUX_PANE=%2"), // its pane was killed
	}
	if err := proctest.Write(dir, procs...); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: home, TmpDir: dir, Root: saferoot.New(filepath.Join(home, "."+h))}
	}
	want := map[int]string{100: "detached", 101: "tmux", 102: "tty", 103: "detached", 105: "zmx", 106: "detached"}
	for _, grantee := range []bool{false, true} {
		a := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs, grantee: grantee}, time.Now())
		r := a.root()
		rows := readTable(t, r)
		if len(rows) != len(want) {
			t.Fatalf("table: %d rows, want %d: %v", len(rows), len(want), rows)
		}
		for _, row := range rows {
			pid := int(row["pid"].(float64))
			got, ok := row["reach"]
			if grantee {
				if ok {
					t.Errorf("grantee: pid %d has reach %v", pid, got)
				}
				if _, err := lookupPath(r, "/claude/"+strconv.Itoa(pid)+"/reach"); err == nil {
					t.Errorf("grantee: pid %d's reach file exists", pid)
				}
				continue
			}
			if got != want[pid] {
				t.Errorf("pid %d: reach %v, want %q", pid, got, want[pid])
			}
			if b := readFact(t, r, "claude", pid, "reach"); b != want[pid]+"\n" {
				t.Errorf("pid %d: reach file %q, want %q", pid, b, want[pid])
			}
		}
	}
}

// readFact reads /active/<h>/<pid>/<name>.
func readFact(t *testing.T, r *activeRoot, h string, pid int, name string) string {
	t.Helper()
	n, err := lookupPath(r, "/"+h+"/"+strconv.Itoa(pid)+"/"+name)
	if err != nil {
		t.Fatalf("%s/%d/%s: %v", h, pid, name, err)
	}
	fh, err := n.(File).Open()
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 4096)
	k, _ := fh.ReadAt(b, 0)
	return string(b[:k])
}
