package test

// Tests of the fakes themselves (test/fakezmx, test/fakeharness): that they
// keep the real tools' on-disk formats, CLI and process shapes (the samples
// in testdata/home were taken from the real ones), so the tests that drive
// them prove something about the real ones.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is what the tests read of a process from /proc.
type proc struct {
	pid, ppid, pgid, sid int
	state, comm          string
	argv                 []string
	env                  map[string]string
	cwd                  string
}

func readProc(t testing.TB, pid int) (proc, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	s := string(b)
	p := proc{pid: pid, comm: s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')], env: map[string]string{}}
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p.state = f[0]
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	p.sid, _ = strconv.Atoi(f[3])
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		p.argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for _, kv := range strings.Split(string(b), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				p.env[k] = v
			}
		}
	}
	p.cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return p, true
}

// running reports whether pid exists and is not a zombie.
func running(t testing.TB, pid int) bool {
	p, ok := readProc(t, pid)
	return ok && p.state != "Z" && p.state != "X"
}

// holdsOpen reports whether pid has path open.
func holdsOpen(pid int, path string) bool {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l == path {
			return true
		}
	}
	return false
}

// fakeZmx is one test's zmx world: a socket dir, an environment with the
// fakes on PATH, and a cleanup that kills every session left in the dir.
type fakeZmx struct {
	t       *testing.T
	dir     string // ZMX_DIR
	cwd     string // the client's cwd
	home    string
	record  string // FAKE_RECORD
	env     []string
	tracked []int // processes the sessions started, killed if left over
}

func newFakeZmx(t *testing.T) *fakeZmx {
	t.Helper()
	base := t.TempDir()
	z := &fakeZmx{t: t, dir: filepath.Join(base, "zmx"), cwd: filepath.Join(base, "work"), home: filepath.Join(base, "home"), record: filepath.Join(base, "record.jsonl")}
	must(t, os.MkdirAll(z.cwd, 0o755))
	must(t, os.MkdirAll(z.home, 0o755))
	z.env = []string{"PATH=" + bins + ":/usr/bin:/bin", "HOME=" + z.home, "ZMX_DIR=" + z.dir, "FAKE_RECORD=" + z.record}
	t.Cleanup(z.cleanup)
	return z
}

