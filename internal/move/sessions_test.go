package move

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/confine"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/prochelper"
)

// TestTmuxSessions: the tmux file's lookup runs the tmux of the daemon's
// host path (a fake here, which records its argv), once, against the
// agent's socket and pane, and only when the socket is trustworthy: a
// socket in a directory others may write, a socket nothing of uid's
// serves, a relative socket, an agent that is gone, and a host path
// without tmux all answer "" without starting anything.
//
// Guards rule 7: no client byte reaches exec; no agent picks a binary; the environment never leaks.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestTmuxSessions(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// The fake records its argv: the confined client may write that file.
	os.WriteFile(calls, nil, 0o600)
	testRules = []confine.Rule{{Path: calls, Access: confine.Read | unix.LANDLOCK_ACCESS_FS_WRITE_FILE}}
	t.Cleanup(func() { testRules = nil })
	fake := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + calls + "\necho rescued\n"
	if err := os.WriteFile(filepath.Join(bin, "tmux"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	serve := func(dir string, mode os.FileMode) string {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(dir, "work")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return sock
	}
	base := shortTemp(t, "tmuxsess", 0o755)
	good := serve(filepath.Join(base, "good"), 0o700)
	open := serve(filepath.Join(base, "open"), 0o777)
	dead := filepath.Join(base, "good", "dead")
	if f, err := os.Create(dead); err == nil {
		f.Close()
	}

	procs := proc.New("/proc")
	self, err := procs.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Getuid())
	s := TmuxSessions{Procs: procs, UID: uid, HostPath: bin, Sandbox: prochelper.Sandbox(nil, uid, nil)}
	read := func() []string {
		b, _ := os.ReadFile(calls)
		os.Truncate(calls, 0)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	if got := s.TmuxSession(context.Background(), self, good, "%3", ""); got != good+":rescued" {
		t.Errorf("trusted server: %q, want %q", got, good+":rescued")
	}
	if got := read(); len(got) != 1 || got[0] != "-S /proc/self/fd/3 display-message -p -t %3 #{session_name}" {
		t.Errorf("tmux ran with %q", got)
	}
	gone := self
	gone.Start++
	for _, tc := range []struct {
		name   string
		s      TmuxSessions
		agent  proc.Proc
		socket string
	}{
		{"a directory others may write", s, self, open},
		{"not a served socket", s, self, dead},
		{"a relative socket", s, self, "good/work"},
		{"an agent that is gone", s, gone, good},
		{"no tmux on the host path", TmuxSessions{Procs: procs, UID: uid, HostPath: t.TempDir()}, self, good},
		{"a server in a sandbox", TmuxSessions{Procs: procs, UID: uid, HostPath: bin, Sandbox: func(net.Conn, *peer.Peer) (string, error) { return "user", nil }}, self, good},
		{"a server whose namespaces are unknown", TmuxSessions{Procs: procs, UID: uid, HostPath: bin, Sandbox: func(net.Conn, *peer.Peer) (string, error) { return "unknown", nil }}, self, good},
		{"no judgement of servers", TmuxSessions{Procs: procs, UID: uid, HostPath: bin}, self, good},
	} {
		if got := tc.s.TmuxSession(context.Background(), tc.agent, tc.socket, "%3", ""); got != "" {
			t.Errorf("%s: %q, want \"\"", tc.name, got)
		}
		if b, _ := os.ReadFile(calls); len(b) > 0 {
			t.Errorf("%s: tmux ran: %q", tc.name, b)
			os.Truncate(calls, 0)
		}
	}
}
