package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/9harness/9harness/internal/harness"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// claudeKey is a made-up key of the real shape; Claude approves a custom
// key by its last 20 characters in ~/.claude.json.
const claudeKey = "sk-ant-api03-realcli-mock-key-0123456789abcdefABCDEF-0123456789ab"

var claudeCode = &cli{
	harness: "claude",
	pkg:     "@anthropic-ai/claude-code",
	pinned:  harness.Verified("claude"),
	bin:     "claude",
	configure: func(w *world, cwd string) []string {
		// Onboarding done, the key approved, cwd trusted; other cwds of
		// earlier agents of the same world kept.
		p := filepath.Join(w.home, ".claude.json")
		cfg := map[string]any{}
		if b, err := os.ReadFile(p); err == nil {
			json.Unmarshal(b, &cfg)
		}
		cfg["hasCompletedOnboarding"] = true
		cfg["theme"] = "dark"
		if _, ok := cfg["numStartups"]; !ok {
			cfg["numStartups"] = 1
		}
		// A permission mode other than auto in settings.json makes 2.1.332
		// offer, soon after start, a dialog "Make auto mode your default
		// permission mode?" that takes the keys typed next: seen already.
		cfg["hasSeenAutoDefaultNudge"] = true
		cfg["customApiKeyResponses"] = map[string]any{"approved": []string{claudeKey[len(claudeKey)-20:]}, "rejected": []string{}}
		projects, _ := cfg["projects"].(map[string]any)
		if projects == nil {
			projects = map[string]any{}
		}
		projects[cwd] = map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true, "allowedTools": []string{}}
		cfg["projects"] = projects
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			w.t.Fatal(err)
		}
		claudeSettings(w)
		return []string{
			"ANTHROPIC_BASE_URL=" + w.mock.URL(), // Claude appends /v1/messages
			"ANTHROPIC_API_KEY=" + claudeKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		}
	},
	ready:       func(s string) bool { return inputBox(s, "❯") },
	argvVisible: true,
	agentPID:    func(pane int) int { return pane }, // one native process
	isAgent:     func(pid int) bool { return exeBase(pid) == "claude.exe" },
	wrote:       claudeWrote,
}

// claudeMockMode is the permission mode the tier's Claude starts in: since
// 2.1.3xx a Claude starts in "auto", whose check of each action runs on
// Anthropic's servers; against the mock the first action that needs it (a
// sub-agent) stops at a dialog "Auto mode can't check actions in this
// session". A test that wants another mode passes --permission-mode.
const claudeMockMode = "acceptEdits"

