package tree

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// TestActiveScanReuse checks the rule on active: a listing of /active/<h>
// may use the scan of the listing of /active before it, but never lists an
// exited agent, sees a reused pid at once, and lists a new agent by the
// next listing of its directory.
func TestActiveScanReuse(t *testing.T) {
	dir := t.TempDir()
	uid := uint32(os.Getuid())
	agent := func(pid int, start uint64) proctest.Proc {
		return proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: start, Argv: []string{"claude"}, Cwd: "/"}
	}
	if err := proctest.Write(dir, agent(100, 1), agent(200, 2)); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: dir, TmpDir: dir}
	}
	r := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs}, time.Now()).root()
	claude := func() []string {
		t.Helper()
		n, err := r.Lookup("claude")
		if err != nil {
			t.Fatal(err)
		}
		ents, err := n.(Dir).List()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name)
		}
		return out
	}
	listRoot := func() {
		t.Helper()
		if _, err := r.List(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, got []string, names ...string) {
		t.Helper()
		if !slices.Equal(got, names) {
			t.Errorf("%s: /active/claude = %v, want %v", what, got, names)
		}
	}

	listRoot()
	want("first", claude(), "100", "200")

	// Exit after the listing of /active: the reused scan is not believed.
	listRoot()
	if err := proctest.Remove(dir, 200); err != nil {
		t.Fatal(err)
	}
	want("after an exit", claude(), "100")

	// A reused pid (same pid, new start time) is listed at once, with its
	// new identity.
	listRoot()
	if err := proctest.Add(dir, agent(100, 7)); err != nil {
		t.Fatal(err)
	}
	want("after a reused pid", claude(), "100")
	if n, err := r.Lookup("claude"); err != nil {
		t.Fatal(err)
	} else if a, err := n.(Dir).Lookup("100"); err != nil || a.(*agentDir).p.Start != 7 {
		t.Fatalf("reused pid: %v, %v", a, err)
	}

	// A new agent started between the listing of /active and that of
	// its directory may be missed by that listing, never by the next.
	listRoot()
	if err := proctest.Add(dir, agent(300, 3)); err != nil {
		t.Fatal(err)
	}
	claude()
	want("the next listing", claude(), "100", "300")

	// Without a listing of /active, every listing of a directory scans.
	if err := proctest.Add(dir, agent(400, 4)); err != nil {
		t.Fatal(err)
	}
	want("no burst", claude(), "100", "300", "400")
}
