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

// moveArgs are the daemon's flags for a move test: moves on, and the
// host binaries (the fake zmx, the real tmux) on the daemon's host path.
func (m *moveEnv) moveArgs(extra ...string) []string {
	return append([]string{"--allow-move", "--host-path", bins + ":/usr/bin:/bin"}, extra...)
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
	return readLaunches(m.record)
}

// readLaunches reads the fake harness's launch record at path.
func readLaunches(path string) []launchRecord {
	f, err := os.Open(path)
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
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
	agent := startFake(t, "claude", m.home, m.cwd, append(m.env, "FAKE_SESSION="+sid, "ZMX_SESSION=old", "STY=123.screen", "LISTEN_FDS=1", "ZELLIJ_SESSION_NAME=z")...)
	waitRegistry(t, m.home, agent.pid())
	d := startDaemon(t, m.home, m.moveArgs()...)
	c := d.client()
	dir := "/active/claude/" + strconv.Itoa(agent.pid())
	_, a, err := c.Stat(dir + "/tmux")
	must(t, err)
	if a.Perm != 0o644 {
		t.Errorf("tmux file mode %o with --allow-move, want 0644", a.Perm)
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
//
// Guards rule 4: read-only by absence.
// Guards rule 5: nothing is killed that has nowhere to come back to.
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
func TestMoveRefusals(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "8b9c0d1e-2f3a-4b4c-9d5e-6f7a8b9c0d1e"
	agent := startFake(t, "claude", m.home, m.cwd, append(m.env, "FAKE_SESSION="+sid)...)
	waitRegistry(t, m.home, agent.pid())
	// A session name already in use on the agent's tmux server.
	if out, err := m.tmux("new-session", "-d", "-s", "taken", "sleep", "600"); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	// An agent whose harness cannot resume: no registry, no session.
	bare := startFake(t, "codex", m.home, m.cwd, m.env...)
	// An agent whose own PATH has neither the host nor its harness: that
	// does not matter (the daemon's host path and the agent's executable
	// do, rule 7), so it is refused only by daemons whose own paths lack
	// them.
	lost := startFake(t, "claude", m.home, m.cwd, "PATH=/nonexistent", "TMUX_TMPDIR="+m.tmuxDir, "ZMX_DIR="+m.zmxDir,
		"FAKE_RECORD="+m.record, "FAKE_SESSION=5f6a7b8c-9d0e-4f1a-8b2c-3d4e5f6a7b8c")
	waitRegistry(t, m.home, lost.pid())
	// A claude whose executable does not name it (as pi and Codex run
	// under node): the resume binary must come from the daemon's path.
	anon := startFakeExe(t, "claude", m.home, m.cwd, append(append([]string{}, m.env...), "FAKE_SESSION=6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d")...)
	waitRegistry(t, m.home, anon.pid())
	nohost := startDaemon(t, m.home, "--allow-move", "--host-path", "/nonexistent")
	noresume := startDaemon(t, m.home, m.moveArgs("--resume-path", "/nonexistent")...)

	readonly := startDaemon(t, m.home)
	d := startDaemon(t, m.home, m.moveArgs()...)
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
		{"leading dash", d, dir + "/tmux", "-x", linux.EINVAL},
		{"zmx -d name", d, dir + "/zmx", "-dfoo", linux.EINVAL},
		{"another tmux server", d, dir + "/tmux", "other:x", linux.EINVAL},
		{"a socket path", d, dir + "/tmux", "/tmp/evil/sock:x", linux.EINVAL},
		{"zmx not on the daemon's host path", nohost, "/active/claude/" + strconv.Itoa(lost.pid()) + "/zmx", "lost", linux.EPERM},
		{"tmux not on the daemon's host path", nohost, "/active/claude/" + strconv.Itoa(lost.pid()) + "/tmux", "lost", linux.EPERM},
		{"no resume binary", noresume, "/active/claude/" + strconv.Itoa(anon.pid()) + "/tmux", "anon", linux.EPERM},
	} {
		err := tc.d.client().WriteFile(tc.path, []byte(tc.value))
		if !isErrno(err, tc.errno) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
		}
	}
	// Nothing was touched: both agents run, nothing was relaunched.
	for _, a := range []*fakeAgent{agent, bare, lost, anon} {
		select {
		case <-a.done:
			t.Fatalf("agent %d died from a refused move", a.pid())
		default:
		}
	}
	if recs := m.records(t); len(recs) != 4 {
		t.Errorf("%d launches recorded, want the 4 originals", len(recs))
	}
	for dd, reasons := range map[*daemon][]string{
		d: {"cannot start with '-'", `other\" is not the agent's own tmux server`, `/tmp/evil/sock\" is not the agent's own tmux server`,
			"a tmux session named taken already exists", "session unresolved"},
		nohost:   {"zmx is not on the daemon's host path (/nonexistent)", "tmux is not on the daemon's host path (/nonexistent)"},
		noresume: {"does not name claude, and claude is not on the daemon's resume path (/nonexistent"},
	} {
		out := dd.stderr.Await(append([]string{"message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53"}, reasons...)...)
		for _, r := range reasons {
			if !strings.Contains(out, r) {
				t.Errorf("the audit lacks the reason %q:\n%s", r, out)
			}
		}
		if !strings.Contains(out, "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53") {
			t.Errorf("refusals not audited:\n%s", out)
		}
		if strings.Contains(out, "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54") {
			t.Errorf("a refused move was started:\n%s", out)
		}
	}
}

