package sockpath

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen serves sock, counting the bytes it is sent.
func listen(t *testing.T, sock string) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 64)
			m, _ := c.Read(b)
			n.Add(int64(m))
			c.Close()
		}
	}()
	return &n
}

// TestDialChecksDirectory: a socket in a directory its group or others may
// write is refused before connect (so its listener sees no connection at
// all); the user's own 0700 directory is served. As root, the user's
// default directory (TMPDIR/9p-<uid>) owned by another uid is refused, as
// is created by a squatter.
//
// Guards rule 3: a peer the kernel does not allow gets nothing; Tattach is never trusted; a client talks only to its own uid's server.
func TestDialChecksDirectory(t *testing.T) {
	me := os.Geteuid()
	for _, tc := range []struct {
		mode  os.FileMode
		chown int // -1: leave
		own   bool
		want  string // "" = served
	}{
		{0o700, -1, false, ""},
		{0o755, -1, false, ""},
		{0o777, -1, false, "is writable by its group and others (mode 0777)"},
		{os.ModeSticky | 0o777, -1, false, ""},                                 // /tmp, the socket the user's
		{os.ModeSticky | 0o777, -2, false, "it is owned by uid 4132, not you"}, // /tmp, someone else's socket
		{0o703, -1, false, "is writable by others (mode 0703)"},
		{0o770, -1, false, "is writable by its group (mode 0770)"},
		{0o722, -1, false, "is writable by its group and others"},
		{0o700, -1, true, ""},
		{0o755, 4131, true, "its directory is owned by uid 4131, not you (uid " + strconv.Itoa(me) + "); another user may have created it"},
	} {
		base := t.TempDir()
		t.Setenv("TMPDIR", base)
		t.Setenv("XDG_RUNTIME_DIR", "")
		dir := filepath.Join(base, "d")
		if tc.own {
			dir = Dir()
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(dir, "harness")
		got := listen(t, sock)
		os.Chmod(dir, tc.mode)
		if tc.chown == -2 {
			if me != 0 {
				continue
			}
			if err := os.Lchown(sock, 4132, 4132); err != nil {
				t.Fatal(err)
			}
		}
		if tc.chown >= 0 {
			if me != 0 {
				t.Logf("not root: the squatted case is in test/clienttrust_test.go")
				continue
			}
			if err := os.Chown(dir, tc.chown, tc.chown); err != nil {
				t.Fatal(err)
			}
		}
		c, err := Dial(sock, time.Second)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.mode, err)
				continue
			}
			c.Write([]byte("hello"))
			c.Close()
			continue
		}
		var u *Untrusted
		if !errors.As(err, &u) || !IsUntrusted(err) || !strings.HasPrefix(err.Error(), "refusing "+sock+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v owned by %d: %v, want a refusal saying %q", tc.mode, tc.chown, err, tc.want)
		}
		if c != nil {
			t.Errorf("a connection was returned with the refusal")
		}
		time.Sleep(10 * time.Millisecond)
		if n := got.Load(); n != 0 {
			t.Errorf("the listener got %d bytes", n)
		}
	}
}

// TestForwardable: a socket is fit for ssh to forward by name only when
// no directory above it can be written by another uid (a sticky one
// aside); the path returned is absolute and free of links.
func TestForwardable(t *testing.T) {
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, open, sock, refusal string
	}{
		{"private", "a", "a/b/s", ""},
		{"sticky above", "st", "st/b/s", ""},
		{"writable above", "ww", "ww/b/s", "above it is writable by its group and others (mode 0777)"},
		{"group-writable above", "gw", "gw/b/s", "above it is writable by its group (mode 0770)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := os.FileMode(0o755)
			switch tc.open {
			case "st":
				mode = 0o777 | os.ModeSticky
			case "ww":
				mode = 0o777
			case "gw":
				mode = 0o770
			}
			mk(tc.open, mode)
			mk(filepath.Dir(tc.sock), 0o700)
			sock := filepath.Join(base, tc.sock)
			listen(t, sock)
			got, c, err := Forwardable(sock, time.Second)
			if c != nil {
				c.Close()
			}
			if tc.refusal == "" {
				if err != nil || got != sock {
					t.Fatalf("Forwardable(%s) = %q, %v; want it back", sock, got, err)
				}
				return
			}
			if !IsUntrusted(err) || !strings.Contains(err.Error(), filepath.Join(base, tc.open)+" "+tc.refusal) {
				t.Fatalf("Forwardable(%s) = %q, %v; want a refusal naming %s", sock, got, err, tc.refusal)
			}
		})
	}
	// A link on the way is resolved: sshd gets the real path.
	real := mk("real/d", 0o700)
	listen(t, filepath.Join(real, "s"))
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	got, c, err := Forwardable(filepath.Join(base, "link", "s"), time.Second)
	if err != nil || got != filepath.Join(real, "s") {
		t.Fatalf("through a link: %q, %v; want %s", got, err, filepath.Join(real, "s"))
	}
	c.Close()
	// No server: nothing to forward.
	mk("dead", 0o700)
	if _, _, err := Forwardable(filepath.Join(base, "dead", "s"), time.Second); err == nil {
		t.Fatal("Forwardable of a socket nobody serves succeeded")
	}
}
