package realcli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// HoldWord in a prompt makes a test's Hold keep the mock's answer.
const HoldWord = "HOLDME"

// evLine is one line of /active/events: TIME HARNESS PID EVENT [WHAT].
type evLine struct {
	raw, harness, event, what string
	pid                       int
}

var evLineRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+ \S+ \S+( .*)?$`)

// evStream is a reader blocked on /active/events, over a connection of
// its own, from the moment of its open.
type evStream struct {
	t    *testing.T
	ch   chan evLine
	seen []string // every line read, for a failure's message
}

// events opens /active/events; the open returns once the daemon has taken
// its baseline, so a change after it is a line.
func (d *daemon) events(t *testing.T) *evStream {
	t.Helper()
	c, err := client.Dial(d.sock)
	if err != nil {
		t.Fatalf("dial %s: %v", d.sock, err)
	}
	r, err := c.Open(client.ActiveRoot + "/events")
	if err != nil {
		c.Close()
		t.Fatalf("open %s/events: %v", client.ActiveRoot, err)
	}
	s := &evStream{t: t, ch: make(chan evLine, 256)}
	done := make(chan struct{})
	t.Cleanup(func() {
		t.Logf("/active/events lines read: %q", s.seen)
		close(done)
		c.Close()
	})
	go func() {
		defer close(s.ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l := evLine{raw: sc.Text()}
			if f := strings.SplitN(l.raw, " ", 5); len(f) >= 4 && evLineRE.MatchString(l.raw) {
				l.harness, l.event = f[1], f[3]
				l.pid, _ = strconv.Atoi(f[2])
				if len(f) == 5 {
					l.what = f[4]
				}
			}
			select {
			case s.ch <- l:
			case <-done:
				return
			}
		}
	}()
	return s
}

// next waits up to d for the next line of agent h/pid. A line of the
// wrong shape fails the test; other agents' lines are skipped. ok is
// false when d passed.
func (s *evStream) next(h string, pid int, d time.Duration) (evLine, bool) {
	s.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-s.ch:
			if !ok {
				s.t.Fatalf("/active/events ended; lines read: %q", s.seen)
			}
			s.seen = append(s.seen, l.raw)
			if l.event == "" {
				s.t.Fatalf("/active/events line %q is not TIME HARNESS PID EVENT [WHAT]", l.raw)
			}
			if l.harness == h && l.pid == pid {
				return l, true
			}
		case <-timeout:
			return evLine{}, false
		}
	}
}

// expect waits up to d for agent h/pid's line with event; a line of that
// agent with an event in never fails the test first.
func (s *evStream) expect(h string, pid int, event string, d time.Duration, never ...string) evLine {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		l, ok := s.next(h, pid, time.Until(deadline))
		if !ok {
			s.t.Fatalf("no line %s %d %s within %s; lines read: %q", h, pid, event, d, s.seen)
		}
		if l.event == event {
			return l
		}
		for _, n := range never {
			if l.event == n {
				s.t.Fatalf("line %q before %s %d %s; lines read: %q", l.raw, h, pid, event, s.seen)
			}
		}
	}
}

// quiet reads agent h/pid's lines for d and fails on one with an event in
// never.
func (s *evStream) quiet(h string, pid int, d time.Duration, never ...string) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l, ok := s.next(h, pid, time.Until(deadline))
		if !ok {
			return
		}
		for _, n := range never {
			if l.event == n {
				s.t.Fatalf("line %q while the turn is held; lines read: %q", l.raw, s.seen)
			}
		}
	}
}

// turnFacts reads /active/H/PID/{state,waiting,state.via}; an absent
// file is "".
func turnFacts(t *testing.T, d *daemon, h string, pid int) (state, waiting, via string) {
	t.Helper()
	dir := client.AgentDir(h, pid)
	read := func(name string) string {
		b, err := d.c.ReadFile(dir + "/" + name)
		if client.IsErrno(err, syscall.ENOENT) {
			return ""
		}
		if err != nil {
			t.Fatalf("reading %s/%s: %v", dir, name, err)
		}
		return strings.TrimSpace(string(b))
	}
	return read("state"), read("waiting"), read("state.via")
}

// atPrompt waits until the tree knows a's state and it is idle: a reader
// opened after it sees no line for the state first becoming known.
func atPrompt(t *testing.T, w *world, d *daemon, a *agent) {
	t.Helper()
	w.waitFor(30*time.Second, &a.pane, a.cli.harness+"'s state idle in the tree", func() bool {
		state, _, _ := turnFacts(t, d, a.cli.harness, a.pid)
		return state == "idle"
	})
}

// heldTurn types prompt (which has HoldWord) into a, with the mock holding
// its answer, and asserts the turn through the events stream: working
// while the answer is held (never idle), idle once it is given. The
// agent's state file agrees at each step.
func heldTurn(t *testing.T, w *world, d *daemon, ev *evStream, a *agent, prompt string) {
	t.Helper()
	h := a.cli.harness
	hold := w.mock.Hold(HoldWord)
	defer hold.Release()
	before := w.mock.Turns()
	w.typeLine(a.pane, prompt)
	n0, start, retried := len(w.mock.Requests()), time.Now(), false
	w.waitFor(90*time.Second, &a.pane, "the mock to receive "+h+"'s held turn", func() bool {
		select {
		case <-hold.Arrived():
			return true
		default:
		}
		// As prompt does: a TUI that showed its input line before it
		// could take a prompt keeps the text; Enter once more.
		if !retried && time.Since(start) > 20*time.Second && len(w.mock.Requests()) == n0 {
			retried = true
			t.Logf("%s took no prompt in 20s; pressing Enter again. Screen:\n%s", h, w.screen(a.pane))
			w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
		}
		return false
	})
	l := ev.expect(h, a.pid, "working", 30*time.Second, "idle", "waiting")
	t.Logf("while held: %q", l.raw)
	// Held for longer than the daemon's rescan: a wrong idle would show.
	ev.quiet(h, a.pid, 3*time.Second, "idle", "waiting")
	state, _, via := turnFacts(t, d, h, a.pid)
	t.Logf("while held: %s/%d/state %q via %q", h, a.pid, state, via)
	if state != "working" {
		t.Errorf("while the answer is held, %s/%d/state = %q (via %q), want working", h, a.pid, state, via)
	}
	if w.mock.Turns() != before {
		t.Fatalf("the mock answered %d turns while holding", w.mock.Turns()-before)
	}
	hold.Release()
	ans := "mock answer " + strconv.Itoa(before+1)
	l = ev.expect(h, a.pid, "idle", 60*time.Second, "waiting")
	t.Logf("after the answer: %q", l.raw)
	state, _, via = turnFacts(t, d, h, a.pid)
	t.Logf("after the answer: %s/%d/state %q via %q", h, a.pid, state, via)
	if state != "idle" {
		t.Errorf("after the answer, %s/%d/state = %q (via %q), want idle", h, a.pid, state, via)
	}
	if !strings.Contains(w.screen(a.pane), ans) {
		t.Errorf("%q is not on %s's screen after idle:\n%s", ans, h, w.screen(a.pane))
	}
}

// interruptedTurn types prompt (which has HoldWord) into a, with the mock
// holding its answer, and interrupts the turn with Escape once it is seen
// working: idle follows with no answer given (Claude's registry and
// interruption line, Codex's turn_aborted).
func interruptedTurn(t *testing.T, w *world, d *daemon, ev *evStream, a *agent, prompt string) {
	t.Helper()
	h := a.cli.harness
	hold := w.mock.Hold(HoldWord)
	defer hold.Release()
	before := w.mock.Turns()
	w.typeLine(a.pane, prompt)
	w.waitFor(90*time.Second, &a.pane, "the mock to receive "+h+"'s held turn", func() bool {
		select {
		case <-hold.Arrived():
			return true
		default:
			return false
		}
	})
	ev.expect(h, a.pid, "working", 30*time.Second, "idle", "waiting")
	w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Escape")
	l := ev.expect(h, a.pid, "idle", 30*time.Second, "waiting")
	state, _, via := turnFacts(t, d, h, a.pid)
	t.Logf("interrupted: %q; %s/%d/state %q via %q", l.raw, h, a.pid, state, via)
	if state != "idle" {
		t.Errorf("after the interruption, %s/%d/state = %q (via %q), want idle", h, a.pid, state, via)
	}
	if w.mock.Turns() != before {
		t.Errorf("the mock answered the interrupted turn")
	}
}

// TestEventsClaudeTurn: a real Claude turn, seen by a reader blocked on
// /active/events since before the prompt: working while the mock holds
// the model's answer, then idle once it is given; twice, then a turn
// interrupted while held.
func TestEventsClaudeTurn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode})
	a := claudeCode.start(w, "clev", w.cwd("clev"))
	atPrompt(t, w, d, a)
	ev := d.events(t)
	heldTurn(t, w, d, ev, a, "say hello "+HoldWord)
	// A second turn, on a transcript that exists: the same again.
	heldTurn(t, w, d, ev, a, "say hello again "+HoldWord)
	interruptedTurn(t, w, d, ev, a, "never mind "+HoldWord)
	d.checkListed(t, map[int]string{a.pid: a.cli.harness})
}

// TestEventsCodexTurn: the same for a real Codex turn, whose states come
// from its rollout's task_started and task_complete (turn_aborted for the
// interrupted one). Its first turn: the
// rollout, and so the agent's session, appears with it.
func TestEventsCodexTurn(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	d := w.startDaemon([]*cli{codex})
	// Without the shared app-server daemon: the TUI holds its rollout.
	a := codex.start(w, "cxev", w.cwd("cxev"), codexNoDaemon...)
	ev := d.events(t)
	heldTurn(t, w, d, ev, a, "say hello "+HoldWord)
	heldTurn(t, w, d, ev, a, "say hello again "+HoldWord)
	interruptedTurn(t, w, d, ev, a, "never mind "+HoldWord)
	d.checkListed(t, map[int]string{a.pid: a.cli.harness})
}

// claudeRecord is the agent's registry record, as Claude wrote it.
func claudeRecord(a *agent) (status, waitingFor string) {
	var reg struct {
		Status     string `json:"status"`
		WaitingFor string `json:"waitingFor"`
	}
	b, _ := os.ReadFile(filepath.Join(a.w.home, ".claude", "sessions", strconv.Itoa(a.pid)+".json"))
	json.Unmarshal(b, &reg)
	return reg.Status, reg.WaitingFor
}

// TestEventsClaudePermission: a real Claude, in the permission mode named
// default, asked by the model to run a Bash command that writes a file,
// asks the user. Where the registry publishes it (status waiting), the
// events line and /active/claude/PID/{state,waiting} say waiting, approve
// Bash: the registry says only "permission prompt" (2.1.197, 2.1.332), and
// the tree names the tool from the transcript's unanswered call. Where it
// does not publish it, the state is absent or working, never idle.
// Approved, the command runs and the turn ends: idle.
func TestEventsClaudePermission(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode})
	cwd := w.cwd("clperm")
	// The mode that asks, by name: 2.1.332 made "auto" the mode a
	// Claude starts in, which ran the probe unasked.
	a := claudeCode.start(w, "clperm", cwd, "--permission-mode", "default")
	atPrompt(t, w, d, a)
	ev := d.events(t)
	w.typeLine(a.pane, "run the probe "+BashWord)
	w.waitFor(90*time.Second, &a.pane, "the mock's Bash call and Claude's permission dialog", func() bool {
		called := false
		for _, r := range w.mock.Requests() {
			called = called || r.Kind == "tool"
		}
		return called && strings.Contains(w.screen(a.pane), "Do you want to proceed?")
	})
	if _, err := os.Stat(filepath.Join(cwd, "realcli-permission-probe")); err == nil {
		t.Fatalf("Claude ran %q without asking", BashCommand)
	}
	// The registry is rewritten as the dialog opens: give it a moment.
	var status, waitingFor string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if status, waitingFor = claudeRecord(a); status == "waiting" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec, _ := os.ReadFile(filepath.Join(a.w.home, ".claude", "sessions", strconv.Itoa(a.pid)+".json"))
	t.Logf("at the permission dialog Claude's registry says status %q waitingFor %q: %s", status, waitingFor, rec)
	if f, ok := claudeWrote(a); ok && f.transcript != "" {
		t.Logf("Claude's transcript at the dialog: %s", lineTypes(f.transcript))
	}
	if status == "waiting" {
		t.Logf("case: this Claude publishes the prompt in its registry")
		// The registry may name no tool (2.1.197: "permission prompt"):
		// the tree names it from the transcript's unanswered call, which
		// may be read after the registry (then a first line has the
		// registry's words).
		l := ev.expect("claude", a.pid, "waiting", 30*time.Second, "idle")
		for l.what != "approve Bash" {
			if l.what != waitingFor {
				t.Errorf("events line %q: WHAT %q, want %q or the registry's %q", l.raw, l.what, "approve Bash", waitingFor)
			}
			l = ev.expect("claude", a.pid, "waiting", 30*time.Second, "idle")
		}
		t.Logf("at the dialog: %q", l.raw)
		state, waiting, via := turnFacts(t, d, "claude", a.pid)
		t.Logf("at the dialog: /active/claude/%d: state %q waiting %q via %q", a.pid, state, waiting, via)
		if state != "waiting" || waiting != "approve Bash" {
			t.Errorf("/active/claude/%d: state %q waiting %q (via %q), want waiting, approve Bash", a.pid, state, waiting, via)
		}
	} else {
		t.Logf("case: this Claude does not publish the prompt (status %q): the state must be absent or working, never idle", status)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			state, _, via := turnFacts(t, d, "claude", a.pid)
			if state != "" && state != "working" {
				t.Fatalf("at a permission prompt /active/claude/%d/state = %q (via %q), want absent or working", a.pid, state, via)
			}
			ev.quiet("claude", a.pid, 500*time.Millisecond, "idle")
		}
	}
	// Approve (the dialog's first choice is yes): the command runs, the
	// mock answers its result, the turn ends.
	w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
	l := ev.expect("claude", a.pid, "idle", 60*time.Second)
	t.Logf("after approval: %q", l.raw)
	if _, err := os.Stat(filepath.Join(cwd, "realcli-permission-probe")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// lineTypes lists a transcript's lines by type (and a message's first
// block's type), in file order, for the log.
func lineTypes(path string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		json.Unmarshal([]byte(line), &l)
		var blocks []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(l.Message.Content, &blocks) == nil && len(blocks) > 0 {
			out = append(out, l.Type+"/"+blocks[0].Type+blocks[0].Name)
			continue
		}
		out = append(out, l.Type)
	}
	return strings.Join(out, " ")
}

// TestEventsClaudeAutoDialog: a real Claude in the "auto" permission mode
// (the default since 2.1.3xx), asked by the model to start a sub-agent,
// cannot have the action checked (the check runs on Anthropic's servers,
// not the mock) and stops at its own dialog for the user. That dialog
// waits for the user like a permission prompt: the tree says waiting,
// never idle or working.
func TestEventsClaudeAutoDialog(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode})
	cwd := w.cwd("clauto")
	w.claudeAuto = true // no mode named: Claude's default, auto
	a := claudeCode.start(w, "clauto", cwd)
	atPrompt(t, w, d, a)
	ev := d.events(t)
	w.typeLine(a.pane, SubagentWord+" go")
	w.waitFor(90*time.Second, &a.pane, "the mock's Agent call and Claude's auto-mode dialog", func() bool {
		return strings.Contains(w.screen(a.pane), "Auto mode can")
	})
	var status, waitingFor string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if status, waitingFor = claudeRecord(a); status == "waiting" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec, _ := os.ReadFile(filepath.Join(a.w.home, ".claude", "sessions", strconv.Itoa(a.pid)+".json"))
	t.Logf("at the auto-mode dialog Claude's registry says status %q waitingFor %q: %s", status, waitingFor, rec)
	t.Logf("screen:\n%s", w.screen(a.pane))
	if f, ok := claudeWrote(a); ok && f.transcript != "" {
		t.Logf("Claude's transcript at the dialog: %s", lineTypes(f.transcript))
	}
	require(t, status == "waiting", "at the auto-mode dialog Claude's registry says %q, not waiting", status)
	l := ev.expect("claude", a.pid, "waiting", 30*time.Second, "idle")
	t.Logf("at the dialog: %q", l.raw)
	state, waiting, via := turnFacts(t, d, "claude", a.pid)
	t.Logf("at the dialog: /active/claude/%d: state %q waiting %q via %q", a.pid, state, waiting, via)
	if state != "waiting" || waiting != waitingFor {
		t.Errorf("/active/claude/%d: state %q waiting %q (via %q), want waiting, %q", a.pid, state, waiting, via, waitingFor)
	}
}
