package harness

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	cxSID   = "019e763f-ff0c-7683-a4e9-a17e2bf964fb"
	cxSub   = "019e7640-0a0b-7c0d-8e0f-101112131415"
	cxOther = "019e7641-1a1b-7c1d-8e1f-202122232425"
	cxDay   = "sessions/2026/09/20/"
	cxRoll  = cxDay + "rollout-2026-09-20T12-00-00-" + cxSID + ".jsonl"
	cxPID   = 4242
)

func cxMeta(id, source string) string {
	return fmt.Sprintf(`{"timestamp":"2026-09-20T10:00:00.118Z","type":"session_meta","payload":{"id":%q,"timestamp":"2026-09-20T10:00:00.118Z","cwd":"/home/goblin/src/x","originator":"codex_cli_rs","cli_version":"0.128.0","source":%s,"model_provider":"openai","base_instructions":{"text":"You are Codex."},"git":{"commit_hash":"abcdef0","branch":"main","repository_url":"git@github.com:g/x.git"}}}`, id, source)
}

func cxTurn(model string) string {
	return fmt.Sprintf(`{"timestamp":"2026-09-20T10:00:01.000Z","type":"turn_context","payload":{"cwd":"/home/goblin/src/x","approval_policy":"on-request","model":%q,"effort":"medium","summary":"auto"}}`, model)
}

const cxRest = `{"timestamp":"2026-09-20T10:00:01.100Z","type":"event_msg","payload":{"type":"user_message","message":"Fix the flaky test"}}
{"timestamp":"2026-09-20T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"on it"}]}}
`

// cxPaginated is one turn of a paginated rollout after its session_meta:
// the event_msg lines as a real Codex 0.171 wrote them against the tier's
// mock (the turn_context cut short). No user_message event: the prompt is
// an item_completed UserMessage.
const cxPaginated = `{"timestamp":"2026-12-06T11:42:44.807Z","ordinal":1,"type":"event_msg","payload":{"type":"task_started","turn_attribution":{"turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3","turn_trigger":"user","parent_turn_id":null,"initiating_agent_path":null,"root_turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3"},"turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3","root_turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3","started_at":1796557364,"model_context_window":258400,"collaboration_mode_kind":"default"}}
{"timestamp":"2026-12-06T11:42:44.810Z","ordinal":2,"type":"turn_context","payload":{"cwd":"/home/goblin/src/x","approval_policy":"on-request","model":"gpt-mock"}}
{"timestamp":"2026-12-06T11:42:44.939Z","ordinal":8,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a24b29-ddc4-78d2-941e-7ca3babab83b","turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3","item":{"type":"UserMessage","id":"01a24b29-dec9-7b11-88c0-d638d20b14b0","client_id":"79e691ce-8c21-432f-a5cd-91680721077a","content":[{"type":"text","text":"say hello bravo","text_elements":[]}]},"started_at_ms":1796557364939,"completed_at_ms":1796557364939}}
{"timestamp":"2026-12-06T11:42:44.975Z","ordinal":9,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a24b29-ddc4-78d2-941e-7ca3babab83b","turn_id":"01a24b29-de2c-7af3-b669-b4ea1574d1b3","item":{"type":"AgentMessage","id":"msg_mock_1","content":[{"type":"Text","text":"mock answer 1"}]},"started_at_ms":1796557364975,"completed_at_ms":1796557364975}}
`

