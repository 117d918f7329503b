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
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/prochelper"
)

// TestTmuxServer: the table's lookup runs the host path's tmux once per
// server (list-panes -a), answers each agent from that one listing, with
// the same display as TmuxSession, and runs nothing for an untrusted
// socket.
func TestTmuxServer(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// The fake records its argv: the confined client may write that file.
	os.WriteFile(calls, nil, 0o600)
	testRules = []confine.Rule{{Path: calls, Access: confine.Read | unix.LANDLOCK_ACCESS_FS_WRITE_FILE}}
	t.Cleanup(func() { testRules = nil })
	fake := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + calls + "\nprintf '%%1 main\\n%%3 rescued\\n%%4 with space\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "tmux"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	base := shortTemp(t, "tmuxsrv", 0o755)
	serve := func(dir string, mode os.FileMode) string {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode)
		sock := filepath.Join(dir, "work")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return sock
	}
	good := serve(filepath.Join(base, "good"), 0o700)
	open := serve(filepath.Join(base, "open"), 0o777)
	procs := proc.New("/proc")
	self, err := procs.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Getuid())
	s := TmuxSessions{Procs: procs, UID: uid, HostPath: bin, Sandbox: prochelper.Sandbox(nil, uid, nil)}

	ask := s.TmuxServer(context.Background(), good)
	for pane, want := range map[string]string{"%3": "rescued", "%4": "with space", "%1": "main", "%9": ""} {
		if want != "" {
			want = TmuxDisplay(good, "", uid, want)
		}
		if got := ask(self, pane, ""); got != want {
			t.Errorf("pane %s: %q, want %q (as TmuxSession shows it)", pane, got, want)
		}
	}
	gone := self
	gone.Start++
	if got := ask(gone, "%3", ""); got != "" {
		t.Errorf("an agent that is gone: %q", got)
	}
	b, _ := os.ReadFile(calls)
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); len(got) != 1 || got[0] != "-S /proc/self/fd/3 list-panes -a -F #{pane_id} #{session_name}" {
		t.Fatalf("tmux ran %q, want once with list-panes -a", got)
	}
	os.Truncate(calls, 0)
	if got := s.TmuxServer(context.Background(), open)(self, "%3", ""); got != "" {
		t.Errorf("untrusted server: %q", got)
	}
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Errorf("tmux ran for an untrusted socket: %q", b)
	}

	// A trusted socket named only by agents that fail the per-agent checks
	// (here: gone) is never dialled: the socket came from such an agent's
	// environment, and it may be a server that agent runs itself.
	ask = s.TmuxServer(context.Background(), good)
	if got := ask(gone, "%3", ""); got != "" {
		t.Errorf("an agent that is gone: %q", got)
	}
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Errorf("tmux ran for a server only an unchecked agent named: %q", b)
	}
}
