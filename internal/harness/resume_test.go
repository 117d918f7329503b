package harness

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// fixture reads testdata/name with each {{KEY}} replaced.
func fixture(t *testing.T, name string, kv ...string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(kv); i += 2 {
		s = strings.ReplaceAll(s, "{{"+kv[i]+"}}", kv[i+1])
	}
	if strings.Contains(s, "{{") {
		t.Fatalf("%s: a placeholder is left: %s", name, s)
	}
	return s
}

const sid197 = "5ca8b210-abd8-4d5b-9996-78342b3fe993" // the session of testdata/claude-2.1.197

// claude197 is a Claude Code 2.1.197 agent: its registry record as 2.1.197
// writes it at startup (no pidDomain), and, when prompted, its transcript.
func claude197(f *fx, prompted bool) (proc.Proc, Env) {
	p := f.add(proctest.Proc{PID: ccPID, PPID: 344980, Start: ccTick, Comm: "claude", Argv: []string{"claude"}, Env: f.stdEnv(), Cwd: f.cwd()})
	f.write(".claude/sessions/"+strconv.Itoa(ccPID)+".json", fixture(f.t, "claude-2.1.197/registry.json",
		"PID", strconv.Itoa(ccPID), "CWD", f.cwd(), "STARTED_MS", strconv.FormatInt(at(505).UnixMilli(), 10), "PROCSTART", strconv.Itoa(ccTick)), at(505))
	if prompted {
		f.write(".claude/projects/"+claudeSanitize(f.cwd())+"/"+sid197+".jsonl", fixture(f.t, "claude-2.1.197/transcript.jsonl", "CWD", f.cwd()), at(600))
	}
	return p, f.env(".claude")
}

// piAgent is a pi process in f.cwd() (its argv hidden by process.title),
// with transcripts written at the given times (seconds after boot; the
// process started at 120 s).
func piAgent(f *fx, times ...float64) (proc.Proc, Env, []string) {
	p, _ := ompProc(f, "pi", f.cwd())
	var rels []string
	for i, sec := range times {
		id := "01a231bc-bb7a-75a1-bb95-9fa4b05df36" + strconv.Itoa(i)
		rel := "agent/sessions/" + piLegacyDir(f.cwd()) + "/2026-12-01T13-13-0" + strconv.Itoa(i) + "-074Z_" + id + ".jsonl"
		f.write(".pi/"+rel, fixture(f.t, "pi-0.73.1/session.jsonl", "ID", id, "CWD", f.cwd()), at(sec))
		rels = append(rels, rel)
	}
	return p, f.env(".pi"), rels
}

