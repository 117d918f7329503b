package realcli

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// kiloCLI: Kilo Code's CLI, an opencode descendant. Its npm bin is a node
// wrapper (node …/.bin/kilo) of the native …/@kilocode/cli/bin/.kilo, the
// agent, which talks to the mock's Chat Completions through an
// openai-compatible provider of ~/.config/kilo/kilo.json. Its sessions are
// rows of ~/.local/share/kilo/kilo.db; it writes no transcript file.
var kiloCLI = &cli{
	harness:     "kilo",
	pkg:         "@kilocode/cli",
	pinned:      harness.Verified("kilo"),
	bin:         "kilo",
	argvVisible: true,
	aliases:     map[string]string{"-m": "--model", "-s": "--session"},
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".config", "kilo")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		model := func(name string) map[string]any { return map[string]any{"name": name} }
		cfg := map[string]any{
			"autoupdate": false, "share": "disabled",
			"model": "mock/mock-oc", "small_model": "mock/mock-oc",
			"provider": map[string]any{"mock": map[string]any{
				"npm": "@ai-sdk/openai-compatible", "name": "Mock",
				"options": map[string]any{"baseURL": w.mock.URL() + "/v1", "apiKey": "sk-test"},
				"models":  map[string]any{"mock-oc": model("Mock OC"), "mock-oc-2": model("Mock OC 2")},
			}},
		}
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "kilo.json"), b, 0o600); err != nil {
			w.t.Fatal(err)
		}
		return []string{"KILO_DISABLE_AUTOUPDATE=1", "KILO_DISABLE_MODELS_FETCH=1"}
	},
	// The input box's footer names the agent and the model.
	ready:    func(s string) bool { return strings.Contains(s, "Mock OC") },
	agentPID: kiloAgentPID,
	isAgent:  func(pid int) bool { return exeBase(pid) == ".kilo" },
	wrote:    func(a *agent) (facts, bool) { return kiloWrote(a.w, a.cwd) },
}

// kiloAgentPID is the native .kilo among the pane's processes: the pane's
// own (a move may run it directly) or the node wrapper's child.
func kiloAgentPID(pane int) int {
	if exeBase(pane) == ".kilo" {
		return pane
	}
	for _, c := range children(pane) {
		if exeBase(c) == ".kilo" {
			return c
		}
	}
	return 0
}

func kiloDataDir(w *world) string { return filepath.Join(w.home, ".local", "share", "kilo") }

// kiloWrote reads, with SQLite itself (read-only, through the WAL), the
// one root session of cwd, its title, the model of its newest completed
// assistant message, and how many messages it holds.
func kiloWrote(w *world, cwd string) (facts, bool) {
	f, _, ok := kiloRead(w, cwd)
	return f, ok
}

