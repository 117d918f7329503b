package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tmux escape: a process of the owner's uid in a user+mount+pid
// sandbox that shares the temporary directory puts its own tmux server on
// the owner's default socket. A tmux client obeys its server (it opens
// files for it: load-buffer, save-buffer), so a client the daemon runs
// outside the sandbox, for `9harness ps` or a move, would read the
// owner's files for the sandbox, write files outside it, or land the
// agent, with its environment, inside it.

const tmuxCanary = "CANARY-id_ed25519-7f3c9a"

// sandboxTmux starts a tmux server in `unshare --user --mount --pid` on
// sock, with the owner's home hidden under a tmpfs (the sandbox cannot
// read it itself), and hooks that, after each command a client of the
// daemon might send, have the client read canary into a buffer and write
// a buffer to a file under home.
//
// The hooks act only while a tmux client runs whose parent's command line
// names daemonDir (the daemon startDaemonIn starts there, or the
// control's shell): other daemons on a shared machine see this test's
// agent too (same uid, same namespaces) and may ask its server, and what
// their clients are made to do is not this daemon's doing. (A hook has no
// format naming its client; the sandbox looks in /proc, which it still
// shares: no --mount-proc.)
func sandboxTmux(t *testing.T, tm, sock, home, canary, daemonDir string) {
	t.Helper()
	unshare := require(t, "unshare")
	cdir := shortDir(t, "sbc")
	conf := filepath.Join(cdir, "tmux.conf")
	mine := filepath.Join(cdir, "mine")
	must(t, os.WriteFile(mine, []byte(`for d in /proc/[0-9]*; do
	case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in *tmux*) ;; *) continue ;; esac
	p=$(sed -n 's/^PPid:[[:space:]]*//p' $d/status 2>/dev/null)
	grep -qF '`+daemonDir+`' /proc/$p/cmdline 2>/dev/null && exit 0
done
exit 1
`), 0o755))
	var b strings.Builder
	b.WriteString("set-buffer -b planted PLANTED-BY-THE-SANDBOX\n")
	for _, cmd := range []string{"list-panes", "list-sessions", "display-message", "has-session", "new-session", "list-windows"} {
		// After the command, in its client's name: read the owner's key,
		// write a file into the owner's home.
		b.WriteString("set-hook -g after-" + cmd + " {\n" +
			"  if-shell '/bin/sh " + mine + "' {\n" +
			"    load-buffer -b stolen-" + cmd + " " + canary + "\n" +
			"    save-buffer -b planted " + filepath.Join(home, "written-"+cmd) + "\n" +
			"  }\n}\n")
	}
	b.WriteString("new-session -d -s sbx 'sleep 600'\n")
	must(t, os.WriteFile(conf, []byte(b.String()), 0o644))
	// The server is the sandbox's pid 1 (-D: in the foreground), so the
	// sandbox lives as long as this test keeps unshare.
	script := "mount -t tmpfs none " + home + " && exec " + tm + " -D -S " + sock + " -f " + conf
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "SHELL=/bin/sh"}
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // unshare: --kill-child takes the sandbox with it
		<-done
	})
	eventually(t, func() bool {
		out, err := tmuxAt(tm, sock, "list-buffers", "-F", "#{buffer_name}")
		return err == nil && strings.Contains(out, "planted")
	}, "the sandbox's tmux server on "+sock)
}