func (z *fakeZmx) cleanup() {
	out, _ := z.cmd(nil, "kill", "*").CombinedOutput()
	if ents, _ := os.ReadDir(z.dir); len(ents) > 0 {
		for _, e := range ents {
			if e.Type() == os.ModeSocket {
				z.t.Errorf("session %s survived zmx kill '*': %s", e.Name(), out)
			}
		}
	}
	for _, pid := range z.tracked {
		if running(z.t, pid) {
			z.t.Errorf("pid %d survived its session", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (z *fakeZmx) track(pids ...int) { z.tracked = append(z.tracked, pids...) }

func (z *fakeZmx) cmd(extraEnv []string, args ...string) *exec.Cmd {
	c := exec.Command(bin("zmx"), args...)
	c.Args[0] = "zmx"
	c.Dir = z.cwd
	c.Env = append(append([]string{}, z.env...), extraEnv...)
	return c
}

// zmx runs the fake zmx and returns its stdout; a non-zero exit fails the
// test unless wantFail.
func (z *fakeZmx) zmx(args ...string) string {
	z.t.Helper()
	c := z.cmd(nil, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		z.t.Fatalf("zmx %q: %v\n%s%s", args, err, out, stderr.String())
	}
	return string(out)
}

// daemon returns the pid `zmx list` gives for session name.
func (z *fakeZmx) daemon(name string) int {
	z.t.Helper()
	re := regexp.MustCompile(`(?m)^name=` + regexp.QuoteMeta(name) + `\tpid=(\d+)\tclients=0\tcreated=(\d+)$`)
	m := re.FindStringSubmatch(z.zmx("list"))
	if m == nil {
		z.t.Fatalf("zmx list has no live session %q", name)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// records returns the FAKE_RECORD lines written so far.
func readRecords(t testing.TB, path string) []map[string]any {
	b, _ := os.ReadFile(path)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitRecords waits for n FAKE_RECORD lines and returns them.
func (z *fakeZmx) waitRecords(n int) []map[string]any {
	z.t.Helper()
	var recs []map[string]any
	eventually(z.t, func() bool { recs = readRecords(z.t, z.record); return len(recs) >= n }, fmt.Sprintf("%d started harnesses", n))
	for _, r := range recs {
		z.track(int(r["pid"].(float64)))
	}
	return recs
}

func (z *fakeZmx) history(name string) string { return z.zmx("history", name) }

// TestZmxRunShape: "zmx run NAME -d CMD…" creates a session whose socket
// accepts connections, held by a double-forked daemon with the client's
// argv; the command runs under a login bash (argv[0] "-bash") with
// ZMX_SESSION, TERM and the client's cwd, typed in with the task marker;
// every argument beginning -d is eaten; kill ends the whole session.
func TestZmxRunShape(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	const sid = "aaaa0000-1111-4222-8333-444455556666"
	z.env = append(z.env, "FAKE_SESSION="+sid) // TERM is unset
	client := z.cmd(nil, "run", "work", "-d", "claude", "--resume", sid, "-dangerously", "two words", "it's")
	out, err := client.CombinedOutput()
	if err != nil {
		t.Fatalf("zmx run: %v\n%s", err, out)
	}
	if string(out) != "session \"work\" created\ncommand sent!\n" {
		t.Errorf("zmx run printed %q", out)
	}

	sock := filepath.Join(z.dir, "work")
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no socket at %s: %v", sock, err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the session socket refuses connections: %v", err)
	}
	c.Close()
	if got := z.zmx("list", "--short"); got != "work\n" {
		t.Errorf("zmx list --short = %q", got)
	}
	if fi, err := os.Stat(z.dir); err != nil || fi.Mode().Perm() != 0o750&^os.FileMode(umaskNow()) {
		t.Errorf("socket dir mode %v, want 0750 less the umask", fi.Mode().Perm())
	}

	recs := z.waitRecords(1)
	argv := recs[0]["argv"].([]any)
	if got := fmt.Sprint(argv[1:]); got != fmt.Sprint([]any{"--resume", sid, "two words", "it's"}) {
		t.Errorf("the agent got argv %s: the -d arguments should be gone and the rest intact", got)
	}
	agentPID := int(recs[0]["pid"].(float64))
	agent, ok := readProc(t, agentPID)
	if !ok {
		t.Fatal("the agent is gone")
	}
	bash, _ := readProc(t, agent.ppid)
	daemonPID := z.daemon("work")
	daemon, _ := readProc(t, daemonPID)
	z.track(daemonPID, bash.pid)
	if bash.comm != "bash" || len(bash.argv) == 0 || bash.argv[0] != "-bash" {
		t.Errorf("the agent's parent is %q %q, want a login bash (argv[0] -bash)", bash.comm, bash.argv)
	}
	if bash.ppid != daemonPID {
		t.Errorf("bash's parent is %d, want the session daemon %d", bash.ppid, daemonPID)
	}
	if daemon.comm != "zmx" || filepath.Base(daemon.argv[0]) != "zmx" || strings.Join(daemon.argv[1:], " ") != strings.Join(client.Args[1:], " ") {
		t.Errorf("daemon comm %q argv %q: want the client's argv %q", daemon.comm, daemon.argv, client.Args)
	}
	self, _ := readProc(t, os.Getpid())
	if daemon.sid == daemonPID || daemon.sid == self.sid || daemon.ppid == os.Getpid() {
		t.Errorf("daemon pid %d sid %d ppid %d: want a double fork (orphaned, not a session leader, not in the test's session)", daemonPID, daemon.sid, daemon.ppid)
	}
	if bash.sid != bash.pid || agent.pgid != bash.pid {
		t.Errorf("bash sid %d, agent pgid %d: want bash to lead its session and the agent in its group", bash.sid, agent.pgid)
	}
	if agent.env["ZMX_SESSION"] != "work" || agent.env["TERM"] != "xterm-256color" || agent.env["FAKE_SESSION"] != sid {
		t.Errorf("agent env ZMX_SESSION=%q TERM=%q FAKE_SESSION=%q", agent.env["ZMX_SESSION"], agent.env["TERM"], agent.env["FAKE_SESSION"])
	}
	for k := range agent.env {
		if strings.HasPrefix(k, "FAKEZMX_") {
			t.Errorf("the fake's own variable %s leaked into the session", k)
		}
	}
	if agent.cwd != z.cwd || recs[0]["cwd"] != z.cwd {
		t.Errorf("agent cwd %q, want the client's %q", agent.cwd, z.cwd)
	}
	typed := regexp.MustCompile(`^claude --resume ` + sid + ` 'two words' 'it'\\''s'; echo ZMX_TASK_COMPLETED:[0-9a-f]{4}:\$\?\n$`)
	if h := z.history("work"); !typed.MatchString(h) {
		t.Errorf("history %q: want the quoted command and the task marker", h)
	}
	// The fake writes its registry record after the record of its argv.
	registry := waitRegistry(t, z.home, agentPID)

	if out := z.zmx("kill", "work"); out != "killed session work\n" {
		t.Errorf("zmx kill printed %q", out)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket survived zmx kill: %v", err)
	}
	for _, pid := range []int{daemonPID, bash.pid, agentPID} {
		pid := pid
		eventually(t, func() bool { return !running(t, pid) }, fmt.Sprintf("pid %d to end", pid))
	}
	// The hangup let the agent clean up, as a real harness does.
	if _, err := os.Stat(registry); !os.IsNotExist(err) {
		t.Errorf("the agent's registry survived the hangup: %v", err)
	}
	if got := z.zmx("list", "--short"); got != "" {
		t.Errorf("zmx list --short after kill = %q", got)
	}
}

// TestZmxRunIntoExistingSession: running into a name that is live does not
// make a new session: the line goes into the existing shell, with that
// session's environment, and waits behind a command still running there.
func TestZmxRunIntoExistingSession(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	first := z.cmd([]string{"WHO=first", "FAKE_SESSION=11111111-2222-4333-8444-555555555555"}, "run", "work", "-d", "claude")
	if out, err := first.CombinedOutput(); err != nil {
		t.Fatalf("zmx run: %v\n%s", err, out)
	}
	a := z.waitRecords(1)[0]
	aPID := int(a["pid"].(float64))
	daemonPID := z.daemon("work")
	agentA, _ := readProc(t, aPID)
	z.track(daemonPID, agentA.ppid)

	second := z.cmd([]string{"WHO=second", "FAKE_SESSION=66666666-7777-4888-8999-000000000000"}, "run", "work", "-d", "codex")
	out, err := second.CombinedOutput()
	if err != nil || string(out) != "command sent!\n" {
		t.Fatalf("zmx run into a live session: %v %q, want just \"command sent!\"", err, out)
	}
	if z.daemon("work") != daemonPID {
		t.Error("a second daemon took over the name")
	}
	if ents, _ := os.ReadDir(z.dir); len(ents) != 1 {
		t.Errorf("socket dir holds %d entries, want the one session", len(ents))
	}
	// The shell is busy with claude: codex is typed ahead and does not run.
	time.Sleep(300 * time.Millisecond)
	if n := len(readRecords(t, z.record)); n != 1 {
		t.Fatalf("%d harnesses started while the shell was busy, want 1", n)
	}
	if h := z.history("work"); !strings.Contains(h, "codex; echo ZMX_TASK_COMPLETED:") {
		t.Errorf("history %q lacks the typed-ahead line", h)
	}
	// Once claude ends the shell reads the line and runs it, in the first
	// session's shell and environment.
	must(t, syscall.Kill(aPID, syscall.SIGTERM))
	b := z.waitRecords(2)[1]
	agentB, ok := readProc(t, int(b["pid"].(float64)))
	if !ok {
		t.Fatal("codex is gone")
	}
	if b["name"] != "codex" || agentB.ppid != agentA.ppid {
		t.Errorf("%v has parent %d, want the existing session's bash %d", b["name"], agentB.ppid, agentA.ppid)
	}
	if agentB.env["WHO"] != "first" || agentB.env["ZMX_SESSION"] != "work" {
		t.Errorf("codex env WHO=%q ZMX_SESSION=%q: want the existing session's environment", agentB.env["WHO"], agentB.env["ZMX_SESSION"])
	}
	if !regexp.MustCompile(`(?m)^ZMX_TASK_COMPLETED:[0-9a-f]{4}:0$`).MatchString(z.history("work")) {
		t.Errorf("history lacks claude's completion marker: %q", z.history("work"))
	}
	z.zmx("kill", "work")
}

// TestZmxListStale: list shows live sessions, reports and deletes a stale
// socket (connect refused), ignores what is not a socket, marks the current
// session; run over a stale socket makes a new session.
func TestZmxListStale(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	z.zmx("run", "live", "-d", "true")
	daemonPID := z.daemon("live")
	z.track(daemonPID)
	must(t, os.WriteFile(filepath.Join(z.dir, "notes"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(z.dir, "logs"), 0o755))
	stale := func(name string) string {
		path := filepath.Join(z.dir, name)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		must(t, err)
		l.SetUnlinkOnClose(false)
		l.Close()
		return path
	}
	dead := stale("dead")

	if got := z.zmx("list", "--short"); got != "live\n" {
		t.Errorf("zmx list --short = %q, want only the live session", got)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("list --short kept the stale socket: %v", err)
	}
	stale("dead")
	want := regexp.MustCompile(`^name=dead\terr=ConnectionRefused\tstatus=cleaning up\nname=live\tpid=` + strconv.Itoa(daemonPID) + `\tclients=0\tcreated=\d+\n$`)
	if got := z.zmx("list"); !want.MatchString(got) {
		t.Errorf("zmx list = %q", got)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("list kept the stale socket: %v", err)
	}
	if _, err := os.Stat(filepath.Join(z.dir, "notes")); err != nil {
		t.Errorf("list removed a file that is not a socket: %v", err)
	}
	inside := z.cmd([]string{"ZMX_SESSION=live"}, "list")
	out, err := inside.Output()
	if err != nil || !strings.HasPrefix(string(out), "→ name=live\t") {
		t.Errorf("zmx list inside session live = %q %v, want the → mark", out, err)
	}

	old := stale("old")
	if out := z.zmx("run", "old", "-d", "true"); out != "session \"old\" created\ncommand sent!\n" {
		t.Errorf("run over a stale socket printed %q", out)
	}
	c, err := net.Dial("unix", old)
	if err != nil {
		t.Fatalf("run over a stale socket left no live session: %v", err)
	}
	c.Close()
	z.track(z.daemon("old"))
	z.zmx("kill", "old", "live")
	eventually(t, func() bool { return !running(t, daemonPID) }, "the daemon to exit")
}

// TestZmxNames: names are any bytes but '/' and NUL, not "." or "..",
// prefixed by $ZMX_SESSION_PREFIX, and bounded by sun_path.
func TestZmxNames(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	for _, bad := range []string{"a/b", ".", "..", ""} {
		c := z.cmd(nil, "run", bad, "-d", "true")
		if out, err := c.CombinedOutput(); err == nil {
			t.Errorf("zmx run %q succeeded: %s", bad, out)
		}
	}
	room := 107 - len(z.dir) - 1
	long := z.cmd(nil, "run", strings.Repeat("n", room+1), "-d", "true")
	out, err := long.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "session name is too long") {
		t.Errorf("a name one byte too long: %v %q", err, out)
	}
	for _, name := range []string{strings.Repeat("m", room), "odd name: [x]"} {
		z.zmx("run", name, "-d", "true")
		c, err := net.Dial("unix", filepath.Join(z.dir, name))
		if err != nil {
			t.Errorf("session %q: %v", name, err)
			continue
		}
		c.Close()
		z.track(z.daemon(name))
	}
	pre := z.cmd([]string{"ZMX_SESSION_PREFIX=p-"}, "run", "x", "-d", "sh", "-c", `echo "$ZMX_SESSION"`)
	if out, err := pre.CombinedOutput(); err != nil {
		t.Fatalf("zmx run with a prefix: %v %s", err, out)
	}
	if _, err := os.Lstat(filepath.Join(z.dir, "p-x")); err != nil {
		t.Errorf("the prefixed session has no socket p-x: %v", err)
	}
	z.track(z.daemon("p-x"))
	eventually(t, func() bool { return strings.Contains(z.history("p-x"), "\np-x\n") }, "ZMX_SESSION=p-x in the session")
}

// TestZmxSocketDir: the socket dir's precedence, its mode, and version.
func TestZmxSocketDir(t *testing.T) {
	t.Parallel()
	uid := os.Getuid()
	base := t.TempDir()
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"ZMX_DIR=/z/d", "XDG_RUNTIME_DIR=/run/u", "TMPDIR=/tt"}, "/z/d"},
		{[]string{"XDG_RUNTIME_DIR=/run/u", "TMPDIR=/tt"}, "/run/u/zmx"},
		{[]string{"TMPDIR=/tt"}, fmt.Sprintf("/tt/zmx-%d", uid)},
		{nil, fmt.Sprintf("/tmp/zmx-%d", uid)},
	} {
		c := exec.Command(bin("zmx"), "version")
		c.Env = append([]string{"HOME=" + base}, tc.env...)
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "socket_dir\t"+tc.want+"\n") || !strings.Contains(string(out), "log_dir\t") {
			t.Errorf("env %q: version printed %q, want socket_dir %s", tc.env, out, tc.want)
		}
	}
	dir := filepath.Join(base, "private")
	c := exec.Command(bin("zmx"), "list")
	c.Env = []string{"HOME=" + base, "ZMX_DIR=" + dir, "ZMX_DIR_MODE=0700"}
	if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), "no sessions found in "+dir) {
		t.Errorf("zmx list on an empty dir: %v %q", err, out)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("ZMX_DIR_MODE=0700 made %v %v", fi.Mode().Perm(), err)
	}
	a := exec.Command(bin("zmx"), "attach", "x")
	a.Env = c.Env
	out, err := a.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "attach is not supported by the test fake") {
		t.Errorf("zmx attach: %v %q", err, out)
	}
}

