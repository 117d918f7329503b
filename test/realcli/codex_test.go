package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/9harness/9harness/internal/harness"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// codexNoDaemon makes a Codex TUI host its own app-server instead of the
// shared managed daemon (feature daemon_auto_start, on by default). Given
// as a flag, so a move that drops the agent's flags is seen.
var codexNoDaemon = []string{"-c", "features.daemon_auto_start=false"}

var codex = &cli{
	harness: "codex",
	pkg:     "@openai/codex",
	pinned:  harness.Verified("codex"),
	bin:     "codex",
	configure: func(w *world, cwd string) []string {
		dir := filepath.Join(w.home, ".codex")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			w.t.Fatal(err)
		}
		// Rewritten whole for every agent: the mock provider, the
		// world's extra tables, and every cwd trusted so far.
		if !slices.Contains(w.trusted, cwd) {
			w.trusted = append(w.trusted, cwd)
		}
		cfg := fmt.Appendf(nil, `model = "gpt-mock"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, w.mock.URL())
		for _, extra := range w.codexConfig {
			cfg = append(cfg, "\n"+extra+"\n"...)
		}
		for _, d := range w.trusted {
			cfg = fmt.Appendf(cfg, "\n[projects.%s]\ntrust_level = \"trusted\"\n", strconv.Quote(d))
		}
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), cfg, 0o600); err != nil {
			w.t.Fatal(err)
		}
		return []string{"OPENAI_API_KEY=sk-test"}
	},
	ready:       func(s string) bool { return strings.Contains(s, "›") },
	argvVisible: true,
	aliases:     map[string]string{"-c": "--config", "-m": "--model", "-p": "--profile", "-s": "--sandbox", "-a": "--ask-for-approval"},
	// The pane runs the node wrapper, whose child is the native TUI; a
	// move may run the native TUI directly.
	agentPID: func(pane int) int {
		if codexNative(pane) {
			return pane
		}
		for _, c := range children(pane) {
			if codexNative(c) {
				return c
			}
		}
		return 0
	},
	isAgent: codexNative,
	wrote:   codexWrote,
}

// codexNative tells the native Codex TUI (not its node wrapper, not the
// app-server daemon, whose argv says app-server).
func codexNative(pid int) bool {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil || filepath.Base(p) != "codex" {
		return false
	}
	argv := cmdline(pid)
	return len(argv) < 2 || argv[1] != "app-server"
}

// codexWrote finds the rollout whose session_meta names the agent's cwd
// and whose first prompt is the agent's, and reads its session, model and
// title: the /rename name from session_index.jsonl, else the thread's
// title in state_5.sqlite, which is its first user message.
func codexWrote(a *agent) (facts, bool) {
	var found []string
	filepath.WalkDir(filepath.Join(a.w.home, ".codex", "sessions"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), ".jsonl") {
			found = append(found, p)
		}
		return nil
	})
	var f facts
	for _, p := range found {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var id, model, prompt string
		for sc.Scan() {
			var l struct {
				Type    string `json:"type"`
				Payload struct {
					ID    string `json:"id"`
					Cwd   string `json:"cwd"`
					Model string `json:"model"`
					Type  string `json:"type"`
					Item  struct {
						Type    string `json:"type"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"item"`
				} `json:"payload"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Type == "session_meta":
				if l.Payload.Cwd != a.cwd {
					break
				}
				id = l.Payload.ID
			case l.Type == "turn_context" && l.Payload.Model != "":
				model = l.Payload.Model
			case l.Type == "event_msg" && l.Payload.Type == "item_completed" && l.Payload.Item.Type == "UserMessage" && prompt == "":
				for _, c := range l.Payload.Item.Content {
					prompt += c.Text
				}
			}
		}
		if a.session != "" && id != a.session {
			continue
		}
		if id == "" || (a.session == "" && a.firstPrompt != "" && prompt != a.firstPrompt) {
			continue // another agent's: each types its own first prompt
		}
		if f.session != "" {
			return facts{}, false // two rollouts the agent cannot be told by
		}
		f = facts{session: id, transcript: p, model: model, title: prompt} // the thread's title in state_5.sqlite
	}
	if f.session == "" {
		return f, false
	}
	if b, err := os.ReadFile(filepath.Join(a.w.home, ".codex", "session_index.jsonl")); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			var e struct {
				ID   string `json:"id"`
				Name string `json:"thread_name"`
			}
			if json.Unmarshal(line, &e) == nil && e.ID == f.session && e.Name != "" {
				f.title = e.Name
			}
		}
	}
	if a.firstPrompt != "" && f.title == "" {
		f.title = a.firstPrompt
	}
	return f, true
}

