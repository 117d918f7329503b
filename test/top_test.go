package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// topPane is 9harness top running in a pane of a private tmux server, as
// a person would see it: keys go in with send-keys, the screen comes out
// with capture-pane.
type topPane struct {
	tm   *psTmux
	name string
}

// startTopPane runs `9harness ARGS` in a new w x h pane, after a line
// BEFORE that the restored terminal must show again, and prints
// [exit N] when it ends.
func startTopPane(t *testing.T, tm *psTmux, name string, w, h int, env []string, args ...string) *topPane {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	script := fmt.Sprintf("echo BEFORE; env %s %s %s; echo \"[exit $?]\"; exec sleep 600",
		strings.Join(env, " "), bin("9harness"), strings.Join(quoted, " "))
	tm.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "/bin/sh", "-c", script)
	return &topPane{tm, name}
}

func (p *topPane) screen() string { return strings.Join(p.tm.rows(p.name), "\n") }

func (p *topPane) keys(keys ...string) {
	p.tm.run(append([]string{"send-keys", "-t", p.name}, keys...)...)
}

func (p *topPane) text(s string) { p.tm.run("send-keys", "-t", p.name, "-l", s) }

// await waits (generously) for the screen to satisfy cond.
func (p *topPane) await(t *testing.T, what string, cond func(string) bool) string {
	t.Helper()
	var s string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s = p.screen(); cond(s) {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s; the screen:\n%s", p.name, what, s)
	return ""
}

func screenHas(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}

// rowOf is the screen line of pid's row, "" when there is none.
func topRowOf(screen string, pid int) string {
	for _, l := range strings.Split(screen, "\n") {
		for _, f := range strings.Fields(l) {
			if f == strconv.Itoa(pid) {
				return l
			}
		}
	}
	return ""
}

// TestTop drives 9harness top in a real tmux at 80x24 and 200x50: a row
// per agent, a state change shown as it happens (waiting first), the
// filter, the sort, the details, a move into tmux accepted and the same
// name refused (the daemon's reason shown), attach to the moved agent's
// tmux session and back, and q giving the terminal back as it was.
func TestTop(t *testing.T) {
	t.Parallel()
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			t.Parallel()
			testTopAt(t, size[0], size[1])
		})
	}
}

