package harness

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	ccSID  = "1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55"
	ccSIDB = "2b8e1c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
	ccSIDC = "3c9f2d4e-5a6b-4c7d-9e8f-0a1b2c3d4e5f"
	ccPID  = 345104
	ccTick = 50424 // starttime: 504.24 s after boot
)

// ccUser and ccAssistant are Claude transcript lines.
func ccUser(sid, cwd, text string, sec float64) string {
	return fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":"2.1.284","gitBranch":"main","entrypoint":"cli","type":"user","message":{"role":"user","content":%q},"uuid":"aaaa0000-0000-4000-8000-000000000001","timestamp":%q}`, cwd, sid, text, iso(sec))
}

func ccAssistant(sid, cwd, model string, sec float64) string {
	return fmt.Sprintf(`{"parentUuid":"aaaa0000-0000-4000-8000-000000000001","isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":"2.1.284","type":"assistant","message":{"id":"msg_01","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"On it."}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":3}},"requestId":"req_01","uuid":"aaaa0000-0000-4000-8000-000000000002","timestamp":%q}`, cwd, sid, model, iso(sec))
}

// ccRecord is a modern registry record (Claude Code 2.1.284 on Linux).
func ccRecord(sid, cwd, procStart, pidDomain string) string {
	return fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"startedAt":%d,"procStart":%q,"pidDomain":%q,"version":"2.1.284","kind":"interactive","entrypoint":"cli","name":"goblin","nameSource":"derived","status":"busy","updatedAt":%d,"statusUpdatedAt":%d}`,
		ccPID, sid, cwd, at(505).UnixMilli(), procStart, pidDomain, at(900).UnixMilli(), at(900).UnixMilli())
}

// ccFixture is a Claude home with the main session's transcript and its
// sub-agents, and the agent's process. It returns the process, the project
// dir and the base Agent (what /proc alone says).
func ccFixture(f *fx, cwd string, argv ...string) (proc.Proc, string, Agent) {
	if len(argv) == 0 {
		argv = []string{"claude"}
	}
	p := f.add(proctest.Proc{PID: ccPID, PPID: 344980, Start: ccTick, Comm: "2.1.212) (x", Argv: argv, Env: f.stdEnv(), Cwd: cwd})
	proj := "projects/" + claudeSanitize(cwd)
	f.write(".claude/"+proj+"/"+ccSID+".jsonl", jsonl(
		`{"type":"summary","summary":"Fix flaky login test","leafUuid":"7f3c9d2e-1111-4222-8333-444455556666"}`,
		`{"type":"file-history-snapshot","messageId":"m1","snapshot":{},"isSnapshotUpdate":false}`,
		ccUser(ccSID, cwd, "fix the build", 510),
		ccAssistant(ccSID, cwd, "claude-sonnet-4-5-20250929", 511),
		ccAssistant(ccSID, cwd, "claude-opus-4-6", 512),
		`{"type":"ai-title","aiTitle":"Fixing the build","sessionId":"`+ccSID+`","timestamp":"`+iso(513)+`"}`,
		`{"type":"custom-title","customTitle":"the session's title","sessionId":"`+ccSID+`"}`,
		`{"type":"last-prompt","lastPrompt":"fix the build","sessionId":"`+ccSID+`"}`,
		ccAssistant(ccSID, cwd, "<synthetic>", 514),
	), at(600))
	sub := ".claude/" + proj + "/" + ccSID + "/subagents/"
	f.write(sub+"agent-ad2d877.jsonl", jsonl(
		`{"parentUuid":null,"isSidechain":true,"agentId":"ad2d877","userType":"external","cwd":"`+cwd+`","sessionId":"`+ccSID+`","version":"2.1.284","type":"user","message":{"role":"user","content":"Explore the repo"},"uuid":"bbbb0000-0000-4000-8000-000000000001","timestamp":"`+iso(520)+`"}`,
		ccAssistant(ccSID, cwd, "claude-haiku-4-5", 521),
	), at(530))
	f.write(sub+"agent-ad2d877.meta.json", `{"agentType":"Explore","description":"Find the build script"}`, at(520))
	f.write(sub+"workflows/run1/agent-a0123456789abcdef.jsonl", jsonl(ccAssistant(ccSID, cwd, "claude-sonnet-4-5", 540)), at(540))
	base := Agent{Harness: "claude", PID: ccPID, PPID: 344980, Start: ccTick, Cwd: cwd, Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
	return p, proj, base
}

// ccSubs is what ccFixture's sub-agents resolve to.
func ccSubs(proj string) []Sub {
	sub := proj + "/" + ccSID + "/subagents/"
	return []Sub{
		{Name: "Explore-ad2d877", Model: "claude-haiku-4-5", Transcript: sub + "agent-ad2d877.jsonl"},
		{Name: "agent-a0123456789abcdef", Model: "claude-sonnet-4-5", Transcript: sub + "workflows/run1/agent-a0123456789abcdef.jsonl"},
	}
}

// ccResolved is the base agent resolved through the registry to ccSID.
func ccResolved(base Agent, proj string) Agent {
	a := base
	a.Session, a.Via, a.Transcript = ccSID, "registry", proj+"/"+ccSID+".jsonl"
	a.Name, a.Status = "goblin", "busy"
	a.Title, a.Model = "the session's title", "claude-opus-4-6"
	a.Agents = ccSubs(proj)
	return a
}

func TestResolveClaude(t *testing.T) {
	const domain = "linux::pid:[4026531836]"
	runResolve(t, []resolveCase{
		{"claude/registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A cwd with '.' and '_' (both become '-'), a comm holding ") (",
			// and a torn temp record and a peer key beside the record.
			cwd := f.home + "/src/my_proj.x"
			p, proj, base := ccFixture(f, cwd)
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, cwd, "50424", domain), at(900))
			f.write(".claude/sessions/345104.json.0123456789abcdef.tmp", ccRecord(ccSIDC, cwd, "50424", domain), at(901))
			f.write(".claude/sessions/345104.ab12cd34.key", "peer-token", at(901))
			if !strings.HasSuffix(proj, "-src-my-proj-x") {
				t.Fatalf("project dir %q", proj)
			}
			return claude{}, f.env(".claude"), p, ccResolved(base, proj)
		}},
		{"claude/legacy-subagent-files", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Old builds wrote agent-<id>.jsonl straight into the project
			// dir; only those naming this session are its.
			p, proj, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", domain), at(900))
			f.write(".claude/"+proj+"/agent-0ld1d.jsonl", jsonl(ccAssistant(ccSID, f.cwd(), "claude-3-5-haiku", 530)), at(530))
			f.write(".claude/"+proj+"/agent-07her.jsonl", jsonl(ccAssistant(ccSIDB, f.cwd(), "claude-3-5-haiku", 530)), at(530))
			want := ccResolved(base, proj)
			want.Agents = slices.Insert(want.Agents, 1, Sub{Name: "agent-0ld1d", Model: "claude-3-5-haiku", Transcript: proj + "/agent-0ld1d.jsonl"})
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/old-shape", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, proj, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", fmt.Sprintf(`{"pid":345104,"sessionId":%q,"cwd":%q,"startedAt":%d,"kind":"interactive","entrypoint":"cli"}`, ccSID, f.cwd(), at(505).UnixMilli()), at(505))
			want := ccResolved(base, proj)
			want.Name, want.Status = "", ""
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/reused-pid", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, _, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "49999", domain), at(400))
			base.Via = `none (registry record is another process's: procStart "49999", this process started at 50424)`
			return claude{}, f.env(".claude"), p, base
		}},
		{"claude/other-pid-namespace", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, _, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", "linux::pid:[4026532999]"), at(900))
			base.Via = "none (registry record is from another pid namespace (linux::pid:[4026532999]))"
			return claude{}, f.env(".claude"), p, base
		}},
		{"claude/pid-domain-unknown", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, proj, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", "linux::pid:[4026532999]"), at(900))
			env := f.env(".claude")
			env.PIDDomain = ""
			return claude{}, env, p, ccResolved(base, proj)
		}},
		{"claude/no-registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, _, base := ccFixture(f, f.cwd())
			base.Via = "none (no registry record)"
			return claude{}, f.env(".claude"), p, base
		}},
		{"claude/partial-registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, _, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", `{"pid":345104,"sessionId":"1f9a74f7-3c2e`, at(900))
			base.Via = "none (no registry record)"
			return claude{}, f.env(".claude"), p, base
		}},
		{"claude/no-registry-argv", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, proj, base := ccFixture(f, f.cwd(), "claude", "--resume", ccSID)
			want := ccResolved(base, proj)
			want.Name, want.Status, want.Via = "", "", "argv (no registry; session from argv)"
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/stale-after-clear", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, proj, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", domain), at(900))
			// B began after the process did: /clear's new session.
			f.write(".claude/"+proj+"/"+ccSIDB+".jsonl", jsonl(
				`{"type":"file-history-snapshot","messageId":"m2","snapshot":{},"isSnapshotUpdate":false}`,
				ccUser(ccSIDB, f.cwd(), "now the docs", 700),
				ccAssistant(ccSIDB, f.cwd(), "claude-opus-4-6", 701),
			), at(900))
			// C is newer still but began long before: another process's
			// resumed session, not this one's /clear.
			f.write(".claude/"+proj+"/"+ccSIDC+".jsonl", jsonl(ccUser(ccSIDC, f.cwd(), "old work", 100)), at(950))
			// A torn temp record naming B is no claim on it.
			f.write(".claude/sessions/999.json.0123456789abcdef.tmp", fmt.Sprintf(`{"pid":999,"sessionId":%q}`, ccSIDB), at(950))
			want := base
			want.Session, want.Transcript = ccSIDB, proj+"/"+ccSIDB+".jsonl"
			want.Via = "transcript (registry session " + ccSID + " is stale after /clear)"
			want.Name, want.Status, want.Title, want.Model = "goblin", "busy", "now the docs", "claude-opus-4-6"
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/newer-claimed-by-another-record", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, proj, base := ccFixture(f, f.cwd())
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", domain), at(900))
			f.write(".claude/"+proj+"/"+ccSIDB+".jsonl", jsonl(ccUser(ccSIDB, f.cwd(), "another agent", 700)), at(900))
			f.write(".claude/sessions/999.json", fmt.Sprintf(`{"pid":999,"sessionId":%q,"cwd":%q,"startedAt":%d}`, ccSIDB, f.cwd(), at(690).UnixMilli()), at(690))
			return claude{}, f.env(".claude"), p, ccResolved(base, proj)
		}},
		{"claude/not-written-yet", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A fresh session has no transcript; the newer one in its
			// project dir is another live agent's (its record names it).
			p, _, base := ccFixture(f, f.cwd())
			fresh := "4d0a3e5f-6b7c-4d8e-af90-1b2c3d4e5f60"
			f.write(".claude/sessions/345104.json", ccRecord(fresh, f.cwd(), "50424", domain), at(900))
			f.write(".claude/sessions/999.json", fmt.Sprintf(`{"pid":999,"sessionId":%q,"cwd":%q,"startedAt":%d}`, ccSID, f.cwd(), at(500).UnixMilli()), at(500))
			want := base
			want.Session, want.Via, want.Name, want.Status = fresh, "registry", "goblin", "busy"
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/cleared-before-first-write", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The registry's session never wrote a line before /clear; the
			// unclaimed transcript begun since the process started is the
			// live one.
			p, proj, base := ccFixture(f, f.cwd())
			fresh := "4d0a3e5f-6b7c-4d8e-af90-1b2c3d4e5f60"
			f.write(".claude/sessions/345104.json", ccRecord(fresh, f.cwd(), "50424", domain), at(900))
			want := ccResolved(base, proj)
			want.Via = "transcript (registry session " + fresh + " is stale after /clear)"
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/long-cwd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			cwd := f.home + "/" + strings.Repeat("deep/", 45) + "x"
			p := f.add(proctest.Proc{PID: ccPID, PPID: 344980, Start: ccTick, Argv: []string{"claude"}, Cwd: cwd})
			name := claudeSanitize(cwd)
			if len(name) <= 200 {
				t.Fatalf("cwd too short: %d", len(name))
			}
			proj := "projects/" + name[:200] + "-1k2j3h"
			f.write(".claude/projects/"+name[:200]+"-zzzzzz/unrelated.jsonl", "", at(600)) // another long cwd's
			f.write(".claude/"+proj+"/"+ccSID+".jsonl", jsonl(ccUser(ccSID, cwd, "deep work", 510)), at(600))
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, cwd, "50424", domain), at(900))
			return claude{}, f.env(".claude"), p, Agent{Harness: "claude", PID: ccPID, PPID: 344980, Start: ccTick, Cwd: cwd,
				Session: ccSID, Via: "registry", Transcript: proj + "/" + ccSID + ".jsonl", Name: "goblin", Status: "busy", Title: "deep work"}
		}},
		{"claude/credential-shaped-project-dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// saferoot refuses any component holding "auth", "token",
			// "secret" or "credentials", so a project under such a cwd keeps
			// its registry facts but shows no transcript.
			cwd := f.home + "/src/auth-service"
			p, _, base := ccFixture(f, cwd)
			f.write(".claude/sessions/345104.json", ccRecord(ccSID, cwd, "50424", domain), at(900))
			want := base
			want.Session, want.Via, want.Name, want.Status = ccSID, "registry", "goblin", "busy"
			return claude{}, f.env(".claude"), p, want
		}},
		{"claude/no-root", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, _, base := ccFixture(f, f.cwd())
			env := f.env(".claude")
			env.Root = nil
			return claude{}, env, p, base
		}},
	})
}

func TestClaudeSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"/home/goblin":     "-home-goblin",
		"/a/b.c":           "-a-b-c",
		"/x/my_proj":       "-x-my-proj",
		"/x/my proj":       "-x-my-proj",
		"/x/café":          "-x-caf-",
		"/x/\U0001F600":    "-x---",
		"/Users/Foo/Repo1": "-Users-Foo-Repo1",
	} {
		if got := claudeSanitize(in); got != want {
			t.Errorf("claudeSanitize(%q): got %q, want %q", in, got, want)
		}
	}
}

// The title precedence of Claude's own listing, one source at a time.
func TestClaudeTitle(t *testing.T) {
	const cwd = "/home/goblin/src/x"
	user := ccUser(ccSID, cwd, "the first prompt", 510)
	rows := []struct {
		name  string
		lines []string
		want  string
	}{
		{"custom-over-ai", []string{`{"type":"custom-title","customTitle":"old custom"}`, user, `{"type":"ai-title","aiTitle":"ai"}`, `{"type":"custom-title","customTitle":"new custom"}`}, "new custom"},
		{"ai-over-prompt", []string{user, `{"type":"last-prompt","lastPrompt":"last"}`, `{"type":"ai-title","aiTitle":"Fixing it"}`}, "Fixing it"},
		// 2.1.x ranks agentName||customTitle||aiTitle||summary||firstPrompt.
		{"agent-name-over-custom", []string{`{"type":"agent-name","agentName":"old name"}`, `{"type":"custom-title","customTitle":"custom"}`, `{"type":"ai-title","aiTitle":"ai"}`, `{"type":"agent-name","agentName":"renamed","sessionId":"x"}`}, "renamed"},
		{"summary-over-last-prompt", []string{`{"type":"summary","summary":"sum"}`, user, `{"type":"last-prompt","lastPrompt":"the last\nprompt"}`}, "sum"},
		{"last-prompt-over-first", []string{user, `{"type":"last-prompt","lastPrompt":"the last\nprompt"}`}, "the last prompt"},
		{"summary-over-first", []string{`{"type":"summary","summary":"Fix flaky login test","leafUuid":"x"}`, user}, "Fix flaky login test"},
		{"first-real-prompt", []string{
			`{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: meta"}}`,
			`{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"}}`,
			`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}`,
			`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"  the   real\tone "}]}}`,
			user,
		}, "the real one"},
		{"nothing", []string{`{"type":"file-history-snapshot"}`}, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFx(t)
			f.write(".claude/t.jsonl", jsonl(r.lines...), at(600))
			if got, _ := claudeFacts(f.env(".claude").Root, "t.jsonl"); got != r.want {
				t.Errorf("%s: got %q, want %q", r.name, got, r.want)
			}
		})
	}
}