// TestZmxDaemonTerm: a daemon told to stop by SIGTERM takes its shell and
// command with it and removes its socket; a session whose shell exits ends.
func TestZmxDaemonTerm(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	z.zmx("run", "w", "-d", "claude")
	rec := z.waitRecords(1)[0]
	agent := int(rec["pid"].(float64))
	daemonPID := z.daemon("w")
	z.track(daemonPID)
	must(t, syscall.Kill(daemonPID, syscall.SIGTERM))
	for _, pid := range []int{daemonPID, agent} {
		pid := pid
		eventually(t, func() bool { return !running(t, pid) }, fmt.Sprintf("pid %d to end", pid))
	}
	if _, err := os.Lstat(filepath.Join(z.dir, "w")); !os.IsNotExist(err) {
		t.Errorf("the socket survived SIGTERM: %v", err)
	}

	z.zmx("run", "e", "-d", "exit")
	eventually(t, func() bool { _, err := os.Lstat(filepath.Join(z.dir, "e")); return os.IsNotExist(err) }, "the session whose shell exited to end")
}

// harness is a fake harness process this test started.
type harness struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startHarness(t *testing.T, name, home, cwd string, args []string, env ...string) *harness {
	t.Helper()
	cmd := exec.Command(bin(name), args...)
	cmd.Args[0] = name
	cmd.Dir = cwd
	cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/bin:/bin"}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	h := &harness{cmd: cmd, done: make(chan struct{})}
	go func() { h.err = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		h.stop(t, syscall.SIGTERM)
		if stderr.Len() > 0 {
			t.Logf("%s stderr: %s", name, stderr.String())
		}
	})
	return h
}

