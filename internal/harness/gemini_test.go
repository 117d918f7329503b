package harness

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	gemSID   = "f92f9950-645f-4010-96b6-0bcac6873a23" // the real chat's, testdata/gemini
	gemSID2  = "3a1d2ebe-5c3e-4f6a-9b1d-2c3e4f5a6b7c"
	gemPID   = 161000
	gemTick  = 12000 // 120 s after boot
	gemNode  = "/usr/bin/node"
	gemBin   = "/home/goblin/.npm-global/lib/node_modules/.bin/gemini"
	gemPPID  = 160999
	gemShell = 100
)

// gemChatName is the chat file name Gemini gives a session begun at sec.
func gemChatName(sec float64, id string) string {
	return "session-" + strings.ReplaceAll(at(sec).UTC().Format("2006-01-02T15:04"), ":", "-") + "-" + id[:8] + ".jsonl"
}

// gemMeta is a chat's first line.
func gemMeta(f *fx, id string, startSec float64) string {
	return fmt.Sprintf(`{"sessionId":%q,"projectHash":%q,"startTime":%q,"lastUpdated":%q,"kind":"main"}`, id, geminiHash(f.cwd()), iso(startSec), iso(startSec))
}

// gemContext is the checkpoint Gemini writes at start: its injected
// <session_context>, never a title.
const gemContext = `{"$set":{"messages":[{"id":"d04923d3","timestamp":"2026-12-01T17:42:16.923Z","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}]}}`

// gemProject writes projects.json mapping the cwd to slug, and the slug
// dir's .project_root.
func gemProject(f *fx, slug string) {
	f.write(".gemini/projects.json", fmt.Sprintf(`{"projects":{%q:%q}}`, f.cwd(), slug), at(10))
	f.write(".gemini/tmp/"+slug+"/.project_root", f.cwd(), at(10))
}