// TestCodex: a Codex TUI that hosts its own app-server (the daemon off by
// flag), started with its own model: its facts, then its move into tmux,
// keeping its flags, and one more prompt.
func TestCodex(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	d := w.startDaemon([]*cli{codex}, "--allow-move")
	cwd := w.cwd("codex")
	a := codex.start(w, "cx1", cwd, append(append([]string{}, codexNoDaemon...), "-m", "gpt-mock-2")...)
	a.prompt("say hello bravo")
	f := a.facts()
	if f.model != "gpt-mock-2" {
		t.Errorf("Codex wrote model %q, want the -m it was started with", f.model)
	}
	logCodexRequests(t, w)
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "codex", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "codex"})
		if daemons := codexDaemons(w); len(daemons) != 0 {
			t.Errorf("Codex started with %q runs app-server daemons %v", codexNoDaemon, describe(daemons))
		}
	})
	moved(t, w, d, a, "cxmoved")
}

// TestCodexConfigNoDaemon: the same with daemon_auto_start = false in
// config.toml and no flag: the move then depends on no flag being kept.
func TestCodexConfigNoDaemon(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	w.codexConfig = append(w.codexConfig, "[features]\ndaemon_auto_start = false")
	d := w.startDaemon([]*cli{codex}, "--allow-move")
	cwd := w.cwd("codexc")
	a := codex.start(w, "cxc1", cwd)
	a.prompt("say hello bravo")
	f := a.facts()
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "codex", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "codex"})
		if daemons := codexDaemons(w); len(daemons) != 0 {
			t.Errorf("Codex configured without the daemon runs app-server daemons %v", describe(daemons))
		}
	})
	moved(t, w, d, a, "cxcmoved")
}

// TestCodexDefault: Codex as installed, with its shared app-server daemon,
// which (not the TUI) holds the rollout open: the TUI's facts all the
// same, the daemon and its pid-update loop never listed, and a move.
func TestCodexDefault(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	d := w.startDaemon([]*cli{codex}, "--allow-move")
	cwd := w.cwd("codexd")
	a := codex.start(w, "cxd1", cwd)
	a.prompt("say hello bravo")
	f := a.facts()
	logCodexRequests(t, w)
	w.waitFor(20*time.Second, nil, "Codex's app-server daemon", func() bool { return len(codexDaemons(w)) > 0 })
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "codex", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "codex"})
		// No file ties the TUI to its thread: the route is the guarded
		// one (the one thread of its cwd begun since it started), and via
		// says the daemon holds it.
		if got, err := d.c.Agent("codex", a.pid); err != nil || !strings.HasPrefix(got.Via, "dir ") || !strings.Contains(got.Via, "daemon") {
			t.Errorf("/active/codex/%d/via = %q (%v), want the dir route naming the app-server daemon", a.pid, got.Via, err)
		}
	})
	moved(t, w, d, a, "cxdmoved")
}

// codexDaemons are this test's Codex app-server processes.
func codexDaemons(w *world) []int {
	var out []int
	for _, pid := range w.markedPIDs() {
		if argv := cmdline(pid); len(argv) > 1 && argv[1] == "app-server" {
			out = append(out, pid)
		}
	}
	return out
}

// logCodexRequests says which requests Codex made: a title request may
// come with a thread's first prompt or not (Codex 0.169 does not always
// send one), so the log says which this run saw.
func logCodexRequests(t *testing.T, w *world) {
	kinds := map[string]int{}
	for _, r := range w.mock.Requests() {
		kinds[r.API+" "+r.Kind]++
	}
	t.Logf("Codex's requests so far: %v", kinds)
}

