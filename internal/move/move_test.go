package move

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

var good = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// Guards rule 7: no client byte reaches exec; no agent picks a binary; the environment never leaks.
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
		{"-d", "", false},
		{"-x", "", false},
		{"a-d", "a-d", true},
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

// Guards rule 7: no client byte reaches exec; no agent picks a binary; the environment never leaks.
func TestScrub(t *testing.T) {
	got := scrub([]string{"A=1", "ZMX_SESSION=x", "TMUX=/s,1,2", "TMUX_PANE=%1", "STY=1.s", "ZELLIJ=0", "ZELLIJ_SESSION_NAME=z",
		"LISTEN_FDS=1", "LISTEN_PID=2", "LISTEN_FDNAMES=x", "NOTIFY_SOCKET=/run/x", "PATH=/bin", "TMUX_TMPDIR=/t"})
	want := []string{"A=1", "PATH=/bin", "TMUX_TMPDIR=/t"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q", got)
	}
}

func TestHosts(t *testing.T) {
	zt := func(name string) Target { return Target{Name: name, ZmxDir: "/run/user/1000/zmx"} }
	if err := (Zmx{}).Check(zt(strings.Repeat("n", 80))); err != nil {
		t.Errorf("80-byte name under a short dir: %v", err)
	}
	if err := (Zmx{}).Check(zt(strings.Repeat("n", 100))); !errs.Is(err, errs.Invalid) {
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
	if err := (Tmux{}).Check(Target{Name: "a.b"}); !errs.Is(err, errs.Invalid) {
		t.Errorf("tmux a.b: %v", err)
	}
	launcher := []string{"/bin/9harnessd", "--exec-env", "/run/9harness/launch/0123"}
	cmd := (Zmx{}).Command("/bin/zmx", Target{Name: "n", Cwd: "/w"}, launcher)
	if !slices.Equal(cmd, append([]string{"/bin/zmx", "run", "n", "-d"}, launcher...)) {
		t.Errorf("zmx command %q", cmd)
	}
	cmd = (Tmux{}).Command("/bin/tmux", Target{Name: "n", Cwd: "/w", Cols: 132, Rows: 43, Socket: "/tmp/tmux-0/default"}, launcher)
	want := append([]string{"/bin/tmux", "-S", "/tmp/tmux-0/default", "new-session", "-d", "-s", "n", "-c", "/w", "-x", "132", "-y", "43", "--"}, launcher...)
	if !slices.Equal(cmd, want) {
		t.Errorf("tmux command %q", cmd)
	}
	// A tmux command longer than one client message is refused before
	// anything is touched (tmux would refuse it after the kill).
	long := (Tmux{}).Command("/bin/tmux", Target{Name: "n", Cwd: "/" + strings.Repeat("d", 17000), Socket: "/s"}, launcher)
	if err := checkCommand(Tmux{}, long, "n"); err == nil {
		t.Error("a 17000-byte tmux command passed")
	}
	if err := checkCommand(Zmx{}, []string{"/bin/zmx", "run", "n", "-d", "/bin/9harnessd", "-dx"}, "n"); err == nil {
		t.Error("a -d element after the zmx name passed")
	}
	env := (Zmx{}).Env(Target{ZmxDir: "/z", ZmxPrefix: "p-"}, "/usr/bin")
	if getenv(env, "ZMX_DIR") != "/z" || getenv(env, "ZMX_SESSION_PREFIX") != "p-" || getenv(env, "PATH") != "/usr/bin" {
		t.Errorf("zmx env %q", env)
	}
}

func TestTmuxLabel(t *testing.T) {
	for _, tc := range []struct {
		socket, tmpdir, name, want string
	}{
		{"/tmp/tmux-1000/default", "", "work", "work"},
		{"/tmp/tmux-1000/other", "", "work", "other:work"},
		{"/t/tmux-1000/other", "/t", "work", "other:work"},
		{"/t/tmux-1000/default", "/t", "work", "work"},
		{"/t/tmux-1000/other", "", "work", "/t/tmux-1000/other:work"},
		{"/home/u/s:ock", "", "work", "/home/u/s:ock:work"},
		{"/tmp/tmux-1001/other", "", "work", "/tmp/tmux-1001/other:work"},
	} {
		got := TmuxDisplay(tc.socket, tc.tmpdir, 1000, tc.name)
		if got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.socket, tc.tmpdir, got, tc.want)
		}
		server, name := SplitTarget([]byte(got))
		if string(name) != tc.name || server != TmuxLabel(tc.socket, tc.tmpdir, 1000) {
			t.Errorf("%q split as %q %q", got, server, name)
		}
	}
}