func testTopAt(t *testing.T, w, h int) {
	m := newMoveEnv(t)
	// The daemon lists every agent of the uid, other tests' too: the
	// view is filtered to this test's directory.
	dirName := fmt.Sprintf("topdir%d", w)
	m.cwd = filepath.Join(m.home, "src", dirName)
	must(t, os.MkdirAll(m.cwd, 0o755))
	const sid = "2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d"
	claude := m.startClaude(t, sid)
	codex := startFake(t, "codex", m.home, m.cwd, append(append([]string{}, m.env...), "FAKE_SESSION=019e7777-2222-7333-8444-55556666aaaa")...)
	d := startDaemon(t, m.home, m.moveArgs()...)
	tm := newPsTmux(t)
	name := fmt.Sprintf("top%d", w)
	env := []string{"HOME=" + m.home, "PATH=" + bins + ":/usr/bin:/bin", "TMUX_TMPDIR=" + m.tmuxDir, "LANG=C.UTF-8"}
	p := startTopPane(t, tm, name, w, h, env, "-s", d.sock, "top", "--count-reads")
	// Each step waits for the screen to show it: an Escape followed at
	// once by another key would read as Alt and that key.
	filter := func(text string) {
		t.Helper()
		p.keys("/")
		p.await(t, "the filter prompt", screenHas("\n/"))
		p.keys("C-u")
		p.text(text)
		p.await(t, "the filter typed", screenHas("\n/"+text))
		p.keys("Enter")
		p.await(t, "the filter kept", screenHas("filter: "+text))
	}

	p.await(t, "the view", screenHas("q quit"))
	filter(dirName)
	p.await(t, "a row for each agent", func(s string) bool {
		return topRowOf(s, claude.pid()) != "" && topRowOf(s, codex.pid()) != ""
	})
	s := p.screen()
	for _, want := range []string{"9harness top", "HARNESS", "PID", "STATE", "q quit"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q on the screen:\n%s", want, s)
		}
	}

	// A state change shows, and the waiting agent comes first.
	writeRegistryStatus(t, filepath.Join(m.home, ".claude", "sessions", itoa(claude.pid())+".json"), "waiting", "approve Bash", nil)
	s = p.await(t, "the claude row waiting", func(s string) bool { return strings.Contains(topRowOf(s, claude.pid()), "waiting") })
	if strings.Index(s, topRowOf(s, claude.pid())) > strings.Index(s, topRowOf(s, codex.pid())) {
		t.Errorf("the waiting agent is not first:\n%s", s)
	}
	if w >= 200 && !strings.Contains(topRowOf(s, claude.pid()), "waiting: approve Bash") {
		t.Errorf("at %d columns the row does not say what it waits for:\n%s", w, s)
	}

	// Filter: only codex; esc: no filter (every agent of the uid).
	filter("codex " + itoa(codex.pid()))
	p.await(t, "the filter to hide claude", func(s string) bool {
		return topRowOf(s, claude.pid()) == "" && topRowOf(s, codex.pid()) != ""
	})
	p.keys("Escape")
	p.await(t, "esc to clear the filter", func(s string) bool { return !strings.Contains(s, "filter: ") })
	filter(dirName)
	p.await(t, "both rows again", func(s string) bool {
		return topRowOf(s, claude.pid()) != "" && topRowOf(s, codex.pid()) != ""
	})

	// Sort: s cycles, the footer says the key.
	p.keys("s")
	p.await(t, "s to sort by host", screenHas("sort:host"))
	for range 7 {
		p.keys("s")
	}
	p.await(t, "s to come back to state", screenHas("sort:state"))

	// Details of the selected (first, waiting) agent; esc back.
	p.keys("Home", "Enter")
	s = p.await(t, "the details", screenHas(sid))
	if !strings.Contains(s, "esc back") {
		t.Errorf("the details have no keys line:\n%s", s)
	}
	p.keys("Escape")
	p.await(t, "the table again", screenHas("q quit"))

	// Move the claude agent into tmux session NAME: accepted.
	session := fmt.Sprintf("topmv%d", w)
	p.keys("m")
	p.await(t, "the move prompt", screenHas("into zmx session"))
	p.text(session)
	p.keys("Tab")
	p.await(t, "tab to choose tmux", screenHas("into tmux session"))
	p.keys("Enter")
	p.await(t, "the move done", screenHas("moved claude/"+itoa(claude.pid())))
	select {
	case <-claude.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the old claude still runs after the move")
	}
	// The moved agent's row: only it under the filter.
	filter("tmux:" + session)
	p.await(t, "the moved agent's row", func(s string) bool {
		return strings.Contains(s, "tmux:"+session) && topRowOf(s, claude.pid()) == "" && topRowOf(s, codex.pid()) == ""
	})
	// The same name again: refused by the daemon, its reason shown.
	p.keys("m")
	p.await(t, "the move prompt", screenHas("into zmx session"))
	p.text(session)
	p.keys("Tab", "Enter")
	s = p.await(t, "the refusal", screenHas("refused"))
	t.Logf("refused:\n%s", s)

	// Attach: tmux attach on the agent's own server, and back on detach.
	p.keys("a")
	p.await(t, "the attached session", func(s string) bool { return !strings.Contains(s, "9harness top") })
	inner := filepath.Join(m.tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "default")
	// The view leaves the screen before tmux's client is attached:
	// detach once that client is there.
	within(t, 20*time.Second, func() bool {
		_, err := m.tmux("-S", inner, "detach-client", "-s", session)
		return err == nil
	}, "a client attached to "+session+" to detach")
	p.await(t, "the view back after detach", screenHas("9harness top"))

	// q restores the terminal: the line before, the exit, no view.
	p.keys("q")
	s = p.await(t, "top to exit 0", screenHas("[exit 0]"))
	if !strings.Contains(s, "BEFORE") || strings.Contains(s, "9harness top") {
		t.Errorf("the terminal after q is not as before:\n%s", s)
	}
	if got := strings.TrimSpace(tm.run("display-message", "-p", "-t", name, "#{alternate_on} #{cursor_flag} #{keypad_flag} #{mouse_any_flag}")); got != "0 1 0 0" {
		t.Errorf("after q: alternate_on cursor_flag keypad_flag mouse_any_flag = %q, want 0 1 0 0", got)
	}
}

var topReads = regexp.MustCompile(`reads ([0-9]+) tables ([0-9]+) rows`)