// Guards rule 5: what cannot be resumed is refused before anything is
// stopped, with the words "nothing to resume yet". A real Claude that was
// started and never prompted has its registry record and no transcript:
// "claude --resume" of it exits at once and the agent would be lost.
func TestNothingToResumeYet(t *testing.T) {
	rows := []struct {
		name    string
		setup   func(f *fx) (Harness, Env, Agent)
		wantErr string // "" for a resume that goes ahead
	}{
		{"claude/never-prompted", func(f *fx) (Harness, Env, Agent) {
			p, env := claude197(f, false)
			a := claude{}.Resolve(env, p)
			if a.Session != sid197 || a.Via != "registry" || a.Transcript != "" {
				f.t.Fatalf("the unprompted agent resolved to %q via %q, transcript %q", a.Session, a.Via, a.Transcript)
			}
			return claude{}, env, a
		}, NothingYet},
		{"claude/print-run-not-persisted", func(f *fx) (Harness, Env, Agent) {
			p, env := claude197(f, false)
			a := claude{}.Resolve(env, p)
			a.Argv = []string{"claude", "-p", "--no-session-persistence", "summarize"}
			return claude{}, env, a
		}, NothingYet + ": a print run with --no-session-persistence"},
		{"claude/prompted", func(f *fx) (Harness, Env, Agent) {
			p, env := claude197(f, true)
			return claude{}, env, claude{}.Resolve(env, p)
		}, ""},
		{"claude/transcript-gone-since", func(f *fx) (Harness, Env, Agent) {
			p, env := claude197(f, true)
			a := claude{}.Resolve(env, p)
			os.Remove(f.home + "/.claude/" + a.Transcript)
			return claude{}, env, a
		}, NothingYet},
		{"codex/no-rollout", func(f *fx) (Harness, Env, Agent) {
			// A session known by some route, its rollout not (yet) on disk.
			rel := "sessions/2026/12/01/rollout-2026-12-01T13-13-02-019e763f-ff0c-7683-a4e9-a17e2bf964fb.jsonl"
			return codex{}, f.env(".codex"), Agent{Harness: "codex", Session: "019e763f-ff0c-7683-a4e9-a17e2bf964fb", Transcript: rel, Via: "fd"}
		}, NothingYet},
		{"codex/rollout", func(f *fx) (Harness, Env, Agent) {
			rel := "sessions/2026/12/01/rollout-2026-12-01T13-13-02-019e763f-ff0c-7683-a4e9-a17e2bf964fb.jsonl"
			f.write(".codex/"+rel, `{"type":"session_meta","payload":{"id":"019e763f-ff0c-7683-a4e9-a17e2bf964fb"}}`+"\n", at(600))
			return codex{}, f.env(".codex"), Agent{Harness: "codex", Session: "019e763f-ff0c-7683-a4e9-a17e2bf964fb", Transcript: rel, Via: "fd"}
		}, ""},
		{"pi/no-session-file", func(f *fx) (Harness, Env, Agent) {
			p, env, _ := piAgent(f)
			return pi{}, env, pi{}.Resolve(env, p)
		}, NothingYet},
		{"pi/session-file", func(f *fx) (Harness, Env, Agent) {
			p, env, _ := piAgent(f, 600)
			return pi{}, env, pi{}.Resolve(env, p)
		}, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFx(t)
			h, env, a := r.setup(f)
			argv, err := h.Resume(a, env)
			if r.wantErr == "" {
				if err != nil || len(argv) < 3 {
					t.Fatalf("%s: Resume: %q %v", r.name, argv, err)
				}
				return
			}
			if err == nil || !errs.Is(err, errs.Permission) || !strings.Contains(err.Error(), r.wantErr) {
				t.Fatalf("%s: Resume: %q %v; want a Permission error saying %q", r.name, argv, err, r.wantErr)
			}
			if _, _, _, err := ResumeArgv(h, a, env); err == nil {
				t.Errorf("%s: ResumeArgv went ahead", r.name)
			}
		})
	}
}

// Claude 2.1.197's facts: a registry record without pidDomain is believed
// (on procStart), one with another pid namespace's still is not, and the
// title follows agent-name over custom-title over ai-title.
func TestClaude2_1(t *testing.T) {
	f := newFx(t)
	p, env := claude197(f, true)
	a := claude{}.Resolve(env, p)
	if a.Session != sid197 || a.Via != "registry" || !a.Corroborated() {
		t.Fatalf("resolved %q via %q", a.Session, a.Via)
	}
	if a.Title != "the agent's name" || a.Model != "claude-opus-4-8" || a.Name != "claude-83" || a.Status != "idle" {
		t.Errorf("title %q model %q name %q status %q", a.Title, a.Model, a.Name, a.Status)
	}
	// The same record, from another pid namespace.
	rec := fixture(t, "claude-2.1.197/registry.json", "PID", strconv.Itoa(ccPID), "CWD", f.cwd(), "STARTED_MS", "1", "PROCSTART", strconv.Itoa(ccTick))
	rec = strings.Replace(rec, `"version"`, `"pidDomain":"linux::pid:[4026532999]","version"`, 1)
	f.write(".claude/sessions/"+strconv.Itoa(ccPID)+".json", rec, at(505))
	if a := (claude{}).Resolve(env, p); a.Session != "" || !strings.HasPrefix(a.Via, "none (registry record is from another pid namespace") {
		t.Errorf("another namespace's record: %q via %q", a.Session, a.Via)
	}
}