func TestTmuxPlace(t *testing.T) {
	uid := uint32(os.Getuid())
	tmp := t.TempDir()
	env := []string{"TMUX_TMPDIR=" + tmp}
	// Outside tmux: the default server, whatever the client names.
	tg, err := (Tmux{}).Place("", "n", env, "", uid)
	if err != nil || tg.Label != "" || tg.Socket != filepath.Join(tmp, "tmux-"+strconv.Itoa(int(uid)), "default") {
		t.Fatalf("default: %+v %v", tg, err)
	}
	if _, err := (Tmux{}).Place("default", "n", env, "", uid); err != nil {
		t.Errorf("default:n refused: %v", err)
	}
	for _, server := range []string{"other", "/tmp/evil", tmp + "/tmux-0/x"} {
		if _, err := (Tmux{}).Place(server, "n", env, "", uid); !errs.Is(err, errs.Invalid) {
			t.Errorf("server part %q: %v, want Invalid", server, err)
		}
	}
	// A server socket that is not a live socket of this uid is not trusted:
	// the move falls back to the default server.
	fake := filepath.Join(tmp, "notasocket")
	must(t, os.WriteFile(fake, nil, 0o600))
	tg, err = (Tmux{}).Place("", "n", env, fake, uid)
	if err != nil || tg.Socket == fake {
		t.Errorf("untrusted socket chosen: %+v %v", tg, err)
	}
	if _, err := (Tmux{}).Place(fake, "n", env, fake, uid); !errs.Is(err, errs.Invalid) {
		t.Errorf("naming an untrusted server: %v", err)
	}
}

// Guards rule 7: no client byte reaches exec; no agent picks a binary; the environment never leaks.
func TestSanitize(t *testing.T) {
	big := "BIG=" + strings.Repeat("x", MaxArgString)
	kept, dropped := sanitize([]string{"A=1", "noequals", "=v", "1A=x", "A B=x", "B=", "BASH_FUNC_module%%=() { :; }", "C=a=b", big, "\\x=1"})
	if want := []string{"A=1", "B=", "BASH_FUNC_module%%=() { :; }", "C=a=b"}; !slices.Equal(kept, want) || dropped != 6 {
		t.Fatalf("kept %q dropped %d", kept, dropped)
	}
}

func TestVerifiedRoute(t *testing.T) {
	for via, want := range map[string]bool{
		"registry": true, "fd": true, "dir": true, "relaunch": true, "registry (2 leases on this pid; the most recently updated)": true,
		"transcript (registry session X is stale after /clear)":    true,
		"argv (no registry; argv session X is stale after /clear)": false,
		"only": false, "ambiguous": false, "none (no registry record)": false, "": false,
	} {
		if got := verifiedRoute(harness.Agent{Session: "x", Via: via}); got != want {
			t.Errorf("%q: %v", via, got)
		}
	}
	if verifiedRoute(harness.Agent{Via: "registry"}) {
		t.Error("a route without a session verified")
	}
	for _, tc := range []struct {
		h, exe string
		want   bool
	}{
		{"claude", "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe", true},
		{"claude", "/home/u/.local/share/claude/versions/2.1.197", true},
		{"claude", "/usr/bin/node", false},
		{"codex", "/x/vendor/x86_64-unknown-linux-musl/bin/codex", true},
		{"pi", "/usr/bin/node", false},
		{"pi", "/tmp/evil/claude", false},
	} {
		if got := exeIdentifies(tc.h, tc.exe); got != tc.want {
			t.Errorf("%s %s: %v", tc.h, tc.exe, got)
		}
	}
}

