package realcli

import (
	"database/sql"
	"encoding/json"
	"github.com/9harness/9harness/internal/harness"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
)

// opencode: one native (Bun-compiled) process, argv "opencode", talking
// to the mock's Chat Completions through an openai-compatible provider of
// its config. Its sessions are rows of ~/.local/share/opencode/opencode.db;
// it writes no transcript file.
var opencode = &cli{
	harness:     "opencode",
	pkg:         "opencode-ai",
	pinned:      harness.Verified("opencode"),
	bin:         "opencode",
	argvVisible: true,
	aliases:     map[string]string{"-m": "--model", "-s": "--session"},
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".config", "opencode")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		model := func(name string) map[string]any { return map[string]any{"name": name} }
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
			"model": "mock/mock-oc", "small_model": "mock/mock-oc",
			"provider": map[string]any{"mock": map[string]any{
				"npm": "@ai-sdk/openai-compatible", "name": "Mock",
				"options": map[string]any{"baseURL": w.mock.URL() + "/v1", "apiKey": "sk-test"},
				"models":  map[string]any{"mock-oc": model("Mock OC"), "mock-oc-2": model("Mock OC 2")},
			}},
		}
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o600); err != nil {
			w.t.Fatal(err)
		}
		// No update check, and no fetch of models.dev (the tier has no
		// network but the npm install; the fetch only times out).
		return []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1"}
	},
	// The input box's footer names the agent and the model.
	ready:    func(s string) bool { return strings.Contains(s, "Mock OC") },
	agentPID: func(pane int) int { return pane },
	isAgent: func(pid int) bool {
		return exeBase(pid) == "opencode.exe" || exeBase(pid) == "opencode"
	},
	wrote: opencodeWrote,
}

// ocDataDir is opencode's root in the scratch HOME (no XDG_DATA_HOME).
func ocDataDir(w *world) string { return filepath.Join(w.home, ".local", "share", "opencode") }

// opencodeWrote reads what opencode wrote of the agent's session, with
// SQLite itself (read-only, through the WAL, as opencode's own readers do):
// the one root session whose directory is the agent's cwd, its title, and
// the model of its newest message that names one (the assistant's modelID).
// There is no transcript file.
func opencodeWrote(a *agent) (facts, bool) {
	return ocWrote(a.w, a.cwd, "")
}

