package test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// TestOtherUIDGetsNothing: a peer whose uid is not the daemon's is closed
// before any reply, even with the socket opened to everyone. The peer is
// the project's own client run as another uid, and a raw Tversion sent as
// that uid.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestOtherUIDGetsNothing(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	home := fixtureHome(t)
	dir, err := os.MkdirTemp("", "9harness-sock-")
	must(t, err)
	defer os.RemoveAll(dir)
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "harness.sock")
	d := launch(t, append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(home)...)...)
	d.sock = sock
	d.waitReady()
	must(t, os.Chmod(sock, 0o666))

	cmd := exec.Command(bin("9harness"), "-s", sock, "ls", "/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("uid 65534 was served:\n%s", out)
	}
	if strings.Contains(string(out), "claude") {
		t.Fatalf("uid 65534 saw the tree:\n%s", out)
	}
	t.Logf("uid 65534: %s", strings.TrimSpace(string(out)))

	// Raw: as uid 65534, send a Tversion and read: the daemon closes with
	// zero bytes of reply.
	probe := exec.Command(bin("self.test"), "-test.run=^TestHelperRawVersion$")
	probe.Env = append(os.Environ(), "HELPER_SOCK="+sock)
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	pout, err := probe.CombinedOutput()
	if err != nil || !strings.Contains(string(pout), "REPLY-BYTES 0") {
		t.Fatalf("raw probe as uid 65534: %v\n%s", err, pout)
	}
	eventually(t, func() bool { return strings.Contains(d.stderr.String(), "peer_uid=65534") }, "the refusal in the audit log")
	// The owner is still served.
	if _, err := d.client().ReadFile("/pid"); err != nil {
		t.Fatal(err)
	}
}

// TestHelperRawVersion is run as a subprocess (under another uid) by
// TestOtherUIDGetsNothing: it sends a Tversion and prints how many reply
// bytes came back before the connection closed.
func TestHelperRawVersion(t *testing.T) {
	sock := os.Getenv("HELPER_SOCK")
	if sock == "" {
		return // not a helper run
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := tversion(0xffff, 8192, "9P2000.L")
	c.Write(msg)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	println("REPLY-BYTES", n)
}

func tversion(tag uint16, msize uint32, version string) []byte {
	size := 4 + 1 + 2 + 4 + 2 + len(version)
	b := []byte{byte(size), byte(size >> 8), byte(size >> 16), byte(size >> 24), 100, byte(tag), byte(tag >> 8),
		byte(msize), byte(msize >> 8), byte(msize >> 16), byte(msize >> 24), byte(len(version)), byte(len(version) >> 8)}
	return append(b, version...)
}

// TestSocketLifecycle: a second daemon on a live socket refuses to start
// and names the path; a stale socket is replaced; SIGTERM removes the
// socket; something at the path that is not a socket is never replaced.
func TestSocketLifecycle(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)

	second := launch(t, append([]string{"--unix", d.sock}, rootArgs(home)...)...)
	if err := second.wait(); err == nil {
		t.Fatal("second daemon on a live socket started")
	}
	if msg := second.stderr.String(); !strings.Contains(msg, d.sock) || !strings.Contains(msg, "already serving") {
		t.Fatalf("second daemon's message does not name the path: %q", msg)
	}
	if _, err := d.client().ReadFile("/pid"); err != nil {
		t.Fatalf("first daemon hurt by the second: %v", err)
	}

	d.stop()
	if _, err := os.Lstat(d.sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after SIGTERM: %v", err)
	}

	// A stale socket: bound, then its owner gone without unlinking.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	must(t, err)
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(stale); err != nil {
		t.Fatal("could not make a stale socket")
	}
	d2 := launch(t, append([]string{"--unix", stale}, rootArgs(home)...)...)
	d2.sock = stale
	d2.waitReady()
	if _, err := d2.client().ReadFile("/pid"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(stale)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}

	// A regular file is not a socket to replace.
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, []byte("keep"), 0o644))
	d3 := launch(t, append([]string{"--unix", file}, rootArgs(home)...)...)
	if err := d3.wait(); err == nil {
		t.Fatal("daemon replaced a regular file")
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Fatal("regular file damaged")
	}
}

// TestDefaultSocket: with no listen flag the daemon posts at
// $XDG_RUNTIME_DIR/9p/harness in a 0700 directory, and --name posts beside it.
func TestDefaultSocket(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	rt := t.TempDir()
	for _, tc := range []struct {
		args []string
		sock string
	}{
		{nil, filepath.Join(rt, "9p", "harness")},
		{[]string{"--name", "other"}, filepath.Join(rt, "9p", "other")},
	} {
		d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1)}
		d.cmd = exec.Command(bin("9harnessd"), append(tc.args, rootArgs(home)...)...)
		d.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
		d.cmd.Stderr = d.stderr
		must(t, d.cmd.Start())
		go func() { d.done <- d.cmd.Wait() }()
		d.sock = tc.sock
		d.waitReady()
		fi, err := os.Stat(filepath.Dir(tc.sock))
		must(t, err)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("socket dir mode %v, want 0700", fi.Mode().Perm())
		}
		// The look-at-it line follows the socket's creation.
		look := "9harness -s " + tc.sock + " ls /"
		out := d.stderr.String()
		for i := 0; i < 100 && !strings.Contains(out, look); i++ {
			time.Sleep(50 * time.Millisecond)
			out = d.stderr.String()
		}
		if !strings.Contains(out, tc.sock) || !strings.Contains(out, look) {
			t.Errorf("start message lacks the socket and the look-at-it line:\n%s", out)
		}
		d.stop()
		if _, err := os.Lstat(tc.sock); !os.IsNotExist(err) {
			t.Errorf("socket %s left after SIGTERM", tc.sock)
		}
	}
}