// A quiet pi (a resumed pi writes nothing until its
// next answer, hides its argv and holds no fd) resolves exactly when
// 9harness relaunched it naming the file, or when its cwd has one
// transcript; otherwise nothing is guessed.
func TestPiQuiet(t *testing.T) {
	rows := []struct {
		name     string
		times    []float64 // transcripts' mtimes (the process started at 120 s)
		record   int       // index of the transcript the relaunch record names; -1 none, -2 a missing file
		named    bool      // the chosen transcript has a session_info name
		want     int       // the transcript resolved to, -1 none
		via      string
		corrob   bool
		title    string
		resumeOK bool
	}{
		{"relaunched, two old transcripts", []float64{50, 60}, 0, false, 0, "relaunch", true, "say hello charlie", true},
		{"relaunched, named", []float64{50, 60}, 1, true, 1, "relaunch", true, "the pi title", true},
		{"one old transcript", []float64{50}, -1, false, 0, "only (the one transcript for this cwd; none written since the process started)", false, "say hello charlie", true},
		{"two old transcripts", []float64{50, 60}, -1, false, -1, "ambiguous (several transcripts for this cwd, none written since the process started)", false, "", false},
		{"record of a missing file", []float64{50, 60}, -2, false, -1, "ambiguous (several transcripts for this cwd, none written since the process started)", false, "", false},
		{"written since the start", []float64{50, 600}, -1, false, 1, "dir", true, "say hello charlie", true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFx(t)
			p, env, rels := piAgent(f, r.times...)
			env.Relaunches = &Relaunches{}
			env.Relaunches.Note(p.PID+1, p.Start, rels[0]) // another process's record
			env.Relaunches.Note(p.PID, p.Start+1, rels[0]) // a reused pid's
			switch {
			case r.record >= 0:
				env.Relaunches.Note(p.PID, p.Start, rels[r.record])
			case r.record == -2:
				env.Relaunches.Note(p.PID, p.Start, "agent/sessions/"+piLegacyDir(f.cwd())+"/gone.jsonl")
			}
			if r.named {
				b, _ := os.ReadFile(f.home + "/.pi/" + rels[r.want])
				f.write(".pi/"+rels[r.want], string(b)+fixture(t, "pi-0.73.1/named.jsonl"), at(r.times[r.want]))
			}
			a := pi{}.Resolve(env, p)
			wantRel, wantSID := "", ""
			if r.want >= 0 {
				wantRel, wantSID = rels[r.want], piFileID(rels[r.want])
			}
			if a.Transcript != wantRel || a.Session != wantSID || a.Via != r.via || a.Corroborated() != r.corrob || a.Title != r.title {
				t.Errorf("%s: got %q %q via %q (corroborated %v) title %q; want %q via %q (%v) title %q",
					r.name, a.Session, a.Transcript, a.Via, a.Corroborated(), a.Title, wantRel, r.via, r.corrob, r.title)
			}
			if r.want >= 0 && a.Model != "mock-pi-model" {
				t.Errorf("%s: model %q", r.name, a.Model)
			}
			_, err := pi{}.Resume(a, env)
			if (err == nil) != r.resumeOK {
				t.Errorf("%s: Resume: %v", r.name, err)
			}
		})
	}
}

// omp keeps its writer fd, so a transcript older than the process is never
// taken as its own, even when it is the only one.
func TestOmpNoOnlyRoute(t *testing.T) {
	f := newFx(t)
	f.write(".omp/agent/sessions/-src-x/a_"+ompSID+".jsonl", jsonl(ompHeader(ompSID, f.cwd(), "")), at(50))
	p, _ := ompProc(f, "omp", f.cwd())
	if a := (omp{}).Resolve(f.env(".omp"), p); a.Session != "" || a.Via != "none (no transcript for this cwd written since the process started)" {
		t.Errorf("got %q via %q", a.Session, a.Via)
	}
}

func TestRelaunches(t *testing.T) {
	var nilRec *Relaunches
	nilRec.Note(1, 1, "x")
	if _, ok := nilRec.Lookup(1, 1); ok {
		t.Error("a nil record found something")
	}
	r := &Relaunches{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				r.Note(g*1000+i+1, uint64(i), "t"+strconv.Itoa(i))
				r.Lookup(g*1000+i, uint64(i))
			}
		}(g)
	}
	wg.Wait()
	if n := len(r.m); n != maxRelaunches || len(r.order) != maxRelaunches {
		t.Errorf("%d entries kept, want the bound %d", n, maxRelaunches)
	}
	r.Note(5, 7, "a")
	r.Note(5, 7, "b") // the same process again: replaced, not added
	if got, ok := r.Lookup(5, 7); !ok || got != "b" {
		t.Errorf("Lookup(5, 7) = %q %v", got, ok)
	}
	if _, ok := r.Lookup(5, 8); ok {
		t.Error("another start time matched")
	}
}

