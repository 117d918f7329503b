package test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClientMove: `9harness move claude/PID NAME --tmux` prints how to
// attach while the agent still runs (this terminal may be the one that
// goes), waits for the move, says it is done and exits 0; the agent then
// lives in that tmux session. The agent ignores SIGTERM, so the window
// between the two lines is the 5 s grace period.
func TestClientMove(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "3b4c5d6e-7f8a-4b9c-8d0e-1f2a3b4c5d6e"
	agent := m.startClaude(t, sid, "FAKE_IGNORE_TERM=1")
	d := startDaemon(t, m.home, "--allow-move")
	target := "claude/" + strconv.Itoa(agent.pid())

	cmd := exec.Command(bin("9harness"), "-s", d.sock, "move", target, "rescued", "--tmux")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	r := bufio.NewReader(stdout)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %q)", err, stderr.String())
	}
	if first != "attach with: tmux attach -t rescued\n" {
		t.Errorf("first line %q", first)
	}
	select {
	case <-agent.done:
		t.Error("the agent was stopped before the attach line was printed")
	default:
	}
	rest, _ := io.ReadAll(r)
	err = cmd.Wait()
	if err != nil || stderr.Len() != 0 {
		t.Fatalf("move: %v, stderr %q\n%s", err, stderr.String(), d.stderr.String())
	}
	if want := "moved " + target + " into tmux session rescued\n"; string(rest) != want {
		t.Errorf("then %q, want %q", rest, want)
	}
	select {
	case <-agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the old agent still runs after the move returned")
	}
	eventually(t, func() bool { return len(m.records(t)) >= 2 }, "the relaunch's record")
	nw := m.records(t)[1]
	defer func() {
		if p, err := os.FindProcess(nw.PID); err == nil {
			p.Signal(os.Interrupt)
		}
	}()
	if got := strings.Join(nw.Argv[1:], " "); got != "--resume "+sid {
		t.Errorf("relaunch argv %q", nw.Argv)
	}
	panes, err := m.tmux("list-panes", "-s", "-t", "=rescued", "-F", "#{pane_pid}")
	if err != nil || panes != strconv.Itoa(nw.PID) {
		t.Errorf("tmux session rescued panes %q (%v), want the new pid %d", panes, err, nw.PID)
	}
}

// TestClientMoveErrors: each refusal is exit 1 and one line a person
// understands: the client's own sentence where it knows without asking
// (moves off, no such agent), else the daemon's reason as it journaled it,
// read back from the fid that wrote (a write's errno alone cannot say
// which refusal it was). Nothing about
// attaching is printed, and the agent is left alone.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestClientMoveErrors(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	agent := m.startClaude(t, "4c5d6e7f-8a9b-4c0d-9e1f-2a3b4c5d6e7f")
	bare := startFake(t, "codex", m.home, m.cwd, m.env...) // no session: cannot resume
	if out, err := m.tmux("new-session", "-d", "-s", "taken", "sleep", "600"); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	readonly := startDaemon(t, m.home)
	d := startDaemon(t, m.home, "--allow-move")
	claude := "claude/" + strconv.Itoa(agent.pid())
	gone := "claude/" + strconv.Itoa(os.Getpid()) // not an agent
	for _, tc := range []struct {
		name string
		d    *daemon
		args []string
		want string // the whole line, or (with a trailing "…") its start
		has  string // a phrase of the daemon's reason
	}{
		{"EROFS", readonly, []string{claude, "x"},
			"moves are off: start the daemon with --allow-move: systemctl --user edit 9harness.service, add [Service] Environment=HARNESS_ARGS=--allow-move, then systemctl --user restart 9harness.service", ""},
		// An invalid name is the client's usage error (exit 2), before it
		// asks the daemon: TestCLIStatusAndStreams.
		{"EEXIST", d, []string{claude, "--tmux", "taken"}, "refused: …", "taken already exists"},
		{"ENOENT", d, []string{gone, "x"},
			"no such agent: " + gone + " is not running (9harness ps lists them)", ""},
		{"ENOENT harness", d, []string{"nosuch/123", "x"},
			"no such agent: nosuch/123 is not running (9harness ps lists them)", ""},
		{"EPERM", d, []string{"--tmux", "/active/codex/" + strconv.Itoa(bare.pid()), "fresh"}, "refused: …", "codex pid " + strconv.Itoa(bare.pid())},
	} {
		start := time.Now()
		out, errs, code := run9harness(t, nil, append([]string{"-s", tc.d.sock, "move"}, tc.args...)...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (stdout %q, stderr %q)", tc.name, code, out, errs)
		}
		line := "9harness move: " + tc.want
		if pre, ok := strings.CutSuffix(line, "…"); ok {
			if !strings.HasPrefix(errs, pre) || !strings.HasSuffix(errs, "\n") || strings.Count(errs, "\n") != 1 {
				t.Errorf("%s: stderr %q, want one line starting %q", tc.name, errs, pre)
			}
		} else if errs != line+"\n" {
			t.Errorf("%s: stderr\n %q, want\n %q", tc.name, errs, line+"\n")
		}
		if !strings.Contains(errs, tc.has) {
			t.Errorf("%s: stderr %q does not give the daemon's reason (%q)", tc.name, errs, tc.has)
		}
		if out != "" {
			t.Errorf("%s: stdout %q, want nothing (no attach line before a refusal)", tc.name, out)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: a refusal took %v", tc.name, d)
		}
	}
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
}
