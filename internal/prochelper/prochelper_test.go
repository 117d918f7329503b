package prochelper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// start serves a helper on a temporary socket for the test's lifetime.
func start(t *testing.T, idle time.Duration) (string, chan error) {
	sock, done, _ := startGate(t, idle, nil)
	return sock, done
}

// startGate is start with a given gate (nil: the one Serve builds from the
// test process) and the helper's log.
func startGate(t *testing.T, idle time.Duration, g *Gate) (string, chan error, *logBuf) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "helper")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lb := &logBuf{t: t}
	s := &Server{Procs: proc.New("/proc"), UID: uint32(os.Getuid()), Logf: lb.logf, Gate: g}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, idle) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("helper did not stop")
		}
	})
	return sock, done, lb
}

// logBuf keeps the helper's log for the test to read.
type logBuf struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// candidate starts sleep under the argv[0] "claude", which the harness
// classifiers call a Claude session: a candidate agent.
func candidate(t testing.TB, dir string, env []string, extra ...*os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Args[0] = "claude"
	cmd.Dir = dir
	cmd.Env = env
	cmd.ExtraFiles = extra
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// A candidate agent with a known environment, working directory, open
// file and terminal: the helper's answers must equal the kernel's, its
// Environ only the Wanted variables, its MoveEnviron all of them.
func TestGuardedReads(t *testing.T) {
	sock, _ := start(t, 0)
	dir := t.TempDir()
	held := filepath.Join(dir, "held.txt")
	f, err := os.Create(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := []string{"ZMX_SESSION=helper-test", "PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=sk-marker", "CODEX_HOME=/x/codex"}
	cmd := candidate(t, dir, env, f)
	pid := cmd.Process.Pid

	procs := proc.New("/proc")
	c := Dial(sock)
	defer c.Close()
	procs.SetGuarded(c)

	// Many goroutines at once, over the client's small pool.
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			cwd, err := procs.Cwd(pid)
			if err != nil || cwd != dir {
				errs <- errors.New("cwd " + cwd + ": " + errString(err))
				return
			}
			if v, ok := procs.Getenv(pid, "ZMX_SESSION"); !ok || v != "helper-test" {
				errs <- errors.New("ZMX_SESSION = " + v)
				return
			}
			fds, err := procs.FDs(pid)
			if err != nil || !slices.Contains(fds, held) {
				errs <- errors.New("fds " + strings.Join(fds, ",") + ": " + errString(err))
				return
			}
			errs <- nil
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	want := []string{"ZMX_SESSION=helper-test", "PATH=/usr/bin:/bin", "CODEX_HOME=/x/codex"}
	if got, err := c.Environ(pid); err != nil || !slices.Equal(got, want) {
		t.Errorf("environ = %q, %v; want only the Wanted %q", got, err, want)
	}
	if got, err := c.MoveEnviron(pid); err != nil || !slices.Equal(got, env) {
		t.Errorf("move environ = %q, %v; want all of %q", got, err, env)
	}
	if exe, err := c.Exe(pid); err != nil || filepath.Base(exe) != "sleep" {
		t.Errorf("exe = %q, %v; want the sleep binary", exe, err)
	}
	self, err := proc.ReadNS("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	if ns, err := c.Namespaces(pid); err != nil || ns != self {
		t.Errorf("namespaces = %+v, %v; want ours %+v", ns, err, self)
	}
	if ref, err := c.Reference(); err != nil || ref != self {
		t.Errorf("reference = %+v, %v; want the helper's (ours) %+v", ref, err, self)
	}
	// The confinements: the candidate's is ours, as is the helper's
	// Baseline (neither this test nor the helper has no_new_privs or
	// seccomp of its own here), and the one judgement finds nothing.
	own, err := proc.ReadReference()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := c.Confinement(pid)
	if err != nil || conf.NS != self || conf.NoNewPrivs != own.NoNewPrivs || conf.LSM != own.LSM {
		t.Errorf("confinement = %+v, %v; want ours %+v", conf, err, own)
	}
	ref, err := c.ReferenceConfinement()
	if err != nil || ref != own {
		t.Errorf("reference confinement = %+v, %v; want %+v", ref, err, own)
	}
	if r, err := procs.Sandboxed(proc.Proc{PID: pid, Start: mustStart(t, pid)}); err != nil || r != "" {
		t.Errorf("Sandboxed = %q, %v; want none", r, err)
	}
	// No terminal on its descriptors: an error, not a size.
	if cols, rows, err := c.TTYSize(pid); err == nil {
		t.Errorf("tty size of a process without a terminal = %dx%d", cols, rows)
	}

	// A process that is gone is ErrGone, the way a direct read says it.
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := c.Cwd(pid); !errors.Is(err, proc.ErrGone) {
		t.Errorf("cwd of an exited process: %v, want ErrGone", err)
	}
	if _, err := c.Cwd(0); err == nil || errors.Is(err, proc.ErrGone) {
		t.Errorf("cwd of pid 0: %v, want a refusal", err)
	}
}

// The terminal size op reads the size of the agent's controlling terminal.
func TestTTYSize(t *testing.T) {
	sock, _ := start(t, 0)
	ptm, pts := openPTY(t)
	defer ptm.Close()
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 137, Row: 41}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Args[0] = "claude"
	cmd.Stdin, cmd.Stdout = pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := Dial(sock)
	defer c.Close()
	if cols, rows, err := c.TTYSize(cmd.Process.Pid); err != nil || cols != 137 || rows != 41 {
		t.Errorf("tty size = %dx%d, %v; want 137x41", cols, rows, err)
	}
}

// The tty held op: an agent whose controlling terminal this test holds
// the master of is held (the test is another process of the uid); one
// without a terminal is not; a process no harness claims is refused.
func TestTTYHeld(t *testing.T) {
	sock, _ := start(t, 0)
	ptm, pts := openPTY(t)
	defer ptm.Close()
	defer pts.Close()
	run := func(ctty bool) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Args[0] = "claude"
		if ctty {
			cmd.Stdin, cmd.Stdout = pts, pts
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		} else {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	atTTY, noTTY := run(true), run(false)
	c := Dial(sock)
	defer c.Close()
	if held, err := c.TTYHeld(atTTY.Process.Pid); err != nil || !held {
		t.Errorf("agent at a terminal the test holds: held %v, %v", held, err)
	}
	if held, err := c.TTYHeld(noTTY.Process.Pid); err != nil || held {
		t.Errorf("agent without a terminal: held %v, %v", held, err)
	}
	if _, err := c.TTYHeld(os.Getpid()); err == nil {
		t.Error("the test itself (no harness process): answered")
	}
}

func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fail(t, "no pty: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptm, pts
}

// A process that no harness claims is not answered: the helper reads only
// agents, so it cannot be asked about any pid.
//
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestNotCandidate(t *testing.T) {
	sock, _ := start(t, 0)
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"ZMX_SESSION=not-an-agent", "ANTHROPIC_API_KEY=sk-marker"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	for _, op := range []byte{opCwd, opFDs, opExe, opNS, opTTY, opEnviron, opMoveEnv} {
		st, msg := rawAsk(t, sock, op, uint32(pid))
		if st != stErr || !strings.Contains(msg, "not a harness process") || strings.Contains(msg, "marker") {
			t.Errorf("op %q of a plain sleep: status %d %q, want a refusal naming it not a harness process", op, st, msg)
		}
	}
	// The helper's own process (a Go test binary) is no agent either.
	if st, msg := rawAsk(t, sock, opEnviron, uint32(os.Getpid())); st != stErr {
		t.Errorf("environ of the test itself: status %d %q", st, msg)
	}
}

// rawAsk sends one request on a new connection and returns the reply.
func rawAsk(t *testing.T, sock string, op byte, arg uint32) (byte, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := binary.LittleEndian.AppendUint32([]byte{op}, arg)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var h [5]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("op %q: %v", op, err)
	}
	b := make([]byte, binary.LittleEndian.Uint32(h[1:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return h[0], string(b)
}

// Every op the helper answers is in the package doc's list, and every op
// the list names is answered by the helper, with the argument it says.
func TestOpList(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "prochelper.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	listed := regexp.MustCompile(`(?m)^\s+'(.)' `).FindAllStringSubmatch(doc, -1)
	var ops []byte
	for _, m := range listed {
		ops = append(ops, m[1][0])
	}
	want := []byte{opCwd, opFDs, opExe, opNS, opConf, opTTY, opTTYHeld, opEnviron, opMoveEnv, opPeer, opPeerExe, opRef, opRefConf}
	slices.Sort(ops)
	slices.Sort(want)
	if !slices.Equal(ops, want) {
		t.Fatalf("the doc lists ops %q, the helper has %q", ops, want)
	}
	// Each op letter outside the list is unknown; each in it is not.
	s := &Server{Procs: proc.New("/proc"), UID: uint32(os.Getuid()), Gate: &Gate{}}
	for op := range 256 {
		st, msg := s.answer(byte(op), 0, nil)
		unknown := st == stErr && strings.Contains(string(msg), "unknown op")
		if unknown == slices.Contains(want, byte(op)) {
			t.Errorf("op %q: status %d %q", byte(op), st, msg)
		}
	}
	// Agent ops take a pid; the others take 0.
	for _, op := range want {
		_, msg := s.answer(op, 0, nil)
		if agentOp(op) != strings.Contains(string(msg), "bad pid") {
			t.Errorf("op %q with pid 0: %q", op, msg)
		}
		_, msg = s.answer(op, 1<<22+1, nil)
		if !strings.Contains(string(msg), "bad pid") && !strings.Contains(string(msg), "must be 0") {
			t.Errorf("op %q with pid 2^22+1: %q, want a refusal", op, msg)
		}
	}
}

func mustStart(t *testing.T, pid int) uint64 {
	t.Helper()
	p, err := proc.New("/proc").Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p.Start
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The peer op reads the credentials of the connection it is handed.
func TestPeer(t *testing.T) {
	sock, _ := start(t, 0)
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", l.Addr().String())
		if err == nil {
			time.Sleep(2 * time.Second)
			c.Close()
		}
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := Dial(sock)
	defer c.Close()
	cr, err := c.Peer(conn)
	if err != nil {
		t.Fatal(err)
	}
	if cr.UID != uint32(os.Getuid()) || cr.GID != uint32(os.Getgid()) || cr.PID != int32(os.Getpid()) {
		t.Errorf("peer = %+v, want uid %d gid %d pid %d", cr, os.Getuid(), os.Getgid(), os.Getpid())
	}
	if self, _ := proc.ReadConfinement("/proc/self"); cr.Conf != self {
		t.Errorf("peer confinement %+v, want ours %+v", cr.Conf, self)
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if !slices.Contains(cr.Groups, uint32(g)) {
			t.Errorf("peer groups %v lack %d", cr.Groups, g)
		}
	}
}

// The peer image op identifies the executable of the connection it is
// handed, as the daemon reads it without a helper; a pid the kernel does
// not name for that connection is refused.
func TestPeerExe(t *testing.T) {
	sock, _ := start(t, 0)
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", l.Addr().String())
		if err == nil {
			time.Sleep(2 * time.Second)
			c.Close()
		}
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p, err := peer.Identify(conn, "/proc")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := Dial(sock)
	defer c.Close()
	self, err := peer.SelfExe()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Client{"helper": c, "daemon": nil} {
		id, err := PeerExe(c)(conn, p)
		if err != nil || id != self {
			t.Errorf("%s: peer executable %v %v, want %v", name, id, err, self)
		}
	}
	p.PID++
	if _, err := PeerExe(c)(conn, p); err == nil {
		t.Error("the helper's answer about another pid was taken")
	}
}

// Bad requests get an error reply or a closed connection, never an answer
// and never a dead helper.
func TestBadRequests(t *testing.T) {
	sock, _ := start(t, 0)
	ask := func(req []byte) (byte, string, error) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return 0, "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(req); err != nil {
			return 0, "", err
		}
		if cw, ok := c.(*net.UnixConn); ok {
			cw.CloseWrite()
		}
		var h [5]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return 0, "", err
		}
		b := make([]byte, binary.LittleEndian.Uint32(h[1:]))
		_, err = io.ReadFull(c, b)
		return h[0], string(b), err
	}
	for _, tc := range []struct {
		req  []byte
		want string
	}{
		{[]byte{'z', 1, 0, 0, 0}, "unknown op"},
		{[]byte{'c', 0, 0, 0, 0}, "bad pid"},
		{[]byte{'e', 0xff, 0xff, 0xff, 0xff}, "bad pid"},
		{[]byte{'p', 0, 0, 0, 0}, "exactly one descriptor"},
		{[]byte{'p', 1, 0, 0, 0}, "must be 0"},
		{[]byte{'r', 1, 0, 0, 0}, "must be 0"},
		{[]byte{'m', 1, 0, 0, 0}, "not a harness process"},
	} {
		st, msg, err := ask(tc.req)
		if err != nil || st != stErr || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: status %d %q %v, want an error naming %q", tc.req, st, msg, err, tc.want)
		}
	}
	// Half a request, then EOF: the connection is closed, no reply.
	if _, _, err := ask([]byte{'c', 1}); err == nil {
		t.Error("half a request was answered")
	}
	// The helper still answers.
	c := Dial(sock)
	defer c.Close()
	if _, err := c.Reference(); err != nil {
		t.Errorf("after bad requests: %v", err)
	}
}

// Another uid gets nothing: the helper closes the connection unanswered.
//
// Guards rule 3: a peer the kernel does not allow gets nothing; Tattach is never trusted; a client talks only to its own uid's server.
func TestOtherUIDRefused(t *testing.T) {
	if sock := os.Getenv("PROCHELPER_CHILD"); sock != "" {
		// The child, as uid 65534: ask, and print how many bytes came back.
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{'c', 1, 0, 0, 0})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.ReadFull(c, make([]byte, 5))
		os.Stdout.WriteString("REPLY " + strconv.Itoa(n) + "\n")
		return
	}
	if os.Getuid() != 0 {
		fail(t, "needs root to connect as another uid")
	}
	sock, _ := start(t, 0)
	// The child must reach the socket and its own binary.
	dir, err := os.MkdirTemp("", "prochelper-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{dir, filepath.Dir(sock), filepath.Dir(filepath.Dir(sock))} {
		os.Chmod(d, 0o755)
	}
	os.Chmod(sock, 0o666)
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "child.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestOtherUIDRefused$")
	cmd.Env = []string{"PROCHELPER_CHILD=" + sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "REPLY 0\n") {
		t.Errorf("uid 65534 got %q (%v), want 0 reply bytes", out, err)
	}
}

// With an idle timer the helper exits once no connection has been open for
// that long, and not while one is.
func TestIdleExit(t *testing.T) {
	sock, done := start(t, 300*time.Millisecond)
	c := Dial(sock)
	for range 5 {
		if _, err := c.Reference(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("exited with a connection open")
	default:
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		done <- nil // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("no idle exit")
	}
}