// TestHandoff: the relaunch is given once, over the move's own socket
// (0600 in an owner-only directory), to a launcher that passes the judge
// and presents the move's token; a launcher judged sandboxed, of another
// executable or with another token gets nothing and does not use the
// offer up; the launcher takes a relaunch only from the daemon process
// its handle names.
func TestHandoff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "9harness", "launch")
	// What the judge and the executable check answer next (the offer
	// serves from a goroutine of its own).
	var mu sync.Mutex
	verdict := ""
	var exe *peer.FileID
	set := func(v string, e *peer.FileID) { mu.Lock(); verdict, exe = v, e; mu.Unlock() }
	h := &Handoff{Dir: dir,
		Sandbox: func(net.Conn, *peer.Peer) (string, error) { mu.Lock(); defer mu.Unlock(); return verdict, nil },
		PeerExe: func(_ net.Conn, p *peer.Peer) (peer.FileID, error) {
			mu.Lock()
			e := exe
			mu.Unlock()
			if e != nil {
				return *e, nil
			}
			return p.Exe()
		}}
	secret := "SECRET=" + strings.Repeat("s", 100<<10)
	l := Launch{Path: "/bin/true", Argv: []string{"claude", "--resume", "x"}, Env: []string{"A=1", secret, "B=\xff\x01"}, Cwd: "/"}
	o, err := h.Offer(l)
	must(t, err)
	argv := o.Argv([]string{"/bin/9harnessd", "--exec-env"})
	if len(argv) != 4 || strings.Contains(strings.Join(argv, " "), "SECRET") {
		t.Fatalf("launcher argv %q", argv)
	}
	sock, handle := argv[2], argv[3]
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("launch socket %v %v", fi, err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Fatalf("launch dir mode %o", di.Mode().Perm())
	}
	// Judged sandboxed, then another executable, then another token:
	// refused, and the offer stands.
	set("user", nil)
	if _, err := Fetch(sock, handle); err == nil {
		t.Fatal("a launcher judged sandboxed got the relaunch")
	}
	set("", &peer.FileID{Dev: 1, Ino: 2})
	if _, err := Fetch(sock, handle); err == nil {
		t.Fatal("a launcher of another executable got the relaunch")
	}
	set("", nil)
	other := handle[:strings.LastIndexByte(handle, ':')+1] + strings.Repeat("0", 2*tokenLen)
	if _, err := Fetch(sock, other); err == nil {
		t.Fatal("a launcher with another token got the relaunch")
	}
	for _, want := range []string{"another user namespace than the reference's (a sandbox)", "executable (1:2)", "token is not this move's"} {
		if !strings.Contains(o.Refused(), want) {
			t.Errorf("refusals %q lack %q", o.Refused(), want)
		}
	}
	// The launcher takes it from no process but the daemon its handle
	// names (here, this one): not from pid 1, nor from this pid with
	// another start time.
	f := strings.SplitN(handle, ":", 3)
	start, _ := strconv.ParseUint(f[1], 10, 64)
	for _, bad := range []string{"1:" + f[1] + ":" + f[2], f[0] + ":" + strconv.FormatUint(start+1, 10) + ":" + f[2]} {
		if _, err := Fetch(sock, bad); err == nil || !strings.Contains(err.Error(), "not by the daemon") {
			t.Errorf("handle %q: %v", bad, err)
		}
	}
	if o.Fetched() != 0 {
		t.Fatal("fetched by a refused launcher")
	}
	got, err := Fetch(sock, handle)
	if err != nil || got.Path != l.Path || !slices.Equal(got.Argv, l.Argv) || !slices.Equal(got.Env, l.Env) || got.Cwd != "/" {
		t.Fatalf("fetched %q %v", got.Argv, err)
	}
	if o.Fetched() != os.Getpid() {
		t.Errorf("fetched by pid %d, want %d", o.Fetched(), os.Getpid())
	}
	if _, err := Fetch(sock, handle); err == nil {
		t.Fatal("a second fetch succeeded")
	}
	o.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket survived its offer: %v", err)
	}
	// An offer closed unfetched leaves nothing to fetch.
	o, err = h.Offer(l)
	must(t, err)
	argv = o.Argv(nil)
	o.Close()
	if _, err := Fetch(argv[0], argv[1]); err == nil {
		t.Fatal("a closed offer was fetched")
	}
	for _, bad := range [][2]string{{"relative/x.sock", handle}, {sock, "1:2"}, {sock, "x:1:" + f[2]}, {sock, "1:1:zz"}} {
		if _, err := Fetch(bad[0], bad[1]); err == nil {
			t.Errorf("%q fetched", bad)
		}
	}
	// A launch directory anyone else may enter is not used.
	must(t, os.Chmod(dir, 0o755))
	if _, err := h.Offer(l); err == nil {
		t.Error("offered in a 0755 directory")
	}
	// Nor one reached through a link, even to an owner-only directory:
	// nothing is made or bound there.
	must(t, os.Chmod(dir, 0o700))
	parent := filepath.Dir(dir)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	must(t, os.Mkdir(elsewhere, 0o700))
	must(t, os.Rename(parent, parent+".old"))
	must(t, os.Symlink(elsewhere, parent))
	if _, err := h.Offer(l); err == nil {
		t.Error("offered through a linked parent directory")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("made %d entries through the link", len(ents))
	}
}

