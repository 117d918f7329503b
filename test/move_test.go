package test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
)

// moveEnv is a private world for one move test: a fixture home, a working
// directory, a private tmux server directory and zmx socket directory, and
// a PATH with the fakes first.
type moveEnv struct {
	home, cwd, tmuxDir, zmxDir, record string
	env                                []string
}

func newMoveEnv(t *testing.T) *moveEnv {
	t.Helper()
	require(t, "tmux")
	m := &moveEnv{home: fixtureHome(t)}
	m.cwd = filepath.Join(m.home, "src", "x")
	must(t, os.MkdirAll(m.cwd, 0o755))
	m.tmuxDir = shortDir(t, "tm")
	m.zmxDir = shortDir(t, "zx")
	m.record = filepath.Join(t.TempDir(), "record.jsonl")
	m.env = []string{
		"PATH=" + bins + ":/usr/bin:/bin",
		"TMUX_TMPDIR=" + m.tmuxDir,
		"ZMX_DIR=" + m.zmxDir,
		"FAKE_RECORD=" + m.record,
		"LANG=C.UTF-8",
		"AGENT_MARK=kept",
	}
	t.Cleanup(func() {
		// Only the tmux server of this test's private socket directory.
		exec.Command("tmux", "-S", filepath.Join(m.tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "default"), "kill-server").Run()
	})
	return m
}

// shortDir is a private directory with a short path: unix socket paths
// must fit in 107 bytes.
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", prefix)
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type launchRecord struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd"`
	Env  []string `json:"env"`
	PID  int      `json:"pid"`
}

func (m *moveEnv) records(t *testing.T) []launchRecord {
	t.Helper()
	f, err := os.Open(m.record)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []launchRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r launchRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func (m *moveEnv) tmux(args ...string) (string, error) {
	cmd := exec.Command("tmux", args...)
	cmd.Env = []string{"TMUX_TMPDIR=" + m.tmuxDir, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func envSet(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ZMX_SESSION", "TMUX", "TMUX_PANE", "STY", "NOTIFY_SOCKET", "PWD", "SHLVL", "_", "OLDPWD", "TERM":
			continue
		}
		if strings.HasPrefix(k, "ZELLIJ") || strings.HasPrefix(k, "LISTEN_") {
			continue
		}
		out = append(out, kv)
	}
	sort.Strings(out)
	return out
}

// TestMoveTmux: a Claude-shaped agent is moved into a new tmux session on
// the user's default server: same session id, same directory, the same
// environment minus the session-host variables, living in the named
// session; the old process is gone and /active shows the new one.
func TestMoveTmux(t *testing.T) {
	m := newMoveEnv(t)
	const sid = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
	agent := startFake(t, "claude", m.home, m.cwd, append(m.env, "FAKE_SESSION="+sid, "ZMX_SESSION=old", "STY=123.screen", "LISTEN_FDS=1", "ZELLIJ_SESSION_NAME=z")...)
	registry := filepath.Join(m.home, ".claude", "sessions", strconv.Itoa(agent.pid())+".json")
	eventually(t, func() bool { _, err := os.Stat(registry); return err == nil }, "the agent's registry record")
	d := startDaemon(t, m.home, "--allow-move")
	c := d.client()
	dir := "/active/claude/" + strconv.Itoa(agent.pid())
	_, a, err := c.Stat(dir + "/tmux")
	must(t, err)
	if a.Mode.Permissions() != 0o644 {
		t.Errorf("tmux file mode %o with --allow-move, want 0644", a.Mode.Permissions())
	}
	if err := c.WriteFile(dir+"/tmux", []byte("rescued\n")); err != nil {
		t.Fatalf("move: %v\n%s", err, d.stderr.String())
	}
	select {
	case <-agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the old agent is still running after the move returned")
	}
	recs := m.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d launches recorded, want 2: %+v", len(recs), recs)
	}
	old, nw := recs[0], recs[1]
	if got := strings.Join(nw.Argv[1:], " "); got != "--resume "+sid || filepath.Base(nw.Argv[0]) != "claude" {
		t.Errorf("relaunch argv %q", nw.Argv)
	}
	if nw.Cwd != old.Cwd || nw.Cwd != m.cwd {
		t.Errorf("relaunch cwd %q, was %q", nw.Cwd, old.Cwd)
	}
	want, got := envSet(old.Env), envSet(nw.Env)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("environment differs:\n old (scrubbed) %q\n new %q", want, got)
	}
	for _, kv := range nw.Env {
		for _, bad := range []string{"ZMX_SESSION=", "STY=", "LISTEN_FDS=", "ZELLIJ_SESSION_NAME="} {
			if strings.HasPrefix(kv, bad) {
				t.Errorf("relaunched with %s", kv)
			}
		}
	}
	panes, err := m.tmux("list-panes", "-s", "-t", "=rescued", "-F", "#{pane_pid}")
	if err != nil || panes != strconv.Itoa(nw.PID) {
		t.Errorf("tmux session rescued panes %q (%v), want the new pid %d", panes, err, nw.PID)
	}
	newDir := "/active/claude/" + strconv.Itoa(nw.PID)
	eventually(t, func() bool {
		s, err := readField(c, newDir+"/session")
		return err == nil && s == sid
	}, "the moved agent under /active with its session")
	if tm, _ := readField(c, newDir+"/tmux"); tm != "rescued" {
		t.Errorf("new agent's tmux = %q, want rescued", tm)
	}
	if _, _, err := c.Stat(dir + "/session"); !isErrno(err, linux.ENOENT) {
		t.Errorf("old agent still listed: %v", err)
	}
	for _, want := range []string{"message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54", "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55", "new_pid=" + strconv.Itoa(nw.PID), "session=" + sid, "target=rescued", "host=tmux"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("audit lacks %q:\n%s", want, d.stderr.String())
		}
	}
	// Kill only what this test made: the moved fake.
	if p, err := os.FindProcess(nw.PID); err == nil {
		p.Signal(os.Interrupt)
	}
}