// claudeSettings writes ~/.claude/settings.json with the mock's permission
// mode, keeping whatever else is there.
func claudeSettings(w *world) {
	dir := filepath.Join(w.home, ".claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	p := filepath.Join(dir, "settings.json")
	cfg := map[string]any{}
	if b, err := os.ReadFile(p); err == nil {
		json.Unmarshal(b, &cfg)
	}
	perms, _ := cfg["permissions"].(map[string]any)
	if perms == nil {
		perms = map[string]any{}
	}
	if w.claudeAuto {
		delete(perms, "defaultMode")
	} else {
		perms["defaultMode"] = claudeMockMode
	}
	cfg["permissions"] = perms
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		w.t.Fatal(err)
	}
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// claudeWrote reads the registry record of the agent's pid and its
// transcript. ok once the record is there (it is written at startup).
func claudeWrote(a *agent) (facts, bool) {
	var reg struct {
		SessionID string `json:"sessionId"`
		PID       int    `json:"pid"`
		Name      string `json:"name"`
	}
	b, err := os.ReadFile(filepath.Join(a.w.home, ".claude", "sessions", strconv.Itoa(a.pid)+".json"))
	if err != nil || json.Unmarshal(b, &reg) != nil || reg.SessionID == "" || reg.PID != a.pid {
		return facts{}, false
	}
	f := facts{session: reg.SessionID, name: reg.Name}
	p := filepath.Join(a.w.home, ".claude", "projects", nonAlnum.ReplaceAllString(a.cwd, "-"), reg.SessionID+".jsonl")
	tr, err := os.ReadFile(p)
	if err != nil {
		return f, true // never prompted: no transcript yet
	}
	f.transcript = p
	// Title precedence as Claude's own listing: agent-name, custom title,
	// AI title, summary, first prompt. Model: the last real assistant's.
	var agentName, custom, ai, summary, first string
	sc := bufio.NewScanner(bytes.NewReader(tr))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct {
			Type       string `json:"type"`
			AgentName  string `json:"agentName"`
			Custom     string `json:"customTitle"`
			AI         string `json:"aiTitle"`
			Summary    string `json:"summary"`
			IsMeta     bool   `json:"isMeta"`
			IsSide     bool   `json:"isSidechain"`
			PromptFrom string `json:"promptSource"`
			Message    struct {
				Model   string          `json:"model"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Type {
		case "agent-name":
			agentName = l.AgentName
		case "custom-title":
			custom = l.Custom
		case "ai-title":
			ai = l.AI
		case "summary":
			summary = l.Summary
		case "assistant":
			if l.Message.Model != "" && l.Message.Model != "<synthetic>" && !l.IsSide {
				f.model = l.Message.Model
			}
		case "user":
			var s string
			if first == "" && !l.IsMeta && !l.IsSide && json.Unmarshal(l.Message.Content, &s) == nil {
				first = s
			}
		}
	}
	for _, t := range []string{agentName, custom, ai, summary, first} {
		if t != "" {
			f.title = t
			break
		}
	}
	return f, true
}

// TestClaude: a prompted Claude's facts, then its move into tmux with its
// flags, and one more prompt into the moved agent.
func TestClaude(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode}, "--allow-move")
	cwd := w.cwd("claude")
	a := claudeCode.start(w, "cl1", cwd, "--model", "claude-mock-1")
	d.checkListed(t, map[int]string{a.pid: "claude"})
	ans := a.prompt("say hello alpha")
	f := a.facts()
	// 2.1.197 asks the model for a title at the first prompt; 2.1.332
	// does not, and its title is its own ranking's (here the prompt).
	titled := false
	for _, r := range w.mock.Requests() {
		titled = titled || r.Kind == "title"
	}
	if want := map[bool]string{true: "Mock title 1", false: "say hello alpha"}[titled]; f.title != want {
		t.Errorf("Claude wrote title %q, want %q (a title request sent: %v)", f.title, want, titled)
	}
	if f.model != "claude-mock-1" {
		t.Errorf("Claude wrote model %q, want the --model it was started with", f.model)
	}
	w.waitFor(20*time.Second, &a.pane, "Claude's registry to say idle", func() bool { return claudeStatus(a) == "idle" })
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "claude", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "claude"})
	})
	if !strings.Contains(w.screen(a.pane), ans) {
		t.Errorf("the answer %q left the screen", ans)
	}
	claudeSubagent(t, w, d, a)
	claudeRename(t, w, d, a, "Mock renamed")
	moved(t, w, d, a, "clmoved")
}

// TestClaudeLonePane: an agent alone on its tmux server (tmux new -s
// work claude): stopping it ends the server, and the move must still land.
func TestClaudeLonePane(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.lonePane = true
	d := w.startDaemon([]*cli{claudeCode}, "--allow-move")
	a := claudeCode.start(w, "cllone", w.cwd("lone"))
	a.prompt("say hello lone")
	moved(t, w, d, a, "clonemoved")
}

// TestClaudeNeverPrompted: a Claude that was never prompted has a session
// (the registry) and no transcript; a move must be refused before it is
// stopped (resuming it would fail), and it keeps running.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestClaudeNeverPrompted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode}, "--allow-move")
	cwd := w.cwd("fresh")
	a := claudeCode.start(w, "clfresh", cwd)
	f := a.facts()
	require(t, f.transcript == "", "a never-prompted Claude wrote a transcript %s", f.transcript)
	d.checkFacts(t, "claude", a.pid, cwd, f)
	status, out := d.move("claude", a.pid, "clfreshmoved")
	if status != 1 {
		t.Errorf("moving a never-prompted Claude: exit %d, want 1 (refused): %s", status, out)
	}
	if !strings.Contains(out, "refused: ") || !strings.Contains(out, "nothing to resume yet") {
		t.Errorf("9harness move does not print the daemon's reason (nothing to resume yet): %s", out)
	}
	if !d.logged("nothing to resume yet") {
		t.Errorf("the daemon's audit does not give the reason")
	}
	time.Sleep(3 * time.Second) // a wrongly accepted move would have stopped it by now
	if !alive(a.pid) {
		t.Errorf("the never-prompted Claude %d is gone after the refused move", a.pid)
	}
	if p, ok := w.findSession("clfreshmoved"); ok {
		t.Errorf("a session %s exists after a refused move: %s", p, w.screen(p))
	}
	d.checkListed(t, map[int]string{a.pid: "claude"})
}

// claudeStatus is the registry's status of the agent.
func claudeStatus(a *agent) string {
	var reg struct {
		Status string `json:"status"`
	}
	b, _ := os.ReadFile(filepath.Join(a.w.home, ".claude", "sessions", strconv.Itoa(a.pid)+".json"))
	json.Unmarshal(b, &reg)
	return reg.Status
}

// claudeSubagent prompts the agent into running one sub-agent (the mock
// calls Claude's Agent tool) and asserts /active/claude/<pid>/agents: the
// one sub-agent, named <agentType>-<agentId>, with the model and the
// transcript (byte-identical) Claude wrote for it.
func claudeSubagent(t *testing.T, w *world, d *daemon, a *agent) {
	before := w.mock.Turns()
	w.typeLine(a.pane, SubagentWord+" go")
	// The sub-agent's answer, then the answer to the tool's result.
	w.waitFor(90*time.Second, &a.pane, "the sub-agent's turn and the turn's end", func() bool { return w.mock.Turns() >= before+2 })
	a.turns = w.mock.Turns()
	final := "mock answer " + strconv.Itoa(a.turns)
	w.waitFor(60*time.Second, &a.pane, final+" in the transcript and an idle registry", func() bool {
		f, ok := claudeWrote(a)
		if !ok || f.transcript == "" {
			return false
		}
		b, _ := os.ReadFile(f.transcript)
		return bytes.Contains(b, []byte(final)) && claudeStatus(a) == "idle"
	})
	f := a.facts()
	subs, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(f.transcript, ".jsonl"), "subagents", "agent-*.jsonl"))
	require(t, len(subs) == 1, "Claude wrote sub-agent transcripts %q, want one", subs)
	id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(subs[0]), "agent-"), ".jsonl")
	var meta struct {
		AgentType string `json:"agentType"`
	}
	mb, err := os.ReadFile(strings.TrimSuffix(subs[0], ".jsonl") + ".meta.json")
	require(t, err == nil && json.Unmarshal(mb, &meta) == nil, "sub-agent meta: %v %s", err, mb)
	// The sub-agent's model is in its assistant lines, which Claude may
	// write a moment after the transcript appears.
	model := ""
	for deadline := time.Now().Add(20 * time.Second); model == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		sb, _ := os.ReadFile(subs[0])
		for _, line := range bytes.Split(sb, []byte("\n")) {
			var l struct {
				Type    string `json:"type"`
				Message struct {
					Model string `json:"model"`
				} `json:"message"`
			}
			if json.Unmarshal(line, &l) == nil && l.Type == "assistant" && l.Message.Model != "" && l.Message.Model != "<synthetic>" {
				model = l.Message.Model
			}
		}
	}
	require(t, model != "", "Claude wrote no assistant line with a model in %s within 20 s", subs[0])
	name := meta.AgentType + "-" + id
	dir := "/active/claude/" + strconv.Itoa(a.pid) + "/agents"
	t.Run("subagent", func(t *testing.T) {
		ents, err := d.c.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
		}
		if err != nil || len(names) != 1 || names[0] != name {
			t.Fatalf("ls %s = %q (%v), want [%s]", dir, names, err, name)
		}
		if got, err := d.c.ReadFile(dir + "/" + name + "/model"); err != nil || strings.TrimSpace(string(got)) != model {
			t.Errorf("%s/%s/model = %q (%v), Claude wrote %q", dir, name, got, err, model)
		}
		got, err := d.c.ReadFile(dir + "/" + name + "/transcript")
		now, _ := os.ReadFile(subs[0])
		if err != nil || !bytes.Equal(got, now) {
			t.Errorf("%s/%s/transcript: %d bytes (%v), %s has %d", dir, name, len(got), err, subs[0], len(now))
		}
	})
}

// claudeRename renames the session with /rename: Claude writes
// custom-title and agent-name lines and renames its registry record; the
// title and the name follow.
func claudeRename(t *testing.T, w *world, d *daemon, a *agent, title string) {
	w.typeLine(a.pane, "/rename "+title)
	w.waitFor(30*time.Second, &a.pane, "Claude's agent-name line and registry name", func() bool {
		f, ok := claudeWrote(a)
		if !ok || f.transcript == "" {
			return false
		}
		b, _ := os.ReadFile(f.transcript)
		return bytes.Contains(b, []byte(`"agent-name"`)) && f.name == title
	})
	f := a.facts()
	if f.title != title {
		t.Errorf("after /rename Claude's transcript gives title %q, want %q", f.title, title)
	}
	t.Run("facts after /rename", func(t *testing.T) {
		d.checkFacts(t, "claude", a.pid, a.cwd, f)
	})
}