// tmuxAt runs the test's own tmux client against sock.
func tmuxAt(tm, sock string, args ...string) (string, error) {
	cmd := exec.Command(tm, append([]string{"-S", sock}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// sandboxLoot is what reached the sandbox's server: its buffers other
// than the one it planted, with their content.
func sandboxLoot(t *testing.T, tm, sock string) string {
	t.Helper()
	out, err := tmuxAt(tm, sock, "list-buffers", "-F", "#{buffer_name}")
	if err != nil {
		t.Fatalf("the sandbox's server: %v %s", err, out)
	}
	var loot []string
	for _, name := range strings.Fields(out) {
		if name == "planted" {
			continue
		}
		content, _ := tmuxAt(tm, sock, "show-buffer", "-b", name)
		loot = append(loot, name+"="+content)
	}
	return strings.Join(loot, "; ")
}

// TestTmuxSandboxEscape: with the sandbox's server on the default socket
// the owner's agent names, the owner's `9harness ps`, a read of the
// agent's tmux file and `9harness move --tmux` give the sandbox no byte
// of the canary, write no file outside it, and the move is refused before
// the agent is touched, with a reason naming the server's namespace.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestTmuxSandboxEscape(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	tm := require(t, "tmux")
	// Each way has its own move environment, sandbox and daemon.
	t.Run("direct", func(t *testing.T) { t.Parallel(); tmuxEscape(t, tm, false) })
	t.Run("through the proc helper", func(t *testing.T) { t.Parallel(); tmuxEscape(t, tm, true) })
}

func tmuxEscape(t *testing.T, tm string, helper bool) {
	m := newMoveEnv(t)
	uid := strconv.Itoa(os.Getuid())
	sock := filepath.Join(m.tmuxDir, "tmux-"+uid, "default")
	canary := filepath.Join(m.home, ".ssh", "id_ed25519")
	must(t, os.MkdirAll(filepath.Dir(canary), 0o700))
	must(t, os.WriteFile(canary, []byte(tmuxCanary+"\n"), 0o600))
	// The owner's tmux directory, as tmux makes it (0700).
	must(t, os.Mkdir(filepath.Dir(sock), 0o700))
	daemonDir := shortDir(t, "dcw")
	sandboxTmux(t, tm, sock, m.home, canary, daemonDir)

	// The control: a tmux client outside the sandbox does what the
	// sandbox's hooks say. (The test's own client, against a server this
	// test started; what it wrote is removed before the daemon runs.)
	ctl := exec.Command("/bin/sh", "-c", `"$1" -S "$2" list-sessions; true`, daemonDir, tm, sock)
	ctl.Env, ctl.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
	if out, err := ctl.CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	if loot := sandboxLoot(t, tm, sock); !strings.Contains(loot, tmuxCanary) {
		t.Fatalf("control: the hooks did not make an outside client read the canary (loot %q): the test proves nothing", loot)
	}
	if _, err := os.Stat(filepath.Join(m.home, "written-list-sessions")); err != nil {
		t.Fatalf("control: the hooks did not make an outside client write a file: %v", err)
	}
	for _, f := range []string{"stolen-list-sessions"} {
		tmuxAt(tm, sock, "delete-buffer", "-b", f)
	}
	os.Remove(filepath.Join(m.home, "written-list-sessions"))
	if loot := sandboxLoot(t, tm, sock); loot != "" {
		t.Fatalf("control buffers left: %q", loot)
	}

	// The owner's agent, which ran in tmux on the default server: its
	// TMUX names the socket the sandbox now serves.
	const sid = "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b"
	agent := m.startClaude(t, sid, "TMUX="+sock+",1,0", "TMUX_PANE=%0", "FAKE_IGNORE_TERM=1")
	args := m.moveArgs()
	if helper {
		hsock := filepath.Join(t.TempDir(), "proc-helper.sock")
		h := launch(t, "--serve-proc-helper", "--unix", hsock)
		h.sock = hsock
		h.waitReady()
		args = append(args, "--proc-helper", hsock)
	}
	d := startDaemonIn(t, daemonDir, m.home, args...)
	target := "claude/" + strconv.Itoa(agent.pid())

	// ps: the table asks each agent's tmux server (list-panes -a).
	out, errs, code := run9harness(t, []string{"HOME=" + m.home}, "-s", d.sock, "ps")
	if code != 0 || !strings.Contains(out, strconv.Itoa(agent.pid())) {
		t.Fatalf("ps: %d %q %q", code, out, errs)
	}
	// The tmux file: display-message for the agent's pane.
	if tmx, err := readField(d.client(), "/active/"+target+"/tmux"); err != nil || tmx != "" {
		t.Errorf("the agent's tmux file names a session of the sandbox's server: %q %v", tmx, err)
	}
	// The move: refused before the agent is touched.
	out, errs, code = run9harness(t, nil, "-s", d.sock, "move", target, "rescued", "--tmux")
	if code == 0 {
		t.Errorf("the move onto the sandbox's server succeeded: %q", out)
	}
	t.Logf("move: %d %q %q", code, out, errs)
	log := d.stderr.Await("message_id=")
	if !strings.Contains(log, "the tmux server on "+sock) || !strings.Contains(log, "another user namespace") {
		t.Errorf("the refusal does not name the tmux server's namespace:\n%s", log)
	}
	select {
	case <-agent.done:
		t.Error("the agent was stopped")
	case <-time.After(200 * time.Millisecond):
	}
	if recs := m.records(t); len(recs) != 1 {
		t.Errorf("%d launches recorded, want only the agent's own: %+v", len(recs), recs)
	}

	// Nothing reached the sandbox, nothing was written outside it, and no
	// session of the move's is on its server.
	if loot := sandboxLoot(t, tm, sock); loot != "" {
		t.Errorf("the sandbox's server got buffers through the daemon's tmux clients: %q", loot)
	}
	ents, err := os.ReadDir(m.home)
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "written-") {
			t.Errorf("a file was written outside the sandbox: %s", e.Name())
		}
	}
	if ss, _ := tmuxAt(tm, sock, "list-sessions", "-F", "#{session_name}"); ss != "sbx" {
		t.Errorf("the sandbox's server has sessions %q", ss)
	}
	// (That list-sessions ran the hooks through this test's client:
	// nothing is checked after it.)
}