// ocWrote is opencodeWrote for the session of cwd other than not.
func ocWrote(w *world, cwd, not string) (facts, bool) {
	path := filepath.Join(ocDataDir(w), "opencode.db")
	if _, err := os.Stat(path); err != nil {
		return facts{}, false
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return facts{}, false
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, title FROM session WHERE directory = ? AND parent_id IS NULL AND id != ?`, cwd, not)
	if err != nil {
		return facts{}, false
	}
	var f facts
	n := 0
	for rows.Next() {
		n++
		rows.Scan(&f.session, &f.title)
	}
	rows.Close()
	if n != 1 {
		return facts{}, false
	}
	var data string
	if err := db.QueryRow(`SELECT data FROM message WHERE session_id = ? AND json_extract(data, '$.role') = 'assistant'
		ORDER BY time_created DESC, id DESC LIMIT 1`, f.session).Scan(&data); err != nil {
		return facts{}, false
	}
	var m struct {
		ModelID string `json:"modelID"`
		Time    struct {
			Completed int64 `json:"completed"`
		} `json:"time"`
	}
	if json.Unmarshal([]byte(data), &m) != nil || m.Time.Completed == 0 {
		return facts{}, false // the answer is still being written
	}
	f.model = m.ModelID
	return f, true
}

// ocStart is cli.start with opencode's patience: its 185 MB binary takes
// tens of seconds to come up on a loaded machine, more than the tier's
// usual minute.
func ocStart(w *world, session, cwd string, flags ...string) *agent {
	w.t.Helper()
	c := opencode
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
	w.waitFor(60*time.Second, &a.pane, "opencode's process", func() bool {
		pp := w.panePID(a.pane)
		if pp == 0 || !c.isAgent(pp) {
			return false
		}
		a.pid = pp
		return true
	})
	w.waitFor(300*time.Second, &a.pane, "opencode's TUI to take input", func() bool { return c.ready(w.screen(a.pane)) })
	return a
}

// ocPrompt types text and waits until the mock answered it, the answer is
// on screen, and opencode has written the session's title and the
// completed answer (it keeps no transcript, so cli.prompt does not fit).
func ocPrompt(a *agent, text, not string) facts {
	w := a.w
	w.t.Helper()
	before, asked := w.mock.Turns(), len(w.mock.Requests())
	w.typeLine(a.pane, text)
	start := time.Now()
	retried := false
	w.waitFor(180*time.Second, &a.pane, "the mock to answer opencode's prompt "+text, func() bool {
		if w.mock.Turns() > before {
			return true
		}
		// A TUI still coming up may drop the Enter: press it once more
		// if nothing was asked of the mock and opencode is not at work.
		if !retried && time.Since(start) > 30*time.Second && len(w.mock.Requests()) == asked &&
			!strings.Contains(w.screen(a.pane), "esc interrupt") {
			retried = true
			w.t.Logf("opencode took no prompt in 30s; pressing Enter again. Screen:\n%s", w.screen(a.pane))
			w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
		}
		return false
	})
	a.turns = w.mock.Turns()
	ans := "mock answer " + itoa(a.turns)
	w.waitFor(90*time.Second, &a.pane, "\""+ans+"\" on opencode's screen", func() bool {
		return strings.Contains(w.screen(a.pane), ans)
	})
	var f facts
	w.waitFor(60*time.Second, &a.pane, "opencode's session row, titled, with the completed answer", func() bool {
		var ok bool
		f, ok = ocWrote(w, a.cwd, not)
		return ok && strings.HasPrefix(f.title, "Mock title ")
	})
	return f
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestOpencode: opencode's facts from its database, before and after a
// prompt (the model its --model names, the title its title agent asked
// the mock for); then a second TUI in the same cwd: before it writes, the
// first keeps its session and the second has none; once both have
// written, neither ever shows the other's session.
func TestOpencode(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// The root's parent must exist when the daemon pins its roots.
	if err := os.MkdirAll(ocDataDir(w), 0o700); err != nil {
		t.Fatal(err)
	}
	d := w.startDaemon([]*cli{opencode})
	cwd := w.cwd("oc")
	a := ocStart(w, "oc1", cwd, "--model", "mock/mock-oc-2")
	d.checkListed(t, map[int]string{a.pid: "opencode"})
	t.Run("before the first prompt", func(t *testing.T) {
		// No session row exists yet: every fact of a session is absent.
		d.checkFacts(t, "opencode", a.pid, cwd, facts{})
	})
	f := ocPrompt(a, "say hello echo", "")
	if f.model != "mock-oc-2" {
		t.Errorf("opencode wrote model %q, want the --model it was started with", f.model)
	}
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "opencode", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "opencode"})
		if ag, err := d.c.Agent("opencode", a.pid); err == nil && !strings.HasPrefix(ag.Via, "dir (heuristic") {
			t.Errorf("via %q, want the heuristic named", ag.Via)
		}
	})
	if testing.Short() {
		return
	}

	b := ocStart(w, "oc2", cwd)
	t.Run("a second TUI in the same cwd, quiet", func(t *testing.T) {
		d.checkListed(t, map[int]string{a.pid: "opencode", b.pid: "opencode"})
		d.checkFacts(t, "opencode", a.pid, cwd, f)
		d.checkFacts(t, "opencode", b.pid, cwd, facts{})
	})
	ocPrompt(b, "say hello foxtrot", f.session)
	t.Run("two TUIs in one cwd, both written: never swapped", func(t *testing.T) {
		g, _ := ocWrote(w, cwd, f.session)
		for pid, own := range map[int]facts{a.pid: f, b.pid: g} {
			ag, err := d.c.Agent("opencode", pid)
			if err != nil {
				t.Errorf("opencode/%d: %v", pid, err)
				continue
			}
			if ag.Session != "" && ag.Session != own.session {
				t.Errorf("opencode/%d shows session %q (via %q), its own is %q", pid, ag.Session, ag.Via, own.session)
			}
			if ag.Session == "" && !strings.HasPrefix(ag.Via, "ambiguous") {
				t.Errorf("opencode/%d: no session, via %q; want ambiguous", pid, ag.Via)
			}
			t.Logf("opencode/%d: session %q via %q", pid, ag.Session, ag.Via)
		}
	})
}