// startFakeExe starts the fake harness as name (argv[0]) from an
// executable whose own name is not name, as a node-run harness looks.
func startFakeExe(t *testing.T, name, home, cwd string, env ...string) *fakeAgent {
	t.Helper()
	cmd := &exec.Cmd{Path: bin("fakeharness"), Args: []string{name}, Dir: cwd, Stderr: os.Stderr,
		Env: append([]string{"HOME=" + home, "PATH=/usr/bin:/bin"}, env...)}
	must(t, cmd.Start())
	a := &fakeAgent{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// startClaude starts a Claude-shaped fake agent and waits for its registry.
func (m *moveEnv) startClaude(t *testing.T, sid string, extra ...string) *fakeAgent {
	t.Helper()
	a := startFake(t, "claude", m.home, m.cwd, append(append([]string{}, m.env...), append([]string{"FAKE_SESSION=" + sid}, extra...)...)...)
	waitRegistry(t, m.home, a.pid())
	return a
}

// TestMoveStubbornAgent: an agent that ignores SIGTERM is killed at 5 s and
// still moved; meanwhile another connection is served at once.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
// Guards rule 6: a move completes, whatever its client and the daemon do.
func TestMoveStubbornAgent(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
	agent := m.startClaude(t, sid, "FAKE_IGNORE_TERM=1")
	d := startDaemon(t, m.home, m.moveArgs()...)
	other := d.client()
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		errc <- d.client().WriteFile("/active/claude/"+strconv.Itoa(agent.pid())+"/tmux", []byte("stubborn"))
	}()
	// While the move waits out the grace period, reads proceed.
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		if _, err := other.ReadFile("/pid"); err != nil {
			t.Fatal(err)
		}
		if dt := time.Since(t0); dt > 2*time.Second {
			t.Fatalf("a read took %v during a move", dt)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("move: %v\n%s", err, d.stderr.String())
	}
	took := time.Since(start)
	<-agent.done
	if ws, ok := agent.cmd.ProcessState.Sys().(interface{ Signal() os.Signal }); ok && ws.Signal().String() != "killed" {
		t.Errorf("the stubborn agent ended by %v, want SIGKILL", ws.Signal())
	}
	if took < 5*time.Second || took > 25*time.Second {
		t.Errorf("move took %v; the SIGKILL comes at 5 s", took)
	}
	if recs := m.records(t); len(recs) != 2 {
		t.Errorf("%d launches, want 2", len(recs))
	} else if p, err := os.FindProcess(recs[1].PID); err == nil {
		p.Signal(os.Interrupt)
	}
}

// TestMoveClientHangsUp: a client that hangs up right after its write still
// gets its agent moved.
//
// Guards rule 6: a move completes, whatever its client and the daemon do.
func TestMoveClientHangsUp(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "0d1e2f3a-4b5c-4d6e-9f7a-8b9c0d1e2f3a"
	agent := m.startClaude(t, sid)
	d := startDaemon(t, m.home, m.moveArgs()...)
	c := d.client()
	f, err := c.Walk("/active/claude/" + strconv.Itoa(agent.pid()) + "/tmux")
	must(t, err)
	if err := f.Open(1); err != nil { // write-only
		t.Fatal(err)
	}
	go f.WriteAt([]byte("orphan"), 0)
	time.Sleep(50 * time.Millisecond)
	c.Close() // hang up with the write in flight
	eventually(t, func() bool { return len(m.records(t)) == 2 }, "the relaunch")
	eventually(t, func() bool {
		out, err := m.tmux("list-panes", "-s", "-t", "=orphan", "-F", "#{pane_pid}")
		return err == nil && out == strconv.Itoa(m.records(t)[1].PID)
	}, "the agent in the orphan session")
	eventually(t, func() bool { return strings.Contains(d.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55") }, "the move's end in the audit")
	if p, err := os.FindProcess(m.records(t)[1].PID); err == nil {
		p.Signal(os.Interrupt)
	}
}

// TestMoveConcurrent: two moves of the same agent cannot both proceed: the
// second is EBUSY (or, once the first has killed it, ENOENT).
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestMoveConcurrent(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	agent := m.startClaude(t, "1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b", "FAKE_IGNORE_TERM=1")
	d := startDaemon(t, m.home, m.moveArgs()...)
	path := "/active/claude/" + strconv.Itoa(agent.pid()) + "/tmux"
	c1, c2 := d.client(), d.client()
	f1, _ := c1.Walk(path)
	f2, _ := c2.Walk(path)
	f1.Open(1)
	f2.Open(1)
	first := make(chan error, 1)
	go func() { _, err := f1.WriteAt([]byte("one"), 0); first <- err }()
	time.Sleep(300 * time.Millisecond)
	_, err := f2.WriteAt([]byte("two"), 0)
	if !isErrno(err, linux.EBUSY) {
		t.Errorf("second move: %v, want EBUSY", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first move: %v", err)
	}
	if _, err := m.tmux("has-session", "-t", "=two"); err == nil {
		t.Error("the second move created its session")
	}
	if recs := m.records(t); len(recs) == 2 {
		if p, err := os.FindProcess(recs[1].PID); err == nil {
			p.Signal(os.Interrupt)
		}
	}
}

// TestMoveEveryHarnessAndHost: a successful move per resumable harness and
// per host: the new process has the same session id, the same directory,
// the environment minus the scrubbed variables, and lives in the named
// session.
func TestMoveEveryHarnessAndHost(t *testing.T) {
	t.Parallel()
	sessions := map[string]string{
		"claude": "2f3a4b5c-6d7e-4f8a-9b0c-1d2e3f4a5b6c",
		"codex":  "019e9999-aaaa-7bbb-8ccc-dddddddddddd",
		"omp":    "019e7777-aaaa-7bbb-8ccc-eeeeeeeeeeee",
		"pi":     "3a4b5c6d-7e8f-4a9b-8c0d-1e2f3a4b5c6d",
		"hermes": "20261130_071500_a1b2c3",
	}
	for _, h := range []string{"claude", "codex", "omp", "pi", "hermes"} {
		for _, host := range []string{"zmx", "tmux"} {
			t.Run(h+"/"+host, func(t *testing.T) {
				m := newMoveEnv(t)
				agent := startFake(t, h, m.home, m.cwd, append(append([]string{}, m.env...), "FAKE_SESSION="+sessions[h])...)
				d := startDaemon(t, m.home, m.moveArgs()...)
				c := d.client()
				dir := "/active/" + h + "/" + strconv.Itoa(agent.pid())
				var sid string
				deadline := time.Now().Add(10 * time.Second)
				for {
					sid, _ = readField(c, dir+"/session")
					if sid != "" || time.Now().After(deadline) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if sid == "" {
					via, _ := readField(c, dir+"/via")
					t.Fatalf("%s agent's session never resolved (via %q)", h, via)
				}
				name := h + "-" + host
				// Whatever happens below, the session this move makes (and
				// the agent in it) is ended: the test made them.
				t.Cleanup(func() {
					if host == "zmx" {
						cmd := exec.Command(bin("zmx"), "kill", name)
						cmd.Env = m.env
						cmd.Run()
					}
					for i, r := range m.records(t) {
						if p, err := os.FindProcess(r.PID); err == nil && i > 0 {
							p.Signal(os.Interrupt)
						}
					}
				})
				if err := c.WriteFile(dir+"/"+host, []byte(name+"\n")); err != nil {
					t.Fatalf("move: %v\n%s", err, d.stderr.String())
				}
				select {
				case <-agent.done:
				case <-time.After(5 * time.Second):
					t.Fatal("the old agent still runs")
				}
				// The new process may record its launch a moment after it
				// became visible as the session's holder.
				eventually(t, func() bool { return len(m.records(t)) >= 2 }, "the relaunch's record")
				recs := m.records(t)
				if len(recs) != 2 {
					t.Fatalf("%d launches recorded, want 2", len(recs))
				}
				old, nw := recs[0], recs[1]
				if nw.Cwd != old.Cwd {
					t.Errorf("cwd %q, was %q", nw.Cwd, old.Cwd)
				}
				if w, g := envSet(old.Env), envSet(nw.Env); strings.Join(w, "\n") != strings.Join(g, "\n") {
					t.Errorf("environment differs:\n old %q\n new %q", w, g)
				}
				newDir := "/active/" + h + "/" + strconv.Itoa(nw.PID)
				eventually(t, func() bool {
					s, err := readField(c, newDir+"/session")
					return err == nil && s == sid
				}, "the new agent with the same session")
				if got, _ := readField(c, newDir+"/"+host); got != name {
					t.Errorf("new agent's %s = %q, want %q", host, got, name)
				}
			})
		}
	}
}