func (h *harness) pid() int { return h.cmd.Process.Pid }

func (h *harness) stop(t *testing.T, sig syscall.Signal) {
	select {
	case <-h.done:
		return
	default:
	}
	h.cmd.Process.Signal(sig)
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		t.Errorf("%s ignored %v", h.cmd.Args[0], sig)
		h.cmd.Process.Kill()
		<-h.done
	}
}

func (h *harness) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// waitFile waits for the one file matching glob and returns it.
func waitFile(t *testing.T, glob string) string {
	t.Helper()
	var m []string
	eventually(t, func() bool { m, _ = filepath.Glob(glob); return len(m) > 0 }, glob)
	if len(m) != 1 {
		t.Fatalf("%s matches %q, want one file", glob, m)
	}
	return m[0]
}

func jsonLines(t *testing.T, path string) ([]string, []map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var objs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: bad JSON line %q: %v", path, l, err)
		}
		objs = append(objs, m)
	}
	return lines, objs
}

var (
	tsName = `\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_`
	uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// TestFakeOmp: omp's current directory scheme, the v3 layout with its
// 256-byte title slot, a held fd, and --session PATH resuming in place.
func TestFakeOmp(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	tmp := filepath.Join(base, "tmp") // TMPDIR, so home is not under it
	elsewhere := filepath.Join(base, "elsewhere")
	for _, d := range []string{filepath.Join(home, "src", "x"), filepath.Join(tmp, "scratch"), elsewhere} {
		must(t, os.MkdirAll(d, 0o755))
	}
	record := filepath.Join(base, "record.jsonl")
	sessions := filepath.Join(home, ".omp", "agent", "sessions")
	for _, tc := range []struct{ cwd, dir string }{
		{filepath.Join(home, "src", "x"), "-src-x"},
		{home, "-"},
		{filepath.Join(tmp, "scratch"), "-tmp-scratch"},
		{tmp, "-tmp"},
		{elsewhere, "--" + strings.ReplaceAll(strings.TrimPrefix(elsewhere, "/"), "/", "-") + "--"},
	} {
		h := startHarness(t, "omp", home, tc.cwd, nil, "TMPDIR="+tmp, "FAKE_RECORD="+record)
		path := waitFile(t, filepath.Join(sessions, tc.dir, "*.jsonl"))
		if !holdsOpen(h.pid(), path) {
			t.Errorf("cwd %s: omp does not hold %s open", tc.cwd, path)
		}
		h.stop(t, syscall.SIGTERM)
		_, objs := jsonLines(t, path)
		if objs[1]["cwd"] != tc.cwd || !uuidV7.MatchString(objs[1]["id"].(string)) {
			t.Errorf("cwd %s: header %v, want its cwd and a UUIDv7 id", tc.cwd, objs[1])
		}
	}

	const sid = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	cwd := filepath.Join(home, "src", "x")
	must(t, os.RemoveAll(sessions))
	h := startHarness(t, "omp", home, cwd, nil, "TMPDIR="+tmp, "FAKE_SESSION="+sid, "FAKE_RECORD="+record)
	path := waitFile(t, filepath.Join(sessions, "-src-x", "*.jsonl"))
	if !regexp.MustCompile(`^` + tsName + sid + `\.jsonl$`).MatchString(filepath.Base(path)) {
		t.Errorf("transcript name %s", filepath.Base(path))
	}
	eventually(t, func() bool { b, _ := os.ReadFile(path); return strings.Count(string(b), "\n") >= 5 }, "the transcript")
	lines, objs := jsonLines(t, path)
	if len(lines[0]) != 256 || objs[0]["type"] != "title" || objs[0]["v"] != 1.0 {
		t.Errorf("title slot is %d bytes %v, want 256 bytes with the newline", len(lines[0]), objs[0])
	}
	if !strings.HasPrefix(lines[1], `{"type":"session","version":3,"id":"`+sid+`",`) || objs[1]["cwd"] != cwd {
		t.Errorf("header %q", lines[1])
	}
	if objs[2]["type"] != "model_change" || objs[2]["model"] != "anthropic/claude-opus-4-6" {
		t.Errorf("line 3 %v, want a model_change", objs[2])
	}
	h.stop(t, syscall.SIGTERM)

	r := startHarness(t, "omp", home, cwd, []string{"--session", path}, "TMPDIR="+tmp, "FAKE_RECORD="+record)
	eventually(t, func() bool { return holdsOpen(r.pid(), path) }, "the resumed omp to hold its transcript")
	eventually(t, func() bool { b, _ := os.ReadFile(path); return strings.Count(string(b), "\n") > len(lines) }, "the resumed omp to append")
	if m, _ := filepath.Glob(filepath.Join(sessions, "*", "*.jsonl")); len(m) != 1 {
		t.Errorf("resume made a new transcript: %q", m)
	}
	lines2, objs2 := jsonLines(t, path)
	if lines2[1] != lines[1] || objs2[len(lines)]["parentId"] != objs[len(objs)-1]["id"] {
		t.Errorf("the resumed omp rewrote the header or broke the tree")
	}
	recs := readRecords(t, record)
	if last := recs[len(recs)-1]; fmt.Sprint(last["argv"]) != fmt.Sprint([]any{"omp", "--session", path}) || int(last["pid"].(float64)) != r.pid() {
		t.Errorf("FAKE_RECORD line %v", last)
	}
}

// TestFakePi: pi's --<cwd>-- directory, the header first, no held fd, and
// --session PATH|ID resuming in place.
func TestFakePi(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	cwd := filepath.Join(home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	const sid = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	h := startHarness(t, "pi", home, cwd, nil, "FAKE_SESSION="+sid)
	dir := "--" + strings.ReplaceAll(strings.TrimPrefix(cwd, "/"), "/", "-") + "--"
	path := waitFile(t, filepath.Join(home, ".pi", "agent", "sessions", dir, "*_"+sid+".jsonl"))
	if !regexp.MustCompile(`^` + tsName + sid + `\.jsonl$`).MatchString(filepath.Base(path)) {
		t.Errorf("session file name %s", filepath.Base(path))
	}
	eventually(t, func() bool { b, _ := os.ReadFile(path); return strings.Count(string(b), "\n") >= 4 }, "the session file")
	lines, objs := jsonLines(t, path)
	if !strings.HasPrefix(lines[0], `{"type":"session","version":3,"id":"`+sid+`",`) || objs[0]["cwd"] != cwd {
		t.Errorf("first line %q, want the header", lines[0])
	}
	if objs[1]["type"] != "model_change" || objs[1]["provider"] != "anthropic" || objs[1]["modelId"] != "claude-opus-4-6" {
		t.Errorf("line 2 %v", objs[1])
	}
	if holdsOpen(h.pid(), path) {
		t.Error("pi holds its session file open; pi appends and closes")
	}
	h.stop(t, syscall.SIGTERM)

	for _, arg := range []string{path, sid[:13]} {
		before := len(lines)
		r := startHarness(t, "pi", home, cwd, []string{"--session", arg})
		eventually(t, func() bool { b, _ := os.ReadFile(path); return strings.Count(string(b), "\n") > before }, "the resumed pi to append")
		if holdsOpen(r.pid(), path) {
			t.Error("the resumed pi holds its session file open")
		}
		r.stop(t, syscall.SIGTERM)
		lines, _ = jsonLines(t, path)
	}
	if m, _ := filepath.Glob(filepath.Join(home, ".pi", "agent", "sessions", "*", "*.jsonl")); len(m) != 1 {
		t.Errorf("resume made a new session file: %q", m)
	}
}

// hermesStart is psutil's create_time for pid, computed here independently.
func hermesStart(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	s := string(b)
	ticks, _ := strconv.ParseFloat(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[19], 64)
	f, err := os.Open("/proc/stat")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			bt, _ := strconv.ParseFloat(v, 64)
			return bt + ticks/100
		}
	}
	t.Fatal("no btime in /proc/stat")
	return 0
}