func TestRoute(t *testing.T) {
	rows := []struct {
		via     string
		session string
		route   string
		corrob  bool
	}{
		{"registry", "s", RouteRegistry, true},
		{"registry (2 leases on this pid; the most recently updated)", "s", RouteRegistry, true},
		{"fd", "s", RouteFD, true},
		{"dir", "s", RouteDir, true},
		{"relaunch", "s", RouteRelaunch, true},
		{"transcript (registry session x is stale after /clear)", "s", RouteTranscript, true},
		{"argv (no registry; session from argv)", "s", RouteArgv, false},
		{"only (the one transcript for this cwd; none written since the process started)", "s", RouteOnly, false},
		{"ambiguous (several)", "", RouteAmbiguous, false},
		{"none (no registry record)", "", RouteNone, false},
		{"", "", RouteNone, false},
		{"fd", "", RouteFD, false}, // no session, nothing to corroborate
	}
	for _, r := range rows {
		a := Agent{Via: r.via, Session: r.session}
		if a.Route() != r.route || a.Corroborated() != r.corrob {
			t.Errorf("via %q: route %q corroborated %v; want %q %v", r.via, a.Route(), a.Corroborated(), r.route, r.corrob)
		}
	}
}

// Guards rule 7: the flags a resume keeps, in both spellings, each value
// one argv element; everything else dropped and named by its name only.
func TestResumeArgv(t *testing.T) {
	const csid = "019e763f-ff0c-7683-a4e9-a17e2bf964fb"
	long := strings.Repeat("m", 257)
	rows := []struct {
		name    string
		h       Harness
		argv    []string
		want    []string // after the fixed argv (codex: between "resume" and the id)
		kept    []string
		dropped []string
	}{
		{"codex/both-forms", codex{}, []string{"codex", "-c", "features.daemon_auto_start=false", "--config=model_providers.mock.base_url=\"http://127.0.0.1:9\"", "-m", "gpt-5", "--profile=work", "-s", "workspace-write", "--ask-for-approval", "never", "-a=on-request"},
			[]string{"--config", "features.daemon_auto_start=false", "--config", "model_providers.mock.base_url=\"http://127.0.0.1:9\"", "--model", "gpt-5", "--profile", "work", "--sandbox", "workspace-write", "--ask-for-approval", "never", "--ask-for-approval", "on-request"},
			[]string{"--config", "--model", "--profile", "--sandbox", "--ask-for-approval"}, nil},
		{"codex/dropped", codex{}, []string{"codex", "--cd", "/secret/dir", "-i", "img.png", "--yolo", "resume", "--last", "fix the bug", "-m", "o3"},
			[]string{"--model", "o3"}, []string{"--model"}, []string{"--cd", "-i", "--yolo", "--last"}},
		{"codex/hostile", codex{}, []string{"codex", "-m", "-dx", "-c", "a=1\nb=2", "-c", "a\x00b", "-s", "read-only; rm -rf /", "--model=", "-m", long, "-p", "ok", "-cKEY=secret"},
			[]string{"--profile", "ok"}, []string{"--profile"}, []string{"--model", "-d", "--config", "--sandbox", "-c"}},
		{"codex/missing-value", codex{}, []string{"codex", "-m"}, nil, nil, []string{"--model"}},
		{"codex/after-dashdash", codex{}, []string{"codex", "--", "-m", "x"}, nil, nil, nil},
		{"claude/flags", claude{}, []string{"claude", "--model", "opus", "--permission-mode=acceptEdits", "--dangerously-skip-permissions", "--add-dir", "/a", "/b", "--settings", `{"apiKeyHelper":"x"}`, "--mcp-config=/m.json", "--resume", ccSID, "-p", "--append-system-prompt", "--model", "prompt words"},
			[]string{"--model", "opus", "--permission-mode", "acceptEdits", "--dangerously-skip-permissions", "--add-dir", "/a", "--add-dir", "/b", "--settings", `{"apiKeyHelper":"x"}`, "--mcp-config", "/m.json"},
			[]string{"--model", "--permission-mode", "--dangerously-skip-permissions", "--add-dir", "--settings", "--mcp-config"}, []string{"--resume", "-p", "--append-system-prompt"}},
		// A print run resumes as the interactive TUI: neither -p nor the
		// prompt nor the print-only flags are kept.
		{"claude/print-run", claude{}, []string{"claude", "-p", "fix the flaky test", "--output-format", "stream-json", "--verbose", "--max-turns", "30", "--permission-mode", "bypassPermissions", "--allowedTools", "Bash,Edit"},
			[]string{"--permission-mode", "bypassPermissions"}, []string{"--permission-mode"}, []string{"-p", "--output-format", "--verbose", "--max-turns", "--allowedTools"}},
		{"claude/node", claude{}, []string{"node", "--no-warnings", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--model", "sonnet"},
			[]string{"--model", "sonnet"}, []string{"--model"}, nil},
		{"claude/bool-with-value", claude{}, []string{"claude", "--dangerously-skip-permissions=true", "--permission-mode", "bad mode"}, nil, nil, []string{"--dangerously-skip-permissions", "--permission-mode"}},
		{"claude/odd-names", claude{}, []string{"claude", "--$(id)", "--" + long}, nil, nil, []string{"-?"}},
		{"pi/hidden-argv", pi{}, []string{"pi"}, nil, nil, nil},
		{"pi/visible", pi{}, []string{"pi", "--provider", "mock", "--model=mock-pi-model", "--session", "/x.jsonl", "--api-key", "sk-secret"},
			[]string{"--provider", "mock", "--model", "mock-pi-model"}, []string{"--provider", "--model"}, []string{"--session", "--api-key"}},
		{"hermes/none", hermes{}, []string{"hermes", "--model", "x"}, nil, nil, []string{"--model"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFx(t)
			a := Agent{Harness: r.h.Name(), Session: ccSID, Transcript: "t.jsonl", Argv: r.argv}
			env := Env{}
			switch r.h.(type) {
			case codex:
				a.Session = csid
			case pi:
				f.write(".pi/t.jsonl", "{}\n", at(600))
				env = f.env(".pi")
			case hermes:
				a.Session = "20260920_100000_a1b2c3"
			}
			argv, kept, dropped, err := ResumeArgv(r.h, a, env)
			if err != nil {
				t.Fatal(err)
			}
			fixed, _ := r.h.Resume(a, env)
			want := append(slices.Clone(fixed), r.want...)
			if _, ok := r.h.(codex); ok {
				want = append(append([]string{"codex", "resume"}, r.want...), csid)
			}
			if !slices.Equal(argv, want) {
				t.Errorf("argv\n %q\nwant\n %q", argv, want)
			}
			if !slices.Equal(kept, r.kept) || !slices.Equal(dropped, r.dropped) {
				t.Errorf("kept %q dropped %q; want %q %q", kept, dropped, r.kept, r.dropped)
			}
			// A value never shows in the names.
			for _, n := range append(kept, dropped...) {
				if strings.ContainsAny(n, "=/ \n{") || strings.Contains(n, "secret") || len(n) > 64 {
					t.Errorf("name %q carries a value", n)
				}
			}
		})
	}
}

// FuzzResumeArgv: whatever the agent's argv, the resume argv is the fixed
// argv plus pairs of an allowlisted flag and a valid value (or a lone
// allowlisted boolean flag), and the names never carry a value.
func FuzzResumeArgv(f *testing.F) {
	f.Add("codex\x00-c\x00a=b\x00--model=x\x00-dx\x00--\x00-m\x00y")
	f.Add("claude\x00--add-dir\x00/a\x00/b\x00--settings\x00{\"k\":1}\x00--dangerously-skip-permissions\x00-p\x00hi")
	f.Add("node\x00/x/claude-code/cli.js\x00--model\x00\n\x00--mcp-config=")
	f.Add("pi\x00--provider\x00p\x00--model\x00-x")
	f.Fuzz(func(t *testing.T, cmdline string) {
		argv := strings.Split(cmdline, "\x00")
		for _, h := range []Harness{claude{}, codex{}, pi{}} {
			a := Agent{Session: ccSID, Transcript: "t.jsonl", Argv: argv}
			if h.Name() == "codex" {
				a.Session = "019e763f-ff0c-7683-a4e9-a17e2bf964fb"
			}
			env := Env{}
			fixed, err := h.Resume(a, env)
			if err != nil {
				continue // pi needs a root; nothing to check
			}
			got, kept, dropped, err := ResumeArgv(h, a, env)
			if err != nil {
				t.Fatal(err)
			}
			extra := got[len(fixed)-1 : len(got)-1] // codex: between resume and the id
			if h.Name() != "codex" {
				extra = got[len(fixed):]
			}
			for i := 0; i < len(extra); i++ {
				k := findKeep(keeps[h.Name()], extra[i])
				if k == nil || k.emit != extra[i] {
					t.Fatalf("%s: element %q is not an allowlisted flag: %q", h.Name(), extra[i], got)
				}
				if k.value {
					i++
					if i >= len(extra) || !validValue(extra[i], k) {
						t.Fatalf("%s: flag %s without a valid value: %q", h.Name(), k.emit, got)
					}
				}
			}
			for _, n := range append(kept, dropped...) {
				if !strings.HasPrefix(n, "-") || strings.ContainsAny(n, "= \n\x00") || len(n) > 64 {
					t.Fatalf("name %q", n)
				}
			}
		}
	})
}
