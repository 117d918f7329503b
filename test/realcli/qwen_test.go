package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// qwenMinNode is the oldest Node Qwen Code runs on (its engines field).
var qwenMinNode = [3]int{22, 0, 0}

// qwenNodeFromNPM is the node package installed for Qwen Code when the
// tier's Node is older than qwenMinNode.
const qwenNodeFromNPM = "22.23.3"

var qwenNodeDir struct {
	once sync.Once
	dir  string // "" when the tier's own Node will do
	err  error
}

// qwenNode is the directory of a Node Qwen Code runs on, to put first on
// its PATH, or "" when the tier's own is new enough.
func qwenNode(t testing.TB) string {
	nodes, err := install.node(t)
	if err != nil {
		missing(t, "%v", err)
	}
	qwenNodeDir.once.Do(func() {
		if v, err := nodeVersion(filepath.Join(nodes, "node")); err == nil && newer(v, qwenMinNode) {
			return
		}
		prefix, err := npmInstall(nodes, "node", qwenNodeFromNPM)
		if err != nil {
			qwenNodeDir.err = err
			return
		}
		qwenNodeDir.dir = filepath.Join(prefix, "node_modules", ".bin")
	})
	if qwenNodeDir.err != nil {
		missing(t, "Qwen Code needs Node >= 22; installing node@%s from npm: %v", qwenNodeFromNPM, qwenNodeDir.err)
	}
	return qwenNodeDir.dir
}

var qwenCLI = &cli{
	harness: "qwen",
	pkg:     "@qwen-code/qwen-code",
	pinned:  harness.Verified("qwen"),
	bin:     "qwen",
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".qwen")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		p := filepath.Join(dir, "settings.json")
		if _, err := os.Stat(p); err != nil {
			settings := obj{
				"security":  obj{"auth": obj{"selectedType": "openai"}, "folderTrust": obj{"enabled": false}},
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
		// Its IPC sockets go under TMPDIR: the scratch area's, so the
		// cleanup removes what a killed qwen leaves.
		tmp := filepath.Join(w.dir, "tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			w.t.Fatal(err)
		}
		env := []string{"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + w.mock.URL() + "/v1",
			"OPENAI_MODEL=mock-qwen", "TMPDIR=" + tmp}
		if node := qwenNode(w.t); node != "" {
			// Later than the PATH start() gives, so it wins: the same
			// with Node 22 first.
			pkg := "@qwen-code/qwen-code"
			bin := filepath.Join(install.prefix(w.t, pkg, install.version(w.t, pkg, harness.Verified("qwen"))), "node_modules", ".bin")
			env = append(env, "PATH="+bin+":"+node+":"+install.pathFor(w.t))
		}
		return env
	},
	argvVisible: true,
	aliases:     map[string]string{"-m": "--model"},
	// The input line shows while it still initializes (its registry
	// record comes seconds later): ready once the banner's spinner is
	// gone and the line has shown for a while.
	ready: func(s string) bool {
		return strings.Contains(s, "Type your message") && !strings.Contains(s, "Initializing")
	},
	settle:   3 * time.Second,
	agentPID: qwenAgentPID,
	isAgent:  qwenNoRelaunch,
	wrote:    qwenWrote,
}

// qwenAgentPID is the agent among the pane's processes: the wrapper's
// grandchild (the relauncher's child) or, for a qwen that does not
// relaunch, its child: the cli.js with QWEN_CODE_NO_RELAUNCH.
func qwenAgentPID(pane int) int {
	next := []int{pane}
	for depth := 0; depth < 3 && len(next) > 0; depth++ {
		var more []int
		for _, p := range next {
			if qwenNoRelaunch(p) {
				return p
			}
			more = append(more, children(p)...)
		}
		next = more
	}
	return 0
}

// qwenNoRelaunch tells whether pid is Qwen Code's cli.js with
// QWEN_CODE_NO_RELAUNCH set: the agent, not the wrapper or relauncher.
func qwenNoRelaunch(pid int) bool {
	if !strings.Contains(strings.Join(cmdline(pid), " "), "/@qwen-code/qwen-code/cli.js") {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00QWEN_CODE_NO_RELAUNCH=true\x00"))
}

// qwenReg is the agent's registry record, sessions/<pid>.json.
func qwenReg(a *agent) (sid, cwd, name string, ok bool) {
	var reg struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Name      string `json:"name"`
	}
	b, err := os.ReadFile(filepath.Join(a.w.home, ".qwen", "sessions", strconv.Itoa(a.pid)+".json"))
	if err != nil || json.Unmarshal(b, &reg) != nil || reg.SessionID == "" {
		return "", "", "", false
	}
	return reg.SessionID, reg.Cwd, reg.Name, true
}

