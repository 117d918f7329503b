package peer

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Quick returns what the kernel recorded of c's peer at connect time, its
// SO_PEERCRED, and, when groups is set, its SO_PEERGROUPS (nil when the
// kernel gives none): two getsockopt calls at most, no pidfd, no /proc
// read. It is all that refusing a peer whose uid and groups no grant
// names needs, so that such a refusal stays cheap however many connects a
// flood makes.
func Quick(c net.Conn, groups bool) (Cred, []uint32, error) {
	const op = "peer.Quick"
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, nil, fmt.Errorf("%s: %T is not a unix socket", op, c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	var cr Cred
	var gs []uint32
	var serr error
	if err := raw.Control(func(fd uintptr) {
		u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			serr = fmt.Errorf("SO_PEERCRED: %w", err)
			return
		}
		cr = Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid}
		if groups {
			// As Identify: groups the kernel does not give are none,
			// so no group grant applies.
			gs, _ = Groups(int(fd))
		}
	}); err != nil {
		return Cred{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	if serr != nil {
		return Cred{}, nil, fmt.Errorf("%s: %w", op, serr)
	}
	return cr, gs, nil
}