func TestManualResume(t *testing.T) {
	rec := &record{resume: []string{"claude", "--resume", "1f9a"}}
	rec.agent.Cwd = "/home/g/it's here"
	if got := rec.manual(); got != `cd '/home/g/it'\''s here' && claude --resume 1f9a` {
		t.Fatalf("%s", got)
	}
	rec = &record{resume: []string{"codex", "-c", "key=sk-1", "--settings={\"k\":1}", "--model", "m", "resume", "x"}}
	rec.agent.Cwd = "/w"
	got := rec.manual()
	if strings.Contains(got, "sk-1") || strings.Contains(got, `"k"`) || !strings.Contains(got, "--model m resume x") {
		t.Fatalf("%s", got)
	}
	// With no flag that can hold a key, the journal's line is the
	// agent's resume file's, word for word.
	rec = &record{resume: []string{"claude", "--resume", "1f9a", "--model", "opus 4"}}
	rec.agent.Cwd = "/w"
	if got, want := rec.manual(), harness.ResumeLine("/w", rec.resume); got != want || want != `cd /w && claude --resume 1f9a --model 'opus 4'` {
		t.Fatalf("journal %q, resume file %q", got, want)
	}
}

// allowedArgv checks that every element of a host command is one the
// daemon chose: the host binary and its fixed words, the launcher, the
// name, the cwd, the size, the socket.
func allowedArgv(t *testing.T, argv []string, launcher []string, tg Target) {
	t.Helper()
	allowed := map[string]bool{tg.Name: true, tg.Cwd: true, strconv.Itoa(tg.Cols): true, strconv.Itoa(tg.Rows): true, tg.Socket: true}
	for _, w := range append([]string{"/bin/tmux", "/bin/zmx", "-S", "new-session", "-d", "-s", "-c", "-x", "-y", "--", "run"}, launcher...) {
		allowed[w] = true
	}
	for _, a := range argv {
		if !allowed[a] {
			t.Fatalf("argv element %q is none of the daemon's: %q", a, argv)
		}
	}
}

// FuzzName feeds arbitrary bytes to the name check and the command
// builders: whatever is accepted is exactly one argument of the host
// command, in the allowed charset, and every other element is the
// daemon's own.
func FuzzName(f *testing.F) {
	for _, s := range []string{"work", "work\n", "", ".", "..", "a/b", "-d", "--dangerous", "a\x00b", "x;rm -rf /", "$(id)", "a\nb", "lbl:work", "/tmp/x:y"} {
		f.Add([]byte(s))
	}
	launcher := placeholderArgv([]string{"/bin/9harnessd", "--exec-env"}, "/run/user/1000/9harness/launch")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, nb := SplitTarget(b)
		if bytes.IndexByte(nb, ':') >= 0 {
			t.Fatalf("split left a ':' in the name %q", nb)
		}
		name, err := ValidName(b)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("refusal of kind %v", errs.KindOf(err))
			}
			return
		}
		if !good.MatchString(name) || name == "." || name == ".." || name[0] == '-' {
			t.Fatalf("accepted %q", name)
		}
		for _, h := range []Host{Zmx{}, Tmux{}} {
			tg := Target{Name: name, Cwd: "/w", Cols: 80, Rows: 24, Socket: "/tmp/tmux-0/default"}
			argv := h.Command("/bin/"+h.Name(), tg, launcher)
			allowedArgv(t, argv, launcher, tg)
			if checkCommand(h, argv, name) != nil {
				t.Fatalf("%s refused its own command %q", h.Name(), argv)
			}
			if n := slices.Index(argv, name); n < 0 {
				t.Fatalf("%s: name %q not passed as one argument: %q", h.Name(), name, argv)
			}
		}
	})
}

