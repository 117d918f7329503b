package harness

import (
	"fmt"
	"github.com/9harness/9harness/internal/saferoot"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// The fixtures are Qwen Code 0.24.4's own files (testdata/qwen-0.24.4),
// written against the real-CLI tier's mock: renamed-resumed.jsonl is a
// chat prompted once, renamed (/rename my qwen title), resumed
// (qwen --resume) and prompted again; tool.jsonl one whose prompt made a
// shell call that was approved and answered; registry.json the record of
// the resumed process (its ipcToken zeroed), runtime.json its runtime
// record.
const (
	qwSID    = "a50c6ead-7878-45df-a8fe-183223bb0551" // the real chat's
	qwSID2   = "8a67423a-b11f-497a-b4c8-442b2d019316" // tool.jsonl's
	qwPID    = 171000
	qwTick   = 13000 // 130 s after boot
	qwPPID   = 170999
	qwWrap   = 170998
	qwShell  = 100
	qwNode   = "/opt/node22/bin/node"
	qwBin    = "/home/goblin/.npm-global/lib/node_modules/.bin/qwen"
	qwCLI    = "/home/goblin/.npm-global/lib/node_modules/@qwen-code/qwen-code/cli.js"
	qwRealIn = "/tmp/qwx/s1/work/proj"
)

func qwData(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/qwen-0.24.4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// qwAgent is a qwen as the npm bin starts it: the wrapper, the
// relauncher, and the agent, its child.
func qwAgent(f *fx, args ...string) (proc.Proc, Agent) {
	f.add(proctest.Proc{PID: qwWrap, PPID: qwShell, Start: qwTick - 60, Argv: append([]string{"node", qwBin}, args...), Env: f.stdEnv(), Cwd: f.cwd()})
	f.add(proctest.Proc{PID: qwPPID, PPID: qwWrap, Start: qwTick - 50, Argv: append([]string{qwNode, "--expose-gc", qwCLI}, args...),
		Env: f.stdEnv("QWEN_CODE_LAUNCHER_PID=170998"), Cwd: f.cwd()})
	p := f.add(proctest.Proc{PID: qwPID, PPID: qwPPID, Start: qwTick, Argv: append([]string{qwNode, "--expose-gc", qwCLI}, args...),
		Env: f.stdEnv("QWEN_CODE_LAUNCHER_PID=170998", "QWEN_CODE_NO_RELAUNCH=true"), Cwd: f.cwd()})
	return p, Agent{Harness: "qwen", PID: qwPID, PPID: qwPPID, Start: qwTick, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

// qwRegistry writes the real registry record, moved to the fixture's
// cwd and process (pid, starttime), with the session sid.
func qwRegistry(t *testing.T, f *fx, sid string, pid int, tick uint64) {
	s := qwData(t, "registry.json")
	s = strings.ReplaceAll(s, qwRealIn, f.cwd())
	s = strings.Replace(s, `"pid": 7305`, fmt.Sprintf(`"pid": %d`, pid), 1)
	s = strings.Replace(s, ":1364059", fmt.Sprintf(":%d", tick), 1)
	s = strings.Replace(s, qwSID, sid, 1)
	f.write(fmt.Sprintf(".qwen/sessions/%d.json", pid), s, at(140))
}

// qwChat writes a real chat, moved to the fixture's cwd, as session sid,
// and returns its rel path.
func qwChat(t *testing.T, f *fx, file, sid string, lines int) string {
	s := strings.ReplaceAll(qwData(t, file), qwRealIn, f.cwd())
	if lines > 0 {
		ls := strings.SplitAfter(s, "\n")
		s = strings.Join(ls[:lines], "")
	}
	rel := qwenChats(f.cwd()) + "/" + sid + ".jsonl"
	f.write(".qwen/"+rel, s, at(200))
	return rel
}

func TestClassifyQwen(t *testing.T) {
	wrap := []string{"node", qwBin}
	cli := []string{qwNode, "--expose-gc", qwCLI}
	with := func(argv []string, args ...string) []string { return append(append([]string{}, argv...), args...) }
	for _, r := range []struct {
		argv, parent []string
		want         Kind
	}{
		{wrap, []string{"tmux"}, Helper},                        // the npm wrapper
		{with(wrap, "--resume", qwSID), []string{"sh"}, Helper}, // and a move's
		{[]string{"qwen"}, []string{"bash"}, Helper},            // a standalone shim
		{cli, wrap, Helper},                                     // the relauncher
		{cli, cli, Session},                                     // the agent
		{with(cli, "--model", "qwen3-coder"), with(cli, "--model", "qwen3-coder"), Session},
		{with(cli, "-r"), cli, Session},               // the session picker
		{with(cli, "-i", "fix it"), cli, Session},     // a prompt, then interactive
		{with(cli, "fix", "it"), cli, Helper},         // a positional prompt is one-shot
		{with(cli, "-p", "fix it"), cli, Helper},      // so is -p
		{with(cli, "sessions", "list"), cli, Helper},  // subcommands
		{with(cli, "serve"), cli, Helper},             // its daemon
		{with(cli, "--acp"), cli, Helper},             // an editor's agent protocol
		{with(cli, "-o", "stream-json"), cli, Helper}, // headless output
		{[]string{"node", "/x/claude-code/cli.js"}, cli, None},
		{[]string{"node", "/x/other/cli.js"}, cli, None}, // another package's cli.js
		{[]string{"qwen-helper"}, nil, None},
	} {
		if got := (qwen{}).Classify(proc.Proc{Argv: r.argv}, proc.Proc{Argv: r.parent}); got != r.want {
			t.Errorf("Classify(%q, parent %q) = %v, want %v", r.argv, r.parent, got, r.want)
		}
	}
	env := func(kv ...string) func(string) (string, bool) {
		return func(n string) (string, bool) {
			for _, s := range kv {
				if k, v, _ := strings.Cut(s, "="); k == n {
					return v, true
				}
			}
			return "", false
		}
	}
	for _, r := range []struct {
		argv []string
		env  []string
		want bool
	}{
		{cli, []string{"QWEN_CODE_NO_RELAUNCH=true"}, true}, // a qwen that does not relaunch
		{cli, nil, false}, // the relauncher
		{wrap, []string{"QWEN_CODE_NO_RELAUNCH=true"}, false}, // the wrapper never
		{with(cli, "-p", "x"), []string{"QWEN_CODE_NO_RELAUNCH=true"}, false},
	} {
		if got := (qwen{}).Promote(proc.Proc{Argv: r.argv}, env(r.env...)); got != r.want {
			t.Errorf("Promote(%q, %q) = %v, want %v", r.argv, r.env, got, r.want)
		}
	}
}

func TestResolveQwen(t *testing.T) {
	runResolve(t, []resolveCase{
		{"qwen/real-0.24.4", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			qwRegistry(t, f, qwSID, qwPID, qwTick)
			rel := qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
			want.Session, want.Via, want.Transcript, want.Name = qwSID, RouteRegistry, rel, "proj-e4"
			want.Title, want.Model = "my qwen title", "mock-qwen"
			return qwen{}, f.env(".qwen"), p, want
		}},
		{"qwen/first-prompt-before-rename", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			qwRegistry(t, f, qwSID, qwPID, qwTick)
			rel := qwChat(t, f, "renamed-resumed.jsonl", qwSID, 6) // before /rename
			want.Session, want.Via, want.Transcript, want.Name = qwSID, RouteRegistry, rel, "proj-e4"
			want.Title, want.Model = "say hello qwen", "mock-qwen"
			return qwen{}, f.env(".qwen"), p, want
		}},
		{"qwen/no-prompt-yet", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			qwRegistry(t, f, qwSID, qwPID, qwTick)
			want.Session, want.Via, want.Name = qwSID, RouteRegistry, "proj-e4"
			return qwen{}, f.env(".qwen"), p, want
		}},
		{"qwen/registry-of-a-reused-pid", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			qwRegistry(t, f, qwSID, qwPID, qwTick-7)
			qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
			want.Via = `none (registry record is another process's: procStart "c4f5d7b8-7dc9-4ff8-b4fa-0ff734af5122:12993", this process started at 13000; no runtime record of this pid begun since it started)`
			return qwen{}, f.env(".qwen"), p, want
		}},
		{"qwen/registry-of-another-pid-namespace", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			qwRegistry(t, f, qwSID, qwPID, qwTick)
			env := f.env(".qwen")
			env.PIDDomain = "linux::pid:[4026532999]"
			want.Via = `none (registry record is from another pid namespace (4026531836); no chats dir for this cwd)`
			return qwen{}, env, p, want
		}},
		{"qwen/runtime-record-before-the-registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			rt := strings.ReplaceAll(qwData(t, "runtime.json"), qwRealIn, f.cwd())
			rt = strings.Replace(rt, `"pid": 7305`, fmt.Sprintf(`"pid": %d`, qwPID), 1)
			rt = strings.Replace(rt, "1796555305.136", fmt.Sprintf("%.3f", float64(at(131).UnixMilli())/1000), 1)
			f.write(".qwen/"+qwenChats(f.cwd())+"/"+qwSID+".runtime.json", rt, at(131))
			// A record a killed qwen of the same pid left, begun before.
			old := strings.Replace(strings.Replace(rt, qwSID, qwSID2, 1), fmt.Sprintf("%.3f", float64(at(131).UnixMilli())/1000), fmt.Sprintf("%.3f", float64(at(20).UnixMilli())/1000), 1)
			f.write(".qwen/"+qwenChats(f.cwd())+"/"+qwSID2+".runtime.json", old, at(20))
			rel := qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
			want.Session, want.Transcript = qwSID, rel
			want.Via = RouteRegistry + " (the runtime record; sessions/171000.json is not written yet)"
			want.Title, want.Model = "my qwen title", "mock-qwen"
			return qwen{}, f.env(".qwen"), p, want
		}},
		{"qwen/relaunched-by-a-move", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// 9harness started the wrapper with qwen --resume and noted
			// the chat; the agent, its grandchild, has no record yet.
			p, want := qwAgent(f, "--resume", qwSID)
			rel := qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
			env := f.env(".qwen")
			env.Relaunches = &Relaunches{}
			env.Relaunches.Note(qwWrap, qwTick-60, rel)
			want.Session, want.Via, want.Transcript = qwSID, RouteRelaunch, rel
			want.Title, want.Model = "my qwen title", "mock-qwen"
			return qwen{}, env, p, want
		}},
		{"qwen/relaunch-record-of-another-cwd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f, "--resume", qwSID)
			env := f.env(".qwen")
			env.Relaunches = &Relaunches{}
			other := "projects/-elsewhere/chats/" + qwSID + ".jsonl"
			f.write(".qwen/"+other, qwData(t, "renamed-resumed.jsonl"), at(200))
			env.Relaunches.Note(qwWrap, qwTick-60, other)
			want.Via = `none (no registry record; no chats dir for this cwd)`
			return qwen{}, env, p, want
		}},
		{"qwen/only-a-stale-runtime-record", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := qwAgent(f)
			rt := strings.ReplaceAll(qwData(t, "runtime.json"), qwRealIn, f.cwd())
			rt = strings.Replace(rt, `"pid": 7305`, fmt.Sprintf(`"pid": %d`, qwPID), 1)
			rt = strings.Replace(rt, "1796555305.136", fmt.Sprintf("%.3f", float64(at(20).UnixMilli())/1000), 1)
			f.write(".qwen/"+qwenChats(f.cwd())+"/"+qwSID+".runtime.json", rt, at(20))
			want.Via = `none (no registry record; no runtime record of this pid begun since it started)`
			return qwen{}, f.env(".qwen"), p, want
		}},
	})
}