// TestCodexTwoInOneCwd: two Codex TUIs in one cwd, with and without the
// app-server daemon. Each is either resolved to its own thread or shown
// as ambiguous (no session, via says so), never to the other's.
func TestCodexTwoInOneCwd(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"no daemon", codexNoDaemon}, {"default", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			w := codexWorld(t)
			d := w.startDaemon([]*cli{codex})
			cwd := w.cwd("shared")
			// One after the other: two TUIs starting the shared daemon at
			// once left the first one unable to submit its prompt.
			a := codex.start(w, "cxa", cwd, mode.flags...)
			a.prompt("say hello from a")
			b := codex.start(w, "cxb", cwd, mode.flags...)
			b.prompt("say hello from b")
			fa, fb := a.facts(), b.facts()
			require(t, fa.session != fb.session, "both agents wrote session %s", fa.session)
			d.checkListed(t, map[int]string{a.pid: "codex", b.pid: "codex"})
			for _, c := range []struct {
				ag          *agent
				own, others facts
			}{{a, fa, fb}, {b, fb, fa}} {
				got, err := d.c.Agent("codex", c.ag.pid)
				if err != nil {
					t.Errorf("codex/%d: %v", c.ag.pid, err)
					continue
				}
				t.Logf("/active/codex/%d: session %q via %q", c.ag.pid, got.Session, got.Via)
				switch got.Session {
				case c.own.session:
					d.checkFacts(t, "codex", c.ag.pid, cwd, c.own)
				case c.others.session:
					t.Errorf("/active/codex/%d/session is the other agent's %s (via %q): swapped", c.ag.pid, got.Session, got.Via)
				case "":
					if !strings.Contains(got.Via, "ambiguous") {
						t.Errorf("/active/codex/%d has no session and via %q: want its own %s, or via saying ambiguous", c.ag.pid, got.Via, c.own.session)
						drifts.add(t, "codex", "session", "", c.own.session, got.Via)
					}
				default:
					t.Errorf("/active/codex/%d/session = %q, neither agent's (%s, %s)", c.ag.pid, got.Session, c.own.session, c.others.session)
				}
			}
		})
	}
}

// codexAlone makes the test the only one running Codex, across test
// processes too, until its cleanup is done: Codex's app-server daemon
// is found through a control socket outside HOME, per uid, so a Codex in
// one scratch HOME can reach the daemon another test's HOME started (seen:
// a second HOME's TUI never sent its prompt to its own mock). A Codex
// started without the daemon runs one after a move that drops the flag.
// Call it before newWorld: the lock is released after the world's cleanup.
func codexAlone(t *testing.T) {
	if os.Getenv("REALCLI_CODEX_PARALLEL") != "" {
		return
	}
	cache, err := cacheDir()
	if err == nil {
		err = os.MkdirAll(cache, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(cache, "codex-daemon.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// codexWorld is newWorld for a Codex test: alone (codexAlone), and with
// the app-server daemons Codex started in the scratch HOME stopped by pid
// before the world's own cleanup.
func codexWorld(t *testing.T) *world {
	codexAlone(t)
	w := newWorld(t)
	t.Cleanup(func() { stopCodexDaemons(w) })
	return w
}

// stopCodexDaemons stops the app-server daemon and its pid-update loop
// that Codex started for this world, by the pids Codex recorded in
// ~/.codex/app-server-daemon/{daemon,daemon-updater}.pid: only a process
// whose start ticks are the recorded ones and whose executable is Codex's
// copy under the scratch HOME, so never another HOME's daemon and never a
// reused pid. The world's cleanup then stops anything left by its marker.
func stopCodexDaemons(w *world) {
	var pids []int
	for _, name := range []string{"daemon.pid", "daemon-updater.pid"} {
		b, err := os.ReadFile(filepath.Join(w.home, ".codex", "app-server-daemon", name))
		if err != nil {
			continue
		}
		var rec struct {
			PID      int `json:"pid"`
			Identity struct {
				StartTicks int64 `json:"startTicks"`
			} `json:"processIdentity"`
		}
		if json.Unmarshal(b, &rec) != nil || rec.PID <= 1 {
			continue
		}
		exe, err := os.Readlink("/proc/" + strconv.Itoa(rec.PID) + "/exe")
		if err != nil || !strings.HasPrefix(exe, filepath.Join(w.home, ".codex", "packages")+"/") {
			continue
		}
		if st, err := procStartTicks(rec.PID); err != nil || st != rec.Identity.StartTicks {
			continue
		}
		pids = append(pids, rec.PID)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(pids) > 0 {
		w.t.Logf("stopped Codex's app-server daemon processes %v", pids)
	}
}

// procStartTicks is field 22 of /proc/PID/stat.
func procStartTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("stat of %d: short", pid)
	}
	return strconv.ParseInt(f[19], 10, 64)
}

// codexThreadsIn are the rollouts of the threads begun in the agent's cwd,
// by thread id.
func codexThreadsIn(a *agent) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(filepath.Join(a.w.home, ".codex", "sessions"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "rollout-") || !strings.HasSuffix(d.Name(), ".jsonl") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				ID  string `json:"id"`
				Cwd string `json:"cwd"`
			} `json:"payload"`
		}
		if sc.Scan() && json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "session_meta" && l.Payload.Cwd == a.cwd {
			out[l.Payload.ID] = p
		}
		return nil
	})
	return out
}

