package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of contrib/zmxify, the picker: driven for real in a tmux pane, a
// real fzf on its screen, keys sent as a user types them, the screen read
// back with capture-pane.

// zmxifyWorld is the agents a picker test offers: one to move, one already
// in zmx, one in tmux, one whose session did not resolve; and a zmx
// session that takes the directory's name, so the default name gets a
// suffix.
type zmxifyWorld struct {
	m              *moveEnv
	agent          *fakeAgent
	sid            string
	inZmx, unknown *fakeAgent
	inTmux         int // a pid: tmux started it
}

func newZmxifyWorld(t *testing.T) *zmxifyWorld {
	t.Helper()
	require(t, "fzf")
	m := newMoveEnv(t)
	w := &zmxifyWorld{m: m, sid: "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f"}
	w.agent = m.startClaude(t, w.sid)
	w.inZmx = m.startClaude(t, "6d7e8f9a-0b1c-4d2e-9f3a-4b5c6d7e8f9a", "ZMX_SESSION=busy")
	// An agent in a real tmux session, on the test's private server.
	args := append([]string{"new-session", "-d", "-s", "busy", "-c", m.cwd, "env", "HOME=" + m.home,
		"FAKE_SESSION=7e8f9a0b-1c2d-4e3f-8a4b-5c6d7e8f9a0b"}, m.env...)
	if out, err := m.tmux(append(args, bin("claude"))...); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	out, err := m.tmux("list-panes", "-t", "=busy", "-F", "#{pane_pid}")
	must(t, err)
	w.inTmux, err = strconv.Atoi(out)
	must(t, err)
	eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(m.home, ".claude", "sessions", out+".json"))
		return err == nil
	}, "the tmux agent's registry record")
	w.unknown = startFake(t, "codex", m.home, m.cwd, m.env...)
	// The directory's name is taken in zmx: the default becomes x-2.
	w.zmx(t, "run", "x", "-d", "sleep", "600")
	t.Cleanup(func() { w.zmx(nil, "kill", "x", "x-2", "picked") })
	return w
}

func (w *zmxifyWorld) zmx(t *testing.T, args ...string) {
	cmd := exec.Command(bin("zmx"), args...)
	cmd.Env = append(append([]string{}, w.m.env...), "HOME="+w.m.home)
	cmd.Dir = w.m.cwd
	if out, err := cmd.CombinedOutput(); err != nil && t != nil {
		t.Fatalf("zmx %q: %v\n%s", args, err, out)
	}
}

// picker runs contrib/zmxify in a tmux pane of the test's private server,
// with env, and returns a function that reads the pane's screen.
func (w *zmxifyWorld) picker(t *testing.T, sock string, env ...string) func() string {
	t.Helper()
	script, err := filepath.Abs("../contrib/zmxify")
	must(t, err)
	args := []string{"new-session", "-d", "-s", "picker", "-x", "180", "-y", "40", "env",
		"PATH=" + bins + ":/usr/bin:/bin", "HOME=" + w.m.home, "ZMX_DIR=" + w.m.zmxDir, "LANG=C.UTF-8", "TERM=xterm-256color",
		// A -race binary sleeps a second at exit by default; the picker
		// runs 9harness a dozen times.
		"GORACE=atexit_sleep_ms=0"}
	args = append(args, env...)
	args = append(args, "sh", "-c", `sh "$0" -s "$1"; echo "ZMXIFY-EXIT=$?"; sleep 600`, script, sock)
	if out, err := w.m.tmux(args...); err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	return func() string {
		out, _ := w.m.tmux("capture-pane", "-p", "-J", "-t", "picker")
		return out
	}
}

// drive picks the agent in fzf by typing its pid, accepts the offered
// name, and returns the screen once the picker has exited.
func (w *zmxifyWorld) drive(t *testing.T, screen func() string) string {
	t.Helper()
	pid := strconv.Itoa(w.agent.pid())
	waitScreen(t, screen, "the agent offered in fzf", func(s string) bool {
		return strings.Contains(s, "HARNESS") && rowOf(s, "claude", pid) != ""
	})
	s := screen()
	t.Logf("fzf's screen:\n%s", strings.TrimRight(s, "\n"))
	row := rowOf(s, "claude", pid)
	for _, want := range []string{"~/src/x", "registry"} {
		if !strings.Contains(row, want) {
			t.Errorf("the agent's row %q lacks %q", row, want)
		}
	}
	if h := headerOf(s); !strings.Contains(h, "HARNESS") || !strings.Contains(h, "PID") || !strings.Contains(h, "AGE") ||
		!strings.Contains(h, "CWD") || !strings.Contains(h, "VIA") || !strings.Contains(h, "TITLE") {
		t.Errorf("header %q: want HARNESS PID AGE CWD VIA TITLE", h)
	}
	for what, p := range map[string]int{"in zmx": w.inZmx.pid(), "in tmux": w.inTmux, "unresolved": w.unknown.pid()} {
		if strings.Contains(s, " "+strconv.Itoa(p)+" ") {
			t.Errorf("the agent %s (%d) is offered:\n%s", what, p, s)
		}
	}
	if _, err := w.m.tmux("send-keys", "-t", "picker", "-l", pid); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, screen, "fzf to show the typed pid", func(s string) bool { return strings.Contains(s, "agent to move into zmx> "+pid) })
	w.m.tmux("send-keys", "-t", "picker", "Enter")
	prompt := "zmx session name for claude/" + pid + " [x-2]:"
	waitScreen(t, screen, "the name prompt offering x-2", func(s string) bool { return strings.Contains(s, prompt) })
	w.m.tmux("send-keys", "-t", "picker", "Enter")
	waitScreen(t, screen, "the picker to exit", func(s string) bool { return strings.Contains(s, "ZMXIFY-EXIT=") })
	return screen()
}