// gemChild is the relaunched child (the agent) under its launcher.
func gemChild(f *fx, args ...string) (proc.Proc, Agent) {
	f.add(proctest.Proc{PID: gemPPID, PPID: gemShell, Start: gemTick - 50, Argv: append([]string{"node", gemBin}, args...), Env: f.stdEnv(), Cwd: f.cwd()})
	p := f.add(proctest.Proc{PID: gemPID, PPID: gemPPID, Start: gemTick, Argv: append([]string{gemNode, "--max-old-space-size=12052", gemBin}, args...),
		Env: f.stdEnv("GEMINI_CLI_NO_RELAUNCH=true"), Cwd: f.cwd()})
	return p, Agent{Harness: "gemini", PID: gemPID, PPID: gemPPID, Start: gemTick, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

// gemReal is the real 0.61.0 chat of testdata/gemini, moved to the
// fixture's cwd (its path and project hash), begun at sec.
func gemReal(t *testing.T, f *fx, slug string, sec float64, tail string) string {
	b, err := os.ReadFile("testdata/gemini/session-2026-12-01T17-42-f92f9950.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "/tmp/rc-97907184/work/gemproj", f.cwd())
	s = strings.Replace(s, "22bfafbaaa6f39ed41d9ebc027fd75371403b12eaf076155fbf66713b85ba0ba", geminiHash(f.cwd()), 1)
	s = strings.Replace(s, "2026-12-01T17:42:16.908Z", iso(sec), 2)
	rel := "tmp/" + slug + "/chats/" + gemChatName(sec, gemSID)
	f.write(".gemini/"+rel, s+tail, at(sec+20))
	return rel
}

func TestResolveGemini(t *testing.T) {
	runResolve(t, []resolveCase{
		{"gemini/real-0.61.0", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := gemReal(t, f, "x", 121, "")
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript = gemSID, RouteDir, rel
			want.Title, want.Model = "say hello golf", "gemini-3.1-pro-preview"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/torn-last-line-and-repeated-id", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			// The answer re-appended with its tokens and a later model,
			// then a record caught mid-append.
			rel := gemReal(t, f, "x", 121, `{"id":"d0565121-8f9b-42bb-834a-dfa155cd0e27","type":"gemini","content":"mock answer 1","model":"gemini-3.5-flash"}`+"\n"+`{"id":"e1","type":"gemini","content":"half`)
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript = gemSID, RouteDir, rel
			want.Title, want.Model = "say hello golf", "gemini-3.5-flash"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/summary-title-and-commands-skipped", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := "tmp/x/chats/" + gemChatName(125, gemSID2)
			f.write(".gemini/"+rel, jsonl(gemMeta(f, gemSID2, 125), gemContext,
				`{"id":"u1","type":"user","content":[{"text":"/model"}]}`,
				`{"id":"u2","type":"user","content":"  fix   the\nflaky test  "}`,
				`{"id":"g1","type":"gemini","content":"ok","model":"gemini-2.5-pro"}`,
				`{"$set":{"lastUpdated":"2026-12-01T17:42:35.335Z","summary":"Fix the flaky test"}}`), at(130))
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript = gemSID2, RouteDir, rel
			want.Title, want.Model = "Fix the flaky test", "gemini-2.5-pro"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/first-prompt-when-no-summary", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := "tmp/x/chats/" + gemChatName(125, gemSID2)
			f.write(".gemini/"+rel, jsonl(gemMeta(f, gemSID2, 125), gemContext,
				`{"id":"u1","type":"user","content":[{"text":"?"}]}`,
				`{"id":"u2","type":"user","content":"  fix   the\nflaky test  "}`), at(130))
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript = gemSID2, RouteDir, rel
			want.Title = "fix the flaky test"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/legacy-sha256-dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := "tmp/" + geminiHash(f.cwd()) + "/chats/" + gemChatName(125, gemSID2)
			f.write(".gemini/"+rel, jsonl(gemMeta(f, gemSID2, 125), `{"id":"u2","type":"user","content":"hi"}`), at(130))
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript, want.Title = gemSID2, RouteDir, rel, "hi"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/two-begun-since-ambiguous", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			gemReal(t, f, "x", 121, "")
			f.write(".gemini/tmp/x/chats/"+gemChatName(125, gemSID2), jsonl(gemMeta(f, gemSID2, 125)), at(125))
			p, want := gemChild(f)
			want.Via = RouteAmbiguous + " (several chats for this cwd begun since the process started)"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/later-gemini-in-this-cwd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A second gemini started after this one, before the one chat
			// begun since: Gemini deleted this one's unprompted chat at
			// the second's start, so that chat may well be the second's.
			gemProject(f, "x")
			f.write(".gemini/tmp/x/chats/"+gemChatName(125, gemSID2), jsonl(gemMeta(f, gemSID2, 125), gemContext), at(125))
			f.add(proctest.Proc{PID: gemPID + 1, PPID: gemShell, Start: gemTick + 300, Argv: []string{"node", gemBin}, Cwd: f.cwd()})
			p, want := gemChild(f)
			want.Via = RouteAmbiguous + " (the one chat begun since the process started may be a later gemini's in this cwd)"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/later-gemini-elsewhere", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := "tmp/x/chats/" + gemChatName(125, gemSID2)
			f.write(".gemini/"+rel, jsonl(gemMeta(f, gemSID2, 125), gemContext), at(125))
			f.add(proctest.Proc{PID: gemPID + 1, PPID: gemShell, Start: gemTick + 300, Argv: []string{"node", gemBin}, Cwd: f.home})
			f.add(proctest.Proc{PID: gemPID + 2, PPID: gemShell, Start: gemTick + 300, UID: 1001, Argv: []string{"node", gemBin}, Cwd: f.cwd()})
			f.add(proctest.Proc{PID: gemPID + 3, PPID: gemShell, Start: gemTick + 900, Argv: []string{"node", gemBin}, Cwd: f.cwd()}) // after the chat
			p, want := gemChild(f)
			want.Session, want.Via, want.Transcript = gemSID2, RouteDir, rel
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/older-chat-not-taken", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Another, earlier gemini's chat, still being written: begun
			// before this process, not named by it.
			gemProject(f, "x")
			f.write(".gemini/tmp/x/chats/"+gemChatName(60, gemSID2), jsonl(gemMeta(f, gemSID2, 60), `{"id":"u","type":"user","content":"hi"}`), at(200))
			p, want := gemChild(f)
			want.Via = "none (no chat for this cwd begun since the process started)"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/resumed-quiet-argv", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := gemReal(t, f, "x", 30, "")
			p, want := gemChild(f, "--resume", gemSID)
			want.Session, want.Via, want.Transcript = gemSID, RouteArgv+" (the session its argv names; not written since the process started)", rel
			want.Title, want.Model = "say hello golf", "gemini-3.1-pro-preview"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/resumed-written-since", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := gemReal(t, f, "x", 30, "")
			os.Chtimes(f.home+"/.gemini/"+rel, at(130), at(130))
			p, want := gemChild(f, "-r", gemSID)
			want.Session, want.Via, want.Transcript = gemSID, RouteDir+" (the session its argv names, written since the process started)", rel
			want.Title, want.Model = "say hello golf", "gemini-3.1-pro-preview"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/resumed-with-its-stub", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The stub a resume begins under the same id (this minute's
			// name) and the session's own file, re-stated since.
			gemProject(f, "x")
			rel := gemReal(t, f, "x", 30, `{"$set":{"sessionId":"`+gemSID+`"}}`+"\n"+gemContext+"\n")
			os.Chtimes(f.home+"/.gemini/"+rel, at(140), at(140))
			f.write(".gemini/tmp/x/chats/"+gemChatName(125, gemSID), jsonl(gemMeta(f, gemSID, 125), gemContext), at(125))
			p, want := gemChild(f, "--resume", gemSID)
			want.Session, want.Via, want.Transcript = gemSID, RouteDir+" (the session its argv names, written since the process started)", rel
			want.Title, want.Model = "say hello golf", "gemini-3.1-pro-preview"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/fresh-session-id", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			rel := "tmp/x/chats/" + gemChatName(125, gemSID2)
			f.write(".gemini/"+rel, jsonl(gemMeta(f, gemSID2, 125), gemContext), at(125))
			p, want := gemChild(f, "--session-id", gemSID2)
			want.Session, want.Via, want.Transcript = gemSID2, RouteDir+" (the session its argv names, written since the process started)", rel
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/relaunched-by-a-move", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// 9harness started the launcher; the child is the agent.
			gemProject(f, "x")
			rel := gemReal(t, f, "x", 30, "")
			p, want := gemChild(f, "--resume", gemSID)
			env := f.env(".gemini")
			env.Relaunches = &Relaunches{}
			env.Relaunches.Note(gemPPID, gemTick-51, rel) // a reused pid's record
			env.Relaunches.Note(gemPPID, gemTick-50, rel)
			want.Session, want.Via, want.Transcript = gemSID, RouteRelaunch, rel
			want.Title, want.Model = "say hello golf", "gemini-3.1-pro-preview"
			return gemini{}, env, p, want
		}},
		{"gemini/project-root-names-another-dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			f.write(".gemini/tmp/x/.project_root", "/elsewhere", at(10))
			gemReal(t, f, "x", 121, "")
			p, want := gemChild(f)
			want.Via = "none (no project dir for this cwd)"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/other-project-hash-and-subagent", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			f.write(".gemini/tmp/x/chats/"+gemChatName(125, gemSID), strings.Replace(jsonl(gemMeta(f, gemSID, 125)), geminiHash(f.cwd()), geminiHash("/other"), 1), at(125))
			f.write(".gemini/tmp/x/chats/"+gemChatName(126, gemSID2), strings.Replace(jsonl(gemMeta(f, gemSID2, 126)), `"main"`, `"subagent"`, 1), at(126))
			p, want := gemChild(f)
			want.Via = "none (no chat for this cwd begun since the process started)"
			return gemini{}, f.env(".gemini"), p, want
		}},
		{"gemini/no-chat", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			gemProject(f, "x")
			p, want := gemChild(f)
			want.Via = "none (no chat for this cwd)"
			return gemini{}, f.env(".gemini"), p, want
		}},
	})
}

