package realcli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// topPane is `9harness top` in a pane of a tmux server of its own (not
// the agents'), driven as a person would: keys in with send-keys, the
// screen out with capture-pane.
type topPane struct {
	t     *testing.T
	w     *world
	label string
	name  string
}

// startTop opens a w x h pane that prints a few lines, waits for the go
// file, runs 9harness top against d, then prints [exit N]. It returns
// the pane and the screen before top started.
func startTop(t *testing.T, wd *world, d *daemon, label, name string, w, h int) (*topPane, string) {
	t.Helper()
	goFile := filepath.Join(wd.dir, name+".go")
	script := fmt.Sprintf(`echo "before top: %s"; echo "a second line"; while [ ! -e %s ]; do sleep 0.1; done; `+
		`env TMUX_TMPDIR=%s PATH=%s %s -s %s top; echo "[exit $?]"; exec sleep 600`,
		name, shq(goFile), shq(wd.tmuxDir), shq(bins+":"+systemPath), shq(bin("9harness")), shq(d.sock))
	if _, err := wd.tmux(label, "new-session", "-d", "-s", name, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "/bin/sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	p := &topPane{t, wd, label, name}
	before := p.await("the lines before top", func(s string) bool { return strings.Contains(s, "a second line") })
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p.await("the view", screenHas("q quit"))
	return p, before
}

func (p *topPane) screen() string {
	out, err := p.w.tmux(p.label, "capture-pane", "-p", "-t", "="+p.name+":")
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return out
}

func (p *topPane) keys(keys ...string) {
	p.t.Helper()
	if _, err := p.w.tmux(p.label, append([]string{"send-keys", "-t", "=" + p.name + ":"}, keys...)...); err != nil {
		p.t.Fatal(err)
	}
}

func (p *topPane) text(s string) { p.keys("-l", s) }

// await waits (generously) for the screen to satisfy cond, and fails
// the test with the screen when it never does.
func (p *topPane) await(what string, cond func(string) bool) string {
	p.t.Helper()
	s, ok := p.wait(60*time.Second, cond)
	if !ok {
		p.t.Fatalf("%s: timed out waiting for %s; the screen:\n%s", p.name, what, s)
	}
	return s
}

// wait is await that tells instead of failing.
func (p *topPane) wait(d time.Duration, cond func(string) bool) (string, bool) {
	var s string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s = p.screen(); cond(s) {
			return s, true
		}
	}
	return s, false
}

// filter sets the / filter to text. Each step waits for the screen to
// show it: an Escape followed at once by another key reads as Alt.
func (p *topPane) filter(text string) {
	p.t.Helper()
	p.keys("/")
	p.await("the filter prompt", screenHas("\n/"))
	p.keys("C-u")
	p.text(text)
	p.await("the filter typed", screenHas("\n/"+text))
	p.keys("Enter")
	p.await("the filter kept", screenHas("filter: "+text))
}

func screenHas(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}

// topRowOf is the screen line of pid's row, "" when there is none.
func topRowOf(screen string, pid int) string {
	for _, l := range strings.Split(screen, "\n") {
		if slices.Contains(strings.Fields(l), strconv.Itoa(pid)) {
			return l
		}
	}
	return ""
}

// topAgent is one CLI of the tier in TestTop.
type topAgent struct {
	*agent
	prompt string    // the text last typed into it
	typed  time.Time // when
}

