package tree

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// countingHost is a SessionHost that records every question: in the
// daemon, each one is a tmux process.
type countingHost struct {
	mu    sync.Mutex
	asked []string
}

func (h *countingHost) TmuxSession(ctx context.Context, agent proc.Proc, socket, pane, tmpdir string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, socket+" "+pane+" "+tmpdir)
	return "work:rescued"
}

func (h *countingHost) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

// TestTmuxAskedOnlyOnRead: walking /active (listings of /active,
// /active/<h> and an agent directory, a lookup and a stat of every field,
// an open of the tmux file) never asks the session host, which in the
// daemon runs tmux; the first read of an opened tmux file asks once, and
// further reads of that handle are served from what it answered.
func TestTmuxAskedOnlyOnRead(t *testing.T) {
	dir := t.TempDir()
	uid := uint32(os.Getuid())
	if err := proctest.Write(dir, proctest.Proc{PID: 100, PPID: 1, UID: uid, Start: 1, Argv: []string{"claude"}, Cwd: "/",
		Env: []string{"TMUX=/tmp/tmux-1000/work,77,0", "TMUX_PANE=%3", "TMUX_TMPDIR=/run/t"}}); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: dir, TmpDir: dir}
	}
	host := &countingHost{}
	for _, mover := range []Mover{nil, nopMover{}} {
		host.asked = nil
		r := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs, Sessions: host, Mover: mover}, time.Now()).root()
		if _, err := r.List(); err != nil {
			t.Fatal(err)
		}
		hn, err := r.Lookup("claude")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hn.(Dir).List(); err != nil {
			t.Fatal(err)
		}
		an, err := hn.(Dir).Lookup("100")
		if err != nil {
			t.Fatal(err)
		}
		ents, err := an.(Dir).List()
		if err != nil {
			t.Fatal(err)
		}
		sawTmux := false
		for _, e := range ents {
			sawTmux = sawTmux || e.Name == "tmux"
			n, a, err := LookupAttr(an.(Dir), e.Name)
			if err != nil {
				t.Fatalf("%s: %v", e.Name, err)
			}
			if _, err := n.Attr(); err != nil {
				t.Fatalf("%s: %v", e.Name, err)
			}
			if e.Name == "tmux" && a.Size != 0 {
				t.Errorf("tmux stat size %d: a stat cannot know it without asking tmux", a.Size)
			}
		}
		if !sawTmux {
			t.Fatalf("no tmux file for an agent in tmux: %v", ents)
		}
		if n := host.count(); n != 0 {
			t.Fatalf("mover %v: walking /active asked the session host %d times: %q", mover, n, host.asked)
		}
		n, err := an.(Dir).Lookup("tmux")
		if err != nil {
			t.Fatal(err)
		}
		h, err := n.(File).Open()
		if err != nil {
			t.Fatal(err)
		}
		if n := host.count(); n != 0 {
			t.Fatalf("an open asked the session host (%d): a write-open for a move would pay for it", n)
		}
		b, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<20))
		if err != nil || string(b) != "work:rescued\n" {
			t.Fatalf("read tmux = %q, %v", b, err)
		}
		io.ReadAll(io.NewSectionReader(h, 0, 1<<20))
		h.Close()
		if got := host.asked; len(got) != 1 || got[0] != "/tmp/tmux-1000/work %3 /run/t" {
			t.Fatalf("session host asked %q, want once with the agent's socket, pane and TMUX_TMPDIR", got)
		}
	}
}

type nopMover struct{}

func (nopMover) Move(context.Context, Writer, string, proc.Proc, string, []byte) error { return nil }

// TestTreeDoesNotImportMove: the tree is a model of files. The move
// package (which runs host binaries) is not among its dependencies, and
// none of this module's packages it depends on imports os/exec, so no
// listing or lookup can start a process. (os/exec is among the
// dependencies through godbus, for authz's polkit client, which the tree
// only names a type of.)
func TestTreeDoesNotImportMove(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatal("no go command to list the dependencies with")
		}
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Module}} {{join .Imports \" \"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	own := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "github.com/9harness/9harness" {
			continue
		}
		own++
		if strings.HasSuffix(f[0], "/internal/move") {
			t.Errorf("internal/tree depends on %s", f[0])
		}
		for _, imp := range f[2:] {
			if imp == "os/exec" {
				t.Errorf("%s, a dependency of internal/tree, imports os/exec", f[0])
			}
		}
	}
	if own < 3 {
		t.Fatalf("go list named %d of this module's packages; the check saw nothing:\n%s", own, out)
	}
}
