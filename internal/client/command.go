package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// CommandConn is a net.Conn over a child process's standard input and
// output: the transport when the daemon is reached through a program
// (ssh HOST 9harness relay) rather than a socket. What the program writes
// on standard error is kept (its tail) for the error that reports its end.
type CommandConn struct {
	name   string
	cmd    *exec.Cmd
	r      *os.File // the program's standard output
	w      *os.File // the program's standard input
	stderr *tailBuffer

	exited  chan struct{}
	waitErr error
	once    sync.Once
}

// StartCommand starts argv with its standard input and output joined to the
// returned connection. name is how errors call it ("ssh alice@host").
func StartCommand(name string, argv []string) (*CommandConn, error) {
	if len(argv) == 0 {
		return nil, errors.New("client: empty command")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &CommandConn{name: name, r: outR, w: inW, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Stdin = inR
	c.cmd.Stdout = outW
	c.cmd.Stderr = c.stderr
	// A program that leaves a descendant holding its stderr (an ssh
	// ControlPersist master) must not keep Wait from returning.
	c.cmd.WaitDelay = 2 * time.Second
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Read reads the program's standard output. When that ends because the
// program ended badly, the error is its *CommandError.
func (c *CommandConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		// Give the program a moment to exit, so its status and last words
		// are known.
		select {
		case <-c.exited:
			if e := c.Exited(); e != nil {
				return n, e
			}
		case <-time.After(2 * time.Second):
		}
	}
	return n, err
}

// Write writes to the program's standard input.
func (c *CommandConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close closes the program's standard input, which ends a relay cleanly,
// and waits for it to exit: 5 s, then it is killed. It returns the
// program's *CommandError if it exited non-zero.
func (c *CommandConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		// Whatever the program still writes is nobody's: drain it so it
		// cannot block on a full pipe.
		go io.Copy(io.Discard, c.r)
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
		c.r.Close()
	})
	if c.waitErr != nil {
		return c.Exited()
	}
	return nil
}

// Abort kills the program at once and closes the connection: a dial given
// up on, whose program owes nobody a clean end (and an ssh stuck in
// login would not read the closed input that ends a relay).
func (c *CommandConn) Abort() {
	c.cmd.Process.Kill() // after Wait reaped it: os.ErrProcessDone
	c.Close()
}

// Exited is nil while the program runs; after, it says how it ended.
func (c *CommandConn) Exited() *CommandError {
	select {
	case <-c.exited:
		return &CommandError{Name: c.name, Err: c.waitErr, Stderr: c.stderr.String()}
	default:
		return nil
	}
}

// Done is closed when the program has exited.
func (c *CommandConn) Done() <-chan struct{} { return c.exited }

// Pid is the program's process id.
func (c *CommandConn) Pid() int { return c.cmd.Process.Pid }

// LocalAddr implements net.Conn.
func (c *CommandConn) LocalAddr() net.Addr { return commandAddr(c.name) }

// RemoteAddr implements net.Conn.
func (c *CommandConn) RemoteAddr() net.Addr { return commandAddr(c.name) }

// SetDeadline implements net.Conn.
func (c *CommandConn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}

// SetReadDeadline implements net.Conn.
func (c *CommandConn) SetReadDeadline(t time.Time) error { return c.r.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn.
func (c *CommandConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

type commandAddr string

func (commandAddr) Network() string  { return "command" }
func (a commandAddr) String() string { return string(a) }

// CommandError is a transport program that ended: how, and its last words.
type CommandError struct {
	Name   string // "ssh alice@host"
	Err    error  // the exit status; nil for status 0
	Stderr string // the tail of its standard error
}

func (e *CommandError) Error() string {
	status := "exited"
	if e.Err != nil {
		status = e.Err.Error()
	}
	if l := e.LastLine(); l != "" {
		return e.Name + ": " + status + ": " + l
	}
	return e.Name + ": " + status
}

func (e *CommandError) Unwrap() error { return e.Err }

// LastLine is the last non-empty line the program wrote on standard error:
// where ssh, and the remote relay, say what went wrong.
func (e *CommandError) LastLine() string {
	lines := strings.Split(strings.ReplaceAll(e.Stderr, "\r", ""), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