// TestScanQwen: of the wrapper, the relauncher and the agent, only the
// agent is listed; a qwen started with QWEN_CODE_NO_RELAUNCH (one cli.js
// under the wrapper) is listed too; neither's fork before an exec is.
func TestScanQwen(t *testing.T) {
	f := newFx(t)
	qwAgent(f)
	f.add(proctest.Proc{PID: 172000, PPID: qwShell, Start: qwTick, Argv: []string{"node", qwBin, "--resume", qwSID}, Env: f.stdEnv("QWEN_CODE_NO_RELAUNCH=true"), Cwd: f.cwd()})
	f.add(proctest.Proc{PID: 172001, PPID: 172000, Start: qwTick, Argv: []string{qwNode, "--expose-gc", qwCLI, "--resume", qwSID}, Env: f.stdEnv("QWEN_CODE_NO_RELAUNCH=true"), Cwd: f.cwd()})
	// Each agent's fork before it execs a tool: a cli.js child of a
	// cli.js, with the agent's command line and environment.
	for a, argv := range map[int][]string{
		qwPID:  {qwNode, "--expose-gc", qwCLI},
		172001: {qwNode, "--expose-gc", qwCLI, "--resume", qwSID},
	} {
		f.add(proctest.Proc{PID: a + 5, PPID: a, Start: qwTick + 100, Argv: argv, Env: f.stdEnv("QWEN_CODE_NO_RELAUNCH=true"), Cwd: f.cwd()})
	}
	found, err := Scan(proc.New(f.procDir), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range found {
		got = append(got, fmt.Sprintf("%s/%d", x.Harness, x.Proc.PID))
	}
	if want := "qwen/171000 qwen/172001"; strings.Join(got, " ") != want {
		t.Errorf("Scan found %q, want %q", got, want)
	}
}

func TestStateQwen(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   string
		lines  int
		state  string
		via    string
		since  string
		tokens string
	}{
		{"prompted", "tool.jsonl", 3, StateWorking, "transcript (user prompt)", "2026-12-06T11:10:46Z", ""},
		{"tool-call-pending", "tool.jsonl", 5, "", "none (a tool call without its result: running or awaiting approval, which Qwen does not write)", "",
			"context 10\ninput 10\noutput 8\ncache_read 0"},
		{"tool-result", "tool.jsonl", 7, StateWorking, "transcript (tool result: a model call is in flight)", "2026-12-06T11:11:17Z",
			"context 10\ninput 10\noutput 8\ncache_read 0"},
		{"answered", "tool.jsonl", 0, StateIdle, "transcript (reply without tool calls)", "2026-12-06T11:11:20Z",
			"context 10\ninput 20\noutput 16\ncache_read 0"},
		{"renamed-resumed", "renamed-resumed.jsonl", 0, StateIdle, "transcript (reply without tool calls)", "2026-12-06T11:09:11Z",
			"context 10\ninput 20\noutput 16\ncache_read 0"},
	} {
		f := newFx(t)
		rel := qwChat(t, f, c.file, qwSID, c.lines)
		env := f.env(".qwen")
		var a Agent
		qwenFill(env, &a, rel)
		name := "qwen/" + c.name
		a = summed(t, name, env, a, "qwen", rel, c.tokens)
		checkState(t, name, a, stateCase{state: c.state, via: c.via, since: c.since, tokens: c.tokens})
	}
}