// TestMoveRefusals: each refusal comes before any signal and leaves the
// agent alive, unsignalled and in place.
func TestMoveRefusals(t *testing.T) {
	m := newMoveEnv(t)
	const sid = "8b9c0d1e-2f3a-4b4c-9d5e-6f7a8b9c0d1e"
	agent := startFake(t, "claude", m.home, m.cwd, append(m.env, "FAKE_SESSION="+sid)...)
	registry := filepath.Join(m.home, ".claude", "sessions", strconv.Itoa(agent.pid())+".json")
	eventually(t, func() bool { _, err := os.Stat(registry); return err == nil }, "the agent's registry record")
	// A session name already in use on the agent's tmux server.
	if out, err := m.tmux("new-session", "-d", "-s", "taken", "sleep", "600"); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	// An agent whose harness cannot resume: no registry, no session.
	bare := startFake(t, "codex", m.home, m.cwd, m.env...)

	readonly := startDaemon(t, m.home)
	d := startDaemon(t, m.home, "--allow-move")
	dir := "/active/claude/" + strconv.Itoa(agent.pid())
	for _, tc := range []struct {
		name  string
		d     *daemon
		path  string
		value string
		errno linux.Errno
	}{
		{"moves off", readonly, dir + "/tmux", "x", linux.EROFS},
		{"empty name", d, dir + "/tmux", "\n", linux.EINVAL},
		{"bad byte", d, dir + "/tmux", "a/b", linux.EINVAL},
		{"dotdot", d, dir + "/zmx", "..", linux.EINVAL},
		{"space", d, dir + "/tmux", "a b", linux.EINVAL},
		{"tmux dot", d, dir + "/tmux", "a.b", linux.EINVAL},
		{"too long for zmx", d, dir + "/zmx", strings.Repeat("n", 100), linux.EINVAL},
		{"name in use", d, dir + "/tmux", "taken", linux.EEXIST},
		{"unresolved session", d, "/active/codex/" + strconv.Itoa(bare.pid()) + "/tmux", "fresh", linux.EPERM},
		{"other file", d, dir + "/session", "x", linux.EROFS},
	} {
		err := tc.d.client().WriteFile(tc.path, []byte(tc.value))
		if !isErrno(err, tc.errno) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
		}
	}
	// Nothing was touched: both agents run, nothing was relaunched.
	for _, a := range []*fakeAgent{agent, bare} {
		select {
		case <-a.done:
			t.Fatalf("agent %d died from a refused move", a.pid())
		default:
		}
	}
	if recs := m.records(t); len(recs) != 2 {
		t.Errorf("%d launches recorded, want the 2 originals", len(recs))
	}
	if !strings.Contains(d.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53") {
		t.Errorf("refusals not audited:\n%s", d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54") {
		t.Errorf("a refused move was started:\n%s", d.stderr.String())
	}
}
