package move

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/confine"
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
	dir := shortTemp(t, "tmuxpin", 0o700)
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
	dir := shortTemp(t, "tmuxjdg", 0o700)
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

// TestJudgeTmuxServerExits: a tmux server that exits while it is judged
// (its last session ended, as when a move stops the only agent of a
// server) is no server: the move starts one, rather than failing on a
// judgement of a process that is gone.
func TestJudgeTmuxServerExits(t *testing.T) {
	tm, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("missing in CI: tmux")
		}
		t.Skip("needs tmux")
	}
	dir := shortTemp(t, "tmuxexit", 0o700)
	sock := filepath.Join(dir, "s")
	tmux := func(args ...string) error {
		cmd := exec.Command(tm, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SHELL=/bin/sh"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("tmux %s: %v %s", args[0], err, out)
		}
		return nil
	}
	if err := tmux("new-session", "-d", "sleep 600"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmux("kill-server") })
	judged := 0
	exits := func(c net.Conn, p *peer.Peer) (string, error) {
		judged++
		// A tmux server exits only once its clients have gone: this
		// connection, too.
		c.Close()
		if err := tmux("kill-server"); err != nil {
			t.Error(err)
		}
		for i := 0; i < 1000 && p.Alive(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		return "unknown", nil
	}
	if err := TrustedTmux(sock, uint32(os.Getuid()), exits); err != errNoServer {
		t.Errorf("a server that exited while judged: %v, want errNoServer", err)
	}
	if judged != 1 {
		t.Errorf("judged %d servers, want the one that exited", judged)
	}
}

// hostileTmux serves sock as a hostile tmux server would: to every client
// it sends, in tmux 3.3's protocol (imsg, protocol version 8), MSG_READY
// then MSG_LOCK with cmd, which a tmux client hands to system(3), and
// MSG_SHELL with shell, which a waiting client execs.
func hostileTmux(t *testing.T, sock, msg string, typ uint32) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	imsg := func(typ uint32, data []byte) []byte {
		b := make([]byte, 16, 16+len(data))
		binary.LittleEndian.PutUint32(b[0:], typ)
		binary.LittleEndian.PutUint16(b[4:], uint16(16+len(data)))
		binary.LittleEndian.PutUint32(b[8:], 8) // peerid: PROTOCOL_VERSION
		return append(b, data...)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var out []byte
				if typ == msgLock {
					out = append(imsg(msgReady, nil), imsg(msgLock, append([]byte(msg), 0))...)
				} else {
					out = imsg(typ, append([]byte(msg), 0))
				}
				c.Write(out)
				// Long enough for the client to act, then gone: a client
				// that ran the command waits for more.
				c.SetReadDeadline(time.Now().Add(time.Second))
				io.Copy(io.Discard, c)
			}()
		}
	}()
}

const (
	msgLock  = 206
	msgReady = 207
	msgShell = 209
)

// TestConfinedClientOfHostileServer: a tmux client runs what its server
// tells it to (system(3) of a lock command, exec of a "shell"). The
// daemon's client, confined, runs nothing, even for a server that passed
// the judgement (here one of this very process).
//
// Guards rule 9: no program the daemon runs reaches the owner's files for another.
func TestConfinedClientOfHostileServer(t *testing.T) {
	tm, err := exec.LookPath("tmux")
	if err != nil || confine.ABI() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("missing in CI: tmux and Landlock")
		}
		t.Skip("needs tmux and Landlock")
	}
	uid := uint32(os.Getuid())
	for _, tc := range []struct {
		name string
		typ  uint32
	}{{"MSG_LOCK", msgLock}, {"MSG_SHELL", msgShell}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortTemp(t, "tmuxhst", 0o700)
			pwned := filepath.Join(dir, "pwned")
			msg := "touch " + pwned
			if tc.typ == msgShell {
				script := filepath.Join(dir, "evil")
				if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+pwned+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				msg = script
			}
			sock := filepath.Join(dir, "s")
			hostileTmux(t, sock, msg, tc.typ)
			env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SHELL=/bin/sh"}

			// The control: an unconfined client does it.
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			ctl := exec.CommandContext(cctx, tm, "-S", sock, "list-sessions")
			ctl.Env, ctl.Dir = env, "/"
			ctl.Run()
			if _, err := os.Stat(pwned); err != nil {
				t.Fatalf("control: the hostile server did not make an unconfined client run its command: the test proves nothing")
			}
			os.Remove(pwned)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = askTmux(ctx, prochelper.Sandbox(nil, uid, nil), uid, tm, env, sock, "list-sessions")
			t.Logf("confined client: %v", err)
			time.Sleep(200 * time.Millisecond)
			if _, err := os.Stat(pwned); err == nil {
				t.Error("the daemon's confined tmux client ran its server's command")
			}
		})
	}
}

// shortTemp makes a directory under /tmp, not the test's TempDir, whose
// long path would not fit a unix socket's 107 bytes once tmux adds its
// own names; mode perm, removed at the end.
func shortTemp(t *testing.T, prefix string, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}
