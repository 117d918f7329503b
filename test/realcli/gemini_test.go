package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/9harness/9harness/internal/harness"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var gemini = &cli{
	harness: "gemini",
	pkg:     "@google/gemini-cli",
	pinned:  harness.Verified("gemini"),
	bin:     "gemini",
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".gemini")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		p := filepath.Join(dir, "settings.json")
		if _, err := os.Stat(p); err != nil {
			settings := obj{
				"security":  obj{"auth": obj{"selectedType": "gemini-api-key"}, "folderTrust": obj{"enabled": false}},
				"ui":        obj{"theme": "Default"},
				"general":   obj{"disableAutoUpdate": true, "disableUpdateNag": true},
				"privacy":   obj{"usageStatisticsEnabled": false},
				"telemetry": obj{"enabled": false},
			}
			b, _ := json.Marshal(settings)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				w.t.Fatal(err)
			}
		}
		// Any key will do: the base URL points the API client at the mock
		// (plain http is accepted for 127.0.0.1).
		return []string{"GEMINI_API_KEY=test-key", "GOOGLE_GEMINI_BASE_URL=" + w.mock.URL()}
	},
	argvVisible: true,
	aliases:     map[string]string{"-m": "--model"},
	// The input line shows seconds before the TUI takes an Enter (the
	// text is typed, the Enter lost): ready once it has shown for a while.
	ready: func(s string) bool {
		return strings.Contains(s, "Type your message") && strings.Contains(s, "? for shortcuts")
	},
	settle: 5 * time.Second,
	// The pane runs the launcher; the agent is its relaunched child, the
	// one with GEMINI_CLI_NO_RELAUNCH. A gemini started with that
	// variable (as a move starts it) is one process.
	agentPID: func(pane int) int {
		if geminiNoRelaunch(pane) {
			return pane
		}
		for _, c := range children(pane) {
			if geminiNoRelaunch(c) {
				return c
			}
		}
		return 0
	},
	isAgent: geminiNoRelaunch,
	wrote:   geminiWrote,
}

