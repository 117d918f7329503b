//go:build redteam

package redteam

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	nharness "github.com/9harness/9harness/internal/harness"
)

// The ceilings every attacker checks. They catch breakage, not a figure:
// the figures are in the summary table.
const (
	// memoryMax is the unit's MemoryMax=, the cgroup the daemon runs in.
	memoryMax = 512 << 20
	// hwmCeiling is the most the daemon's VmHWM may reach under attack.
	hwmCeiling = 384 << 20
	// ownerWait is how long one owner `ls /` may take under attack.
	ownerWait = 5 * time.Second
)

// Uids of the tier. They need no passwd entries: the kernel names peers by
// number, and so does the policy.
const (
	ownerUID   = 4111 // runs the daemon
	friendUID  = 4112 // granted by --allow-uid
	strangeUID = 4114 // granted nothing
)

// require fails the test when a tool is missing under CI (CI=true), and
// skips it, saying why, elsewhere.
func require(t testing.TB, tool string) string {
	t.Helper()
	if p, err := exec.LookPath(tool); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, tool); isExec(p) {
			return p
		}
	}
	missing(t, tool+" is not installed (make deps installs it)")
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&0o111 != 0
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		missing(t, "needs root (peers under other uids, a memory cgroup)")
	}
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: %s", why)
	}
	t.Skipf("skipped: %s", why)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- the memory cgroup ----

// cgroup is a memory cgroup of memoryMax made for one daemon: v1 under
// /sys/fs/cgroup/memory, or v2 when /sys/fs/cgroup is the unified
// hierarchy. Swap is not allowed to stand in for memory.
type cgroup struct {
	dir string
	v2  bool
}

func newCgroup(t *testing.T, name string, limitBytes int64) *cgroup {
	t.Helper()
	requireRoot(t)
	leaf := cgroupLeaf(name)
	var cg *cgroup
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		cg = &cgroup{dir: filepath.Join("/sys/fs/cgroup", leaf), v2: true}
		// The parent must hand the memory controller down.
		if b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); !bytes.Contains(b, []byte("memory")) {
			os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory"), 0)
		}
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		cg = &cgroup{dir: filepath.Join("/sys/fs/cgroup/memory", leaf)}
	} else {
		missing(t, "no memory cgroup hierarchy (neither v2 at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/memory)")
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		missing(t, "cannot make a memory cgroup: "+err.Error())
	}
	t.Cleanup(cg.remove)
	limit := []byte(strconv.FormatInt(limitBytes, 10))
	if cg.v2 {
		must(t, os.WriteFile(filepath.Join(cg.dir, "memory.max"), limit, 0))
		os.WriteFile(filepath.Join(cg.dir, "memory.swap.max"), []byte("0"), 0)
	} else {
		must(t, os.WriteFile(filepath.Join(cg.dir, "memory.limit_in_bytes"), limit, 0))
		// memsw is memory plus swap: equal to the limit, no swap.
		os.WriteFile(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes"), limit, 0)
	}
	return cg
}

// cgroupLeaf is the name of the cgroup newCgroup makes for name: a
// process of it shows the name in /proc/PID/cgroup.
func cgroupLeaf(name string) string {
	return fmt.Sprintf("9harness-redteam-%d-%s", os.Getpid(), name)
}