// cxFixture writes a Codex home: the rollout, a sub-agent's, an unrelated
// later one, and session_index.jsonl. The native process holds what fds
// says (absolute paths under the root).
func cxFixture(f *fx, fds ...string) (proc.Proc, Agent) {
	f.write(".codex/"+cxRoll, jsonl(cxMeta(cxSID, `"cli"`), cxTurn("gpt-5"))+cxRest+jsonl(cxTurn("gpt-5.6")), at(600))
	sub := fmt.Sprintf(`{"subagent":{"thread_spawn":{"parent_thread_id":%q,"depth":1,"agent_nickname":"Scout","agent_role":"explorer"}}}`, cxSID)
	f.write(".codex/"+cxDay+"rollout-2026-09-20T12-05-00-"+cxSub+".jsonl", jsonl(cxMeta(cxSub, sub), cxTurn("gpt-5.6-mini")), at(610))
	other := `{"subagent":{"thread_spawn":{"parent_thread_id":"019e0000-0000-7000-8000-000000000000","depth":1}}}`
	f.write(".codex/"+cxDay+"rollout-2026-09-20T12-06-00-"+cxOther+".jsonl", jsonl(cxMeta(cxOther, other), cxTurn("gpt-5.6")), at(620))
	f.write(".codex/session_index.jsonl", jsonl(
		`{"id":"`+cxSID+`","thread_name":"flaky test","updated_at":"2026-09-20T10:05:00Z"}`,
		`{"id":"`+cxOther+`","thread_name":"other","updated_at":"2026-09-20T10:06:00Z"}`,
		`{"id":"`+cxSID+`","thread_name":"flaky test, renamed","updated_at":"2026-09-20T10:07:00Z"}`,
	), at(630))
	codexDir := "/usr/lib/node_modules/@openai/codex/bin/"
	f.add(proctest.Proc{PID: cxPID - 1, PPID: 100, Start: 1000, Argv: []string{"node", codexDir + "codex.js"}, Env: f.stdEnv(), Cwd: f.cwd()})
	p := f.add(proctest.Proc{PID: cxPID, PPID: cxPID - 1, Start: 1001, Argv: []string{codexDir + "codex-x86_64-unknown-linux-musl"}, Env: f.stdEnv("CODEX_MANAGED_BY_NPM=1"), Cwd: f.cwd(), FDs: fds})
	base := Agent{Harness: "codex", PID: cxPID, PPID: cxPID - 1, Start: 1001, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
	return p, base
}

func TestResolveCodex(t *testing.T) {
	subs := []Sub{{Name: "Scout", Model: "gpt-5.6-mini", Transcript: cxDay + "rollout-2026-09-20T12-05-00-" + cxSub + ".jsonl"}}
	runResolve(t, []resolveCase{
		{"codex/fd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := cxFixture(f, "/dev/null", "socket:[77]", f.home+"/.codex/"+cxRoll, f.home+"/.codex/log/codex-tui.log")
			want.Session, want.Via, want.Transcript = cxSID, "fd", cxRoll
			want.Title, want.Model, want.Agents = "flaky test, renamed", "gpt-5.6", subs
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/fd-with-subagent-held", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Sub-agent threads run in-process: their rollouts are held too,
			// and the newer one is not the session.
			p, want := cxFixture(f, f.home+"/.codex/"+cxDay+"rollout-2026-09-20T12-05-00-"+cxSub+".jsonl", f.home+"/.codex/"+cxRoll)
			want.Session, want.Via, want.Transcript = cxSID, "fd", cxRoll
			want.Title, want.Model, want.Agents = "flaky test, renamed", "gpt-5.6", subs
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/lazy-rollout", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A fresh codex has persisted nothing: no rollout, no fd.
			p, want := cxFixture(f, "/dev/null", "/dev/pts/3")
			want.Via = "none (no rollout open yet)"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/zst", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			zrel := cxDay + "rollout-2026-09-20T13-00-00-" + cxOther + ".jsonl.zst"
			f.writeBytes(".codex/"+zrel, zframes(t, jsonl(cxMeta(cxOther, `"cli"`)), jsonl(cxTurn("gpt-5"))+cxRest, jsonl(cxTurn("gpt-5.6-codex"))), at(700))
			p, want := cxFixture(f, f.home+"/.codex/"+zrel)
			want.Session, want.Via, want.Transcript = cxOther, "fd", zrel
			want.Title, want.Model = "other", "gpt-5.6-codex"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/symlinked-root", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The configured root is a link; the kernel names the fd by the
			// resolved path.
			p, want := cxFixture(f, f.home+"/.codex/"+cxRoll)
			if err := os.Rename(f.home+"/.codex", f.home+"/codex-real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("codex-real", f.home+"/.codex"); err != nil {
				t.Fatal(err)
			}
			proctest.Add(f.procDir, proctest.Proc{PID: cxPID, PPID: cxPID - 1, Start: 1001, Argv: p.Argv, Env: f.stdEnv(), Cwd: f.cwd(), FDs: []string{f.home + "/codex-real/" + cxRoll}})
			want.Session, want.Via, want.Transcript = cxSID, "fd", cxRoll
			want.Title, want.Model, want.Agents = "flaky test, renamed", "gpt-5.6", subs
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/long-session-meta-subagent", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A sub-agent whose session_meta line is longer than the probe
			// (long base_instructions), compressed: its parent is still found.
			p, want := cxFixture(f, f.home+"/.codex/"+cxRoll)
			long := strings.Replace(cxMeta("019e7642-2a2b-7c2d-8e2f-303132333435", fmt.Sprintf(`{"subagent":{"thread_spawn":{"parent_thread_id":%q,"depth":1,"agent_role":"worker"}}}`, cxSID)),
				`You are Codex.`, strings.Repeat("instructions ", 10000), 1)
			zrel := cxDay + "rollout-2026-09-20T12-07-00-019e7642-2a2b-7c2d-8e2f-303132333435.jsonl.zst"
			f.writeBytes(".codex/"+zrel, zframes(t, jsonl(long), jsonl(cxTurn("gpt-5.6-mini"))), at(640))
			want.Session, want.Via, want.Transcript = cxSID, "fd", cxRoll
			want.Title, want.Model = "flaky test, renamed", "gpt-5.6"
			want.Agents = append(slices.Clone(subs), Sub{Name: "worker", Model: "gpt-5.6-mini", Transcript: zrel})
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/deleted-rollout", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := cxFixture(f, f.home+"/.codex/"+cxRoll+" (deleted)")
			want.Via = "none (no rollout open yet)"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/paginated-no-state-db", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A paginated rollout (the lines as Codex 0.171 writes them in
			// the real-CLI tier) with neither state_5.sqlite nor an index
			// entry: the title is the first item_completed UserMessage.
			rel := cxDay + "rollout-2026-09-20T14-00-00-" + cxOther + ".jsonl"
			f.write(".codex/"+rel, jsonl(cxMeta(cxOther, `"cli"`))+cxPaginated, at(700))
			p, want := cxFixture(f, f.home+"/.codex/"+rel)
			os.Remove(f.home + "/.codex/session_index.jsonl")
			want.Session, want.Via, want.Transcript = cxOther, "fd", rel
			want.Title, want.Model = "say hello bravo", "gpt-mock"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/reverted-suffix", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A reverted thread's rollout, named as the upstream
			// description gives it (thread id, then "_<rollout id>"; no
			// real run made one): the session is the thread.
			rel := cxDay + "rollout-2026-09-20T14-00-00-" + cxOther + "_019e7642-2a2b-7c2d-8e2f-303132333435.jsonl"
			f.write(".codex/"+rel, jsonl(cxMeta(cxOther, `"cli"`))+cxPaginated, at(700))
			p, want := cxFixture(f, f.home+"/.codex/"+rel)
			want.Session, want.Via, want.Transcript = cxOther, "fd", rel
			want.Title, want.Model = "other", "gpt-mock"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex/not-a-rollout", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.write(".codex/sessions/notes.jsonl", "{}\n", at(600))
			p, want := cxFixture(f, f.home+"/.codex/sessions/notes.jsonl", "/elsewhere/"+cxRoll)
			want.Via = "none (no rollout open yet)"
			return codex{}, f.env(".codex"), p, want
		}},
	})
}

