package client

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/9harness/9harness/internal/sockpath"
)

// Relay joins a byte stream to the daemon's socket: it copies in to the
// daemon at sock and the daemon's replies to out, so that a program which
// can carry a byte stream, above all `ssh HOST 9harness relay`, is a 9P
// transport to that host's daemon. It knows nothing of 9P.
//
// It ends cleanly when either side closes. When in reaches EOF the relay
// half-closes its connection (CloseWrite), so the daemon sees the client's
// end of stream and answers what it still owes before it closes; when the
// daemon closes, or out can no longer be written, Relay returns at once
// (without waiting for in, which may never end). It returns nil for a clean
// end, a *RelayError naming the socket when the daemon cannot be reached,
// and one wrapping ErrUnanswered when the daemon closes before answering a
// word while in is still open (the daemon's gate refused this uid, or its
// connection cap was reached).
//
// Authority. The relay brings no authority of its own and asks for none.
// It connects as the process it is, so the daemon's peer gate checks the
// relay's kernel-attested credentials (SO_PEERCRED) exactly as it checks
// any local client's: over `ssh alice@host 9harness relay` that is alice's
// uid on host, because sshd authenticated alice and started the relay as
// her. This is the right model: the login already proved who the user is,
// by whatever the host's sshd demands (keys, certificates, 2FA); the daemon
// then applies to that uid the same policy as to a local process of hers,
// grants (--allow-uid, --allow-group) included, and refuses and audits any
// other uid as usual. No token, password or key of 9harness is introduced,
// so none can leak or be replayed, and nothing is widened: whoever can run
// the relay as alice could already run `9harness ls /` as alice on that
// host. Forwarding the socket itself (ssh -L LOCAL:REMOTE_SOCKET host)
// grants exactly the same, since sshd's session for alice makes that
// connection too.
//
// The relay checks its daemon as a local client does (sockpath.Dial): on
// the remote host a socket squatted by another user is refused before a
// byte of the client's stream reaches it.
func Relay(sock string, in io.Reader, out io.Writer) error {
	conn, err := sockpath.Dial(sock, 5*time.Second)
	if err != nil {
		return &RelayError{Socket: sock, Err: err}
	}
	defer conn.Close()

	var inDone atomic.Bool
	go func() {
		if _, err := io.Copy(conn, in); err == nil {
			inDone.Store(true) // in's EOF, not a daemon that hung up
		}
		// The daemon reads the end of the client's stream and finishes.
		conn.CloseWrite()
	}()
	// The daemon's replies, until it closes (or resets) the connection or
	// out is gone: either is the end of the relay.
	buf := make([]byte, 256<<10)
	replied := false
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			replied = true
			if _, werr := out.Write(buf[:n]); werr != nil {
				return nil // the client's side is gone
			}
		}
		if err != nil {
			break
		}
	}
	// A daemon that closed before a single byte of reply while the client
	// was still talking refused this peer.
	if !replied && !inDone.Load() {
		return &RelayError{Socket: sock, Err: ErrUnanswered}
	}
	return nil
}

// RelayError is a relay that could not join its daemon.
type RelayError struct {
	Socket string
	Err    error
}

func (e *RelayError) Error() string { return DialError(e.Socket, e.Err).Error() }

func (e *RelayError) Unwrap() error { return e.Err }
