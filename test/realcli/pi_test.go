package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/9harness/9harness/internal/harness"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var pi = &cli{
	harness: "pi",
	pkg:     "@earendil-works/pi-coding-agent",
	pinned:  harness.Verified("pi"),
	bin:     "pi",
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".pi", "agent")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		model := func(id, name string) map[string]any {
			return map[string]any{"id": id, "name": name, "reasoning": false, "input": []string{"text"}, "contextWindow": 128000, "maxTokens": 4096}
		}
		models := map[string]any{"providers": map[string]any{"mock": map[string]any{
			"baseUrl": w.mock.URL() + "/v1", "api": "openai-completions", "apiKey": "sk-test",
			"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
			"models": []any{model("mock-pi-model", "Mock pi model"), model("mock-pi-2", "Mock pi model 2")},
		}}}
		for name, v := range map[string]any{
			"models.json":   models,
			"settings.json": map[string]any{"defaultProvider": "mock", "defaultModel": "mock-pi-model"},
		} {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err == nil {
				continue // pi adds to settings.json: keep what it wrote
			}
			b, _ := json.Marshal(v)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				w.t.Fatal(err)
			}
		}
		// PI_OFFLINE: pi would download fd and ripgrep from GitHub at
		// start; the tier uses no network but the npm install.
		return []string{"PI_OFFLINE=1"}
	},
	ready: func(s string) bool { return strings.Contains(s, "mock-pi") },
	// One node process that calls itself pi (process.title): its argv,
	// flags included, is hidden.
	agentPID: func(pane int) int { return pane },
	isAgent: func(pid int) bool {
		argv := cmdline(pid)
		return len(argv) > 0 && argv[0] == "pi"
	},
	wrote: piWrote,
}

// piWrote finds the session file whose header names the agent's cwd (each
// test agent has its own) and reads its session id, model and title: the
// session_info name, else the first user message, as pi's own picker
// shows it. pi writes the file only once an assistant message exists.
func piWrote(a *agent) (facts, bool) {
	files, _ := filepath.Glob(filepath.Join(a.w.home, ".pi", "agent", "sessions", "*", "*.jsonl"))
	var f facts
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var id, model, name, first string
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var l struct {
				Type    string `json:"type"`
				ID      string `json:"id"`
				Cwd     string `json:"cwd"`
				ModelID string `json:"modelId"`
				Name    string `json:"name"`
				Message struct {
					Role    string `json:"role"`
					Model   string `json:"model"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l.Type {
			case "session":
				if l.Cwd == a.cwd {
					id = l.ID
				}
			case "model_change":
				model = l.ModelID
			case "session_info":
				name = l.Name
			case "message":
				if l.Message.Role == "assistant" && l.Message.Model != "" {
					model = l.Message.Model
				}
				if l.Message.Role == "user" && first == "" {
					for _, c := range l.Message.Content {
						if c.Type == "text" {
							first += c.Text
						}
					}
				}
			}
		}
		if id == "" || (a.firstPrompt != "" && first != "" && first != a.firstPrompt) {
			continue // another session of this cwd (before a /new): each types its own first prompt
		}
		if f.session != "" {
			return facts{}, false // two sessions for one cwd: not this tier's setup
		}
		f = facts{session: id, transcript: p, model: model, title: name}
		if f.title == "" {
			f.title = first
		}
	}
	return f, f.session != ""
}

// TestPi: pi's facts after a prompt, then its move into tmux (a resumed pi
// is quiet until its next answer, and must still be found at once), and
// one more prompt.
func TestPi(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{pi}, "--allow-move")
	cwd := w.cwd("pi")
	a := pi.start(w, "pi1", cwd, "--provider", "mock", "--model", "mock-pi-2")
	d.checkListed(t, map[int]string{a.pid: "pi"})
	a.prompt("say hello charlie")
	f := a.facts()
	if f.model != "mock-pi-2" {
		t.Errorf("pi wrote model %q, want the --model it was started with", f.model)
	}
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "pi", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "pi"})
	})
	moved(t, w, d, a, "pimoved")
}

// TestPiNew: /new in a running pi starts a new session in the same
// process; the next read shows it (session, transcript, title), and a move
// resumes it, not the one before.
func TestPiNew(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{pi}, "--allow-move")
	cwd := w.cwd("pinew")
	a := pi.start(w, "pinew", cwd)
	a.prompt("say hello first")
	old := a.facts()
	d.checkFacts(t, "pi", a.pid, cwd, old)
	newSession(t, w, d, a, "/new", "say hello second", old)
	moved(t, w, d, a, "pinewmoved")
}
