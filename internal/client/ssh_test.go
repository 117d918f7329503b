package client

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// silentSSH is an ssh whose login never ends: it notes its pid and waits,
// reading nothing, as ssh does while a host hangs in authentication.
const silentSSH = `#!/bin/sh
echo $$ > "$DIR/pid"
exec sleep 120
`

// TestDialSSHGivenUp: a dial whose context ends while ssh is still
// logging in returns with the context's cause once that ssh is killed and
// reaped, rather than leaving it and a goroutine behind for each dial a
// fleet gives up on.
func TestDialSSHGivenUp(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "ssh")
	if err := os.WriteFile(prog, []byte(silentSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DIR", dir)
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("no answer within 30s")
	done := make(chan error, 1)
	go func() {
		c, err := DialSSH(ctx, SSH{Dest: "host", Program: prog, NoForward: true})
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if pid == 0 && time.Now().After(deadline) {
			t.Fatal("the fake ssh did not start")
		}
	}
	cancel(why)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a bound on a hang
		t.Fatal("DialSSH still waits 30 s after its context ended")
	}
	if !errors.Is(err, why) {
		t.Errorf("DialSSH given up: %v, want it to wrap %v", err, why)
	}
	// DialSSH returned after the ssh's Wait: its pid is gone.
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the given-up ssh (pid %d) still runs: %v", pid, err)
	}
}

// TestDialFuncGivenUp: a daemon that takes the connection and never
// answers (hung) holds DialFunc until its context ends, then no longer:
// the error wraps the cause, and the connection is closed.
func TestDialFuncGivenUp(t *testing.T) {
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted, closed := make(chan struct{}), make(chan struct{})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		close(accepted)
		io.Copy(io.Discard, c) // never answers; ends when the client closes
		close(closed)
	}()
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("the mount stopped")
	done := make(chan error, 1)
	go func() {
		c, err := DialFunc(ctx, func() (net.Conn, error) { return net.Dial("unix", l.Addr().String()) }, "/")
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	<-accepted
	cancel(why)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a bound on a hang
		t.Fatal("DialFunc still waits 30 s after its context ended")
	}
	if !errors.Is(err, why) {
		t.Errorf("DialFunc given up: %v, want it to wrap %v", err, why)
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Error("the given-up connection was not closed")
	}
}