func TestCodexID(t *testing.T) {
	for in, want := range map[string]string{
		cxRoll: cxSID,
		cxDay + "rollout-2026-09-20T12-00-00-" + cxSID + ".jsonl.zst": cxSID,
		cxDay + "rollout-2026-09-20T12-00-00-short.jsonl":             "",
		cxDay + "rollout-x.json":                                      "",
		// A reverted thread's rollout, named as the upstream description
		// gives it (no real CLI run made one): the thread id, then
		// "_<rollout id>".
		cxDay + "rollout-2026-09-20T12-00-00-" + cxSID + "_019e7642-2a2b-7c2d-8e2f-303132333435.jsonl":     cxSID,
		cxDay + "rollout-2026-09-20T12-00-00-" + cxSID + "_019e7642-2a2b-7c2d-8e2f-303132333435.jsonl.zst": cxSID,
		cxDay + "rollout-2026-09-20T12-00-00-" + cxSID + "_r1.jsonl":                                       cxSID,
		cxDay + "rollout-2026-09-20T12-00-00-short_" + cxSID + ".jsonl":                                    "",
		cxDay + "rollout-2026-09-20T12-00-00-short_x.jsonl":                                                "",
	} {
		if got := codexID(in); got != want {
			t.Errorf("codexID(%q): got %q, want %q", in, got, want)
		}
	}
}