// TestFakeHermes: the lease registry: its shape and Python formatting, the
// owner's process start time, pruning of dead owners, refusal of a session a
// live owner holds, release on exit, FAKE_IGNORE_TERM.
func TestFakeHermes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	must(t, os.MkdirAll(home, 0o755))
	runtime := filepath.Join(home, ".hermes", "runtime")
	registry := filepath.Join(runtime, "active_sessions.json")
	must(t, os.MkdirAll(runtime, 0o755))

	// A lease whose owner is dead: a process this test ran to completion.
	gone := exec.Command("true")
	must(t, gone.Run())
	must(t, os.WriteFile(registry, []byte(fmt.Sprintf(`{"entries": [{"lease_id": "dead", "pid": %d, "process_start_time": 1.5, "session_id": "20200101_000000_000000", "started_at": 1.0, "surface": "cli", "updated_at": 1.0}]}`, gone.Process.Pid)), 0o644))

	type lease struct {
		LeaseID          string      `json:"lease_id"`
		SessionID        string      `json:"session_id"`
		Surface          string      `json:"surface"`
		PID              int         `json:"pid"`
		ProcessStartTime json.Number `json:"process_start_time"`
		StartedAt        json.Number `json:"started_at"`
		UpdatedAt        json.Number `json:"updated_at"`
	}
	leases := func() []lease {
		var r struct{ Entries []lease }
		b, err := os.ReadFile(registry)
		must(t, err)
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		must(t, d.Decode(&r))
		return r.Entries
	}
	const sid = "20260920_100000_a1b2c3"
	a := startHarness(t, "hermes", home, home, nil, "FAKE_SESSION="+sid, "FAKE_IGNORE_TERM=1")
	eventually(t, func() bool { l := leases(); return len(l) == 1 && l[0].SessionID == sid }, "hermes's lease (and the dead one pruned)")
	l := leases()[0]
	if l.PID != a.pid() || l.Surface != "cli" || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(l.LeaseID) {
		t.Errorf("lease %+v", l)
	}
	if st, _ := l.ProcessStartTime.Float64(); math.Abs(st-hermesStart(t, a.pid())) >= 0.001 {
		t.Errorf("process_start_time %s, want %f", l.ProcessStartTime, hermesStart(t, a.pid()))
	}
	if sa, _ := l.StartedAt.Float64(); math.Abs(sa-float64(time.Now().Unix())) > 60 || !strings.Contains(string(l.StartedAt), ".") {
		t.Errorf("started_at %s, want a float of epoch seconds", l.StartedAt)
	}
	raw, _ := os.ReadFile(registry)
	if !strings.HasPrefix(string(raw), `{"entries": [{"lease_id": "`+l.LeaseID+`", "pid": `) {
		t.Errorf("registry %q: want json.dumps(sort_keys=True) formatting", raw)
	}

	// The same session again is refused while its owner lives.
	dup := exec.Command(bin("hermes"), "--resume", sid)
	dup.Args[0] = "hermes"
	dup.Env = []string{"HOME=" + home}
	out, err := dup.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "hermes-refusal-reason: SESSION_NOT_OWNED\n") {
		t.Errorf("a second owner of %s: %v %q, want a SESSION_NOT_OWNED refusal", sid, err, out)
	}
	// Another session coexists; --resume names it.
	const other = "20260920_110000_d4e5f6"
	b := startHarness(t, "hermes", home, home, []string{"--resume", other}, "FAKE_SESSION="+sid)
	eventually(t, func() bool { return len(leases()) == 2 }, "the second lease")

	// FAKE_IGNORE_TERM: SIGTERM is ignored, SIGINT still ends it cleanly.
	a.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	if a.exited() {
		t.Fatal("hermes with FAKE_IGNORE_TERM=1 died of SIGTERM")
	}
	a.stop(t, syscall.SIGINT)
	if ls := leases(); len(ls) != 1 || ls[0].SessionID != other || ls[0].PID != b.pid() {
		t.Errorf("after the first exited: %+v, want only %s's lease", ls, other)
	}
	b.stop(t, syscall.SIGTERM)
	if ls := leases(); len(ls) != 0 {
		t.Errorf("leases left: %+v", ls)
	}
	ents, _ := os.ReadDir(runtime)
	for _, e := range ents {
		if e.Name() != "active_sessions.json" && e.Name() != "active_sessions.lock" {
			t.Errorf("left in runtime/: %s", e.Name())
		}
	}
}

