package p9client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/linux"
)

func TestWireError(t *testing.T) {
	reset := &net.OpError{Op: "write", Net: "unix", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name   string
		in     error
		errno  syscall.Errno // the server's answer; 0 for none
		conn   bool          // a *ConnError
		isErrs []error       // errors.Is holds for each
	}{
		{name: "nil"},
		{name: "EOF", in: io.EOF, isErrs: []error{io.EOF}},
		{name: "Rlerror", in: linux.ENOENT, errno: syscall.ENOENT, isErrs: []error{syscall.ENOENT}},
		{name: "Rlerror EROFS", in: linux.EROFS, errno: syscall.EROFS, isErrs: []error{syscall.EROFS}},
		{name: "socket reset", in: fmt.Errorf("send: %w", reset), conn: true, isErrs: []error{syscall.ECONNRESET}},
		{name: "hang-up", in: fmt.Errorf("recv: %w", io.EOF), conn: true, isErrs: []error{io.EOF}},
		{name: "library", in: errors.New("out of tags"), conn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wireError(tc.in)
			if (err == nil) != (tc.in == nil) {
				t.Fatalf("wireError(%v) = %v", tc.in, err)
			}
			e, ok := Errno(err)
			if ok != (tc.errno != 0) || e != tc.errno {
				t.Errorf("Errno(%v) = %v, %v; want %v, %v", err, e, ok, tc.errno, tc.errno != 0)
			}
			if tc.errno != 0 && err != error(tc.errno) {
				t.Errorf("an Rlerror is %T %v, want the bare syscall.Errno %v", err, err, tc.errno)
			}
			var ce *ConnError
			if errors.As(err, &ce) != tc.conn {
				t.Errorf("%v: a *ConnError: %v, want %v", err, !tc.conn, tc.conn)
			}
			for _, want := range tc.isErrs {
				if !errors.Is(err, want) {
					t.Errorf("errors.Is(%v, %v) = false", err, want)
				}
			}
		})
	}
}

// Through a session: the server's Rlerror reaches the caller as a
// syscall.Errno, and a server gone mid-session as a *ConnError that is no
// errno answer.
func TestSessionErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
			go (&fakeDiod{}).conn(t, c)
		}
	}()
	s, err := Dial(func() (net.Conn, error) { return net.Dial("unix", sock) }, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The fake answers every Twalk with Rlerror EOPNOTSUPP.
	_, err = s.Root().Walk([]string{"x"})
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("Walk: %v (%T), want EOPNOTSUPP", err, err)
	}
	if e, ok := Errno(err); !ok || e != syscall.EOPNOTSUPP {
		t.Errorf("Errno(%v) = %v, %v; want EOPNOTSUPP, true", err, e, ok)
	}
	// Both connections (refused, then plain) go; the second is the session's.
	<-accepted
	(<-accepted).Close()
	_, err = s.Root().Walk([]string{"x"})
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("Walk after the server hung up: %v (%T), want a *ConnError", err, err)
	}
	if e, ok := Errno(err); ok {
		t.Errorf("Errno of a lost connection = %v, true; want none", e)
	}
}