// TestTop drives `9harness top` in a real tmux at 80x24 and 200x50 over
// one real agent of every CLI of the tier, each prompted once, in one
// world: a row for each (its harness and pid, its title at 200 columns);
// a state change (a Claude turn the mock holds is working, then idle once
// released); the filter; the sort; the details of each agent with the
// last messages of its transcript; attach to an agent's tmux session and
// back on the tmux detach key; a move refused (a name in use) and one
// accepted, the moved agent then in its new session; q giving the pane
// back as it was.
func TestTop(t *testing.T) {
	t.Parallel()
	began := time.Now()
	w := codexWorld(t) // Codex is among them
	for _, dir := range []string{ocDataDir(w), kiloDataDir(w)} {
		// A root's parent must exist when the daemon pins its roots.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tier := []struct {
		c        *cli
		session  string
		flags    []string
		patience time.Duration // for its TUI to take input
	}{
		{claudeCode, "tcl", nil, time.Minute},
		{codex, "tcx", codexNoDaemon, time.Minute},
		{gemini, "tge", nil, time.Minute},
		{kiloCLI, "tki", nil, 5 * time.Minute},
		{opencode, "toc", nil, 5 * time.Minute},
		{pi, "tpi", nil, time.Minute},
		{qwenCLI, "tqw", nil, time.Minute},
	}
	var clis []*cli
	for _, c := range tier {
		clis = append(clis, c.c)
	}
	d := w.startDaemon(clis, "--allow-move")
	// Every CLI comes up side by side: launched all, then waited for;
	// launched in reverse harness order, so that the order by pid of the
	// agents that are their pane's own process (opencode, pi) is not the
	// order by harness.
	agents := make([]*topAgent, len(tier))
	for i := len(tier) - 1; i >= 0; i-- {
		c := tier[i]
		a := c.c.launch(w, c.session, w.cwd("tp-"+c.c.harness), nil, c.flags...)
		agents[i] = &topAgent{agent: a, prompt: "say hello top " + c.c.harness}
	}
	// The slow ones last; each is prompted as soon as it is up, so the
	// first turns are answered while the others still start.
	order := []int{0, 5, 1, 2, 6, 4, 3}
	for _, i := range order {
		a := agents[i]
		a.up(tier[i].patience)
		w.waitFor(30*time.Second, &a.pane, a.cli.harness+" itself (not its launcher)", func() bool {
			a.pid = a.cli.agentPID(w.panePID(a.pane))
			return a.pid != 0 && a.cli.isAgent(a.pid)
		})
		t.Logf("%s/%d up after %v", a.cli.harness, a.pid, time.Since(began).Round(time.Millisecond))
		a.firstPrompt, a.typed = a.prompt, time.Now()
		w.typeLine(a.pane, a.prompt)
	}
	for _, i := range order {
		answered(t, w, agents[i])
	}
	t.Logf("all answered after %v", time.Since(began).Round(time.Millisecond))
	listed := map[int]string{}
	for _, a := range agents {
		listed[a.pid] = a.cli.harness
	}
	d.checkListed(t, listed)

	// Both sizes at once: both see the same state change.
	label := w.label + "t"
	t.Cleanup(func() { w.tmux(label, "kill-server") })
	small, smallBefore := startTop(t, w, d, label, "top80", 80, 24)
	large, largeBefore := startTop(t, w, d, label, "top200", 200, 50)
	tag := filepath.Base(w.dir) // in every agent's cwd, and in no other test's
	for _, p := range []*topPane{small, large} {
		p.filter(tag)
		s := p.await("a row for every agent of the tier", func(s string) bool {
			for _, a := range agents {
				if !strings.Contains(topRowOf(s, a.pid), a.cli.harness) {
					return false
				}
			}
			return true
		})
		t.Logf("%s:\n%s", p.name, s)
	}
	// Titles, at 200 columns: what each CLI wrote (a title may come
	// after the first table: the view reads it again).
	for _, a := range agents {
		f, _ := a.cli.wrote(a.agent)
		want := f.title
		if len(want) > 16 {
			want = want[:16]
		}
		if want == "" {
			t.Errorf("%s/%d wrote no title", a.cli.harness, a.pid)
			continue
		}
		if s, ok := large.wait(20*time.Second, func(s string) bool { return strings.Contains(topRowOf(s, a.pid), want) }); !ok {
			t.Errorf("the row of %s/%d has not its title %q:\n%s", a.cli.harness, a.pid, f.title, s)
		}
	}

	of := func(h string) *topAgent {
		i := slices.IndexFunc(agents, func(a *topAgent) bool { return a.cli.harness == h })
		return agents[i]
	}
	topHeldTurn(t, w, d, of("claude"), small, large)

	// Each size attaches to one agent and moves another, refused first
	// into a session name another agent's pane has.
	driveTop(t, w, small, smallBefore, agents, of("gemini"), of("pi"), of("qwen").pane.session, "tpmoved80")
	driveTop(t, w, large, largeBefore, agents, of("qwen"), of("claude"), of("gemini").pane.session, "tpmoved200")
	t.Logf("TestTop took %v", time.Since(began).Round(time.Millisecond))
}

