package move

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errNoServer is a socket of the user's in a safe directory that nothing
// listens on: a server that exited. tmux starts a new one there.
var errNoServer = errors.New("no server listens on the socket")

// TrustedTmux checks a tmux server socket before a move lands on it: the
// socket is a socket owned by uid, in a directory owned by uid (or root)
// that no one else may write, and the process listening on it is uid's
// (SO_PEERCRED). The directory is pinned and the socket reached through
// it, so the checks and the connection are about the same file.
func TrustedTmux(socket string, uid uint32) error {
	dir, base := filepath.Dir(socket), filepath.Base(socket)
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if st.Uid != uid && st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is owned by uid %d with mode %o: others could replace the socket", dir, st.Uid, st.Mode&0o7777)
	}
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", socket, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Uid != uid {
		return fmt.Errorf("%s is not a socket of uid %d", socket, uid)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	via := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + base
	if len(via) > 107 {
		return fmt.Errorf("%s: name too long", socket)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: via}); err == unix.ECONNREFUSED {
		return errNoServer
	} else if err != nil {
		return fmt.Errorf("connecting to %s: %w", socket, err)
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("%s: SO_PEERCRED: %w", socket, err)
	}
	if cred.Uid != uid {
		return fmt.Errorf("the server on %s runs as uid %d, not %d", socket, cred.Uid, uid)
	}
	return nil
}