// TestTopIdleReads: with 100 agents and no change for 30 s, the view
// reads no table and no row (it counts its own reads): it is fed by the
// events alone. The agents are a user's of their own, reached through
// ssh, so that no other test's agents (of root) come and go in its view.
func TestTopIdleReads(t *testing.T) {
	t.Parallel()
	h := newSSHHost(t)
	for i := range 100 {
		startFakeAs(t, h, fmt.Sprintf("FAKE_SESSION=5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e%06d", i))
	}
	tm := newPsTmux(t)
	args := append([]string{"--ssh", h.user + "@127.0.0.1"}, h.opts(h.key)...)
	args = append(args, "top", "--count-reads")
	p := startTopPane(t, tm, "idle", 200, 50, []string{"HOME=" + t.TempDir(), "LANG=C.UTF-8", "XDG_RUNTIME_DIR=" + t.TempDir()}, args...)
	p.await(t, "100 agents counted", screenHas("100 agents"))
	// Settled: the counts still for 3 s.
	var before string
	within(t, 60*time.Second, func() bool {
		a := topReads.FindString(p.screen())
		time.Sleep(3 * time.Second)
		before = topReads.FindString(p.screen())
		return a != "" && a == before
	}, "the view's reads to settle")
	time.Sleep(30 * time.Second)
	after := topReads.FindString(p.screen())
	t.Logf("before the quiet 30 s: %s; after: %s", before, after)
	if after != before {
		t.Errorf("the view read while nothing changed: %s, then %s", before, after)
	}
	p.keys("q")
	p.await(t, "top to exit", screenHas("[exit 0]"))
}

// TestTopFleet: top --hosts FILE over three hosts behind real sshds: a
// row for each host's agent; one host stopped (its sshd frozen, its relay
// gone) is marked DOWN within a few --timeout, its row kept; when its
// sshd resumes, the host is back by itself.
func TestTopFleet(t *testing.T) {
	t.Parallel()
	var hosts []*fleetHost
	var lines []string
	for range 3 {
		h := newSSHHost(t)
		fh := &fleetHost{sshHost: h, name: h.user + "@127.0.0.1:" + itoa(h.port)}
		fh.agent = startFakeAs(t, h)
		hosts = append(hosts, fh)
		lines = append(lines, hostsLine(fh.name, h.key))
	}
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	tm := newPsTmux(t)
	local := fixtureHome(t)
	p := startTopPane(t, tm, "fleet", 200, 50, []string{"HOME=" + local, "LANG=C.UTF-8", "XDG_RUNTIME_DIR=" + t.TempDir()},
		"top", "--hosts", hostsFile, "--timeout", "3s")
	p.await(t, "a row for each host's agent", func(s string) bool {
		for _, h := range hosts {
			if !strings.Contains(topRowOf(s, h.agent.pid()), h.user) {
				return false
			}
		}
		return true
	})

	stopped := hosts[1]
	stopped.sshd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { stopped.sshd.Process.Signal(syscall.SIGCONT) })
	for _, pid := range stopped.relayPids() {
		syscall.Kill(pid, syscall.SIGKILL) // a relay this test's ssh started
	}
	began := time.Now()
	s := p.await(t, "the stopped host marked", screenHas(stopped.name+" 1 DOWN"))
	t.Logf("marked after %v:\n%s", time.Since(began).Round(time.Millisecond), s)
	if !strings.Contains(topRowOf(s, stopped.agent.pid()), "down") {
		t.Errorf("the stopped host's row is not marked down:\n%s", s)
	}
	for _, h := range []*fleetHost{hosts[0], hosts[2]} {
		if strings.Contains(s, h.name+" 1 DOWN") {
			t.Errorf("%s is marked down too:\n%s", h.name, s)
		}
	}
	stopped.sshd.Process.Signal(syscall.SIGCONT)
	within(t, 60*time.Second, func() bool {
		s := p.screen()
		return !strings.Contains(s, "DOWN") && strings.Contains(s, stopped.name+" 1")
	}, "the host to come back by itself")
	p.keys("q")
	p.await(t, "top to exit", screenHas("[exit 0]"))
}