// qwenSanitize is Qwen's project-dir name of a path: every character that
// is not an ASCII letter or digit becomes '-' (the tier's paths are ASCII).
func qwenSanitize(p string) string {
	b := []byte(p)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// qwenWrote reads what the agent wrote: its registry record's session
// and name, and from the session's chat the model of its last assistant
// record and its title as Qwen's own session list shows it (the last
// custom_title, else the first prompt). ok is false until the registry
// record is there; the transcript is "" until the chat is (the first
// prompt writes it).
func qwenWrote(a *agent) (facts, bool) {
	sid, cwd, name, ok := qwenReg(a)
	if !ok {
		return facts{}, false
	}
	f := facts{session: sid, name: name}
	p := filepath.Join(a.w.home, ".qwen", "projects", qwenSanitize(cwd), "chats", sid+".jsonl")
	b, err := os.ReadFile(p)
	if err != nil {
		return f, true
	}
	f.transcript = p
	custom, first := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct {
			Type    string `json:"type"`
			Subtype string `json:"subtype"`
			Model   string `json:"model"`
			Message struct {
				Parts []struct {
					Text *string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
			SystemPayload struct {
				CustomTitle string `json:"customTitle"`
			} `json:"systemPayload"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case l.Type == "assistant" && l.Subtype == "" && l.Model != "":
			f.model = l.Model
		case l.Type == "system" && l.Subtype == "custom_title" && l.SystemPayload.CustomTitle != "":
			custom = l.SystemPayload.CustomTitle
		case l.Type == "user" && l.Subtype == "" && first == "":
			for _, p := range l.Message.Parts {
				if p.Text != nil {
					first = strings.Join(strings.Fields(*p.Text), " ")
					break
				}
			}
		}
	}
	f.title = first
	if custom != "" {
		f.title = custom
	}
	return f, true
}

// TestQwen: Qwen Code's wrapper, relauncher and agent; the agent's facts
// before its first prompt (registry only), after it (the chat, byte for
// byte, through /active and the mirror), its state and tokens, a /rename,
// and its move into tmux with the flag it was started with, then one
// more prompt into the same chat.
func TestQwen(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{qwenCLI}, "--allow-move")
	cwd := w.cwd("qwenproj")
	a := qwenCLI.start(w, "qw1", cwd, "-m", "mock-qwen-flag")
	wrapper := w.panePID(a.pane)
	require(t, wrapper != a.pid, "qwen did not relaunch itself: pane pid %d is the agent", wrapper)
	// Before any prompt: listed, its session from the registry, no chat.
	f0 := a.facts()
	d.checkListed(t, map[int]string{a.pid: "qwen"})
	d.checkFacts(t, "qwen", a.pid, cwd, f0)
	if status, out := d.move("qwen", a.pid, "qwnever"); status == 0 || !strings.Contains(out, harness.NothingYet) {
		t.Errorf("the move of a qwen never prompted: exit %d: %s; want a refusal, %q", status, out, harness.NothingYet)
	}
	require(t, alive(a.pid), "a refused move stopped the agent %d", a.pid)

	ans := a.prompt("say hello qwen")
	// The answer's text is in the chat first in a telemetry record, then
	// in the assistant record that ends the turn: wait for that one.
	w.waitFor(30*time.Second, &a.pane, "qwen's assistant record of "+ans, func() bool {
		b, err := os.ReadFile(a.facts().transcript)
		return err == nil && bytes.Contains(b, []byte(`"type":"assistant"`)) && bytes.Contains(b, []byte(`{"text":"`+ans+`"}`))
	})
	f := a.facts()
	if f.title != "say hello qwen" || f.model != "mock-qwen-flag" || f.session != f0.session {
		t.Errorf("qwen wrote title %q model %q session %q; want the prompt, the -m model, %q", f.title, f.model, f.session, f0.session)
	}
	for _, r := range w.mock.Requests() {
		if r.Kind == "turn" && r.Model != "mock-qwen-flag" {
			t.Errorf("a turn asked for model %q, not the -m one", r.Model)
		}
	}
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "qwen", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "qwen"})
		ag, err := d.c.Agent("qwen", a.pid)
		require(t, err == nil, "/active/qwen/%d: %v", a.pid, err)
		if ag.Via != "registry" || ag.Name != f.name || ag.Tmux != a.pane.String() {
			t.Errorf("via %q name %q tmux %q; want registry, %q, %s", ag.Via, ag.Name, ag.Tmux, f.name, a.pane)
		}
		if ag.State != "idle" {
			t.Errorf("state %q (%s); want idle after the answer", ag.State, ag.StateVia)
		}
		// The mock's usage: 10 in, 8 out per turn, one turn so far.
		if ag.Tokens["context"] != 10 || ag.Tokens["input"] != 10 || ag.Tokens["output"] != 8 {
			t.Errorf("tokens %v; want context 10, input 10, output 8", ag.Tokens)
		}
		// The mirror serves the chat byte for byte; the registry (its
		// ipcToken drives the session) and the settings are not served.
		rel, _ := filepath.Rel(filepath.Join(w.home, ".qwen"), f.transcript)
		got, err := d.c.ReadFile("/qwen/" + rel)
		want, _ := os.ReadFile(f.transcript)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("/qwen/%s: %d bytes (%v), the file %d", rel, len(got), err, len(want))
		}
		for _, p := range []string{"/qwen/sessions", "/qwen/sessions/" + strconv.Itoa(a.pid) + ".json", "/qwen/settings.json"} {
			if _, err := d.c.ReadFile(p); err == nil {
				t.Errorf("%s is served", p)
			}
		}
	})

	w.typeLine(a.pane, "/rename qwen renamed")
	w.waitFor(30*time.Second, &a.pane, "the /rename in qwen's chat", func() bool {
		g, ok := qwenCLI.wrote(a)
		return ok && g.title == "qwen renamed"
	})
	t.Run("facts after /rename", func(t *testing.T) {
		d.checkFacts(t, "qwen", a.pid, cwd, a.facts())
	})
	t.Run("move", func(t *testing.T) {
		moved(t, w, d, a, "qwmoved")
		// Told done by a route of its own: the daemon's record of the
		// wrapper it started, or the resumed qwen's registry.
		if !d.logged("outcome=moved") || !d.logged("new_via=relaunch") && !d.logged("new_via=registry") && !d.logged(`new_via="registry`) {
			t.Errorf("the move was not verified by the relaunch record or the registry")
		}
	})
}