func TestClassifyGemini(t *testing.T) {
	bin := "/usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js"
	launcher := []string{"node", gemBin}
	rows := []struct {
		name   string
		argv   []string
		parent []string
		want   Kind
	}{
		{"launcher", launcher, []string{"-bash"}, Helper},
		{"child", []string{gemNode, "--max-old-space-size=12052", gemBin}, launcher, Session},
		{"child-no-memory-flag", []string{gemNode, gemBin, "--resume", gemSID}, append(launcher, "--resume", gemSID), Session},
		{"child-of-bundle-path", []string{gemNode, bin}, []string{"node", bin}, Session},
		{"sea-child", []string{"/opt/gemini", "-m", "gemini-2.5-pro"}, []string{"/opt/gemini", "-m", "gemini-2.5-pro"}, Session},
		{"one-shot", []string{gemNode, gemBin, "-p", "hi"}, launcher, Helper},
		{"list-sessions", []string{gemNode, gemBin, "--list-sessions"}, launcher, Helper},
		{"mcp", []string{gemNode, gemBin, "mcp", "list"}, launcher, Helper},
		{"acp", []string{gemNode, gemBin, "--acp"}, launcher, Helper},
		{"model-value-not-subcommand", []string{gemNode, gemBin, "-m", "mcp"}, launcher, Session},
		{"not-gemini", []string{"node", "/srv/app/server.js"}, launcher, None},
		{"gemini-word-in-path", []string{"node", "/srv/gemini-proxy/index.js"}, nil, None},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if got := (gemini{}).Classify(proc.Proc{Argv: r.argv}, proc.Proc{Argv: r.parent}); got != r.want {
				t.Errorf("Classify(%q, parent %q) = %v, want %v", r.argv, r.parent, got, r.want)
			}
			h, _ := classify(proc.Proc{Argv: r.argv}, proc.Proc{Argv: r.parent})
			if r.want != None && (h == nil || h.Name() != "gemini") {
				t.Errorf("%q is claimed by %v, not gemini", r.argv, h)
			}
		})
	}
}

