package move

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
)

var good = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"work", "work", true},
		{"work\n", "work", true},
		{"a.b_c-1", "a.b_c-1", true},
		{"", "", false},
		{"\n", "", false},
		{"work\n\n", "", false},
		{".", "", false},
		{"..", "", false},
		{"a/b", "", false},
		{"a b", "", false},
		{"a\x00", "", false},
		{"-d", "-d", true},
		{"ünï", "", false},
		{strings.Repeat("x", 101), "", false},
	} {
		got, err := ValidName([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: got %q %v, want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errs.Is(err, errs.Invalid) {
			t.Errorf("%q: error kind %v, want Invalid", tc.in, errs.KindOf(err))
		}
	}
}

func TestScrub(t *testing.T) {
	got := scrub([]string{"A=1", "ZMX_SESSION=x", "TMUX=/s,1,2", "TMUX_PANE=%1", "STY=1.s", "ZELLIJ=0", "ZELLIJ_SESSION_NAME=z",
		"LISTEN_FDS=1", "LISTEN_PID=2", "LISTEN_FDNAMES=x", "NOTIFY_SOCKET=/run/x", "PATH=/bin", "TMUX_TMPDIR=/t"})
	want := []string{"A=1", "PATH=/bin", "TMUX_TMPDIR=/t"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q", got)
	}
}

func TestHosts(t *testing.T) {
	env := []string{"ZMX_DIR=/run/user/1000/zmx"}
	if err := (Zmx{}).Check(strings.Repeat("n", 80), env); err != nil {
		t.Errorf("80-byte name under a short dir: %v", err)
	}
	if err := (Zmx{}).Check(strings.Repeat("n", 100), env); !errs.Is(err, errs.Invalid) {
		t.Errorf("100-byte name: %v", err)
	}
	for env, want := range map[string]string{
		"ZMX_DIR=/z":           "/z",
		"XDG_RUNTIME_DIR=/r":   "/r/zmx",
		"TMPDIR=/t":            "/t/zmx-",
		"HOME=/nothing/useful": "/tmp/zmx-",
	} {
		if got := (Zmx{}).SocketDir([]string{env}); !strings.HasPrefix(got, want) {
			t.Errorf("%s: socket dir %q, want %q...", env, got, want)
		}
	}
	if err := (Tmux{}).Check("a.b", nil); !errs.Is(err, errs.Invalid) {
		t.Errorf("tmux a.b: %v", err)
	}
	cmd := (Zmx{}).Command("/bin/zmx", "n", "/w", []string{"claude", "--resume", "x"}, nil)
	if !slices.Equal(cmd, []string{"/bin/zmx", "run", "n", "-d", "claude", "--resume", "x"}) {
		t.Errorf("zmx command %q", cmd)
	}
	cmd = (Tmux{}).Command("/bin/tmux", "n", "/w", []string{"claude", "--resume", "x"}, []string{"A=1"})
	if cmd[4] != "n" || cmd[6] != "/w" || !slices.Equal(cmd[len(cmd)-4:], []string{"A=1", "claude", "--resume", "x"}) {
		t.Errorf("tmux command %q", cmd)
	}
}

func TestManualResume(t *testing.T) {
	rec := &record{resume: []string{"claude", "--resume", "1f9a"}}
	rec.agent.Cwd = "/home/g/it's here"
	if got := rec.manual(); got != `cd '/home/g/it'\''s here' && claude --resume 1f9a` {
		t.Fatalf("%s", got)
	}
}

// FuzzName feeds arbitrary bytes to the name check and the command
// builders: whatever is accepted is exactly one argument of the relaunch
// argv, in the allowed charset, so no client byte outside it reaches exec.
func FuzzName(f *testing.F) {
	for _, s := range []string{"work", "work\n", "", ".", "..", "a/b", "-d", "--dangerous", "a\x00b", "x;rm -rf /", "$(id)", "a\nb"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := ValidName(b)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("refusal of kind %v", errs.KindOf(err))
			}
			return
		}
		if !good.MatchString(name) || name == "." || name == ".." {
			t.Fatalf("accepted %q", name)
		}
		for _, h := range []Host{Zmx{}, Tmux{}} {
			argv := h.Command("/bin/"+h.Name(), name, "/w", []string{"claude", "--resume", "s"}, []string{"A=1"})
			n := 0
			for _, a := range argv {
				if strings.Contains(a, name) && a != name && a != "/w" && !strings.HasPrefix(a, "/bin/") {
					if strings.Contains(a, "\x00") {
						t.Fatalf("argument %q carries a NUL", a)
					}
				}
				if a == name {
					n++
				}
			}
			if n < 1 {
				t.Fatalf("%s: name %q not passed as one argument: %q", h.Name(), name, argv)
			}
		}
	})
}

type recordingLauncher struct{ calls [][]string }

func (l *recordingLauncher) Launch(_ context.Context, argv []string, _ string, _ []string, _ string) error {
	l.calls = append(l.calls, argv)
	return nil
}

// TestReusedPidNeverSignalled: a move names the agent by pid and start
// time; a live process at that pid with another start time (a reused pid)
// is refused with ENOENT and never signalled.
func TestReusedPidNeverSignalled(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	procs := proc.New("/proc")
	p, err := procs.Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stale := p
	stale.Start = p.Start - 1 // the agent that had this pid before
	l := &recordingLauncher{}
	uid := uint32(os.Getuid())
	m := &Mover{Policy: &authz.Policy{Owner: uid, AllowMove: true}, Procs: procs, UID: uid, Launcher: l}
	err = m.Move(context.Background(), Request{
		Peer: authz.Subject{UID: uid}, Harness: harness.ByName("claude"), Proc: stale, Host: Tmux{}, Value: []byte("x"),
	})
	if !errs.Is(err, errs.NotExist) {
		t.Fatalf("move of a reused pid: %v, want NotExist", err)
	}
	if len(l.calls) != 0 {
		t.Fatal("a relaunch happened")
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process at the reused pid was hurt: %v", err)
	}
	if st, _ := procs.Stat(cmd.Process.Pid); st.Start != p.Start {
		t.Fatal("the process at the pid changed")
	}
}