func TestResumeQwen(t *testing.T) {
	f := newFx(t)
	p, _ := qwAgent(f, "--model", "mock-qwen", "--approval-mode", "yolo", "--openai-api-key", "sk-secret")
	qwRegistry(t, f, qwSID, qwPID, qwTick)
	env := f.env(".qwen")
	a := qwen{}.Resolve(env, p)
	if _, err := (qwen{}).Resume(a, env); err == nil || !strings.Contains(err.Error(), NothingYet) {
		t.Errorf("Resume before the first prompt: %v, want %q", err, NothingYet)
	}
	qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
	a = qwen{}.Resolve(env, p)
	argv, kept, dropped, err := ResumeArgv(qwen{}, a, env)
	want := "qwen --resume " + qwSID + " --model mock-qwen --approval-mode yolo"
	if err != nil || strings.Join(argv, " ") != want {
		t.Errorf("ResumeArgv = %q, %v; want %q", argv, err, want)
	}
	if strings.Join(kept, " ") != "--model --approval-mode" || strings.Join(dropped, " ") != "--openai-api-key" {
		t.Errorf("kept %q dropped %q", kept, dropped)
	}
	a.Session = "-x"
	if _, err := (qwen{}).Resume(a, env); err == nil {
		t.Errorf("Resume of a session id that is a flag succeeded")
	}
}