// answered waits until the prompt typed into a is answered and in what
// it wrote.
func answered(t *testing.T, w *world, a *topAgent) {
	t.Helper()
	asked := func(text string) bool {
		for _, r := range w.mock.Requests() {
			if r.Kind == "turn" && bytes.Contains(r.Body, []byte(text)) {
				return true
			}
		}
		return false
	}
	retried := false
	w.waitFor(3*time.Minute, &a.pane, a.cli.harness+"'s prompt answered and written", func() bool {
		// A TUI that showed its input line before it could take a
		// prompt keeps the text: Enter once more; not to one at work on
		// it (opencode's and Kilo's "esc interrupt").
		if !asked(a.prompt) {
			if !retried && time.Since(a.typed) > 30*time.Second && !strings.Contains(w.screen(a.pane), "esc interrupt") {
				retried = true
				t.Logf("%s took no prompt in 30s; pressing Enter again. Screen:\n%s", a.cli.harness, w.screen(a.pane))
				w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
			}
			return false
		}
		f, ok := a.cli.wrote(a.agent)
		if !ok {
			return false
		}
		if f.transcript == "" {
			return f.title != "" // a database CLI: its session row
		}
		b, err := os.ReadFile(f.transcript)
		return err == nil && bytes.Contains(b, []byte(a.prompt)) && bytes.Contains(b, []byte("mock answer"))
	})
}

// topHeldTurn types a prompt into a (a Claude) while the mock holds its
// answer: every view shows its row working; released, idle. The views
// are watched side by side.
func topHeldTurn(t *testing.T, w *world, d *daemon, a *topAgent, panes ...*topPane) {
	t.Helper()
	hold := w.mock.Hold(HoldWord)
	defer hold.Release()
	a.prompt = "keep working " + HoldWord // the details show the newest
	w.typeLine(a.pane, a.prompt)
	w.waitFor(90*time.Second, &a.pane, "the mock to receive the held turn", func() bool {
		select {
		case <-hold.Arrived():
			return true
		default:
			return false
		}
	})
	all := func(what, state string) {
		t.Helper()
		rows := make([]string, len(panes))
		deadline := time.Now().Add(90 * time.Second)
		for done := 0; done < len(panes); time.Sleep(100 * time.Millisecond) {
			done = 0
			for i, p := range panes {
				if rows[i] == "" {
					if r := topRowOf(p.screen(), a.pid); strings.Contains(r, " "+state+" ") {
						rows[i] = r
					}
				}
				if rows[i] != "" {
					done++
				}
			}
			if done < len(panes) && time.Now().After(deadline) {
				st, _, via := turnFacts(t, d, a.cli.harness, a.pid)
				for i, p := range panes {
					if rows[i] == "" {
						t.Errorf("%s: no row %s within 90s (the tree says %q via %q):\n%s", p.name, what, st, via, p.screen())
					}
				}
				t.FailNow()
			}
		}
		for i, p := range panes {
			t.Logf("%s %s: %s", p.name, what, rows[i])
		}
	}
	all("working while the turn is held", "working")
	hold.Release()
	all("idle after the answer", "idle")
}

