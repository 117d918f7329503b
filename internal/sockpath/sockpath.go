// Package sockpath knows where 9harness sockets live by default, so that the
// daemon and the client agree without either being told.
package sockpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// DefaultName is the name the daemon posts under: $XDG_RUNTIME_DIR/9p/harness,
// the posting convention of the earlier daemon and of its 9P tooling.
const DefaultName = "harness"

// EnvSocket names the socket once for a shell, as DOCKER_HOST or
// SSH_AUTH_SOCK do: it is the default socket of both the daemon and the
// client, below their -s/--unix flags and above every directory.
const EnvSocket = "HARNESS_SOCKET"

// Dir returns the directory sockets are posted in: $XDG_RUNTIME_DIR/9p;
// without it (a su shell, cron, a container), /run/user/UID/9p where
// logind made that runtime directory for this uid (it exists, is this
// uid's and is 0700); else a private directory under the temporary
// directory, named for the uid.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "9p")
	}
	if d := runUser("/run/user"); d != "" {
		return filepath.Join(d, "9p")
	}
	return filepath.Join(os.TempDir(), "9p-"+strconv.Itoa(os.Getuid()))
}

// runUser is base/UID (/run/user/UID) when it is this uid's own runtime
// directory.
func runUser(base string) string {
	d := filepath.Join(base, strconv.Itoa(os.Getuid()))
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return ""
	}
	if uid, ok := owner(fi); !ok || uid != os.Getuid() {
		return ""
	}
	return d
}

// ForName returns the socket path for a posted name.
func ForName(name string) (string, error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return "", fmt.Errorf("sockpath: bad name %q: it must be one path component", name)
	}
	return filepath.Join(Dir(), name), nil
}

// Default is the default socket path: $HARNESS_SOCKET, else DefaultName
// in Dir.
func Default() string {
	if p := os.Getenv(EnvSocket); p != "" {
		return p
	}
	p, _ := ForName(DefaultName)
	return p
}

// EnsureDir creates dir with mode 0700 if it is missing. If it exists it must
// be a real directory (not a symlink) owned by this uid, because a directory
// under a shared /tmp could have been planted by someone else.
func EnsureDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("cannot make the socket's directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("cannot make the socket's directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the socket's directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the socket's directory %s is not a directory", dir)
	}
	if uid, ok := owner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("the socket's directory %s is owned by uid %d, not you (uid %d): another user may have made it; remove it, or name another socket", dir, uid, os.Getuid())
	}
	return nil
}