// TestQwenCredentialsHidden: the stores Qwen Code keeps keys and tokens
// in, named as it names them, are neither listed nor opened at any depth
// of its root, nor its copies of the projects' files; its chats are.
func TestQwenCredentialsHidden(t *testing.T) {
	f := newFx(t)
	chats := qwenChats(f.cwd())
	rel := qwChat(t, f, "renamed-resumed.jsonl", qwSID, 0)
	hidden := []string{"settings.json", "oauth_creds.json", "mcp-oauth-tokens.json", "peer-controllers.json", ".env",
		chats + "/oauth_creds.json", "projects/peer-controllers.json", "file-history/" + qwSID + "/0a1b2c3d@v1",
		"tmp/f7bfb4dabe4fa3226d3a6c0c11e01a7f59f26b8fae0fa6ff24558603e0c40da6/checkpoints/x"}
	for _, h := range hidden {
		f.write(".qwen/"+h, `{"access_token":"secret"}`, at(100))
	}
	r := saferoot.New(f.home + "/.qwen")
	r.SetSlugDirs(qwenSpec.SlugDirs...)
	r.SetCopyStores(qwenSpec.CopyStores...)
	for _, h := range hidden {
		if fh, err := r.Open(h); err == nil {
			fh.Close()
			t.Errorf("%s was opened", h)
		}
	}
	for _, dir := range []string{"", chats, "projects"} {
		ents, err := r.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir %s: %v", dir, err)
		}
		for _, e := range ents {
			for _, h := range hidden {
				if path.Join(dir, e.Name) == h {
					t.Errorf("%s is listed", h)
				}
			}
		}
	}
	if fh, err := r.Open(rel); err != nil {
		t.Errorf("the chat %s: %v", rel, err)
	} else {
		fh.Close()
	}
}