// TestFakeHarnessInZmx: what a move does: an agent resumed through zmx runs
// under the session's bash and holds its transcript.
func TestFakeHarnessInZmx(t *testing.T) {
	t.Parallel()
	z := newFakeZmx(t)
	cwd := z.cwd
	tmp := t.TempDir()
	z.env = append(z.env, "TMPDIR="+tmp)
	first := startHarness(t, "omp", z.home, cwd, nil, "TMPDIR="+tmp)
	path := waitFile(t, filepath.Join(z.home, ".omp", "agent", "sessions", "*", "*.jsonl"))
	first.stop(t, syscall.SIGTERM)
	z.zmx("run", "moved", "-d", "omp", "--session", path)
	rec := z.waitRecords(1)[0]
	pid := int(rec["pid"].(float64))
	eventually(t, func() bool { return holdsOpen(pid, path) }, "the moved omp to hold its transcript")
	p, _ := readProc(t, pid)
	bash, _ := readProc(t, p.ppid)
	if bash.argv[0] != "-bash" || bash.ppid != z.daemon("moved") || p.env["ZMX_SESSION"] != "moved" {
		t.Errorf("moved omp: parent %q (ppid %d), ZMX_SESSION=%q", bash.argv, bash.ppid, p.env["ZMX_SESSION"])
	}
	z.zmx("kill", "moved")
	eventually(t, func() bool { return !running(t, pid) }, "the moved omp to end")
}

func umaskNow() int {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return m
}
