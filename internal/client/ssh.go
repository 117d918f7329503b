package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/shquote"
)

// DefaultRelayCommand is what runs on the remote host: a relay to that
// host's default socket for the ssh user.
const DefaultRelayCommand = "9harness relay"

// SSH says how to reach a daemon on another machine: ssh logs in and runs
// a relay there (see Relay), and 9P flows over ssh's standard input and
// output.
type SSH struct {
	// Dest is ssh's destination: [user@]host, a Host alias of
	// ~/.ssh/config, or ssh://[user@]host[:port].
	Dest string
	// Options are passed to ssh as -o OPTION, in order, ahead of the
	// defaults: ssh takes the first value it is given, so they win.
	Options []string
	// Command is the remote command; DefaultRelayCommand when empty.
	Command string
	// Socket, when set, is the remote daemon's socket: " -s SOCKET",
	// quoted for the remote shell, is appended to Command.
	Socket string
	// Program is the ssh binary; "ssh" when empty.
	Program string
	// ConnectTimeout, when set, bounds ssh's connecting (ssh's
	// ConnectTimeout, in whole seconds, after Options so theirs wins). It
	// is not part of how a host is reached: a forward made under one
	// timeout serves a call under another.
	ConnectTimeout time.Duration
	// NoForward keeps every call on the relay: no forward through the
	// user's ssh master is used or made (see forward.go).
	NoForward bool
}

// Argv is the command line that starts the transport:
//
//	ssh [-o OPTION]... -T -x -a -o BatchMode=yes -o ClearAllForwardings=yes
//	    -o RemoteCommand=none -o PermitLocalCommand=no -o ControlMaster=no
//	    -- DEST '9harness relay [-s SOCKET]'
//
// -T: no terminal, which would mangle the binary stream; BatchMode: never
// prompt, fail instead; the rest keep the session a plain pipe whatever
// ~/.ssh/config says (no forwardings, agent or X11; no local or configured
// remote command; never become a multiplexing master that outlives the
// call, though an existing master is used).
func (s SSH) Argv() ([]string, error) {
	if s.Dest == "" {
		return nil, errors.New("--ssh: no destination")
	}
	if strings.HasPrefix(s.Dest, "-") {
		return nil, fmt.Errorf("--ssh %q: a destination cannot begin with '-'", s.Dest)
	}
	argv := s.sshArgs()
	if s.ConnectTimeout > 0 {
		secs := int((s.ConnectTimeout + time.Second - 1) / time.Second)
		argv = append(argv, "-o", "ConnectTimeout="+strconv.Itoa(secs))
	}
	argv = append(argv, "-T", "-x", "-a",
		"-o", "BatchMode=yes",
		"-o", "ClearAllForwardings=yes",
		"-o", "RemoteCommand=none",
		"-o", "PermitLocalCommand=no",
		"-o", "ControlMaster=no",
		"--", s.Dest, s.RemoteCommand())
	return argv, nil
}

// RemoteCommand is the command line the remote shell runs.
func (s SSH) RemoteCommand() string {
	cmd := s.Command
	if cmd == "" {
		cmd = DefaultRelayCommand
	}
	if s.Socket != "" {
		cmd += " -s " + shquote.Quote(s.Socket)
	}
	return cmd
}

// ShellQuote quotes s for a POSIX shell: shquote.Quote, the one quoting
// of 9harness, kept under this name for the client's callers.
func ShellQuote(s string) string { return shquote.Quote(s) }

// DialSSH attaches to the daemon s names: through the host's forward when
// the user's ssh master holds a working one (forward.go), else by starting
// ssh to run the relay. A relay call that reached the host makes the
// forward beside it, and its Close waits for that. If ssh or the remote
// relay fails, the error is a *CommandError carrying the exit status and
// the last line of ssh's standard error (where the remote relay's own
// message arrives too). When ctx ends first the dial is given up: its ssh
// is ended and the error wraps ctx's cause.
func DialSSH(ctx context.Context, s SSH) (*Client, error) {
	argv, err := s.Argv()
	if err != nil {
		return nil, err
	}
	var record string
	setup := false
	if !s.NoForward {
		if record = s.fwdRecordPath(); record != "" {
			var c *Client
			if c, setup = dialForward(ctx, record); c != nil {
				return c, nil
			}
		}
	}
	if ctx.Err() != nil {
		return nil, givenUp(ctx)
	}
	c, err := dialRelay(ctx, s, argv)
	if err == nil && setup {
		pid := c.conn.(*CommandConn).Pid()
		done := make(chan struct{})
		go func() {
			defer close(done)
			setupForward(s, record, pid)
		}()
		c.bg = done
	}
	return c, err
}

// dialRelay starts argv, ssh running the relay, and attaches over it.
func dialRelay(ctx context.Context, s SSH, argv []string) (*Client, error) {
	conn, err := StartCommand("ssh "+s.Dest, argv)
	if err != nil {
		return nil, err
	}
	c, err := NewContext(ctx, conn) // closes conn on failure, which reaps ssh
	if err == nil || ctx.Err() != nil {
		return c, err
	}
	if e := conn.Exited(); e != nil {
		if e.Err == nil && e.LastLine() == "" {
			return nil, fmt.Errorf("%s: the remote command %q exited without speaking 9P", e.Name, s.RemoteCommand())
		}
		return nil, e
	}
	return nil, err
}

// TransportError is how the transport program ended, once it has: nil for
// a socket, or while the program runs.
func (c *Client) TransportError() error {
	if cc, ok := c.conn.(*CommandConn); ok {
		if e := cc.Exited(); e != nil {
			return e
		}
	}
	return nil
}
