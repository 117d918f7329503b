package realcli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cli is one real agent CLI the tier drives. Adding a CLI (Gemini CLI,
// opencode) is one file that defines one of these and its tests.
type cli struct {
	harness string // its directory under /active
	pkg     string // the npm package
	pinned  string // the version the tier runs (REALCLI_VERSIONS=latest: the newest)
	bin     string // its program in node_modules/.bin
	// configure writes the CLI's configuration into the scratch HOME, for
	// an agent in cwd, and returns the CLI's own environment variables.
	configure func(w *world, cwd string) []string
	// argvVisible: the agent's flags are in its /proc cmdline (not for
	// pi, which sets process.title).
	argvVisible bool
	// aliases maps a flag's short form to its long one (Codex's -m is
	// --model): a resume may spell a kept flag either way.
	aliases map[string]string
	// isAgent tells a pid is the CLI itself, not a launcher or shell
	// still on its way to exec it.
	isAgent func(pid int) bool
	// ready tells from the screen that the TUI takes input; with settle,
	// once it has told so, poll after poll, for that long (waitReady).
	ready  func(screen string) bool
	settle time.Duration
	// agentPID is the listed agent among the processes the pane started
	// (the pane's own pid, or its native child under a node wrapper).
	agentPID func(panePID int) int
	// wrote reads what the agent wrote about its session; ok is false
	// until the session's files are there.
	wrote func(a *agent) (f facts, ok bool)
}

// agent is one running CLI in a pane.
type agent struct {
	w      *world
	cli    *cli
	prefix string
	cwd    string
	pane   pane
	pid    int
	argv   []string // the flags it was started with
	turns  int      // the mock's turn count after this agent's last answer
	// firstPrompt is the first text typed into the session, before or
	// after a move: some CLIs title a session by it.
	firstPrompt string
	// session, when set, is the session the agent is in, for a CLI that
	// cannot tell it by the first prompt (a fork repeats its parent's).
	session string
}

// binDir is where the CLI's programs are, installing it if needed.
func (c *cli) binDir(t testing.TB) string {
	return filepath.Join(install.prefix(t, c.pkg, install.version(t, c.pkg, c.pinned)), "node_modules", ".bin")
}

// start installs (once) and starts c in a new session of the world's
// private tmux server, and waits until its TUI takes input.
func (c *cli) start(w *world, session, cwd string, flags ...string) *agent {
	w.t.Helper()
	return c.startArgv(w, session, cwd, nil, flags...)
}

// startArgv is start with the CLI run through a launcher (pre, its argv
// before the CLI's, which must exec it in place).
func (c *cli) startArgv(w *world, session, cwd string, pre []string, flags ...string) *agent {
	w.t.Helper()
	a := c.launch(w, session, cwd, pre, flags...)
	a.up(60 * time.Second)
	return a
}

// launch starts c as startArgv does, without waiting for it: a test that
// needs many agents launches them all, then waits for each (up), so they
// come up side by side.
func (c *cli) launch(w *world, session, cwd string, pre []string, flags ...string) *agent {
	w.t.Helper()
	binDir := c.binDir(w.t)
	prefix := filepath.Dir(filepath.Dir(binDir))
	path := binDir + ":" + install.pathFor(w.t)
	env := append([]string{
		"HOME=" + w.home,
		"PATH=" + path,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"TMUX_TMPDIR=" + w.tmuxDir,
	}, c.configure(w, cwd)...)
	a := &agent{w: w, cli: c, prefix: prefix, cwd: cwd, argv: flags}
	a.pane = w.launch(session, cwd, env, append(append(pre, c.bin), flags...)...)
	return a
}

// up waits for a launched agent's process, then, up to patience, for its
// TUI to take input.
func (a *agent) up(patience time.Duration) {
	w, c := a.w, a.cli
	w.t.Helper()
	w.waitFor(60*time.Second, &a.pane, c.harness+"'s agent process", func() bool {
		pp := w.panePID(a.pane)
		if pp == 0 {
			return false
		}
		a.pid = c.agentPID(pp)
		return a.pid != 0
	})
	ready := c.waitReady()
	w.waitFor(patience, &a.pane, c.harness+"'s TUI to take input", func() bool {
		return ready(w.screen(a.pane))
	})
}

// waitReady is ready for one wait: a wait of its own holds its own settle
// count, so tests in parallel never share one.
func (c *cli) waitReady() func(screen string) bool {
	if c.settle == 0 {
		return c.ready
	}
	var since time.Time
	return func(s string) bool {
		if !c.ready(s) {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= c.settle
	}
}

// prompt types text and waits for the mock's next answer on screen and in
// what the agent wrote, so the turn is complete when it returns.
func (a *agent) prompt(text string) string {
	w := a.w
	w.t.Helper()
	before := w.mock.Turns()
	if a.firstPrompt == "" {
		a.firstPrompt = text
	}
	w.typeLine(a.pane, text)
	start := time.Now()
	retried := false
	w.waitFor(90*time.Second, &a.pane, "the mock to answer "+a.cli.harness+"'s prompt "+text, func() bool {
		if w.mock.Turns() > before {
			return true
		}
		// A TUI that showed its input line before it could take a prompt
		// (Codex, while its app-server daemon starts) keeps the text:
		// press Enter once more, and say so.
		if !retried && time.Since(start) > 20*time.Second && len(w.mock.Requests()) == 0 {
			retried = true
			w.t.Logf("%s took no prompt in 20s; pressing Enter again. Screen:\n%s", a.cli.harness, w.screen(a.pane))
			w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
		}
		return false
	})
	a.turns = w.mock.Turns()
	ans := "mock answer " + strconv.Itoa(a.turns)
	w.waitFor(60*time.Second, &a.pane, "\""+ans+"\" on "+a.cli.harness+"'s screen", func() bool {
		return strings.Contains(w.screen(a.pane), ans)
	})
	w.waitFor(60*time.Second, &a.pane, "\""+ans+"\" in "+a.cli.harness+"'s transcript", func() bool {
		f, ok := a.cli.wrote(a)
		if !ok || f.transcript == "" {
			return false
		}
		b, err := os.ReadFile(f.transcript)
		return err == nil && strings.Contains(string(b), ans)
	})
	return ans
}

// facts waits until the agent's files are there and returns them.
func (a *agent) facts() facts {
	a.w.t.Helper()
	var f facts
	a.w.waitFor(30*time.Second, &a.pane, a.cli.harness+"'s session files", func() bool {
		var ok bool
		f, ok = a.cli.wrote(a)
		return ok
	})
	return f
}

// require is a test that fails now, for a step the rest depends on.
func require(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// lastTurn is the last conversation turn the mock answered.
func (m *Mock) lastTurn() (Request, bool) {
	rs := m.Requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Kind == "turn" {
			return rs[i], true
		}
	}
	return Request{}, false
}

// moved moves a prompted agent into a new tmux session NAME and asserts
// the move's promises: the client reports success, the old process is
// gone, a new one of the same harness runs in the session, in the same
// cwd, with the same session and the same flags; /active shows it at once
// with the same session and transcript; one more prompt grows the same
// transcript, with the same model on the wire.
func moved(t *testing.T, w *world, d *daemon, a *agent, name string) {
	before := a.facts()
	require(t, before.transcript != "", "%s/%d has no transcript to move with", a.cli.harness, a.pid)
	old, _ := os.ReadFile(before.transcript)
	lastModel := ""
	if r, ok := w.mock.lastTurn(); ok {
		lastModel = r.Model
	}
	status, out := d.move(a.cli.harness, a.pid, name)
	if status != 0 {
		t.Errorf("9harness move %s/%d %s: exit %d, want 0: %s", a.cli.harness, a.pid, name, status, out)
		// Refused: nothing else to check but that the agent is untouched.
		time.Sleep(3 * time.Second)
		if alive(a.pid) {
			if _, ok := w.findSession(name); ok {
				t.Errorf("a refused move left a session %s", name)
			}
			t.FailNow()
		}
	}
	w.waitFor(20*time.Second, nil, "the old agent to exit", func() bool { return !alive(a.pid) })
	var p pane
	w.waitFor(30*time.Second, nil, "tmux session "+name+" on the agent's server or the default one", func() bool {
		var ok bool
		p, ok = w.findSession(name)
		return ok
	})
	b := &agent{w: w, cli: a.cli, prefix: a.prefix, cwd: a.cwd, pane: p, argv: a.argv, firstPrompt: a.firstPrompt, session: a.session}
	w.waitFor(30*time.Second, &p, "the resumed "+a.cli.harness+" in "+p.String(), func() bool {
		pp := w.panePID(p)
		if pp == 0 {
			return false
		}
		b.pid = a.cli.agentPID(pp)
		return b.pid != 0 && a.cli.isAgent(b.pid)
	})
	t.Logf("moved %s/%d to %s/%d in %s (client said: %s)", a.cli.harness, a.pid, a.cli.harness, b.pid, p, strings.TrimSpace(out))
	if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(b.pid) + "/cwd"); cwd != a.cwd {
		t.Errorf("the resumed agent runs in %q, want %q", cwd, a.cwd)
	}
	if a.cli.argvVisible {
		got := flagPairs(cmdline(b.pid)[1:], a.cli.aliases)
		for _, f := range flagPairs(a.argv, a.cli.aliases) {
			if !slices.Contains(got, f) {
				t.Errorf("the resumed agent's argv %q lacks %q, which it was started with (%q)", cmdline(b.pid), strings.ReplaceAll(f, "\x00", " "), a.argv)
			}
		}
	}
	ready := a.cli.waitReady()
	w.waitFor(60*time.Second, &p, "the resumed TUI to take input", func() bool { return ready(w.screen(p)) })
	// Right after the move, before any new prompt: the tree shows the new
	// pid with the same session and transcript.
	after := b.facts()
	if after.session != before.session || after.transcript != before.transcript {
		t.Errorf("the resumed agent wrote session %q transcript %q, want %q %q", after.session, after.transcript, before.session, before.transcript)
	}
	t.Run("facts after the move", func(t *testing.T) {
		d.checkFacts(t, a.cli.harness, b.pid, b.cwd, after)
		d.checkListed(t, map[int]string{b.pid: a.cli.harness})
	})
	b.prompt("say hello again")
	grown := b.facts()
	now, _ := os.ReadFile(grown.transcript)
	if grown.transcript != before.transcript || grown.session != before.session {
		t.Errorf("after one more prompt the agent wrote session %q transcript %q, want the same %q %q", grown.session, grown.transcript, before.session, before.transcript)
	} else if len(now) <= len(old) || !bytes.HasPrefix(now, old) {
		t.Errorf("the transcript did not grow by appending: %d bytes before the move, %d after one more prompt", len(old), len(now))
	}
	if r, ok := w.mock.lastTurn(); ok && lastModel != "" && r.Model != lastModel {
		t.Errorf("the resumed agent asked for model %q, before the move %q: its flags were not kept", r.Model, lastModel)
	}
	t.Run("facts after one more prompt", func(t *testing.T) {
		d.checkFacts(t, a.cli.harness, b.pid, b.cwd, grown)
		d.checkListed(t, map[int]string{b.pid: a.cli.harness})
	})
}

// flagPairs lists argv's flags with their values ("--model\x00X"), in the
// long spelling, --flag=value split: every flag of the tier's CLIs that it
// passes takes one value.
func flagPairs(argv []string, aliases map[string]string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		f := argv[i]
		if !strings.HasPrefix(f, "-") {
			continue
		}
		v := ""
		if k, val, ok := strings.Cut(f, "="); ok && strings.HasPrefix(f, "--") {
			f, v = k, val
		} else if i+1 < len(argv) {
			i++
			v = argv[i]
		}
		if long, ok := aliases[f]; ok {
			f = long
		}
		out = append(out, f+"\x00"+v)
	}
	return out
}

// newSession types cmd, a command of the TUI that leaves the session for a
// new one in the same process (/new), then a first prompt of the new
// session, and checks that the next read shows the new session and none of
// the old one's facts.
func newSession(t *testing.T, w *world, d *daemon, a *agent, cmd, prompt string, old facts) facts {
	t.Helper()
	w.typeLine(a.pane, cmd)
	time.Sleep(time.Second)
	ready := a.cli.waitReady()
	w.waitFor(30*time.Second, &a.pane, a.cli.harness+"'s TUI to take input after "+cmd, func() bool {
		return ready(w.screen(a.pane))
	})
	a.firstPrompt = ""
	a.prompt(prompt)
	f := a.facts()
	require(t, f.session != "" && f.session != old.session && f.transcript != old.transcript,
		"after %s %s wrote session %q (%s), the one before was %q (%s)", cmd, a.cli.harness, f.session, f.transcript, old.session, old.transcript)
	t.Run("facts after "+cmd, func(t *testing.T) {
		d.checkFacts(t, a.cli.harness, a.pid, a.cwd, f)
		d.checkListed(t, map[int]string{a.pid: a.cli.harness})
	})
	return f
}