// driveTop is everything else, in one pane: filter, sort, details,
// attach to att and back, the moves of mover (refused into the session
// name in use, accepted into a new one; mover is then the moved agent),
// q.
func driveTop(t *testing.T, w *world, p *topPane, before string, agents []*topAgent, att, mover *topAgent, inUse, name string) {
	t.Helper()
	tag := filepath.Base(w.dir)
	ours := func(s string) []*topAgent {
		var out []*topAgent
		for _, l := range strings.Split(s, "\n") {
			for _, a := range agents {
				if f := strings.Fields(l); slices.Contains(f, strconv.Itoa(a.pid)) && slices.Contains(f, a.cli.harness) {
					out = append(out, a)
				}
			}
		}
		return out
	}

	// Filter: one agent's directory keeps its row alone; esc clears.
	only := agents[len(agents)/2]
	p.filter("tp-" + only.cli.harness)
	s := p.await("the filter to keep one row", func(s string) bool {
		o := ours(s)
		return len(o) == 1 && o[0] == only
	})
	p.keys("Escape")
	p.await("esc to clear the filter", func(s string) bool { return !strings.Contains(s, "filter: ") })
	p.filter(tag)
	p.await("every row again", func(s string) bool { return len(ours(s)) == len(agents) })

	// Sort: s cycles state, host, harness, pid; the rows follow.
	p.keys("s")
	p.await("s to sort by host", screenHas("sort:host"))
	p.keys("s")
	s = p.await("s to sort by harness", func(s string) bool { return strings.Contains(s, "sort:harness") })
	byHarness := ours(s)
	if !slices.IsSortedFunc(byHarness, func(x, y *topAgent) int { return strings.Compare(x.cli.harness, y.cli.harness) }) {
		t.Errorf("sort:harness: the rows are not in harness order:\n%s", s)
	}
	p.keys("s")
	s = p.await("s to sort by pid", screenHas("sort:pid"))
	byPID := ours(s)
	if !slices.IsSortedFunc(byPID, func(x, y *topAgent) int { return x.pid - y.pid }) {
		t.Errorf("sort:pid: the rows are not in pid order:\n%s", s)
	}
	t.Logf("%s: by harness %v, by pid %v", p.name, harnesses(byHarness), harnesses(byPID))
	if slices.Equal(byHarness, byPID) {
		t.Errorf("%s: s did not change the order of the rows: %v", p.name, harnesses(byPID))
	}
	for range 5 {
		p.keys("s")
	}
	p.await("s to come back to state", screenHas("sort:state"))

	// Details: each agent's facts and the last messages of its
	// conversation (the daemon's messages file), the prompt typed into
	// it among them: from the transcript, or from the database of a CLI
	// that writes none (opencode, Kilo).
	for _, a := range agents {
		f, _ := a.cli.wrote(a.agent)
		p.filter("tp-" + a.cli.harness)
		p.await("the agent's row alone", func(s string) bool { o := ours(s); return len(o) == 1 && o[0] == a })
		p.keys("Home", "Enter")
		s := p.await(a.cli.harness+"'s details", screenHas("esc back"))
		// The prompt is also the title of most: it must be among the
		// last messages.
		s, ok := p.wait(20*time.Second, func(s string) bool {
			_, msgs, _ := strings.Cut(s, "\nlast messages\n")
			return strings.Contains(s, a.cli.harness+"/"+strconv.Itoa(a.pid)) && strings.Contains(s, f.session) &&
				strings.Contains(msgs, a.prompt)
		})
		if !ok {
			t.Errorf("%s: the details of %s/%d lack its name, its session %q or the prompt %q among its messages (transcript %q):\n%s",
				p.name, a.cli.harness, a.pid, f.session, a.prompt, f.transcript, s)
		}
		switch {
		case f.transcript == "":
			t.Logf("%s: %s writes no transcript file; its details:\n%s", p.name, a.cli.harness, s)
		case a == agents[0] || a == agents[1]:
			t.Logf("%s: %s's details:\n%s", p.name, a.cli.harness, s)
		}
		p.keys("Escape")
		p.await("the table again", screenHas("q quit"))
	}

	// Attach: the agent's own tmux session in this pane, and back to the
	// view on tmux's detach key.
	p.filter("tp-" + att.cli.harness)
	p.await("the agent's row alone", func(s string) bool { o := ours(s); return len(o) == 1 && o[0] == att })
	p.keys("Home", "a")
	clients := func() string {
		out, _ := w.tmux(w.label, "list-clients", "-t", "="+att.pane.session, "-F", "#{client_tty}")
		return strings.TrimSpace(out)
	}
	w.waitFor(60*time.Second, nil, "a client attached to "+att.pane.String(), func() bool { return clients() != "" })
	s = p.await("the agent's screen, not the view", func(s string) bool { return !strings.Contains(s, "q quit") })
	t.Logf("%s: attached to %s (client %s):\n%s", p.name, att.pane, clients(), s)
	p.keys("C-b", "d")
	// tmux's last words go to the status line, not the terminal.
	p.await("the view back after the detach, tmux's words in its status", func(s string) bool {
		return strings.Contains(s, "q quit") && strings.Contains(s, "[detached (from session "+att.pane.session+")]")
	})
	if _, err := w.tmux(w.label, "has-session", "-t", "="+att.pane.session); err != nil || !alive(att.pid) {
		t.Errorf("after attach and detach the agent's session or the agent is gone: %v", err)
	}

	// Move: into a session name in use, refused with the daemon's reason;
	// into a new one, done.
	p.filter("tp-" + mover.cli.harness)
	p.await("the mover's row alone", func(s string) bool { o := ours(s); return len(o) == 1 && o[0] == mover })
	move := func(session string) {
		p.keys("Home", "m")
		p.await("the move prompt", screenHas("into zmx session"))
		p.text(session)
		p.keys("Tab")
		p.await("tab to choose tmux", screenHas("into tmux session"))
		p.keys("Enter")
	}
	move(inUse)
	s = p.await("the refusal", screenHas("refused"))
	t.Logf("%s: moving %s/%d into %s:\n%s", p.name, mover.cli.harness, mover.pid, inUse, s)
	if !alive(mover.pid) {
		t.Fatalf("a refused move stopped %s/%d", mover.cli.harness, mover.pid)
	}
	move(name)
	p.await("the move done", screenHas("moved "+mover.cli.harness+"/"+strconv.Itoa(mover.pid)))
	w.waitFor(20*time.Second, nil, "the old agent to exit", func() bool { return !alive(mover.pid) })
	var np pane
	w.waitFor(30*time.Second, nil, "tmux session "+name, func() bool {
		var ok bool
		np, ok = w.findSession(name)
		return ok
	})
	newPID := 0
	w.waitFor(30*time.Second, &np, "the resumed "+mover.cli.harness, func() bool {
		newPID = mover.cli.agentPID(w.panePID(np))
		return newPID != 0 && mover.cli.isAgent(newPID)
	})
	p.filter(name)
	s = p.await("the moved agent's row in its new session", func(s string) bool {
		r := topRowOf(s, newPID)
		return strings.Contains(r, mover.cli.harness) && topRowOf(s, mover.pid) == ""
	})
	if r := topRowOf(s, newPID); strings.Contains(s, "REACH") && !strings.Contains(r, "tmux:") {
		t.Errorf("the moved agent's row does not say its tmux session:\n%s", s)
	}
	t.Logf("%s: moved %s/%d to %d in %s:\n%s", p.name, mover.cli.harness, mover.pid, newPID, np, s)
	mover.pid, mover.pane = newPID, np

	// q: the pane as it was, then the shell's next line.
	p.keys("q")
	after := p.await("top to exit", screenHas("[exit 0]"))
	want := strings.TrimRight(before, "\n") + "\n[exit 0]"
	if got := strings.TrimRight(after, "\n"); got != want {
		t.Errorf("%s: the pane after q:\n%s\nwant the pane before top, then [exit 0]:\n%s", p.name, got, want)
	}
	if got, _ := w.tmux(p.label, "display-message", "-p", "-t", "="+p.name+":", "#{alternate_on} #{cursor_flag} #{keypad_flag} #{mouse_any_flag}"); strings.TrimSpace(got) != "0 1 0 0" {
		t.Errorf("%s after q: alternate_on cursor_flag keypad_flag mouse_any_flag = %q, want 0 1 0 0", p.name, strings.TrimSpace(got))
	}
}

func harnesses(as []*topAgent) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.cli.harness)
	}
	return out
}
