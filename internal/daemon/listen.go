package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/sockpath"
)

// ListenUnix listens on path with the given socket mode (0600 unless
// other uids are granted), creating its
// directory 0700 when missing. A socket already at path is probed: if a
// daemon answers, ListenUnix refuses (two daemons on one name would split
// their clients); if the connection is refused, the socket is stale (its
// daemon died) and is replaced. Anything at path that is not a socket is
// never removed.
func ListenUnix(path string, mode os.FileMode) (*net.UnixListener, error) {
	const op = "listen"
	if err := sockpath.EnsureDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, path, err)
	}
	for attempt := 0; ; attempt++ {
		// The socket is made with its final mode: under the process's
		// umask alone, it would exist, and accept, for a moment with
		// another mode (a granted uid's connect refused). ListenUnix runs
		// once, at start, before anything else creates files.
		old := syscall.Umask(int(^mode & 0o777))
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		syscall.Umask(old)
		if err == nil {
			if err := os.Chmod(path, mode); err != nil {
				l.Close()
				return nil, fmt.Errorf("%s %s: %w", op, path, err)
			}
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt > 0 {
			return nil, fmt.Errorf("%s %s: %w", op, path, err)
		}
		fi, lerr := os.Lstat(path)
		if lerr != nil {
			return nil, fmt.Errorf("%s %s: %w", op, path, err)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s %s: the path exists and is not a socket; refusing to replace it", op, path)
		}
		c, derr := net.DialTimeout("unix", path, 2*time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("%s %s: another daemon is already serving this socket", op, path)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%s %s: socket exists and its state is unknown: %w", op, path, derr)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s %s: removing stale socket: %w", op, path, err)
		}
	}
}