// TestFD: --fd N serves exactly the one connection on descriptor N.
func TestFD(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	must(t, err)
	ours := os.NewFile(uintptr(fds[0]), "ours")
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(bin("9harnessd"), append([]string{"--fd", "3"}, rootArgs(home)...)...)
	d.cmd.ExtraFiles = []*os.File{theirs}
	d.cmd.Stderr = d.stderr
	must(t, d.cmd.Start())
	theirs.Close()
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	conn, err := net.FileConn(ours)
	must(t, err)
	ours.Close()
	c, err := client.New(conn)
	must(t, err)
	b, err := c.ReadFile("/pid")
	must(t, err)
	if strings.TrimSpace(string(b)) != itoa(d.cmd.Process.Pid) {
		t.Fatalf("/pid = %q, daemon pid %d", b, d.cmd.Process.Pid)
	}
	c.Close()
	if err := d.wait(); err != nil {
		t.Fatalf("--fd daemon did not exit cleanly after its one connection: %v\n%s", err, d.stderr.String())
	}
}

// TestSocketActivation: with LISTEN_FDS and no listen flag, the daemon
// serves the socket systemd handed over.
func TestSocketActivation(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	sock := filepath.Join(t.TempDir(), "act.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	must(t, err)
	f, err := l.File()
	must(t, err)
	defer l.Close()
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1), sock: sock}
	// LISTEN_PID must name the daemon itself: set it in a shell that then
	// execs the daemon, as systemd does.
	d.cmd = exec.Command("sh", append([]string{"-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bin("9harnessd")}, rootArgs(home)...)...)
	d.cmd.ExtraFiles = []*os.File{f}
	d.cmd.Stderr = d.stderr
	must(t, d.cmd.Start())
	f.Close()
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	c, err := client.Dial(sock)
	must(t, err)
	defer c.Close()
	b, err := c.ReadFile("/pid")
	must(t, err)
	if strings.TrimSpace(string(b)) != itoa(d.cmd.Process.Pid) {
		t.Fatalf("/pid = %q, want the activated daemon's pid %d", b, d.cmd.Process.Pid)
	}
}

// TestConnectionCap: the owner's connections beyond --max-conns wait for
// a slot, with a log line, instead of being closed, and are served as soon
// as another closes.
//
// Guards rule 10: bounded connections, and a burst of the owner's own
// clients waits for a slot rather than being closed.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home, "--max-conns", "2")
	a, err := client.Dial(d.sock)
	must(t, err)
	b, err := client.Dial(d.sock)
	must(t, err)
	defer b.Close()
	type dialed struct {
		c   *client.Client
		err error
	}
	third := make(chan dialed, 1)
	go func() {
		c, err := client.Dial(d.sock)
		third <- dialed{c, err}
	}()
	eventually(t, func() bool {
		return strings.Contains(d.stderr.String(), "waits for a slot: 2 connections are already open (the cap)")
	},
		"a log line for the connection waiting")
	select {
	case got := <-third:
		t.Fatalf("the third connection was answered with the cap of 2 held: %v", got.err)
	default:
	}
	a.Close()
	select {
	case got := <-third:
		if got.err != nil {
			t.Fatalf("the third connection, once one closed: %v\n%s", got.err, d.stderr.String())
		}
		if _, err := got.c.ReadFile("/pid"); err != nil {
			t.Errorf("the third connection: %v", err)
		}
		got.c.Close()
	case <-time.After(10 * time.Second):
		t.Fatalf("the third connection was not served after one of the two closed\n%s", d.stderr.String())
	}
}

func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHelp: --help answers a newcomer and --version prints a version.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"9harnessd", "9harness"} {
		out, err := exec.Command(bin(b), "--help").CombinedOutput()
		if err != nil {
			t.Errorf("%s --help: %v", b, err)
		}
		if !strings.Contains(string(out), "usage: "+b) {
			t.Errorf("%s --help:\n%s", b, out)
		}
		out, err = exec.Command(bin(b), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), b+" ") {
			t.Errorf("%s --version: %v %q", b, err, out)
		}
	}
	out, err := exec.Command(bin("9harnessd"), "--root", "nosuch=/tmp").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown harness") {
		t.Errorf("bad --root accepted: %v %s", err, out)
	}
	out, err = exec.Command(bin("9harness"), "-s", "/nonexistent/sock", "ls", "/").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "/nonexistent/sock") || !strings.Contains(string(out), "start it") {
		t.Errorf("unreachable daemon message: %v %s", err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestIdleExit: with --idle-exit the daemon stays while a connection is
// open, and exits cleanly once it has been idle that long.
func TestIdleExit(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home, "--idle-exit", "1s")
	c := d.client()
	time.Sleep(2500 * time.Millisecond)
	if _, err := c.ReadFile("/pid"); err != nil {
		t.Fatalf("daemon left with a connection open: %v", err)
	}
	c.Close()
	start := time.Now()
	if err := d.wait(); err != nil {
		t.Fatalf("idle exit: %v\n%s", err, d.stderr.String())
	}
	if dt := time.Since(start); dt < 900*time.Millisecond {
		t.Errorf("exited %v after the last connection closed, before the idle time", dt)
	}
	if !strings.Contains(d.stderr.String(), "idle for 1s") {
		t.Errorf("no log line:\n%s", d.stderr.String())
	}
	if _, err := os.Lstat(d.sock); !os.IsNotExist(err) {
		t.Errorf("socket left after the idle exit: %v", err)
	}
}
