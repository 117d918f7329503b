package proc

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/proc/proctest"
)

func TestFixtureTable(t *testing.T) {
	dir := t.TempDir()
	err := proctest.Write(dir,
		proctest.Proc{PID: 100, PPID: 1, UID: 1000, Start: 5000, Argv: []string{"claude", "--resume", "x"}, Env: []string{"ZMX_SESSION=work", "TMUX=b=c", "ANTHROPIC_API_KEY=sk"}, Cwd: "/home/g/src", FDs: []string{"/dev/null", "/home/g/.codex/sessions/x.jsonl"}, Threads: []int{101, 102}},
		proctest.Proc{PID: 200, PPID: 100, UID: 1000, Start: 6000, Comm: "a) (b", Argv: []string{"node", "/x/bin/dsh"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tab := New(dir)
	pids, err := tab.PIDs()
	if err != nil || len(pids) != 2 {
		t.Fatalf("pids %v %v (threads must not list)", pids, err)
	}
	p, err := tab.Stat(200)
	if err != nil || p.PPID != 100 || p.Start != 6000 || p.Comm != "a) (b" || p.UID != 1000 || p.Argv[1] != "/x/bin/dsh" {
		t.Fatalf("stat %+v %v", p, err)
	}
	if v, ok := tab.Getenv(100, "ZMX_SESSION"); !ok || v != "work" {
		t.Fatalf("getenv %q %v", v, ok)
	}
	if v, _ := tab.Getenv(100, "TMUX"); v != "b=c" {
		t.Fatalf("getenv TMUX %q", v)
	}
	// Only the Wanted variables are read through Getenv.
	if v, ok := tab.Getenv(100, "ANTHROPIC_API_KEY"); ok || v != "" {
		t.Fatalf("getenv of a variable that is not Wanted: %q %v", v, ok)
	}
	if cwd, _ := tab.Cwd(100); cwd != "/home/g/src" {
		t.Fatal(cwd)
	}
	if fds, _ := tab.FDs(100); len(fds) != 2 {
		t.Fatal(fds)
	}
	if !tab.Alive(100, 5000) || tab.Alive(100, 5001) || tab.Alive(300, 1) {
		t.Fatal("alive")
	}
	if a := tab.Ancestry(200); len(a) != 2 || a[0] != 200 || a[1] != 100 {
		t.Fatalf("ancestry %v", a)
	}
	boot, err := tab.BootTime()
	if err != nil || boot.Unix() != proctest.Boot {
		t.Fatal(boot, err)
	}
	if s := Started(boot, 5000); s.Unix() != proctest.Boot+50 {
		t.Fatal(s)
	}
	// A reused pid is another process.
	proctest.Add(dir, proctest.Proc{PID: 100, PPID: 1, Start: 9999, Argv: []string{"sleep"}})
	if tab.Alive(100, 5000) {
		t.Fatal("reused pid still alive as the old process")
	}
	if _, err := tab.Stat(4242); err == nil {
		t.Fatal("missing pid")
	}
}

// The live table: our own process.
func TestLive(t *testing.T) {
	tab := New("/proc")
	p, err := tab.Stat(os.Getpid())
	if err != nil || p.PPID != os.Getppid() || p.Start == 0 || p.UID != uint32(os.Getuid()) {
		t.Fatalf("%+v %v", p, err)
	}
	if !tab.Alive(os.Getpid(), p.Start) {
		t.Fatal("not alive")
	}
	if _, err := tab.BootTime(); err != nil {
		t.Fatal(err)
	}
}

func TestParseStatHostile(t *testing.T) {
	for _, s := range []string{"", "(", ")", "1 (x", "1 (x) S", "1 (x) S a b"} {
		if _, err := ParseStat([]byte(s)); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestReadGrowsPastTheBuffer(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 10000)
	if err := proctest.Write(dir, proctest.Proc{PID: 7, Start: 5, Argv: []string{"a", long, "b"}}); err != nil {
		t.Fatal(err)
	}
	tb := New(dir)
	argv, err := tb.Argv(7)
	if err != nil || len(argv) != 3 || argv[1] != long || argv[2] != "b" {
		t.Fatalf("argv: %d words, %v", len(argv), err)
	}
	b, err := tb.ReadCmdline(7, make([]byte, 0, 3))
	if err != nil || len(b) != 10005 {
		t.Fatalf("ReadCmdline: %d bytes, %v", len(b), err)
	}
	if !tb.Alive(7, 5) || tb.Alive(7, 6) || tb.Alive(8, 5) {
		t.Fatal("Alive")
	}
}

// Split covers every index exactly once, in contiguous runs, whatever the
// count and the CPUs, and runs nothing when there is nothing.
func TestSplit(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8, 16} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 127, 128, 255, 256, 1000, 5003} {
			seen := make([]atomic.Int32, n)
			var runs atomic.Int32
			Split(n, func(lo, hi int) {
				runs.Add(1)
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("GOMAXPROCS=%d n=%d: index %d seen %d times", procs, n, i, c)
				}
			}
			switch k := min(procs, max(1, n/128), 8); {
			case n == 0 && runs.Load() != 0:
				t.Errorf("GOMAXPROCS=%d n=0: %d runs, want none (no empty run for a caller to index by)", procs, runs.Load())
			case n > 0 && k == 1 && runs.Load() != 1:
				t.Errorf("GOMAXPROCS=%d n=%d: %d runs, want one", procs, n, runs.Load())
			case k > 1 && int(runs.Load()) < k:
				t.Errorf("GOMAXPROCS=%d n=%d: %d runs, want at least one per goroutine (%d)", procs, n, runs.Load(), k)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestSplitShares: a goroutine held up in one run leaves the rest of the
// items to the others. The first run waits until three quarters of the
// items are done elsewhere, which happens only if the other goroutine
// takes the held one's share too; with fixed halves it would wait
// forever (here: fail after 10 s).
func TestSplitShares(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	const n = 1000
	var done, first atomic.Int32
	timeout := time.After(10 * time.Second)
	Split(n, func(lo, hi int) {
		if first.Add(1) == 1 {
			for done.Load() < n*3/4 {
				select {
				case <-timeout:
					t.Errorf("while one run was held the other goroutine did %d items, want %d", done.Load(), n*3/4)
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
		done.Add(int32(hi - lo))
	})
	if done.Load() != n {
		t.Errorf("%d items done, want %d", done.Load(), n)
	}
}

func TestWanted(t *testing.T) {
	w := Wanted()
	for _, name := range []string{"ZMX_SESSION", "ZMX_DIR", "ZMX_SESSION_PREFIX", "TMUX", "TMUX_PANE", "TMUX_TMPDIR",
		"HOME", "PATH", "TMPDIR", "XDG_RUNTIME_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR"} {
		if !IsWanted(name) || !slices.Contains(w, name) {
			t.Errorf("%s is not Wanted", name)
		}
	}
	for _, name := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "", "tmux", "LD_PRELOAD"} {
		if IsWanted(name) {
			t.Errorf("%q is Wanted", name)
		}
	}
	got := OnlyWanted([]string{"HOME=/h", "ANTHROPIC_API_KEY=sk", "TMUX", "=x", "PATH=/bin", "HOME"})
	if want := []string{"HOME=/h", "PATH=/bin"}; !slices.Equal(got, want) {
		t.Errorf("OnlyWanted = %q, want %q", got, want)
	}
	if !slices.IsSorted(w) {
		t.Errorf("Wanted is not sorted: %q", w)
	}
}

// TestCwdLengths: a cwd is read whole whatever its length (one readlink
// into a stack buffer for most, a second way past it), and a process
// that is gone says so.
func TestCwdLengths(t *testing.T) {
	dir := t.TempDir()
	long := "/" + strings.Repeat("d/", 1500) + "end" // past the first buffer
	var procs []proctest.Proc
	for i, cwd := range []string{"/", "/home/g/src", "/" + strings.Repeat("x", 1022), "/" + strings.Repeat("x", 1023), long} {
		procs = append(procs, proctest.Proc{PID: 100 + i, PPID: 1, UID: 1000, Start: 5000, Argv: []string{"claude"}, Cwd: cwd})
	}
	if err := proctest.Write(dir, procs...); err != nil {
		t.Fatal(err)
	}
	tab := New(dir)
	for _, p := range procs {
		if got, err := tab.Cwd(p.PID); err != nil || got != p.Cwd {
			t.Errorf("Cwd(%d) = %d bytes, %v; want %d bytes", p.PID, len(got), err, len(p.Cwd))
		}
	}
	if _, err := tab.Cwd(999); !errors.Is(err, ErrGone) {
		t.Errorf("Cwd of a pid that is not there: %v, want ErrGone", err)
	}
}