// check verifies the picker's output and that the agent now lives in the
// zmx session x-2 with the same session id.
func (w *zmxifyWorld) check(t *testing.T, d *daemon, s string) {
	t.Helper()
	pid := strconv.Itoa(w.agent.pid())
	attach := strings.Index(s, "attach with: zmx attach x-2\n")
	moved := strings.Index(s, "moved claude/"+pid+" into zmx session x-2\n")
	if attach < 0 || moved < 0 || attach < moved || !strings.Contains(s, "ZMXIFY-EXIT=0") {
		t.Fatalf("the picker's screen (want the move, then the attach line, then exit 0):\n%s\n%s", s, d.stderr.String())
	}
	select {
	case <-w.agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the picked agent still runs")
	}
	for _, p := range []int{w.inZmx.pid(), w.inTmux, w.unknown.pid()} {
		if !running(t, p) {
			t.Errorf("agent %d, not picked, is gone", p)
		}
	}
	// The record of every launch: the fourth claude is the relaunch, in
	// zmx session x-2, resuming the picked agent's session.
	var nw *launchRecord
	eventually(t, func() bool {
		for _, r := range w.m.records(t) {
			if strings.Join(r.Argv[1:], " ") == "--resume "+w.sid {
				nw = &r
				return true
			}
		}
		return false
	}, "the relaunch's record")
	defer func() {
		if p, err := os.FindProcess(nw.PID); err == nil {
			p.Signal(os.Interrupt)
		}
	}()
	if !contains(nw.Env, "ZMX_SESSION=x-2") || nw.Cwd != w.m.cwd {
		t.Errorf("relaunched in %s with ZMX_SESSION %v", nw.Cwd, zmxVar(nw.Env))
	}
	c := d.client()
	eventually15(t, func() bool {
		z, err := readField(c, "/active/claude/"+strconv.Itoa(nw.PID)+"/zmx")
		return err == nil && z == "x-2"
	}, "the moved agent in /active with zmx x-2")
	if s, _ := readField(c, "/active/claude/"+strconv.Itoa(nw.PID)+"/session"); s != w.sid {
		t.Errorf("the moved agent's session is %q, want %s", s, w.sid)
	}
}

func zmxVar(env []string) string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "ZMX_SESSION=") {
			return kv
		}
	}
	return "(none)"
}

// rowOf is the screen line listing harness/pid.
func rowOf(screen, harness, pid string) string {
	for _, l := range strings.Split(screen, "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == harness && f[i+1] == pid {
				return l
			}
		}
	}
	return ""
}

func headerOf(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "HARNESS") {
			return l
		}
	}
	return ""
}

func waitScreen(t *testing.T, screen func() string, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok(screen()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the screen:\n%s", what, screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestZmxify: the picker offers only the agent that can be moved, and
// moves it with `9harness move` into the zmx session it names.
func TestZmxify(t *testing.T) {
	t.Parallel()
	if out, _ := exec.Command(bin("9harness"), "move", "--help").CombinedOutput(); strings.Contains(string(out), "unknown command") {
		missing(t, "this 9harness has no move command")
	}
	w := newZmxifyWorld(t)
	d := startDaemon(t, w.m.home, w.m.moveArgs()...)
	s := w.drive(t, w.picker(t, d.sock))
	w.check(t, d, s)
}

// TestZmxifyMount: with a 9harness that has no move command, the picker
// writes the name through the mount it is given in $ZMXIFY_MOUNT.
func TestZmxifyMount(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	w := newZmxifyWorld(t)
	d := startDaemon(t, w.m.home, w.m.moveArgs()...)
	mnt := mountTree(t, d.sock)
	// An older 9harness: everything but move.
	old := filepath.Join(t.TempDir(), "9harness-old")
	must(t, os.WriteFile(old, []byte(fmt.Sprintf(`#!/bin/sh
for a; do
	if [ "$a" = move ]; then
		echo '9harness: unknown command "move" (try 9harness --help)' >&2
		exit 2
	fi
done
exec %s "$@"
`, bin("9harness"))), 0o755))
	s := w.drive(t, w.picker(t, d.sock, "NINEHARNESS="+old, "ZMXIFY_MOUNT="+mnt.dir))
	w.check(t, d, s)
	t.Logf("the screen at the end:\n%s", strings.TrimRight(s, "\n"))
	mnt.umount()
}

// TestZmxifyRefused: a move the daemon refuses (moves are off) ends the
// picker with the daemon's reason and status 1, and no attach line: an
// attach line would send the user to a session that was never made.
func TestZmxifyRefused(t *testing.T) {
	t.Parallel()
	w := newZmxifyWorld(t)
	var args []string
	for _, a := range w.m.moveArgs() {
		if a != "--allow-move" {
			args = append(args, a)
		}
	}
	d := startDaemon(t, w.m.home, args...)
	s := w.drive(t, w.picker(t, d.sock))
	if !strings.Contains(s, "moves are off") || strings.Contains(s, "attach with") || !strings.Contains(s, "ZMXIFY-EXIT=1") {
		t.Errorf("the picker's screen (want the refusal, no attach line, exit 1):\n%s", s)
	}
	if !running(t, w.agent.pid()) {
		t.Error("the agent is gone after a refused move")
	}
}