// A transcript far bigger than the windows: the first prompt comes from the
// head, the model from the tail, and the middle is never needed.
func TestClaudeBigTranscript(t *testing.T) {
	f := newFx(t)
	const cwd = "/home/goblin/src/x"
	ls := []string{ccUser(ccSID, cwd, "the first prompt", 510)}
	filler := strings.Repeat("x", 4000)
	for i := 0; len(ls) < 1200; i++ {
		ls = append(ls, fmt.Sprintf(`{"type":"progress","data":%q}`, filler))
	}
	ls = append(ls, ccAssistant(ccSID, cwd, "claude-opus-4-7", 900), `{"type":"progress","data":"tail"}`)
	f.write(".claude/big.jsonl", jsonl(ls...), at(900))
	title, model := claudeFacts(f.env(".claude").Root, "big.jsonl")
	if title != "the first prompt" || model != "claude-opus-4-7" {
		t.Errorf("big transcript: got %q %q", title, model)
	}
}

func TestSamePIDDomain(t *testing.T) {
	const ns = "pid:[4026531836]"
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"linux::" + ns, "linux::" + ns, true},
		{"linux:0123abcd:" + ns, "linux::" + ns, true},             // 2.1.3xx record, no machine id known here
		{"linux:0123abcd:" + ns, "linux:0123abcd:" + ns, true},     // same machine
		{"linux:0123abcd:" + ns, "linux:99999999:" + ns, false},    // another machine sharing the home
		{"linux:0123abcd:pid:[4026532999]", "linux::" + ns, false}, // another pid namespace
		{"linux::pid:[4026532999]", "linux:0123abcd:" + ns, false},
		{"darwin::pid:[1]", "linux::" + ns, false},
	} {
		if got := SamePIDDomain(tc.a, tc.b); got != tc.want {
			t.Errorf("SamePIDDomain(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
