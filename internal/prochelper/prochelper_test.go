package prochelper

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/proc"
)

// start serves a helper on a temporary socket for the test's lifetime.
func start(t *testing.T, idle time.Duration) (string, chan error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "helper")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Procs: proc.New("/proc"), UID: uint32(os.Getuid()), Logf: t.Logf}
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
	return sock, done
}

// A child of the test with a known environment, working directory and an
// open file: the helper's answers must equal the kernel's.
func TestGuardedReads(t *testing.T) {
	sock, _ := start(t, 0)
	dir := t.TempDir()
	held := filepath.Join(dir, "held.txt")
	f, err := os.Create(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	cmd.Env = []string{"ZMX_SESSION=helper-test", "PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
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
	env, err := c.Environ(pid)
	if err != nil || !slices.Equal(env, cmd.Env) {
		t.Errorf("environ = %q, %v; want %q", env, err, cmd.Env)
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
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if !slices.Contains(cr.Groups, uint32(g)) {
			t.Errorf("peer groups %v lack %d", cr.Groups, g)
		}
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
		{[]byte{'x', 1, 0, 0, 0}, "unknown op"},
		{[]byte{'c', 0, 0, 0, 0}, "bad pid"},
		{[]byte{'e', 0xff, 0xff, 0xff, 0xff}, "bad pid"},
		{[]byte{'p', 0, 0, 0, 0}, "exactly one descriptor"},
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
	if _, err := c.Cwd(os.Getpid()); err != nil {
		t.Errorf("after bad requests: %v", err)
	}
}

// Another uid gets nothing: the helper closes the connection unanswered.
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
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root to connect as another uid")
		}
		t.Skip("needs root to connect as another uid")
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
		if _, err := c.Cwd(os.Getpid()); err != nil {
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