// TestCodexNewFork: in one running Codex (as installed, with its shared
// app-server daemon), /new starts a new thread in the same TUI process,
// then /fork a new thread that carries the conversation so far; after
// each the next read shows the new thread, and a move resumes the fork,
// the conversation the user sees. One test, one Codex: Codex tests run one
// at a time (codexAlone), so each costs the whole tier its length.
func TestCodexNewFork(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	d := w.startDaemon([]*cli{codex}, "--allow-move")
	cwd := w.cwd("codexnew")
	a := codex.start(w, "cxnew", cwd)
	a.prompt("say hello first")
	first := a.facts()
	d.checkFacts(t, "codex", a.pid, cwd, first)
	old := newSession(t, w, d, a, "/new", "say hello second", first)
	w.typeLine(a.pane, "/fork")
	time.Sleep(time.Second)
	ready := codex.waitReady()
	w.waitFor(30*time.Second, &a.pane, "Codex's TUI to take input after /fork", func() bool { return ready(w.screen(a.pane)) })
	// The fork's first prompt: the answer lands in a new rollout, whose
	// first user message is its parent's (the fork carries the history).
	before := w.mock.Turns()
	w.typeLine(a.pane, "say hello in the fork")
	start, retried := time.Now(), false
	w.waitFor(90*time.Second, &a.pane, "the mock to answer the fork's prompt", func() bool {
		// As prompt does: a TUI that showed its input line before it
		// could take a prompt (seen right after /fork) keeps the text.
		if !retried && w.mock.Turns() == before && time.Since(start) > 20*time.Second {
			retried = true
			t.Logf("Codex took no prompt in 20s after /fork; pressing Enter again")
			w.tmux(a.pane.label, "send-keys", "-t", "="+a.pane.session+":", "Enter")
		}
		return w.mock.Turns() > before
	})
	a.turns = w.mock.Turns()
	ans := "mock answer " + strconv.Itoa(a.turns)
	var fork string
	w.waitFor(60*time.Second, &a.pane, "the fork's rollout with \""+ans+"\"", func() bool {
		for id, p := range codexThreadsIn(a) {
			if b, err := os.ReadFile(p); id != old.session && id != first.session && err == nil && strings.Contains(string(b), ans) {
				fork = id
			}
		}
		return fork != ""
	})
	t.Logf("fork %s of %s", fork, old.session)
	a.session = fork
	f := a.facts()
	require(t, f.session == fork, "Codex's fork %s: wrote %q", fork, f.session)
	t.Run("facts after /fork", func(t *testing.T) {
		d.checkFacts(t, "codex", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "codex"})
	})
	moved(t, w, d, a, "cxforkmoved")
}
