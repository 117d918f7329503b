package test

import (
	"bytes"
	"errors"
	nharness "github.com/9harness/9harness/internal/harness"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// require fails the test when a tool is missing under CI (CI=true), and
// skips it, saying why, on a developer's machine that lacks it.
func require(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
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

// requireRoot is require for tests that must switch uids.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		missing(t, "needs root (to run peers under other uids)")
	}
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: %s", why)
	}
	t.Skipf("skipped: %s", why)
}

// fixtureHome copies testdata/home into a fresh directory, so a test may
// add, append and remove files without touching the repository.
func fixtureHome(t testing.TB) string {
	t.Helper()
	dst := t.TempDir()
	out, err := exec.Command("cp", "-a", "../testdata/home/.", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("copy fixtures: %v: %s", err, out)
	}
	return dst
}

// rootArgs points every harness root at the fixture home.
func rootArgs(home string) []string {
	var a []string
	for _, h := range nharness.Names() {
		a = append(a, "--root", h+"="+nharness.DefaultRoot(h, home, ""))
	}
	return a
}

// daemon is a running 9harnessd.
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	sock   string
	stderr *syncBuffer
	done   chan error
}

// startDaemon runs 9harnessd on a fresh socket with the given extra args
// and waits until it accepts connections.
func startDaemon(t testing.TB, home string, extra ...string) *daemon {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "harness.sock")
	d := launch(t, append(append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(home)...), extra...)...)
	d.sock = sock
	d.waitReady()
	return d
}

// startDaemonEnv is startDaemon with env added to the daemon's
// environment (this process's): a test that runs beside others gives its
// daemon a variable of its own this way, where t.Setenv would change it
// for every test.
func startDaemonEnv(t testing.TB, env []string, home string, extra ...string) *daemon {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "harness.sock")
	d := launchEnv(t, env, bin("9harnessd"), append(append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(home)...), extra...)...)
	d.sock = sock
	d.waitReady()
	return d
}

func launch(t testing.TB, args ...string) *daemon {
	t.Helper()
	return launchCmd(t, bin("9harnessd"), args...)
}

// launchCmd starts the daemon through another program (unshare, setpriv)
// that execs it in place, so the process is the daemon's.
func launchCmd(t testing.TB, prog string, args ...string) *daemon {
	t.Helper()
	return launchEnv(t, nil, prog, args...)
}

// launchEnv is launchCmd with env added to this process's environment.
func launchEnv(t testing.TB, env []string, prog string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(prog, args...)
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) waitReady() {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-d.done:
			d.done <- err
			d.t.Fatalf("daemon exited early: %v\n%s", err, d.stderr.String())
		default:
		}
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("daemon did not listen on %s\n%s", d.sock, d.stderr.String())
}

// stop sends SIGTERM and waits; a daemon that does not stop in time is a
// test failure (and is then killed: it is our own child).
func (d *daemon) stop() {
	if d.cmd.Process == nil {
		return
	}
	select {
	case err := <-d.done:
		d.done <- err
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		d.t.Errorf("daemon did not stop on SIGTERM within 10s\n%s", d.stderr.String())
	}
}

// wait returns the daemon's exit error, waiting at most 10 s.
func (d *daemon) wait() error {
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(10 * time.Second):
		d.t.Fatalf("daemon still running\n%s", d.stderr.String())
		return nil
	}
}

func (d *daemon) client() *client.Client {
	d.t.Helper()
	c, err := client.Dial(d.sock)
	if err != nil {
		d.t.Fatalf("dial %s: %v", d.sock, err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// diod runs one of diod's clients against the daemon and returns stdout.
func (d *daemon) diod(tool string, args ...string) ([]byte, error) {
	d.t.Helper()
	p := require(d.t, tool)
	cmd := exec.Command(p, append([]string{"-s", d.sock, "-a", "/"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(strings.TrimSpace(err.Error() + ": " + stderr.String()))
	}
	return out, nil
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Await returns the buffer once it holds every one of subs, or as it is
// after 10 s. A daemon's stderr reaches the buffer through a pipe and a
// copying goroutine, so a line the daemon wrote before it answered can
// arrive after the answer; a loaded machine shows it.
func (b *syncBuffer) Await(subs ...string) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := b.String()
		all := true
		for _, s := range subs {
			all = all && strings.Contains(out, s)
		}
		if all || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func netDial(sock string) (net.Conn, error) { return net.DialTimeout("unix", sock, 5*time.Second) }

// readAtLeast reads until n frames arrived, the peer closed, or the deadline.
func readAtLeast(c net.Conn, buf []byte, frames int) (int, error) {
	got := 0
	for {
		k, err := c.Read(buf[got:])
		got += k
		if countFrames(buf[:got]) >= frames || err != nil {
			return got, err
		}
	}
}

func countFrames(b []byte) int {
	n := 0
	for len(b) >= 7 {
		size := int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24
		if size < 7 || size > len(b) {
			break
		}
		n++
		b = b[size:]
	}
	return n
}

func indexFrame(b []byte, typ byte) int {
	off := 0
	for len(b) >= 7 {
		size := int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24
		if size < 7 || size > len(b) {
			break
		}
		if b[4] == typ {
			return off
		}
		off += size
		b = b[size:]
	}
	return -1
}

// emptyProc is a fixture process table with no processes, for tests that
// compare the whole tree: /active then holds only its six harness
// directories, whatever runs on the machine.
func emptyProc(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("btime 1790000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lineAfter returns the line of out that starts with prefix.
func lineAfter(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