// TestScanGemini: the launcher and the node wrapper are never listed; the
// relaunched child is; a gemini that does not relaunch (its environment
// says so, as after a move or by the user's choice) is listed alone; a
// one-shot never is, whatever its environment.
func TestScanGemini(t *testing.T) {
	f := newFx(t)
	launcher := []string{"node", gemBin}
	procs := []proctest.Proc{
		{PID: 100, PPID: 1, Argv: []string{"-bash"}},
		{PID: 200, PPID: 100, Argv: launcher, Env: []string{"HOME=" + f.home}},
		{PID: 201, PPID: 200, Argv: []string{gemNode, "--max-old-space-size=12052", gemBin}, Env: []string{"GEMINI_CLI_NO_RELAUNCH=true"}},
		{PID: 210, PPID: 100, Argv: []string{"node", gemBin, "--resume", gemSID}, Env: []string{"GEMINI_CLI_NO_RELAUNCH=true"}},
		{PID: 220, PPID: 100, Argv: launcher}, // a launcher whose child has not started yet
		{PID: 230, PPID: 100, Argv: []string{"node", gemBin, "-p", "hi"}, Env: []string{"GEMINI_CLI_NO_RELAUNCH=true"}},
		{PID: 240, PPID: 100, UID: 1001, Argv: []string{"node", gemBin}, Env: []string{"GEMINI_CLI_NO_RELAUNCH=true"}},
		{PID: 250, PPID: 100, Argv: launcher, Env: []string{"GEMINI_CLI_NO_RELAUNCH="}},
	}
	for _, p := range procs {
		if p.UID == 0 {
			p.UID = 1000
		}
		if err := proctest.Add(f.procDir, p); err != nil {
			t.Fatal(err)
		}
	}
	found, err := Scan(proc.New(f.procDir), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range found {
		got = append(got, fmt.Sprintf("%s/%d", fd.Harness, fd.Proc.PID))
	}
	if want := []string{"gemini/201", "gemini/210"}; !slices.Equal(got, want) {
		t.Errorf("Scan: got %v, want %v", got, want)
	}
}

func TestResumeGemini(t *testing.T) {
	f := newFx(t)
	gemProject(f, "x")
	rel := gemReal(t, f, "x", 121, "")
	quiet := "tmp/x/chats/" + gemChatName(125, gemSID2)
	f.write(".gemini/"+quiet, jsonl(gemMeta(f, gemSID2, 125), gemContext), at(125))
	env := f.env(".gemini")
	rows := []struct {
		name    string
		a       Agent
		want    []string
		wantErr string
	}{
		{"resume", Agent{Session: gemSID, Transcript: rel, Via: RouteDir}, []string{"gemini", "--resume", gemSID}, ""},
		{"never-prompted", Agent{Session: gemSID2, Transcript: quiet, Via: RouteDir}, nil, NothingYet},
		{"no-chat", Agent{Via: "none (no chat for this cwd)"}, nil, NothingYet},
		{"ambiguous", Agent{Via: RouteAmbiguous + " (several chats for this cwd begun since the process started)"}, nil, "session unresolved (via ambiguous"},
		{"gone", Agent{Session: gemSID, Transcript: "tmp/x/chats/" + gemChatName(1, gemSID), Via: RouteDir}, nil, NothingYet},
		{"option-shaped", Agent{Session: "--yolo", Transcript: rel}, nil, "session unresolved"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, err := (gemini{}).Resume(r.a, env)
			if r.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), r.wantErr) || !errs.Is(err, errs.Permission) {
					t.Errorf("got %q, %v; want a Permission error saying %q", got, err, r.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, r.want) {
				t.Errorf("got %q, %v; want %q", got, err, r.want)
			}
		})
	}
	// The agent's own flags a resume keeps, and the ones it drops (its
	// old --resume, a prompt) with their values.
	a := Agent{Session: gemSID, Transcript: rel, Via: RouteDir,
		Argv: []string{gemNode, "--max-old-space-size=12052", gemBin, "--resume", "latest", "-m", "gemini-2.5-pro", "--approval-mode", "auto_edit", "-y", "-i", "do it", "--include-directories", "/a", "/b"}}
	argv, kept, dropped, err := ResumeArgv(gemini{}, a, env)
	want := []string{"gemini", "--resume", gemSID, "--model", "gemini-2.5-pro", "--approval-mode", "auto_edit", "--yolo", "--include-directories", "/a", "--include-directories", "/b"}
	if err != nil || !slices.Equal(argv, want) {
		t.Errorf("ResumeArgv = %q, %v; want %q", argv, err, want)
	}
	if !slices.Equal(dropped, []string{"--resume", "-i"}) || len(kept) != 4 {
		t.Errorf("kept %q dropped %q", kept, dropped)
	}
}
