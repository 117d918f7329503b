package sockpath

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDefault: the precedence of the default socket: $HARNESS_SOCKET, then
// $XDG_RUNTIME_DIR/9p/harness, then (no runtime directory in the
// environment) /run/user/UID/9p or $TMPDIR/9p-UID.
func TestDefault(t *testing.T) {
	t.Setenv(EnvSocket, "/some/where.sock")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := Default(); got != "/some/where.sock" {
		t.Errorf("with %s: %q", EnvSocket, got)
	}
	t.Setenv(EnvSocket, "")
	if got := Default(); got != "/run/user/1000/9p/harness" {
		t.Errorf("with XDG_RUNTIME_DIR: %q", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	want := filepath.Join(tmp, "9p-"+strconv.Itoa(os.Getuid()), "harness")
	if d := runUser("/run/user"); d != "" {
		want = filepath.Join(d, "9p", "harness")
	}
	if got := Default(); got != want {
		t.Errorf("without XDG_RUNTIME_DIR: %q, want %q", got, want)
	}
}

// TestRunUser: /run/user/UID is taken only as this uid's own 0700
// directory, never a link, a file or a directory others may enter.
func TestRunUser(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, strconv.Itoa(os.Getuid()))
	if got := runUser(base); got != "" {
		t.Errorf("missing: %q", got)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := runUser(base); got != "" {
		t.Errorf("mode 0755: %q", got)
	}
	os.Chmod(d, 0o700)
	if got := runUser(base); got != d {
		t.Errorf("mode 0700: %q, want %q", got, d)
	}
	if os.Geteuid() == 0 {
		os.Chown(d, 65534, 65534)
		if got := runUser(base); got != "" {
			t.Errorf("another uid's: %q", got)
		}
	}
	os.Remove(d)
	other := t.TempDir()
	os.Chmod(other, 0o700)
	if err := os.Symlink(other, d); err != nil {
		t.Fatal(err)
	}
	if got := runUser(base); got != "" {
		t.Errorf("a symlink: %q", got)
	}
}
