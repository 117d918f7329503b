package move

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/prochelper"
)

// TestJudgedTmuxPinned: the server a client reaches is the one judged,
// whatever is bound at the path since. A same-uid sandbox sharing the
// directory can rename the judged socket away and bind its own in its
// place at any moment; the pinned descriptor still reaches the judged
// listener, and never the new one.
//
// Guards rule 9: whatever the daemon checks, it uses through the descriptor it checked.
func TestJudgedTmuxPinned(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "tmuxpin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o700)
	sock := filepath.Join(dir, "default")
	judged, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer judged.Close()
	uid := uint32(os.Getuid())
	s, err := judgeTmux(sock, uid, prochelper.Sandbox(nil, uid, nil))
	if err != nil {
		t.Fatalf("judging a server of this process: %v", err)
	}
	defer s.Close()
	// The judgement's own connection.
	if c, err := judged.Accept(); err == nil {
		c.Close()
	}

	// The swap: the judged socket renamed away, another bound at the path.
	if err := os.Rename(sock, sock+".old"); err != nil {
		t.Fatal(err)
	}
	impostor, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()

	c, err := net.Dial("unix", "/proc/self/fd/"+strconv.Itoa(int(s.sock.Fd())))
	if err != nil {
		t.Fatalf("dialling the pinned socket: %v", err)
	}
	defer c.Close()
	for name, l := range map[string]net.Listener{"judged": judged, "impostor": impostor} {
		l.(*net.UnixListener).SetDeadline(time.Now().Add(200 * time.Millisecond))
		a, err := l.Accept()
		if got := err == nil; got != (name == "judged") {
			t.Errorf("%s listener accepted: %v", name, got)
		}
		if a != nil {
			a.Close()
		}
	}
}

// TestJudgeTmuxRefusals: each judgement that fails names why, and a
// server in a sandbox is named by its namespace.
func TestJudgeTmuxRefusals(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "tmuxjdg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o700)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	uid := uint32(os.Getuid())
	sandboxed := func(v string) Judge {
		return func(net.Conn, *peer.Peer) (string, error) { return v, nil }
	}
	for _, tc := range []struct {
		judge Judge
		want  string
	}{
		{nil, "no judgement"},
		{sandboxed("user"), "another user namespace"},
		{sandboxed("mnt"), "another mount namespace"},
		{sandboxed("pid"), "another pid namespace"},
		{sandboxed("unknown"), "cannot be compared"},
	} {
		err := TrustedTmux(sock, uid, tc.judge)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("judged %v, want an error naming %q", err, tc.want)
		}
	}
	if err := TrustedTmux(sock, uid+1, prochelper.Sandbox(nil, uid, nil)); err == nil {
		t.Error("a socket of another uid was trusted")
	}
	if err := TrustedTmux(filepath.Join(dir, "none"), uid, prochelper.Sandbox(nil, uid, nil)); err != errNoServer {
		t.Errorf("no socket: %v, want errNoServer", err)
	}
	if err := TrustedTmux(filepath.Join(dir, "nodir", "s"), uid, prochelper.Sandbox(nil, uid, nil)); err != errNoServer {
		t.Errorf("no directory: %v, want errNoServer", err)
	}
}