// paneChild is the pid of the pane's shell's child: the 9harness the
// test started in it.
func paneChild(t *testing.T, tm *psTmux, name string) int {
	t.Helper()
	pid := strings.TrimSpace(tm.run("display-message", "-p", "-t", name, "#{pane_pid}"))
	b, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	must(t, err)
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("the pane's shell has children %q", f)
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// TestTopSignalsRestartOnce: a resize redraws at the new width; the view
// follows the local daemon through a restart (marked down, then back by
// itself); SIGTERM and SIGHUP end it with the terminal restored; --once
// prints one frame.
func TestTopSignalsRestartOnce(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "topsignals")
	must(t, os.MkdirAll(cwd, 0o755))
	a := startFake(t, "claude", home, cwd, "FAKE_SESSION=3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f")
	waitRegistry(t, home, a.pid())
	d := startDaemon(t, home)
	tm := newPsTmux(t)
	env := []string{"HOME=" + home, "LANG=C.UTF-8"}
	p := startTopPane(t, tm, "sig", 70, 20, env, "-s", d.sock, "top", "--timeout", "2s")
	p.await(t, "the view", screenHas("q quit"))
	p.keys("/")
	p.text("topsignals")
	p.keys("Enter")
	p.await(t, "the agent's row", func(s string) bool { return topRowOf(s, a.pid()) != "" })
	if strings.Contains(p.screen(), "y copy resume") {
		t.Fatalf("70 columns show the whole footer:\n%s", p.screen())
	}
	tm.run("resize-window", "-t", "sig", "-x", "200", "-y", "40")
	p.await(t, "the frame redrawn at 200 columns", screenHas("y copy resume"))

	// The daemon restarts on the same socket: down, then back.
	d.stop()
	p.await(t, "the daemon marked down", screenHas(" DOWN (seen "))
	d2 := launch(t, append([]string{"--unix", d.sock, "--audit", "stderr"}, rootArgs(home)...)...)
	d2.sock = d.sock
	d2.waitReady()
	p.await(t, "the view back after the restart", func(s string) bool {
		return !strings.Contains(s, "DOWN") && topRowOf(s, a.pid()) != ""
	})

	// SIGTERM restores the terminal.
	syscall.Kill(paneChild(t, tm, "sig"), syscall.SIGTERM) // the 9harness this test started
	s := p.await(t, "top to exit on SIGTERM", screenHas("[exit 0]"))
	if !strings.Contains(s, "BEFORE") || strings.Contains(s, "q quit") {
		t.Errorf("the terminal after SIGTERM:\n%s", s)
	}
	if got := strings.TrimSpace(tm.run("display-message", "-p", "-t", "sig", "#{alternate_on} #{cursor_flag}")); got != "0 1" {
		t.Errorf("after SIGTERM: alternate_on cursor_flag = %q, want 0 1", got)
	}
	// And SIGHUP; this one with NO_COLOR: no colour, no video
	// attribute, the selection marked by >.
	h := startTopPane(t, tm, "hup", 80, 24, append(env, "NO_COLOR=1"), "-s", d.sock, "top")
	h.await(t, "the view", screenHas("q quit"))
	h.await(t, "the selection's mark", func(s string) bool { return strings.Contains(s, "\n> ") })
	if esc := strings.Join(tm.capture("hup", "-e"), "\n"); strings.Contains(esc, "\x1b[") {
		t.Errorf("NO_COLOR: the screen has attributes:\n%q", esc)
	}
	syscall.Kill(paneChild(t, tm, "hup"), syscall.SIGHUP)
	h.await(t, "top to exit on SIGHUP", screenHas("[exit 0]"))
	if got := strings.TrimSpace(tm.run("display-message", "-p", "-t", "hup", "#{alternate_on} #{cursor_flag}")); got != "0 1" {
		t.Errorf("after SIGHUP: alternate_on cursor_flag = %q, want 0 1", got)
	}

	// --once: one frame, every row, on a pipe.
	out, errs, code := run9harness(t, []string{"HOME=" + home, "COLUMNS=200"}, "-s", d.sock, "top", "--once")
	if code != 0 || !strings.HasPrefix(out, "9harness top · ") || topRowOf(out, a.pid()) == "" || strings.Contains(out, "\x1b") {
		t.Errorf("top --once: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if _, errs, code := run9harness(t, env, "-s", d.sock, "top"); code != 2 || !strings.Contains(errs, "must be a terminal") {
		t.Errorf("top on a pipe: exit %d, %q", code, errs)
	}
}
