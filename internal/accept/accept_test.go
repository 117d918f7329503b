package accept

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// script is a listener that plays a list of Accept results, then blocks
// until it is closed.
type script struct {
	mu     sync.Mutex
	steps  []any // net.Conn or error
	closed chan struct{}
	once   sync.Once
}

func newScript(steps ...any) *script { return &script{steps: steps, closed: make(chan struct{})} }

func (s *script) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.steps) > 0 {
		st := s.steps[0]
		s.steps = s.steps[1:]
		s.mu.Unlock()
		if err, ok := st.(error); ok {
			return nil, err
		}
		return st.(net.Conn), nil
	}
	s.mu.Unlock()
	<-s.closed
	return nil, net.ErrClosed
}

func (s *script) Close() error   { s.once.Do(func() { close(s.closed) }); return nil }
func (s *script) Addr() net.Addr { return &net.UnixAddr{Name: "script", Net: "unix"} }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestLoopHandsOverAndStops: every connection reaches handle in order,
// through a timeout and a shortage of descriptors (logged, paused); when
// ctx is done the listener is closed and Loop returns nil.
func TestLoopHandsOverAndStops(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	emfile := &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	l := newScript(a, timeoutErr{}, emfile, emfile, b)
	ctx, cancel := context.WithCancel(context.Background())
	var got []net.Conn
	var logs []string
	done := make(chan error, 1)
	go func() {
		done <- Loop(ctx, l, func(f string, args ...any) { logs = append(logs, fmt.Sprintf(f, args...)) }, func(c net.Conn) {
			got = append(got, c)
			if len(got) == 2 {
				cancel()
			}
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Loop: %v, want nil after ctx is done", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not return after ctx was done")
	}
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("handed over %v, want both connections in order", got)
	}
	if len(logs) != 2 || logs[0] != "accept: "+emfile.Error()+": pausing 5ms" || logs[1] != "accept: "+emfile.Error()+": pausing 10ms" {
		t.Errorf("logs %q, want two pauses, 5ms then 10ms", logs)
	}
	select {
	case <-l.closed:
	default:
		t.Error("the listener was not closed")
	}
}

// TestLoopReturnsFailure: a failure that does not pass ends the loop with
// that error, the listener left open for the caller.
func TestLoopReturnsFailure(t *testing.T) {
	bad := errors.New("listener broken")
	l := newScript(bad)
	err := Loop(context.Background(), l, nil, func(c net.Conn) { t.Errorf("handed over %v", c) })
	if err != bad {
		t.Errorf("Loop: %v, want %v", err, bad)
	}
	select {
	case <-l.closed:
		t.Error("the listener was closed")
	default:
	}
}

// TestBackoff: 5 ms, doubling, at most 1 s, for the failures that pass.
func TestBackoff(t *testing.T) {
	var last time.Duration
	for _, want := range []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000} {
		d, ok := backoff(syscall.ENFILE, last)
		if !ok || d != want*time.Millisecond {
			t.Fatalf("after %v: %v %v, want %v", last, d, ok, want*time.Millisecond)
		}
		last = d
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if _, ok := backoff(fmt.Errorf("accept: %w", e), 0); !ok {
			t.Errorf("%v does not pass", e)
		}
	}
	if _, ok := backoff(syscall.EINVAL, 0); ok {
		t.Error("EINVAL passes")
	}
}