func kiloRead(w *world, cwd string) (facts, int, bool) {
	path := filepath.Join(kiloDataDir(w), "kilo.db")
	if _, err := os.Stat(path); err != nil {
		return facts{}, 0, false
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return facts{}, 0, false
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, title FROM session WHERE directory = ? AND parent_id IS NULL`, cwd)
	if err != nil {
		return facts{}, 0, false
	}
	var f facts
	n := 0
	for rows.Next() {
		n++
		rows.Scan(&f.session, &f.title)
	}
	rows.Close()
	if n != 1 {
		return facts{}, 0, false
	}
	var msgs int
	db.QueryRow(`SELECT count(*) FROM message WHERE session_id = ?`, f.session).Scan(&msgs)
	var data string
	if err := db.QueryRow(`SELECT data FROM message WHERE session_id = ? AND json_extract(data, '$.role') = 'assistant'
		ORDER BY time_created DESC, id DESC LIMIT 1`, f.session).Scan(&data); err != nil {
		return facts{}, 0, false
	}
	var m struct {
		ModelID string `json:"modelID"`
		Time    struct {
			Completed int64 `json:"completed"`
		} `json:"time"`
	}
	if json.Unmarshal([]byte(data), &m) != nil || m.Time.Completed == 0 {
		return facts{}, 0, false // the answer is still being written
	}
	f.model = m.ModelID
	return f, msgs, true
}

// kiloStart is cli.start with opencode's patience: the 170 MB native
// binary takes tens of seconds to come up on a loaded machine.
func kiloStart(w *world, session, cwd string, flags ...string) *agent {
	w.t.Helper()
	c := kiloCLI
	binDir := c.binDir(w.t)
	env := append([]string{
		"HOME=" + w.home,
		"PATH=" + binDir + ":" + install.pathFor(w.t),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"TMUX_TMPDIR=" + w.tmuxDir,
	}, c.configure(w, cwd)...)
	a := &agent{w: w, cli: c, prefix: filepath.Dir(filepath.Dir(binDir)), cwd: cwd, argv: flags}
	a.pane = w.launch(session, cwd, env, append([]string{c.bin}, flags...)...)
	w.waitFor(60*time.Second, &a.pane, "kilo's native process", func() bool {
		a.pid = kiloAgentPID(w.panePID(a.pane))
		return a.pid != 0
	})
	w.waitFor(300*time.Second, &a.pane, "kilo's TUI to take input", func() bool { return c.ready(w.screen(a.pane)) })
	return a
}

// kiloPrompt types text and waits until the mock answered it, the answer
// is on screen, and Kilo has written the completed answer to its session.
func kiloPrompt(a *agent, text string) facts {
	w := a.w
	w.t.Helper()
	before, asked := w.mock.Turns(), len(w.mock.Requests())
	w.typeLine(a.pane, text)
	start := time.Now()
	retried := false
	w.waitFor(180*time.Second, &a.pane, "the mock to answer kilo's prompt "+text, func() bool {
		if w.mock.Turns() > before {
			return true
		}
		if !retried && time.Since(start) > 30*time.Second && len(w.mock.Requests()) == asked &&
			!strings.Contains(w.screen(a.pane), "esc interrupt") {
			retried = true
			w.t.Logf("kilo took no prompt in 30s; pressing Enter again. Screen:\n%s", w.screen(a.pane))
			w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
		}
		return false
	})
	a.turns = w.mock.Turns()
	ans := "mock answer " + strconv.Itoa(a.turns)
	w.waitFor(90*time.Second, &a.pane, "\""+ans+"\" on kilo's screen", func() bool {
		return strings.Contains(w.screen(a.pane), ans)
	})
	var f facts
	w.waitFor(60*time.Second, &a.pane, "kilo's session row with the completed answer", func() bool {
		var ok bool
		f, ok = kiloWrote(w, a.cwd)
		return ok
	})
	return f
}

// kiloTitled waits until the session's title is its title agent's answer
// (Kilo asks the small model for it apart from the turn, and may ask only
// after a later one): a prompt more if it has not come.
func kiloTitled(a *agent) facts {
	w := a.w
	w.t.Helper()
	var f facts
	titled := func() bool {
		var ok bool
		f, ok = kiloWrote(w, a.cwd)
		return ok && strings.HasPrefix(f.title, "Mock title ")
	}
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		if titled() {
			return f
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.t.Logf("kilo wrote title %q 45s after its answer; one prompt more", f.title)
	kiloPrompt(a, "say hello golf")
	w.waitFor(90*time.Second, &a.pane, "kilo's title from its title agent", titled)
	return f
}

// TestKilo: Kilo's wrapper and native agent; the agent's facts before its
// first prompt (none), after it (session, title, model from kilo.db, via
// the heuristic, state, tokens, tmux), what its root serves and hides,
// and its move into tmux with the flag it was started with, resuming the
// same session, which one more prompt grows.
func TestKilo(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	root := kiloDataDir(w)
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	d := w.startDaemon([]*cli{kiloCLI}, "--allow-move")
	cwd := w.cwd("kilo")
	a := kiloStart(w, "ki1", cwd, "--model", "mock/mock-oc-2")
	wrapper := w.panePID(a.pane)
	require(t, wrapper != a.pid && strings.Contains(strings.Join(cmdline(wrapper), " "), "/.bin/kilo"),
		"kilo's pane runs %q, not its node wrapper", cmdline(wrapper))
	d.checkListed(t, map[int]string{a.pid: "kilo"})
	t.Run("before the first prompt", func(t *testing.T) {
		d.checkFacts(t, "kilo", a.pid, cwd, facts{})
	})
	if status, out := d.move("kilo", a.pid, "kinever"); status == 0 {
		t.Errorf("the move of a kilo never prompted: exit 0: %s; want a refusal", out)
	}
	require(t, alive(a.pid), "a refused move stopped the agent %d", a.pid)

	kiloPrompt(a, "say hello echo")
	f := kiloTitled(a)
	if f.model != "mock-oc-2" {
		t.Errorf("kilo wrote model %q, want the --model it was started with", f.model)
	}
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "kilo", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "kilo"})
		ag, err := d.c.Agent("kilo", a.pid)
		require(t, err == nil, "/active/kilo/%d: %v", a.pid, err)
		if !strings.HasPrefix(ag.Via, "dir (heuristic") || ag.Tmux != a.pane.String() {
			t.Errorf("via %q tmux %q; want the heuristic named, %s", ag.Via, ag.Tmux, a.pane)
		}
		if ag.State != "idle" {
			t.Errorf("state %q (%s); want idle after the answer", ag.State, ag.StateVia)
		}
		// The mock's usage: 10 in, 8 out per turn; the context is the
		// newest answer's prompt.
		if ag.Tokens["context"] != 10 || ag.Tokens["input"] < 10 || ag.Tokens["input"]%10 != 0 || ag.Tokens["output"] != ag.Tokens["input"]*8/10 {
			t.Errorf("tokens %v; want context 10, input and output 10 and 8 a turn", ag.Tokens)
		}
	})
	t.Run("mirror", func(t *testing.T) {
		// Its keys: the database (sessions and account tokens) and the
		// auth file `kilo auth login` writes beside it.
		if err := os.WriteFile(filepath.Join(root, "auth.json"), []byte(`{"kilo":{"type":"api","key":"SECRET"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		ents, err := d.c.ReadDir("/kilo")
		if err != nil {
			t.Fatalf("/kilo: %v", err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name, "kilo.db") || e.Name == "auth.json" || e.Name == "log" {
				t.Errorf("/kilo lists %s", e.Name)
			}
		}
		for _, p := range []string{"/kilo/kilo.db", "/kilo/kilo.db-wal", "/kilo/auth.json", "/kilo/log/opencode.log"} {
			if _, err := d.c.ReadFile(p); err == nil {
				t.Errorf("%s is served", p)
			}
		}
	})
	t.Run("move", func(t *testing.T) {
		kiloMoved(t, w, d, a, "kimoved")
	})
}

// kiloMoved is moved for a CLI with no transcript file: the move succeeds,
// the old agent exits, a new one runs in the tmux session in the same cwd
// with the same flags, /active shows it at once with the same session, and
// one more prompt grows that session, asking the same model.
func kiloMoved(t *testing.T, w *world, d *daemon, a *agent, name string) {
	before, msgs, ok := kiloRead(w, a.cwd)
	require(t, ok, "kilo wrote no session to move with")
	status, out := d.move("kilo", a.pid, name)
	require(t, status == 0, "9harness move kilo/%d %s: exit %d, want 0: %s", a.pid, name, status, out)
	w.waitFor(20*time.Second, nil, "the old agent to exit", func() bool { return !alive(a.pid) })
	var p pane
	w.waitFor(30*time.Second, nil, "tmux session "+name, func() bool {
		var ok bool
		p, ok = w.findSession(name)
		return ok
	})
	b := &agent{w: w, cli: a.cli, prefix: a.prefix, cwd: a.cwd, pane: p, argv: a.argv}
	w.waitFor(60*time.Second, &p, "the resumed kilo in "+p.String(), func() bool {
		b.pid = kiloAgentPID(w.panePID(p))
		return b.pid != 0
	})
	t.Logf("moved kilo/%d to kilo/%d in %s (client said: %s)", a.pid, b.pid, p, strings.TrimSpace(out))
	if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(b.pid) + "/cwd"); cwd != a.cwd {
		t.Errorf("the resumed agent runs in %q, want %q", cwd, a.cwd)
	}
	got := flagPairs(cmdline(b.pid)[1:], a.cli.aliases)
	for _, f := range append(flagPairs(a.argv, a.cli.aliases), "--session\x00"+before.session) {
		if !slices.Contains(got, f) {
			t.Errorf("the resumed agent's argv %q lacks %q", cmdline(b.pid), strings.ReplaceAll(f, "\x00", " "))
		}
	}
	w.waitFor(300*time.Second, &p, "the resumed TUI to take input", func() bool { return a.cli.ready(w.screen(p)) })
	t.Run("facts after the move", func(t *testing.T) {
		d.checkFacts(t, "kilo", b.pid, b.cwd, before)
		d.checkListed(t, map[int]string{b.pid: "kilo"})
		if ag, err := d.c.Agent("kilo", b.pid); err != nil || ag.Tmux != p.String() {
			t.Errorf("/active/kilo/%d: tmux %q (%v), want %s", b.pid, ag.Tmux, err, p)
		}
	})
	b.turns = a.turns
	kiloPrompt(b, "say hello again")
	grown, more, _ := kiloRead(w, b.cwd)
	if grown.session != before.session || more <= msgs {
		t.Errorf("after one more prompt kilo wrote session %q with %d messages; want %q with more than %d", grown.session, more, before.session, msgs)
	}
	if r, ok := w.mock.lastTurn(); ok && r.Model != "mock-oc-2" {
		t.Errorf("the resumed agent asked for model %q: its --model was not kept", r.Model)
	}
	t.Run("facts after one more prompt", func(t *testing.T) {
		d.checkFacts(t, "kilo", b.pid, b.cwd, grown)
		d.checkListed(t, map[int]string{b.pid: "kilo"})
	})
}
