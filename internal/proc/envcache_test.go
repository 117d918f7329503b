package proc

import (
	"slices"
	"testing"

	"github.com/9harness/9harness/internal/proc/proctest"
)

// EnvironOf serves a process's environment from the cache while the pid
// names the same image (start time and argv), reads it again when either
// changed (a reused pid, an exec), keeps only the Wanted variables, and
// forgets the processes RetainEnv is not given.
func TestEnvironOfCache(t *testing.T) {
	dir := t.TempDir()
	argv := []string{"claude", "--resume", "x"}
	write := func(start uint64, argv []string, zmx string) Proc {
		t.Helper()
		if err := proctest.Write(dir, proctest.Proc{PID: 100, PPID: 1, UID: 1000, Start: start, Argv: argv,
			Env: []string{"ZMX_SESSION=" + zmx, "ANTHROPIC_API_KEY=sk"}, Cwd: "/w"}); err != nil {
			t.Fatal(err)
		}
		return Proc{PID: 100, Start: start, Argv: argv}
	}
	tab := New(dir)
	zmx := func(p Proc) string {
		t.Helper()
		v, _ := tab.GetenvOf(p, "ZMX_SESSION")
		return v
	}

	p := write(5000, argv, "one")
	if v := zmx(p); v != "one" {
		t.Fatalf("first read: %q, want one", v)
	}
	env, err := tab.EnvironOf(p)
	if err != nil || !slices.Equal(env, []string{"ZMX_SESSION=one"}) {
		t.Fatalf("EnvironOf = %q, %v: want the Wanted variables alone", env, err)
	}
	// The same image: served from the cache, not read (the file says
	// otherwise now, which a read would show).
	write(5000, argv, "rewritten")
	if v := zmx(p); v != "one" {
		t.Fatalf("same pid, start and argv: %q, want the cached one", v)
	}
	// A reused pid (another start time): read afresh.
	q := write(6000, argv, "two")
	if v := zmx(q); v != "two" {
		t.Fatalf("reused pid: %q, want two", v)
	}
	// An exec (same pid and start, another argv): read afresh.
	e := write(6000, []string{"node", "claude"}, "three")
	if v := zmx(e); v != "three" {
		t.Fatalf("exec'd: %q, want three", v)
	}
	// A process the scan did not give argv for is read, never cached.
	write(6000, []string{"node", "claude"}, "four")
	if v := zmx(Proc{PID: 100, Start: 6000}); v != "four" {
		t.Fatalf("no argv: %q, want four", v)
	}
	// Gone from the scan: forgotten.
	tab.RetainEnv(nil)
	write(6000, []string{"node", "claude"}, "five")
	if v := zmx(e); v != "five" {
		t.Fatalf("after RetainEnv without it: %q, want five (read afresh)", v)
	}
	// Kept by RetainEnv: still served from the cache.
	tab.RetainEnv([]Proc{e})
	write(6000, []string{"node", "claude"}, "six")
	if v := zmx(e); v != "five" {
		t.Fatalf("after RetainEnv with it: %q, want five (cached)", v)
	}
	// A read whose pid has since passed to another process is not kept
	// nor answered.
	write(7000, []string{"node", "claude"}, "other")
	if _, err := tab.EnvironOf(Proc{PID: 100, Start: 8000, Argv: []string{"x"}}); err == nil {
		t.Fatal("EnvironOf of a process the pid no longer names: no error")
	}
	tab.envs.mu.Lock()
	n := len(tab.envs.m)
	e7, ok := tab.envs.m[100]
	tab.envs.mu.Unlock()
	if n != 1 || !ok || e7.start != 6000 {
		t.Fatalf("cache after a refused read: %d entries, %+v", n, e7)
	}
}