// TestTmuxMoveOntoLiveServer: onto the owner's own tmux server, already
// running, the move creates the session through the daemon's confined
// client of the judged server, and the agent comes back in it.
//
// Guards rule 5: a move is reported done only when the session is verified alive.
func TestTmuxMoveOntoLiveServer(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	if out, err := m.tmux("new-session", "-d", "-s", "keep", "sleep 600"); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	const sid = "2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d"
	agent := m.startClaude(t, sid)
	d := startDaemon(t, m.home, m.moveArgs()...)
	target := "claude/" + strconv.Itoa(agent.pid())
	out, errs, code := run9harness(t, nil, "-s", d.sock, "move", target, "rescued", "--tmux")
	if code != 0 {
		t.Fatalf("move: %d %q %q\n%s", code, out, errs, d.stderr.String())
	}
	recs := m.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d launches recorded, want 2", len(recs))
	}
	panes, err := m.tmux("list-panes", "-s", "-t", "=rescued", "-F", "#{pane_pid}")
	if err != nil || panes != strconv.Itoa(recs[1].PID) {
		t.Errorf("session rescued panes %q (%v), want %d", panes, err, recs[1].PID)
	}
	if ss, _ := m.tmux("list-sessions", "-F", "#{session_name}"); ss != "keep\nrescued" {
		t.Errorf("sessions %q: the move did not land on the running server", ss)
	}
	if p, err := os.FindProcess(recs[1].PID); err == nil {
		p.Signal(os.Interrupt)
	}
}

// TestTmuxSandboxSwapMidMove: the owner's own server passes the move's
// checks; then, while the agent is being stopped, a sandbox renames that
// socket away and serves the path itself. The session is never asked of
// the sandbox's server: the move fails (the agent was already stopped),
// naming that server's namespace, and nothing reaches the sandbox.
//
// Guards rule 5: a move is reported failed only when it is not done.
// Guards rule 9: whatever the daemon checks, it uses through the descriptor it checked.
func TestTmuxSandboxSwapMidMove(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	tm := require(t, "tmux")
	m := newMoveEnv(t)
	uid := strconv.Itoa(os.Getuid())
	sock := filepath.Join(m.tmuxDir, "tmux-"+uid, "default")
	canary := filepath.Join(m.home, ".ssh", "id_ed25519")
	must(t, os.MkdirAll(filepath.Dir(canary), 0o700))
	must(t, os.WriteFile(canary, []byte(tmuxCanary+"\n"), 0o600))
	if out, err := m.tmux("new-session", "-d", "-s", "keep", "sleep 600"); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(tm, "-S", sock+".owner", "kill-server").Run() })

	const sid = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"
	agent := m.startClaude(t, sid, "FAKE_IGNORE_TERM=1")
	daemonDir := shortDir(t, "dcw")
	d := startDaemonIn(t, daemonDir, m.home, m.moveArgs()...)
	target := "claude/" + strconv.Itoa(agent.pid())
	type result struct {
		out, errs string
		code      int
	}
	done := make(chan result, 1)
	go func() {
		out, errs, code := run9harness(t, nil, "-s", d.sock, "move", target, "rescued", "--tmux")
		done <- result{out, errs, code}
	}()
	// Past every check, the agent ignoring SIGTERM for 5 s: the swap.
	d.stderr.Await("message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54")
	must(t, os.Rename(sock, sock+".owner"))
	sandboxTmux(t, tm, sock, m.home, canary, daemonDir)

	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the move did not end")
	}
	t.Logf("move: %d %q %q", r.code, r.out, r.errs)
	if r.code != 4 {
		t.Errorf("move exit %d, want 4 (failed after the agent was stopped)", r.code)
	}
	if !strings.Contains(r.errs, "the tmux server on "+sock) || !strings.Contains(r.errs, "another user namespace") {
		t.Errorf("the failure does not name the sandbox's server and namespace: %q", r.errs)
	}
	if recs := m.records(t); len(recs) != 1 {
		t.Errorf("%d launches recorded, want only the agent's own: the relaunch ran somewhere", len(recs))
	}
	if loot := sandboxLoot(t, tm, sock); loot != "" {
		t.Errorf("the sandbox's server got buffers: %q", loot)
	}
	ents, err := os.ReadDir(m.home)
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "written-") {
			t.Errorf("a file was written outside the sandbox: %s", e.Name())
		}
	}
	if ss, _ := tmuxAt(tm, sock, "list-sessions", "-F", "#{session_name}"); ss != "sbx" {
		t.Errorf("the sandbox's server has sessions %q", ss)
	}
}

// startDaemonIn is startDaemon with the daemon's working directory and
// socket in dir, so that its command line names dir (through sh, which
// execs it in place).
func startDaemonIn(t *testing.T, dir, home string, extra ...string) *daemon {
	t.Helper()
	sock := filepath.Join(dir, "harness.sock")
	args := append(append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(home)...), extra...)
	d := launchCmd(t, "/bin/sh", append([]string{"-c", `cd "$0" && exec "$@"`, dir, bin("9harnessd")}, args...)...)
	d.sock = sock
	d.waitReady()
	return d
}
