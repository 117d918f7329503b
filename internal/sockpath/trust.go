package sockpath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Untrusted is a socket the client refuses before it sends a byte: its
// directory or its server is not the user's. The client sends paths, and for
// a move the names of sessions, so a socket someone else put in the user's
// place (another user creating /tmp/9p-<uid> first, where there is no
// XDG_RUNTIME_DIR) must never be spoken to.
type Untrusted struct {
	Path   string
	Reason string
}

func (e *Untrusted) Error() string { return "refusing " + e.Path + ": " + e.Reason }

// Dial connects to the 9harness socket at sock, after checking the place and
// before returning a connection anything could be written on:
//
//   - sock's directory is not writable by group or others (so nobody but
//     its owner can have put a socket there), or it is a sticky directory
//     of the user's or root's (/tmp) and the socket is the user's (or
//     root's); and the directory is owned by the user,
//     or by root (a system-wide socket directory), or, for a socket outside
//     the user's own socket directories, by the uid that serves it (another
//     user's daemon that granted this user a read);
//   - the user's own socket directories (Dir: $XDG_RUNTIME_DIR/9p, and
//     /tmp/9p-<uid>, whichever applies) must be owned by the user, whoever
//     serves them;
//   - the server's SO_PEERCRED uid, which the kernel recorded when it called
//     listen(2), is the user's, or root's (systemd's socket activation
//     listens as root), or the directory owner's (that grant again).
//
// A full listen backlog (EAGAIN: the daemon is busy, or flooded) is waited
// out, and a refused connect while the socket file is there (the daemon
// restarting under socket activation) tried again, for at most RetryFor.
//
// A refusal is an *Untrusted naming the path and the owner found.
func Dial(sock string, timeout time.Duration) (*net.UnixConn, error) {
	me := os.Geteuid()
	dirOwner, err := checkDir(sock, me)
	if err != nil {
		return nil, err
	}
	c, err := dialRetry(sock, timeout)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("sockpath.Dial %s: not a unix connection", sock)
	}
	if err := checkPeer(uc, sock, me, dirOwner); err != nil {
		uc.Close()
		return nil, err
	}
	return uc, nil
}

// ownDirs are the directories where the user's own daemon posts: a socket
// there is the user's or it is nobody's.
func ownDirs(me int) []string {
	dirs := []string{filepath.Join(os.TempDir(), "9p-"+strconv.Itoa(me))}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "9p"))
	}
	return dirs
}

// checkDir checks sock's directory and returns its owner.
func checkDir(sock string, me int) (int, error) {
	dir := filepath.Dir(filepath.Clean(sock))
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: sock, Net: "unix"}, Err: os.NewSyscallError("stat "+dir, err)}
	}
	owner := int(st.Uid)
	if st.Mode&0o022 != 0 {
		if st.Mode&unix.S_ISVTX != 0 && (owner == me || owner == 0) {
			// A sticky directory of the user's or root's (/tmp, where
			// `ssh -L /tmp/h.sock:...` puts a forwarded socket): nobody
			// but the user, the directory's owner and root can remove or
			// replace an entry the user owns, so the socket is the user's
			// if it is owned by the user (or root).
			return owner, checkSocketOwner(sock, dir, me)
		}
		return 0, &Untrusted{Path: sock, Reason: fmt.Sprintf(
			"its directory %s (owned by uid %d) is writable by %s (mode %#o), so another user may have put this socket there; use a directory only you can write",
			dir, owner, writers(st.Mode), st.Mode&0o7777)}
	}
	own := false
	for _, d := range ownDirs(me) {
		own = own || d == dir
	}
	if own && owner != me {
		return 0, &Untrusted{Path: sock, Reason: fmt.Sprintf(
			"its directory is owned by uid %d, not you (uid %d); another user may have created it (remove %s, or set XDG_RUNTIME_DIR)",
			owner, me, dir)}
	}
	return owner, nil
}

// checkSocketOwner checks the socket itself, in a sticky directory: it must
// be a socket (not a link someone planted) owned by the user or root.
func checkSocketOwner(sock, dir string, me int) error {
	var st unix.Stat_t
	if err := unix.Lstat(sock, &st); err != nil {
		return &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: sock, Net: "unix"}, Err: os.NewSyscallError("lstat", err)}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return &Untrusted{Path: sock, Reason: fmt.Sprintf(
			"it is not a socket (its directory %s is writable by others, so nothing but a socket you own is spoken to there)", dir)}
	}
	if uid := int(st.Uid); uid != me && uid != 0 {
		return &Untrusted{Path: sock, Reason: fmt.Sprintf(
			"it is owned by uid %d, not you (uid %d), in %s, which others may write; another user may have created it",
			uid, me, dir)}
	}
	return nil
}

func writers(mode uint32) string {
	switch {
	case mode&0o020 != 0 && mode&0o002 != 0:
		return "its group and others"
	case mode&0o020 != 0:
		return "its group"
	}
	return "others"
}