func (cg *cgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// counter reads "key N" from one of the cgroup's flat-keyed files.
func (cg *cgroup) counter(file, key string) int64 {
	b, _ := os.ReadFile(filepath.Join(cg.dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func (cg *cgroup) single(file string) int64 {
	b, _ := os.ReadFile(filepath.Join(cg.dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// oomKills is how many processes the kernel killed for the cgroup's limit.
func (cg *cgroup) oomKills() int64 {
	if cg.v2 {
		return cg.counter("memory.events", "oom_kill")
	}
	return cg.counter("memory.oom_control", "oom_kill")
}

// peak is the cgroup's peak charge (page cache included).
func (cg *cgroup) peak() int64 {
	if cg.v2 {
		return cg.single("memory.peak")
	}
	return cg.single("memory.max_usage_in_bytes")
}

// remove deletes the cgroup once its processes are gone (the daemon's
// cleanup runs first: cleanups run last in, first out). A process the
// daemon started and that outlives it (a tmux server a move started) is
// moved to the parent cgroup first, never signalled.
func (cg *cgroup) remove() {
	for i := 0; ; i++ {
		err := os.Remove(cg.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		switch {
		case i == 40:
			b, _ := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
			for _, pid := range strings.Fields(string(b)) {
				os.WriteFile(filepath.Join(filepath.Dir(cg.dir), "cgroup.procs"), []byte(pid), 0)
			}
		case i == 80:
			fmt.Fprintf(os.Stderr, "redteam: could not remove the cgroup %s: %v\n", cg.dir, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- the daemon under attack ----

// rig is one daemon under one attack: its cgroup, its memory watched, the
// owner's listings timed.
type rig struct {
	t     *testing.T
	name  string
	cg    *cgroup
	cmd   *exec.Cmd
	sock  string
	owner int // the daemon's uid: whose `ls /` must always be answered
	log   *syncBuffer
	done  chan struct{}
	err   error // the daemon's exit, once done is closed
	began time.Time

	hwm  atomic.Int64 // the last VmHWM read, bytes
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	lsOK  int           // owner listings answered
	worst time.Duration // the slowest answered
	fails []string      // the owner listings not answered, why
	notes []string
}

// world is the files a daemon serves: a copy of the fixture home, and a
// socket directory the daemon's uid owns, both where every uid of the
// tier may reach them.
type world struct {
	base, home, sock string
	env              []string // added to the daemon's environment
}

// newWorld copies testdata/home for a daemon of uid owner.
func newWorld(t *testing.T, owner int) *world {
	t.Helper()
	base, err := os.MkdirTemp("", "9harness-redteam-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	home := filepath.Join(base, "home")
	if out, err := exec.Command("cp", "-a", "../../testdata/home", home).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	// The owner's own agents write under the home.
	if !strings.HasPrefix(home, os.TempDir()) {
		t.Fatalf("refusing to chown %q", home)
	}
	must(t, exec.Command("chown", "-R", fmt.Sprintf("%d:%d", owner, owner), home).Run())
	run := filepath.Join(base, "run")
	must(t, os.Mkdir(run, 0o711))
	must(t, os.Chmod(run, 0o711))
	must(t, os.Chown(run, owner, owner))
	return &world{base: base, home: home, sock: filepath.Join(run, "harness.sock")}
}

// rootArgs points every harness root at home.
func rootArgs(home string) []string {
	var a []string
	for _, h := range nharness.Names() {
		a = append(a, "--root", h+"="+nharness.DefaultRoot(h, home, ""))
	}
	return a
}

// startRig runs 9harnessd as owner on w, with extra flags, inside a fresh
// memory cgroup, and waits until the owner is answered.
// REDTEAM_DAEMON_ARGS adds flags after them, to show the tier failing when
// a bound is taken away: "--max-bytes 8G --max-bytes-per-uid 8G" lifts the
// byte budget, and the listing and fid attackers then pass the ceiling.
func startRig(t *testing.T, name string, owner int, w *world, extra ...string) *rig {
	t.Helper()
	requireRoot(t)
	r := &rig{t: t, name: name, sock: w.sock, owner: owner, log: &syncBuffer{}, done: make(chan struct{}), stop: make(chan struct{})}
	r.cg = newCgroup(t, strings.ReplaceAll(name, " ", "-"), memoryMax)
	args := append([]string{"--unix", w.sock, "--audit", "stderr"}, rootArgs(w.home)...)
	args = append(append(args, extra...), strings.Fields(os.Getenv("REDTEAM_DAEMON_ARGS"))...)
	r.cmd = exec.Command(bin("9harnessd"), args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner), Gid: uint32(owner)}}
	r.cmd.Env = append([]string{"PATH=" + bins + ":/usr/bin:/bin", "HOME=/nonexistent"}, w.env...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	must(t, r.cmd.Start())
	// Into the cgroup before it serves anyone: it has allocated next to
	// nothing yet, and the charge of what it allocates from now on is
	// the cgroup's.
	if err := r.cg.add(r.cmd.Process.Pid); err != nil {
		r.cmd.Process.Kill()
		t.Fatalf("putting the daemon in %s: %v", r.cg.dir, err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.shutdown)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := r.ownerLs(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer: %v\n%s", err, r.log.String())
		}
		select {
		case <-r.done:
			t.Fatalf("the daemon exited: %v\n%s", r.err, r.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.wg.Add(1)
	go r.watch()
	r.began = time.Now()
	return r
}

func (r *rig) pid() int { return r.cmd.Process.Pid }

// alive reports whether the daemon still runs.
func (r *rig) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// watch reads the daemon's VmHWM every 50 ms: the last read before an OOM
// kill is what it reached.
func (r *rig) watch() {
	defer r.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, err := vmHWM(r.pid()); err == nil && v > r.hwm.Load() {
			r.hwm.Store(v)
		}
		select {
		case <-r.stop:
			return
		case <-r.done:
			return
		case <-tick.C:
		}
	}
}

// vmHWM is the kernel's peak resident set size of pid, in bytes.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n << 10, err
			}
		}
	}
	return 0, errors.New("no VmHWM")
}

// overCeiling says the attack may stop: the daemon is gone or its peak is
// already past the ceiling, so the table has its answer. REDTEAM_FULL=1
// goes on until the daemon is gone or the attack is done, to see where
// the cgroup stops it.
func (r *rig) overCeiling() bool {
	if !r.alive() {
		return true
	}
	return os.Getenv("REDTEAM_FULL") != "1" && r.hwm.Load() > hwmCeiling
}

// ownerLs lists / as the owner through the real client and returns how
// long the answer took.
func (r *rig) ownerLs() (time.Duration, error) {
	out, took, err := clientAs(r.owner, r.sock, "", "ls", "/")
	if err == nil && !strings.Contains(out, "active") {
		err = fmt.Errorf("the listing lacks active: %q", out)
	}
	return took, err
}

// clientAs runs the 9harness client as uid with args, within ownerWait.
// path, when set, leads PATH (a fake ssh).
func clientAs(uid int, sock, path string, args ...string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerWait)
	defer cancel()
	if sock != "" {
		args = append([]string{"-s", sock}, args...)
	}
	cmd := exec.CommandContext(ctx, bin("9harness"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if path != "" {
		cmd.Env = []string{"PATH=" + path + ":/usr/bin:/bin"}
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ctx.Err() != nil {
		return string(out), took, fmt.Errorf("not answered within %v", ownerWait)
	}
	if err != nil {
		return string(out), took, fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return string(out), took, nil
}

// ownerListed records one owner listing.
func (r *rig) ownerListed(took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if len(r.fails) < 3 {
			r.t.Logf("owner ls / failed after %v: %v", took.Round(time.Millisecond), err)
		}
		r.fails = append(r.fails, err.Error())
		return
	}
	r.lsOK++
	r.worst = max(r.worst, took)
}

// ownerLists lists / as the owner again and again (a pause of gap
// between) until the returned stop is called.
func (r *rig) ownerLists(gap time.Duration) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			r.ownerListed(r.ownerLs())
			select {
			case <-quit:
				return
			case <-time.After(gap):
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

func (r *rig) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf(format, args...)
	r.notes = append(r.notes, s)
	r.t.Log(s)
}

// finish ends the attack: one more owner listing with whatever the attack
// holds still held, then the figures, the ceilings checked, and a row of
// the summary table.
func (r *rig) finish(attack string) {
	r.t.Helper()
	if r.alive() {
		r.ownerListed(r.ownerLs())
	}
	took := time.Since(r.began)
	if v, err := vmHWM(r.pid()); err == nil && v > r.hwm.Load() {
		r.hwm.Store(v)
	}
	close(r.stop)
	r.wg.Wait()
	// An OOM kill shows in the cgroup's counter and in the exit status.
	oom := r.cg.oomKills()
	alive := r.alive()
	if !alive {
		var ee *exec.ExitError
		if errors.As(r.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && oom == 0 {
				oom = 1 // killed, and nobody here sends SIGKILL
			}
		}
	}
	r.mu.Lock()
	worst := r.worst
	row := row{
		attacker: r.name, attack: attack, took: took, hwm: r.hwm.Load(), cgPeak: r.cg.peak(),
		oom: oom, alive: alive, lsOK: r.lsOK, lsAll: r.lsOK + len(r.fails), worst: worst,
		notes: strings.Join(r.notes, "; "),
	}
	fails := append([]string(nil), r.fails...)
	r.mu.Unlock()
	addRow(row)
	r.t.Logf("%s: %v, VmHWM %s (cgroup peak %s), OOM kills %d, owner ls %d of %d answered, worst %v",
		r.name, took.Round(100*time.Millisecond), mib(row.hwm), mib(row.cgPeak), oom, row.lsOK, row.lsAll, worst.Round(time.Millisecond))
	if oom > 0 {
		r.t.Errorf("the daemon was OOM-killed under the %d MiB cgroup", memoryMax>>20)
	} else if !alive {
		r.t.Errorf("the daemon exited under attack: %v\n%s", r.err, tail(r.log.String(), 2000))
	}
	if row.hwm > hwmCeiling {
		r.t.Errorf("the daemon's VmHWM reached %s, over the ceiling of %s", mib(row.hwm), mib(hwmCeiling))
	}
	if len(fails) > 0 {
		r.t.Errorf("%d of %d owner `ls /` not answered (within %v): first %s", len(fails), row.lsAll, ownerWait, fails[0])
	}
	if row.lsAll == 0 {
		r.t.Errorf("no owner `ls /` was made during the attack")
	}
}

// shutdown stops the daemon (our own child), SIGTERM then SIGKILL.
func (r *rig) shutdown() {
	if r.alive() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
		}
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// The daemon's log under a flood is long: keep its last 1 MiB.
	if b.buf.Len() > 2<<20 {
		b.buf.Next(b.buf.Len() - 1<<20)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dialer returns a function that connects to sock within 5 s.
func dialer(sock string) func() (net.Conn, error) {
	return func() (net.Conn, error) { return net.DialTimeout("unix", sock, 5*time.Second) }
}

// ---- the summary ----

type row struct {
	attacker, attack string
	took             time.Duration
	hwm, cgPeak      int64
	oom              int64
	alive            bool
	lsOK, lsAll      int
	worst            time.Duration
	notes            string
	noDaemon         bool // an attacker of the client alone
}

var (
	rowsMu sync.Mutex
	rows   []row
)

func addRow(r row) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	rows = append(rows, r)
}

// printSummary prints the table RELIABILITY.md quotes on stdout, or, when
// REDTEAM_SUMMARY names a file, into it (make redteam prints that file,
// pass or fail: go test shows a passing package's stdout only with -v).
func printSummary() {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| attacker | attack | time | VmHWM | cgroup peak | OOM kills | owner ls answered | worst owner ls | notes |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	var total time.Duration
	for _, r := range rows {
		total += r.took
		if r.noDaemon {
			fmt.Fprintf(&b, "| %s | %s | %.1f s | - | - | - | - | - | %s |\n", r.attacker, r.attack, r.took.Seconds(), r.notes)
			continue
		}
		oom := strconv.FormatInt(r.oom, 10)
		if !r.alive && r.oom == 0 {
			oom += " (exited)"
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f s | %s | %s | %s | %d of %d | %v | %s |\n",
			r.attacker, r.attack, r.took.Seconds(), mib(r.hwm), mib(r.cgPeak), oom, r.lsOK, r.lsAll, r.worst.Round(time.Millisecond), r.notes)
	}
	fmt.Fprintf(&b, "\nceilings: VmHWM <= %s, no OOM kill under a %s memory cgroup, every owner `ls /` answered within %v; attacks took %.0f s in all\n",
		mib(hwmCeiling), mib(memoryMax), ownerWait, total.Seconds())
	if f := os.Getenv("REDTEAM_SUMMARY"); f != "" {
		os.WriteFile(f, []byte(b.String()), 0o644)
	} else {
		fmt.Print(b.String())
	}
}