// FuzzEnv feeds hostile environ blocks (what /proc/PID/environ can hold)
// through the relaunch: no byte of it reaches any argv (the host command
// is the daemon's words, the launcher, the name, the cwd and the size; the
// resume argv is the harness's), the relaunch carries exactly the valid
// entries, and the launcher reads back what was sent.
func FuzzEnv(f *testing.F) {
	for _, s := range []string{"A=1\x00B=2", "noequals\x00A=1", "=x\x00", "1A=2\x00A B=3", "TMUX=/s,1,2\x00ZMX_SESSION=z\x00P=--resume", "X=" + strings.Repeat("v", 2000), "\x00\x00", "-d=1\x00--exec-env=/etc/passwd"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, block []byte) {
		env := proc.SplitCmdline(block)
		clean, dropped := sanitize(scrub(env))
		if dropped < 0 || len(clean)+dropped > len(env) {
			t.Fatalf("counted %d dropped of %d", dropped, len(env))
		}
		for _, kv := range clean {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !validEnvName(k) || k == "TMUX" || k == "ZMX_SESSION" || !slices.Contains(env, kv) {
				t.Fatalf("kept %q", kv)
			}
		}
		resume := []string{"claude", "--resume", "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"}
		msg, err := encodeLaunch(Launch{Path: "/bin/true", Argv: resume, Env: clean, Cwd: "/w"})
		if err != nil {
			t.Fatal(err)
		}
		launcher := placeholderArgv([]string{"/bin/9harnessd", "--exec-env"}, "/run/user/1000/9harness/launch")
		for _, h := range []Host{Zmx{}, Tmux{}} {
			tg := Target{Name: "work", Cwd: "/w", Cols: 200, Rows: 50, Socket: "/tmp/tmux-0/default"}
			allowedArgv(t, h.Command("/bin/"+h.Name(), tg, launcher), launcher, tg)
		}
		l, err := decodeLaunch(msg)
		if err != nil || !slices.Equal(l.Argv, resume) || !slices.Equal(l.Env, clean) {
			t.Fatalf("read back %q %q %v", l.Argv, l.Env, err)
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type recordingLauncher struct{ calls [][]string }

func (l *recordingLauncher) Launch(_ context.Context, argv []string, _ string, _ []string, _, _ string) error {
	l.calls = append(l.calls, argv)
	return nil
}

// TestReusedPidNeverSignalled: a move names the agent by pid and start
// time; a live process at that pid with another start time (a reused pid)
// is refused with ENOENT and never signalled.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
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

// TestHandoffFlood: while another process, which the judge refuses,
// connects to the move's socket 200 times at once, more than its backlog
// holds, the launcher still gets the relaunch.
func TestHandoffFlood(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("missing in CI: python3")
		}
		t.Skip("skipped: python3 is not installed")
	}
	var refusals atomic.Int32
	h := &Handoff{Dir: filepath.Join(t.TempDir(), "9harness", "launch"),
		Sandbox: func(_ net.Conn, p *peer.Peer) (string, error) {
			if int(p.PID) != os.Getpid() {
				refusals.Add(1)
				time.Sleep(2 * time.Millisecond) // a judgement takes a moment
				return "user", nil
			}
			return "", nil
		}}
	l := Launch{Path: "/bin/true", Argv: []string{"claude"}, Env: []string{"A=1"}, Cwd: "/"}
	o, err := h.Offer(l)
	must(t, err)
	defer o.Close()
	argv := o.Argv(nil)
	flood := exec.Command(py, "-c", `
import socket, sys, threading
def f():
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.recv(1)
    except Exception:
        pass
ts = [threading.Thread(target=f) for _ in range(200)]
[t.start() for t in ts]
[t.join() for t in ts]
`, argv[0])
	must(t, flood.Start())
	defer flood.Wait()
	for refusals.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	got, err := Fetch(argv[0], argv[1])
	if err != nil || !slices.Equal(got.Env, l.Env) {
		t.Fatalf("fetch under a flood: %v (after %d refusals)", err, refusals.Load())
	}
	t.Logf("fetched after %d refusals", refusals.Load())
}