// checkPeer checks the server's uid as the kernel recorded it.
func checkPeer(c *net.UnixConn, sock string, me, dirOwner int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("sockpath.Dial %s: %w", sock, err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("sockpath.Dial %s: %w", sock, err)
	}
	if cerr != nil {
		return fmt.Errorf("sockpath.Dial %s: SO_PEERCRED: %w", sock, cerr)
	}
	uid := int(cred.Uid)
	if uid == me || uid == 0 || uid == dirOwner {
		return nil
	}
	return &Untrusted{Path: sock, Reason: fmt.Sprintf(
		"it is served by uid %d (pid %d), not you (uid %d), nor root, nor the owner of its directory (uid %d); another user may be listening there",
		uid, cred.Pid, me, dirOwner)}
}

// IsUntrusted tells whether err is a refusal of Dial.
func IsUntrusted(err error) bool {
	var u *Untrusted
	return errors.As(err, &u)
}

// Forwardable returns the absolute, link-free path of the socket at sock
// once it is fit to be forwarded by ssh (`ssh -L LOCAL:PATH`), whose sshd
// connects to PATH by name on every use, long after this check: each
// directory above the socket's own is owned by the user or root and
// writable by nobody else, or sticky (/tmp) with the next one down owned
// by the user or root, so no other uid can ever put something else at
// PATH; and the socket's own directory and its server pass Dial's checks,
// now. The connection Dial made is returned too, for the caller to prove
// the server answers (a peer that hangs up before its server has judged
// it is a refused peer in that server's log).
func Forwardable(sock string, timeout time.Duration) (string, *net.UnixConn, error) {
	abs, err := filepath.Abs(sock)
	if err != nil {
		return "", nil, err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", nil, err
	}
	me := os.Geteuid()
	p := filepath.Join(dir, filepath.Base(abs))
	parts := strings.Split(strings.TrimPrefix(filepath.Dir(dir), "/"), "/")
	at := "/"
	for i := 0; ; i++ {
		var st unix.Stat_t
		if err := unix.Lstat(at, &st); err != nil {
			return "", nil, &os.PathError{Op: "lstat", Path: at, Err: err}
		}
		if uid := int(st.Uid); uid != me && uid != 0 {
			return "", nil, &Untrusted{Path: p, Reason: fmt.Sprintf(
				"%s above it is owned by uid %d, not you (uid %d) nor root, who could put another socket in its place", at, uid, me)}
		}
		if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return "", nil, &Untrusted{Path: p, Reason: fmt.Sprintf(
				"%s above it is writable by %s (mode %#o), who could put another socket in its place", at, writers(st.Mode), st.Mode&0o7777)}
		}
		if i == len(parts) || parts[0] == "" {
			break
		}
		at = filepath.Join(at, parts[i])
	}
	c, err := Dial(p, timeout)
	if err != nil {
		return "", nil, err
	}
	return p, c, nil
}

// RetryFor bounds how long Dial waits for a daemon that cannot take its
// connect yet; retryFirst and retryMax are the first and the longest pause
// between connects refused while the socket file is there.
const (
	RetryFor   = 2 * time.Second
	retryFirst = 2 * time.Millisecond
	retryMax   = 100 * time.Millisecond
)

// dialRetry connects to sock, waiting for at most min(RetryFor, timeout)
// while the daemon cannot take the connection yet: while its listen
// backlog is full (EAGAIN), the connect sleeps in the kernel's queue of
// connects to that socket, woken as the daemon accepts, rather than
// polling against whoever floods it; while nobody listens on a socket
// file that is there (ECONNREFUSED: the daemon restarting under socket
// activation), it is tried again after a short pause. Any other failure,
// or ECONNREFUSED with no socket file, is returned at once.
func dialRetry(sock string, timeout time.Duration) (net.Conn, error) {
	until := time.Now().Add(min(RetryFor, timeout))
	pause := retryFirst
	for {
		c, err := connectWait(sock, time.Until(until))
		if err == nil || !retryable(sock, err) || !time.Now().Before(until) {
			return c, err
		}
		// Jittered, so that clients turned away together do not all
		// come back together.
		d := pause/2 + time.Duration(time.Now().UnixNano()%int64(pause/2+1))
		pauseFor(min(d, max(time.Until(until), 0)))
		pause = min(2*pause, retryMax)
	}
}

// connectWait connects a unix stream socket to sock with a blocking
// connect bounded by wait (SO_SNDTIMEO), which is how the kernel lets a
// connect wait for room in a full backlog; Go's own dial connects without
// blocking and fails at once with EAGAIN.
func connectWait(sock string, wait time.Duration) (net.Conn, error) {
	addr := &net.UnixAddr{Name: sock, Net: "unix"}
	fail := func(call string, err error) error {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: os.NewSyscallError(call, err)}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fail("socket", err)
	}
	tv := unix.NsecToTimeval(max(wait, time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fail("setsockopt", err)
	}
	for {
		// A unix connect is all or nothing: interrupted, it made no
		// connection and is made again.
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fail("connect", err)
	}
	// Writes are the runtime poller's from here on, never blocking; the
	// timeout is cleared all the same.
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{})
	f := os.NewFile(uintptr(fd), sock)
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: err}
	}
	return c, nil
}

// pauseFor is time.Sleep; a test counts the pauses.
var pauseFor = time.Sleep

func retryable(sock string, err error) bool {
	if errors.Is(err, unix.EAGAIN) {
		return true
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		return false
	}
	var st unix.Stat_t
	return unix.Lstat(sock, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
}
