// Package peer identifies the process at the other end of a unix socket by
// asking the kernel (SO_PEERCRED, SO_PEERGROUPS, SO_PEERPIDFD), never by
// anything the peer says: the 9P Tattach uname and n_uname are never
// consulted.
package peer

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unsafe"

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

// Peer is a connected process as the kernel names it.
type Peer struct {
	Cred
	// Groups are the peer's supplementary groups when it connected
	// (SO_PEERGROUPS), as the kernel names them in the daemon's user
	// namespace: the same moment and source as the uid and gid. Nil when
	// the kernel gave none: no group grant then applies.
	Groups []uint32
	// Comm is the peer's command name, for the audit trail.
	Comm string
	// StartTime is field 22 of the peer's stat (clock ticks since boot):
	// with the pid it names the process for polkit's unix-process subject.
	StartTime uint64

	pidfd int // -1 when the kernel gave none
}

// Of returns the peer credentials of a unix-domain connection. It reads no
// byte of the connection.
func Of(c net.Conn) (Cred, error) {
	p, err := identify(c, "", false)
	if err != nil {
		return Cred{}, err
	}
	return p.Cred, nil
}

// Identify returns the kernel's account of c's peer, with its pidfd,
// groups, command name and start time. procRoot is "/proc" unless a test says
// otherwise. The caller closes the Peer.
func Identify(c net.Conn, procRoot string) (*Peer, error) {
	if procRoot == "" {
		procRoot = "/proc"
	}
	return identify(c, procRoot, true)
}

func identify(c net.Conn, procRoot string, full bool) (*Peer, error) {
	const op = "peer.Identify"
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%s: %T is not a unix socket", op, c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var p *Peer
	var serr error
	if err := raw.Control(func(fd uintptr) { p, serr = ofFD(int(fd), full) }); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if serr != nil {
		return nil, fmt.Errorf("%s: %w", op, serr)
	}
	if full {
		p.readProc(procRoot)
	}
	return p, nil
}

// FromFD is Identify for a connected unix socket held as a raw descriptor
// (one handed over by SCM_RIGHTS): the kernel's credentials, groups and the
// pinned pidfd, without the /proc read. The caller closes the Peer; fd stays
// the caller's.
func FromFD(fd int) (*Peer, error) {
	p, err := ofFD(fd, true)
	if err != nil {
		return nil, fmt.Errorf("peer.FromFD: %w", err)
	}
	return p, nil
}

func ofFD(fd int, full bool) (*Peer, error) {
	cr, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	p := &Peer{Cred: Cred{PID: cr.Pid, UID: cr.Uid, GID: cr.Gid}, pidfd: -1}
	if full {
		// A pidfd stays bound to the peer process: a later look at
		// /proc/<pid> can be checked against it, so pid reuse cannot
		// substitute another process. Kernels before 6.5 lack it.
		if pfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			p.pidfd = pfd
			unix.CloseOnExec(pfd)
		}
		if gs, err := Groups(fd); err == nil {
			p.Groups = gs
		}
	}
	return p, nil
}

// Groups reads SO_PEERGROUPS of the connected unix socket fd: the peer's
// supplementary groups when it connected, as the kernel names them in the
// reader's user namespace.
func Groups(fd int) ([]uint32, error) {
	var small [32]uint32
	buf := small[:]
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e == unix.ERANGE && int(n/4) > len(buf) {
			buf = make([]uint32, n/4)
			continue
		}
		if e != 0 {
			return nil, e
		}
		return append([]uint32{}, buf[:n/4]...), nil
	}
}

// readProc fills Comm and StartTime from /proc/<pid>/stat, and keeps them
// only if the pinned process is still alive afterwards: while it lives, its
// pid cannot have been reused, so what was read was its own.
func (p *Peer) readProc(procRoot string) {
	if p.PID <= 0 || p.pidfd < 0 {
		return
	}
	// One open, one read: every connection pays for this before it is
	// served, and os.ReadFile would add an epoll registration the kernel
	// refuses, four fcntls and an fstat.
	fd, err := unix.Open(procRoot+"/"+strconv.Itoa(int(p.PID))+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var buf [1024]byte // field 22 ends within 500 bytes, whatever the comm (16 bytes at most)
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 || !p.Alive() {
		return
	}
	p.Comm, p.StartTime = parseStat(buf[:n])
}

// Alive reports whether the pinned peer process still exists. Without a
// pidfd it reports false: nothing about the process can be trusted then.
func (p *Peer) Alive() bool {
	if p.pidfd < 0 {
		return false
	}
	// Signal 0 through the pidfd only checks: ESRCH means the process is
	// gone; EPERM means it lives but is not ours to signal (a peer of
	// another uid), which is still alive.
	err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM
}

// PIDFD returns the pinned pidfd, or -1.
func (p *Peer) PIDFD() int { return p.pidfd }

// Close releases the pidfd.
func (p *Peer) Close() error {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	return nil
}

func (p *Peer) String() string {
	s := p.Cred.String()
	if p.Comm != "" {
		s += " comm=" + strconv.Quote(p.Comm)
	}
	return s
}

// parseStat returns comm and starttime (field 22) from a stat line. The
// comm is between the first '(' and the last ')': a comm may itself hold
// ") (", so the fields are split only after the last ')'.
func parseStat(stat []byte) (comm string, start uint64) {
	open := bytes.IndexByte(stat, '(')
	end := bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0
	}
	comm = string(stat[open+1 : end])
	f := strings.Fields(string(stat[end+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) > 19 {
		start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return comm, start
}
