// Package peer identifies the process at the other end of a unix socket by
// asking the kernel (SO_PEERCRED), never by anything the peer says.
package peer

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Cred is the kernel's account of a peer: the credentials it had when it
// connected (or, for a socketpair, when the pair was made).
type Cred struct {
	PID int32
	UID uint32
	GID uint32
}

func (c Cred) String() string { return fmt.Sprintf("pid=%d uid=%d gid=%d", c.PID, c.UID, c.GID) }

// Of returns the peer credentials of a unix-domain connection. It reads no
// byte of the connection.
func Of(c net.Conn) (Cred, error) {
	const op = "peer.Of"
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, fmt.Errorf("%s: %T is not a unix socket", op, c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("%s: %w", op, err)
	}
	var cr *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cr, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("%s: %w", op, err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("%s: SO_PEERCRED: %w", op, serr)
	}
	return Cred{PID: cr.Pid, UID: cr.Uid, GID: cr.Gid}, nil
}