// geminiNoRelaunch tells whether pid is a gemini process with
// GEMINI_CLI_NO_RELAUNCH set: the agent, not the launcher.
func geminiNoRelaunch(pid int) bool {
	argv := cmdline(pid)
	if len(argv) < 2 || !strings.Contains(strings.Join(argv, " "), "gemini") {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00GEMINI_CLI_NO_RELAUNCH=true\x00"))
}

// geminiWrote reads the agent's chat: in the project dir projects.json
// maps its cwd to, the first chat begun since its process started
// or, for a gemini started with --resume, the session's own file (not the
// stub the resume begins under the same id, which holds no prompt and no
// answer); its session id, the model of its last gemini message, and its
// title as Gemini's own session list shows it: the $set summary, else the
// first user message that is not a command or injected context.
func geminiWrote(a *agent) (facts, bool) {
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	b, err := os.ReadFile(filepath.Join(a.w.home, ".gemini", "projects.json"))
	if err != nil || json.Unmarshal(b, &reg) != nil || reg.Projects[a.cwd] == "" {
		return facts{}, false
	}
	started, err := procStart(a.pid)
	if err != nil {
		return facts{}, false
	}
	resumed := slices.Contains(cmdline(a.pid), "--resume")
	files, _ := filepath.Glob(filepath.Join(a.w.home, ".gemini", "tmp", reg.Projects[a.cwd], "chats", "session-*.jsonl"))
	// A fresh agent's chat is the first begun since it started (a later
	// one is another agent's in the same cwd); a resumed agent's, the
	// session's own file.
	var best facts
	bestStart := ""
	for _, p := range files {
		f, start, resumable := geminiChat(p)
		st, err := time.Parse(time.RFC3339Nano, start)
		if f.session == "" || err != nil || resumed && !resumable || !resumed && st.Unix() < started-1 {
			continue
		}
		if bestStart == "" || !resumed && start < bestStart || resumed && start > bestStart {
			best, bestStart = f, start
		}
	}
	return best, best.session != ""
}

// geminiChat reads one chat file: its facts, its metadata startTime, and
// whether it holds a prompt or an answer.
func geminiChat(p string) (f facts, start string, resumable bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return f, "", false
	}
	var summary, first string
	type msg struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	}
	note := func(m msg) {
		var parts []struct {
			Text string `json:"text"`
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				s += p.Text
			}
		}
		s = strings.TrimSpace(s)
		if m.Type == "gemini" {
			if m.Model != "" {
				f.model = m.Model
			}
			resumable = resumable || s != ""
		}
		if m.Type == "user" && s != "" && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "?") &&
			!strings.HasPrefix(s, "<session_context>") && !strings.HasPrefix(s, "<hook_context>") {
			resumable = true
			if first == "" {
				first = strings.Join(strings.Fields(s), " ")
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var l struct {
			msg
			SessionID string `json:"sessionId"`
			StartTime string `json:"startTime"`
			Set       *struct {
				SessionID string `json:"sessionId"`
				Summary   string `json:"summary"`
				Messages  []msg  `json:"messages"`
			} `json:"$set"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case line == 1:
			f.session, start = l.SessionID, l.StartTime
		case l.Set != nil:
			if l.Set.SessionID != "" {
				f.session = l.Set.SessionID
			}
			if l.Set.Summary != "" {
				summary = l.Set.Summary
			}
			for _, m := range l.Set.Messages {
				note(m)
			}
		case l.ID != "":
			note(l.msg)
		}
	}
	f.transcript, f.title = p, first
	if summary != "" {
		f.title = summary
	}
	return f, start, resumable
}

// TestGemini: Gemini CLI's launcher and relaunched child, the facts of
// the child after a prompt, and its move into tmux (the moved gemini is
// one process: it inherits GEMINI_CLI_NO_RELAUNCH), then one more prompt.
func TestGemini(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{gemini}, "--allow-move")
	cwd := w.cwd("gemproj")
	a := gemini.start(w, "gem1", cwd)
	launcher := w.panePID(a.pane)
	require(t, launcher != a.pid, "gemini did not relaunch itself: pane pid %d is the agent", launcher)
	// Before any prompt the chat exists (Gemini writes its metadata line
	// at start): the agent is listed and resolved, the launcher is not.
	d.checkListed(t, map[int]string{a.pid: "gemini"})
	if _, ok := d.listed()[launcher]; ok {
		t.Errorf("gemini's launcher %d %q is listed", launcher, cmdline(launcher))
	}
	a.prompt("say hello golf")
	f := a.facts()
	if f.title != "say hello golf" || f.model == "" {
		t.Errorf("gemini wrote title %q model %q; want the prompt and a model", f.title, f.model)
	}
	var routed bool
	for _, r := range w.mock.Requests() {
		routed = routed || r.Kind == "route"
	}
	if !routed {
		t.Errorf("the mock saw no generateContent routing call")
	}
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "gemini", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "gemini"})
		ag, err := d.c.Agent("gemini", a.pid)
		if err == nil && !strings.HasPrefix(ag.Via, "dir") {
			t.Errorf("via = %q, want the dir route", ag.Via)
		}
	})
	t.Run("move", func(t *testing.T) {
		moved(t, w, d, a, "gemmoved")
	})
}

// TestGeminiTwoInOneCwd: two geminis in one cwd. Nothing on disk ties a
// chat to its process, and the second's start deletes the first's chat
// while it has no prompt (Gemini's session cleanup drops every chat
// without one), so the first is left with only the second's chat begun
// since it started. It is never given that one: its session is absent,
// via says "ambiguous", and a move of it is refused before it is touched.
// The second has one chat begun since it started, its own.
func TestGeminiTwoInOneCwd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{gemini}, "--allow-move")
	cwd := w.cwd("gemtwo")
	a := gemini.start(w, "gemA", cwd)
	a.facts() // its chat is there
	b := gemini.start(w, "gemB", cwd)
	fb := b.facts() // and the second's
	d.checkListed(t, map[int]string{a.pid: "gemini", b.pid: "gemini"})
	ag, err := d.c.Agent("gemini", a.pid)
	require(t, err == nil, "/active/gemini/%d: %v", a.pid, err)
	if ag.Session != "" || ag.Transcript != "" || !strings.HasPrefix(ag.Via, "ambiguous") {
		t.Errorf("the first gemini: session %q transcript %q via %q; want none, via ambiguous", ag.Session, ag.Transcript, ag.Via)
	}
	d.checkFacts(t, "gemini", b.pid, cwd, fb)
	if status, out := d.move("gemini", a.pid, "gemA2"); status == 0 {
		t.Errorf("the move of an ambiguous gemini succeeded: %s", out)
	} else if !strings.Contains(out, "ambiguous") {
		t.Errorf("the move was refused without saying why: %s", out)
	}
	time.Sleep(time.Second)
	if !alive(a.pid) {
		t.Errorf("a refused move stopped the agent %d", a.pid)
	}
}
