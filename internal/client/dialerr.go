package client

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/9harness/9harness/internal/sockpath"
)

// DialError is the one line a user reads when the daemon at sock cannot be
// reached: what happened, in words, and what to do about it. The socket's
// owner and mode are looked at (never used) to tell another user's daemon
// from a daemon that is not running. An untrusted socket's error is kept:
// it already names the path and the owner. The result is a sentence for
// the user and wraps nothing: callers that reduce an error to its errno
// must not reduce this one.
func DialError(sock string, err error) error {
	if err == nil || sockpath.IsUntrusted(err) {
		return err
	}
	return &dialError{sock: sock, err: err}
}

type dialError struct {
	sock string
	err  error
}

const startHint = "start it with systemctl --user start 9harness.socket, or run 9harnessd"

func (e *dialError) Error() string {
	if errors.Is(e.err, ErrUnanswered) {
		return fmt.Sprintf("the daemon at %s closed the connection without answering: it serves its own uid and the uids it grants, and this uid (%d) is neither; or it is at its connection cap", e.sock, os.Getuid())
	}
	var errno syscall.Errno
	if !errors.As(e.err, &errno) {
		return fmt.Sprintf("cannot reach the daemon at %s: %v", e.sock, e.err)
	}
	switch errno {
	case syscall.ENOENT, syscall.ECONNREFUSED:
		return fmt.Sprintf("cannot reach the daemon at %s: %v: %s", e.sock, errno, startHint)
	case syscall.EACCES, syscall.EPERM:
		return fmt.Sprintf("cannot reach the daemon at %s: %v: %s", e.sock, errno, denied(e.sock))
	}
	return fmt.Sprintf("cannot reach the daemon at %s: %v", e.sock, errno)
}

// denied says why this uid may not open sock, as far as a stat tells.
func denied(sock string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(sock, &st); err != nil {
		return "a directory on its path keeps this uid out; name your own daemon's socket with --socket or HARNESS_SOCKET"
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Sprintf("it is the socket of uid %d's daemon (mode %04o). Start your own (systemctl --user start 9harness.socket), or have that user grant uid %d (9harnessd --allow-uid)",
			st.Uid, st.Mode&0o7777, os.Getuid())
	}
	return fmt.Sprintf("the socket is yours but its mode %04o keeps you out; restart the daemon to make it again", st.Mode&0o7777)
}
