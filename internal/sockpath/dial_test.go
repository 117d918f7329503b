package sockpath

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawListener binds a unix stream socket at path; listen, unless
// backlog is negative, with that backlog.
func rawListener(t *testing.T, path string, backlog int) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if backlog >= 0 {
		if err := unix.Listen(fd, backlog); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// TestDialWaitsForBacklog: while the listen backlog is full a connect
// waits (it does not fail at once with EAGAIN, as Go's dial does) and
// completes as soon as the server accepts; with nobody accepting, it
// gives up with EAGAIN after RetryFor.
func TestDialWaitsForBacklog(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l := rawListener(t, sock, 0)
	// A backlog of 0 holds one connection: this one fills it.
	first, err := dialRetry(sock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	done := make(chan error, 1)
	go func() {
		c, err := dialRetry(sock, 5*time.Second)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a connect to a full backlog ended before the server accepted: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	nfd, _, err := unix.Accept(l)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(nfd)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting connect, once the server accepted: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connect did not complete after the server accepted")
	}

	// Full again, and nobody accepts: EAGAIN after RetryFor.
	start := time.Now()
	_, err = dialRetry(sock, 5*time.Second)
	took := time.Since(start)
	if !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a connect nobody accepts: %v, want EAGAIN", err)
	}
	if took < RetryFor-100*time.Millisecond || took > RetryFor+3*time.Second {
		t.Errorf("gave up after %v, want about RetryFor (%v)", took, RetryFor)
	}
}

// TestDialRetriesRefused: a connect refused while the socket file is there
// (nothing listening yet, as while socket activation restarts the daemon)
// is tried again, and succeeds once the server listens; a path with no
// socket fails at once.
func TestDialRetriesRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	fd := rawListener(t, sock, -1) // bound, not listening: ECONNREFUSED
	pauses := 0
	pauseFor = func(d time.Duration) {
		// The server listens during the client's third pause.
		if pauses++; pauses == 3 {
			if err := unix.Listen(fd, 8); err != nil {
				t.Error(err)
			}
		}
		time.Sleep(d)
	}
	defer func() { pauseFor = time.Sleep }()
	c, err := dialRetry(sock, 5*time.Second)
	if err != nil {
		t.Fatalf("a connect while the server comes up: %v", err)
	}
	c.Close()
	if pauses != 3 {
		t.Errorf("connected after %d pauses, want 3", pauses)
	}

	pauses = 0
	_, err = dialRetry(filepath.Join(t.TempDir(), "none"), 5*time.Second)
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("no socket: %v, want ENOENT", err)
	}
	if pauses != 0 {
		t.Errorf("no socket: tried again %d times, want none", pauses)
	}
}
