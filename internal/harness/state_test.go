package harness

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// stateCase is one fixture of testdata/state/<harness>/ and what its turn
// state and tokens are.
type stateCase struct {
	file    string
	settled bool // Claude: the file has been still for the settle time
	state   string
	waiting string
	via     string
	since   string // RFC 3339, "" for unknown
	tokens  string // the tokens file, "" for absent
}

// claudeTokens3 is the usage of a fixture whose first response is
// msg_0 (output 5) and whose second is msg_1 written as three lines
// (output 2, 2, 159): each id counts once, its last line's.
const claudeTokens3 = "context 1110\ninput 20\noutput 164\ncache_read 2000\ncache_write 200"
const claudeTokens1 = "context 1110\ninput 10\noutput 8\ncache_read 1000\ncache_write 100"

var claudeStateCases = []stateCase{
	{file: "streaming-tool-use.jsonl", settled: true,
		via:    "none (tool_use Bash in flight: running or awaiting approval, which only the registry tells)",
		tokens: claudeTokens3},
	{file: "streaming-tool-use-bypass.jsonl", settled: true, state: StateWorking,
		via: "transcript (tool_use Bash in flight; bypassPermissions)", since: "2026-12-01T13:00:10Z", tokens: claudeTokens3},
	{file: "null-text-tail.jsonl", settled: true, state: StateIdle,
		via: "transcript (text reply with stop_reason null, file settled)", since: "2026-12-01T13:00:11Z", tokens: claudeTokens1},
	{file: "null-text-tail.jsonl", settled: false, state: StateWorking,
		via: "transcript (response streaming: stop_reason null)", since: "2026-12-01T13:00:10Z", tokens: claudeTokens1},
	{file: "turn-duration.jsonl", state: StateIdle, via: "transcript (turn_duration)", since: "2026-12-01T13:00:12Z", tokens: claudeTokens1},
	{file: "interrupted.jsonl", state: StateIdle, via: "transcript (interrupted)", since: "2026-12-01T13:00:14Z",
		tokens: "context 1110\ninput 10\noutput 20\ncache_read 1000\ncache_write 100"},
	{file: "tool-result.jsonl", state: StateWorking, via: "transcript (tool result: a model call is in flight)", since: "2026-12-01T13:00:10Z",
		tokens: "context 1110\ninput 10\noutput 20\ncache_read 1000\ncache_write 100"},
	{file: "resumed-after-end-turn.jsonl", state: StateIdle, via: "transcript (stop_reason end_turn)", since: "2026-12-01T13:00:11Z", tokens: claudeTokens1},
	{file: "ask-user-question.jsonl", state: StateWaiting, waiting: "approve AskUserQuestion",
		via: "transcript (AskUserQuestion pending)", since: "2026-12-01T13:00:11Z",
		tokens: "context 1110\ninput 10\noutput 30\ncache_read 1000\ncache_write 100"},
	{file: "torn-last-line.jsonl", state: StateIdle, via: "transcript (stop_reason end_turn)", since: "2026-12-01T13:00:11Z", tokens: claudeTokens1},
	{file: "sidechain-newest.jsonl", state: StateIdle, via: "transcript (stop_reason end_turn)", since: "2026-12-01T13:00:11Z", tokens: claudeTokens1},
	{file: "api-error.jsonl", state: StateIdle, via: "transcript (api error)", since: "2026-12-01T13:00:15Z"},
	{file: "prompt-sent.jsonl", state: StateWorking, via: "transcript (user prompt)", since: "2026-12-01T13:00:30Z", tokens: claudeTokens1},
	// /compact's summary is a user line that is no prompt.
	{file: "compacted.jsonl", state: StateIdle, via: "transcript (turn_duration)", since: "2026-12-01T13:00:12Z", tokens: claudeTokens1},
}

const codexWorking = "transcript (task_started; approval prompts are not written, so waiting cannot be seen)"
const codexTokensWant = "context 1200\ninput 200\noutput 80\ncache_read 1000\ncache_write 0"

var codexStateCases = []stateCase{
	{file: "started-tool-in-flight.jsonl", state: StateWorking, via: codexWorking, since: "2026-12-01T13:10:01Z", tokens: codexTokensWant},
	{file: "complete.jsonl", state: StateIdle, via: "transcript (task_complete)", since: "2026-12-01T13:10:08Z", tokens: codexTokensWant},
	{file: "aborted.jsonl", state: StateIdle, via: "transcript (turn_aborted)", since: "2026-12-01T13:10:05Z", tokens: codexTokensWant},
	{file: "second-turn-started.jsonl", state: StateWorking, via: codexWorking, since: "2026-12-01T13:10:20Z", tokens: codexTokensWant},
	{file: "torn-last-line.jsonl", state: StateIdle, via: "transcript (task_complete)", since: "2026-12-01T13:10:05Z", tokens: codexTokensWant},
	// The sub-agent's first token_count is its parent's total (50000 in,
	// 40000 of it cached, 3000 out): only what came after is its own.
	{file: "subagent-fork.jsonl", state: StateIdle, via: "transcript (task_complete)", since: "2026-12-01T13:10:04Z",
		tokens: "context 2000\ninput 500\noutput 400\ncache_read 1500\ncache_write 0"},
	// A fork whose replay carries no zero-usage marker: its own share
	// cannot be told, so only the context is given.
	{file: "fork-no-marker.jsonl", state: StateIdle, via: "transcript (task_complete)", since: "2026-12-01T13:10:04Z",
		tokens: "context 2000"},
}

var piStateCases = []stateCase{
	{file: "stop.jsonl", state: StateIdle, via: "transcript (stopReason stop)", since: "2026-12-01T13:13:11Z",
		tokens: "context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
	{file: "tool-use.jsonl", state: StateWorking, via: "transcript (stopReason toolUse: tools running)", since: "2026-12-01T13:13:10Z",
		tokens: "context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
	{file: "tool-result.jsonl", state: StateWorking, via: "transcript (tool result)", since: "2026-12-01T13:13:10Z",
		tokens: "context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
	{file: "prompt-sent.jsonl", state: StateWorking, via: "transcript (user message)", since: "2026-12-01T13:13:20Z",
		tokens: "context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
	{file: "aborted.jsonl", state: StateIdle, via: "transcript (stopReason aborted)", since: "2026-12-01T13:13:12Z",
		tokens: "context 25\ninput 30\noutput 16\ncache_read 5\ncache_write 0"},
	{file: "torn-last-line.jsonl", state: StateIdle, via: "transcript (stopReason stop)", since: "2026-12-01T13:13:11Z",
		tokens: "context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
}

var geminiStateCases = []stateCase{
	// The reply's record is appended again when its tokens arrive: it
	// counts once, the last (output 8 and 2 thoughts; 60 of 100 cached).
	{file: "reply.jsonl", state: StateIdle, via: "transcript (reply without tool calls)", since: "2026-12-01T13:13:12Z",
		tokens: "context 100\ninput 40\noutput 10\ncache_read 60"},
	{file: "tool-calls.jsonl", state: StateWorking, via: "transcript (tool calls completed; approval prompts are not written)", since: "2026-12-01T13:13:11Z",
		tokens: "context 100\ninput 40\noutput 6\ncache_read 60"},
	{file: "prompt-sent.jsonl", state: StateWorking, via: "transcript (user message; approval prompts are not written)", since: "2026-12-01T13:13:20Z",
		tokens: "context 100\ninput 40\noutput 10\ncache_read 60"},
	{file: "torn-last-line.jsonl", state: StateIdle, via: "transcript (reply without tool calls)", since: "2026-12-01T13:13:11Z",
		tokens: "context 100\ninput 40\noutput 10\ncache_read 60"},
	{file: "error.jsonl", state: StateIdle, via: "transcript (error)", since: "2026-12-01T13:13:12Z"},
}

var dshStateCases = []stateCase{
	// The answer is re-appended (output 3, then 5): it counts once.
	{file: "answered.jsonl", via: "none (dsh writes no turn end: an answer does not tell whether the turn goes on)",
		tokens: "input 12\noutput 5"},
	{file: "prompt-sent.jsonl", state: StateWorking, via: "transcript (user message)", since: time.UnixMilli(1790013010000).UTC().Format(time.RFC3339),
		tokens: "input 12\noutput 5"},
}

// checkState compares an agent's state and tokens with c's.
func checkState(t *testing.T, name string, a Agent, c stateCase) {
	t.Helper()
	since := ""
	if !a.Since.IsZero() {
		since = a.Since.Format(time.RFC3339)
		if a.Since.Location() != time.UTC {
			t.Errorf("%s: since %v is not UTC", name, a.Since)
		}
	}
	got := fmt.Sprintf("state=%q waiting=%q via=%q since=%q", a.State, a.Waiting, a.StateVia, since)
	want := fmt.Sprintf("state=%q waiting=%q via=%q since=%q", c.state, c.waiting, c.via, c.since)
	if got != want {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
	if got := a.Tokens.String(); got != c.tokens {
		t.Errorf("%s: tokens\n%s\nwant\n%s", name, got, c.tokens)
	}
}

// summed checks that a fill gave the context alone (the first line of
// want, if it is one) and returns a with the tokens Count gives.
func summed(t *testing.T, name string, env Env, a Agent, harness, rel, want string) Agent {
	t.Helper()
	ctx, _, _ := strings.Cut(want, "\n")
	if !strings.HasPrefix(ctx, "context ") {
		ctx = ""
	}
	if got := a.Tokens.String(); got != ctx {
		t.Errorf("%s: Resolve's tokens %q, want the context alone %q", name, got, ctx)
	}
	a.Harness, a.Transcript = harness, rel
	a.Tokens = Count(env, a)
	return a
}

// fixture writes testdata/state/<dir>/<file> into the home at rel.
func (f *fx) fixture(dir, file, rel string, mtime time.Time) {
	f.t.Helper()
	b, err := os.ReadFile("testdata/state/" + dir + "/" + file)
	if err != nil {
		f.t.Fatal(err)
	}
	f.writeBytes(rel, b, mtime)
}

func TestStateClaude(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	for _, c := range claudeStateCases {
		f := newFx(t)
		mtime := now.Add(-time.Second) // still growing
		if c.settled {
			mtime = now.Add(-settle)
		}
		f.fixture("claude", c.file, ".claude/projects/-x/s.jsonl", mtime)
		var a Agent
		name := fmt.Sprintf("claude/%s (settled %v)", c.file, c.settled)
		claudeFill(f.env(".claude"), &a, "projects/-x/s.jsonl", now)
		a = summed(t, name, f.env(".claude"), a, "claude", "projects/-x/s.jsonl", c.tokens)
		checkState(t, name, a, c)
	}
}

// TestStateClaudeRegistry: the registry's status comes first. A
// "waiting" record beside a transcript whose newest line is a Bash
// tool_use (which alone tells nothing) gives waiting, "approve Bash".
func TestStateClaudeRegistry(t *testing.T) {
	for _, tc := range []struct {
		status, waitingFor string
		state, waiting     string
	}{
		{"waiting", "approve Bash", StateWaiting, "approve Bash"},
		{"busy", "", StateWorking, ""},
		{"idle", "", StateIdle, ""},
	} {
		f := newFx(t)
		p, proj, _ := ccFixture(f, f.cwd())
		f.fixture("claude", "streaming-tool-use.jsonl", ".claude/"+proj+"/"+ccSID+".jsonl", at(950))
		rec := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"startedAt":%d,"procStart":"50424","version":"2.1.284","kind":"interactive","status":%q,"waitingFor":%q,"updatedAt":%d,"statusUpdatedAt":%d}`,
			ccPID, ccSID, f.cwd(), at(505).UnixMilli(), tc.status, tc.waitingFor, at(960).UnixMilli(), at(955).UnixMilli())
		f.write(".claude/sessions/345104.json", rec, at(960))
		a := claude{}.Resolve(f.env(".claude"), p)
		a.Tokens = Count(f.env(".claude"), a)
		checkState(t, "claude registry "+tc.status, a, stateCase{state: tc.state, waiting: tc.waiting, via: RouteRegistry,
			since: at(955).UTC().Format(time.RFC3339), tokens: claudeTokens3})
		if a.Status != tc.status {
			t.Errorf("status %q, want the registry's %q", a.Status, tc.status)
		}
	}
	// An old build's record has no status: the transcript decides.
	f := newFx(t)
	p, proj, _ := ccFixture(f, f.cwd())
	f.fixture("claude", "turn-duration.jsonl", ".claude/"+proj+"/"+ccSID+".jsonl", at(950))
	f.write(".claude/sessions/345104.json", fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"procStart":"50424"}`, ccPID, ccSID, f.cwd()), at(960))
	a := claude{}.Resolve(f.env(".claude"), p)
	a.Tokens = Count(f.env(".claude"), a)
	checkState(t, "claude registry without status", a, stateCase{state: StateIdle, via: "transcript (turn_duration)", since: "2026-12-01T13:00:12Z", tokens: claudeTokens1})
}

func TestStateCodex(t *testing.T) {
	for _, c := range codexStateCases {
		f := newFx(t)
		rel := "sessions/2026/12/01/rollout-2026-12-01T13-10-00-01a231bc-0000-7000-8000-000000000001.jsonl"
		f.fixture("codex", c.file, ".codex/"+rel, at(900))
		var a Agent
		codexFill(f.env(".codex"), &a, rel)
		checkState(t, "codex/"+c.file, a, c)
	}
}

// TestStateCodexResolve: a live rollout held open resolves with its
// state, and Codex is never said to be waiting.
func TestStateCodexResolve(t *testing.T) {
	f := newFx(t)
	rel := "sessions/2026/12/01/rollout-2026-12-01T13-10-00-01a231bc-0000-7000-8000-000000000001.jsonl"
	path := f.home + "/.codex/" + rel
	f.fixture("codex", "started-tool-in-flight.jsonl", ".codex/"+rel, at(900))
	p := f.add(proctest.Proc{PID: 4242, PPID: 100, Start: 1001, Argv: []string{"codex"}, Env: f.stdEnv(), Cwd: f.cwd(), FDs: []string{"/dev/null", "/dev/null", "/dev/null", path}})
	a := codex{}.Resolve(f.env(".codex"), p)
	if a.Transcript != rel {
		t.Fatalf("transcript %q via %q", a.Transcript, a.Via)
	}
	checkState(t, "codex resolve", a, codexStateCases[0])
}

func TestStatePi(t *testing.T) {
	for _, c := range piStateCases {
		f := newFx(t)
		rel := "agent/sessions/--x--/2026-12-01T13-13-02-074Z_01a231bc-bb7a-75a1-bb95-9fa4b05df367.jsonl"
		f.fixture("pi", c.file, ".pi/"+rel, at(900))
		var a Agent
		piFill(f.env(".pi"), &a, rel)
		a = summed(t, "pi/"+c.file, f.env(".pi"), a, "pi", rel, c.tokens)
		checkState(t, "pi/"+c.file, a, c)
	}
}

func TestStateGemini(t *testing.T) {
	for _, c := range geminiStateCases {
		f := newFx(t)
		rel := "tmp/x/chats/session-2026-12-01T13-13-3a1d2ebe.jsonl"
		f.fixture("gemini", c.file, ".gemini/"+rel, at(900))
		var a Agent
		geminiFill(f.env(".gemini"), &a, rel)
		a = summed(t, "gemini/"+c.file, f.env(".gemini"), a, "gemini", rel, c.tokens)
		checkState(t, "gemini/"+c.file, a, c)
	}
}

func TestStateDsh(t *testing.T) {
	for _, c := range dshStateCases {
		for _, zst := range []bool{false, true} {
			f := newFx(t)
			rel := "sessions/--x--/session-5b0e2c1a-7d3f-4e9a-8c21-9f0a1b2c3d4e/session.jsonl"
			b, err := os.ReadFile("testdata/state/dsh/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			if zst {
				ls := strings.SplitAfterN(string(b), "\n", 2)
				b, rel = zframes(t, ls[0], ls[1]), rel+".zstd"
			}
			f.writeBytes(".dsh/"+rel, b, at(900))
			var a Agent
			dshFill(f.env(".dsh"), &a, rel)
			checkState(t, fmt.Sprintf("dsh/%s (zstd %v)", c.file, zst), a, c)
		}
	}
}

func TestStateOpencode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string // message data appended after the answered turn
		c     stateCase
	}{
		{"answered", nil, stateCase{state: StateIdle, via: "db (finish stop)", since: at(12).Add(2 * time.Millisecond).UTC().Format(time.RFC3339)}},
		{"prompt sent", []string{`{"role":"user","time":{"created":%d}}`},
			stateCase{state: StateWorking, via: "db (user message)", since: at(20).UTC().Format(time.RFC3339)}},
		{"streaming", []string{`{"role":"user","time":{"created":%d}}`, `{"role":"assistant","time":{"created":%d},"tokens":{"input":30,"cache":{"read":7,"write":1}}}`},
			stateCase{state: StateWorking, via: "db (assistant message not completed)", since: at(21).UTC().Format(time.RFC3339)}},
		{"tool calls", []string{`{"role":"user","time":{"created":%d}}`, `{"role":"assistant","time":{"created":%d,"completed":1},"finish":"tool-calls"}`},
			stateCase{state: StateWorking, via: "db (finish tool-calls)", since: at(21).UTC().Format(time.RFC3339)}},
		{"error", []string{`{"role":"user","time":{"created":%d}}`, `{"role":"assistant","time":{"created":%d},"error":{"name":"APIError"}}`},
			stateCase{state: StateIdle, via: "db (assistant error)", since: at(21).UTC().Format(time.RFC3339)}},
	} {
		f := newFx(t)
		db := ocWriter(t, f)
		ocInsert(t, db, ocRow{id: "ses_1", dir: f.cwd(), title: "t", model: "mock-oc", created: 11, updated: 12, answered: []string{"mock-oc"}})
		ocExec(t, db, `UPDATE session SET tokens_input = 10, tokens_output = 8, tokens_reasoning = 2, tokens_cache_read = 5, tokens_cache_write = 1 WHERE id = 'ses_1'`)
		for i, d := range tc.extra {
			sec := float64(20 + i)
			ocExec(t, db, `INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, 'ses_1', ?, ?, ?)`,
				fmt.Sprintf("msg_x%d", i), ms(sec), ms(sec), fmt.Sprintf(d, ms(sec)))
		}
		dbr, err := openOC(t, f)
		if err != nil {
			t.Fatal(err)
		}
		var a Agent
		ocTurn(dbr, "ses_1").set(&a)
		a.Tokens = ocTokens(dbr, "ses_1")
		tc.c.tokens = "context 10\ninput 10\noutput 10\ncache_read 5\ncache_write 1"
		if tc.name == "streaming" {
			tc.c.tokens = "context 38\ninput 10\noutput 10\ncache_read 5\ncache_write 1"
		}
		checkState(t, "opencode/"+tc.name, a, tc.c)
	}
}

// TestTokensString: lines in a fixed order, absent where unknown.
func TestTokensString(t *testing.T) {
	for _, tc := range []struct {
		t    Tokens
		want string
	}{
		{Tokens{}, ""},
		{Tokens{Output: i64(3)}, "output 3"},
		{Tokens{CacheWrite: i64(0), Context: i64(7), Input: i64(1)}, "context 7\ninput 1\ncache_write 0"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestScanBounds: a line over the line bound is skipped, not split; a
// last line with no newline yet is left for the next count; and a file
// over the scan bound gives the context alone (sums of a part would pass
// for the whole).
func TestScanBounds(t *testing.T) {
	f := newFx(t)
	long := `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("x", scanLine+10) + `"}}`
	b, _ := os.ReadFile("testdata/state/claude/null-text-tail.jsonl")
	path := f.write(".claude/a.jsonl", long+"\n"+string(b)+`{"type":"user"`, at(900))
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	var got []string
	end := scanLines(fh, 0, st.Size(), func(ln []byte) { got = append(got, string(ln[:20])) })
	if len(got) != 2 || end != st.Size()-int64(len(`{"type":"user"`)) {
		t.Errorf("scanned %q up to %d of %d: want the 2 short whole lines, up to the torn one", got, end, st.Size())
	}
	big := strings.Repeat(`{"type":"progress"}`+"\n", scanMax/20+1) + string(b)
	f.write(".claude/b.jsonl", big, at(900))
	a := Agent{Harness: "claude", Transcript: "b.jsonl"}
	claudeFill(f.env(".claude"), &a, "b.jsonl", at(1000))
	if got := Count(f.env(".claude"), a).String(); got != "context 1110" {
		t.Errorf("over the scan bound: tokens %q, want the context alone", got)
	}
	if a.State != StateIdle {
		t.Errorf("over the scan bound: state %q, want idle from the tail", a.State)
	}
}

// openOC opens the fixture's opencode.db read-only, as a snapshot would.
func openOC(t *testing.T, f *fx) (*sql.DB, error) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(f.home, ocRoot, "opencode.db")+"?mode=ro")
	if err == nil {
		t.Cleanup(func() { db.Close() })
	}
	return db, err
}

// BenchmarkClaudeFill is what Resolve adds for the state and context of
// one agent whose transcript is about 2 MiB (the realistic size),
// and BenchmarkClaudeCount what its tokens file costs to read.
func BenchmarkClaudeFill(b *testing.B)  { benchClaude(b, false, nil) }
func BenchmarkClaudeCount(b *testing.B) { benchClaude(b, true, nil) }

// BenchmarkClaudeCountCached is a tokens read of an unchanged transcript
// with the daemon's Counts.
func BenchmarkClaudeCountCached(b *testing.B) { benchClaude(b, true, &Counts{}) }

func benchClaude(b *testing.B, count bool, counts *Counts) {
	var sb strings.Builder
	for i := 0; sb.Len() < 2<<20; i++ {
		sb.WriteString(ccUser(ccSID, "/x", strings.Repeat("prompt text ", 40), float64(i)) + "\n")
		sb.WriteString(strings.Replace(ccAssistant(ccSID, "/x", "claude-opus-4-8", float64(i)+0.5), `"msg_01"`, fmt.Sprintf(`"msg_%d"`, i), 1) + "\n")
	}
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/s.jsonl", []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	env := Env{Root: saferoot.New(dir), Counts: counts}
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var a Agent
		claudeFill(env, &a, "s.jsonl", time.Now())
		if a.State != StateIdle || a.Tokens.Context == nil {
			b.Fatalf("state %q tokens %q", a.State, a.Tokens)
		}
		if count {
			a.Harness, a.Transcript = "claude", "s.jsonl"
			if t := Count(env, a); t.Input == nil {
				b.Fatalf("tokens %q", t)
			}
		}
	}
}

// TestClaudeUsageFast: the shortcut reads what the full decoding reads,
// and leaves to it every line it cannot be sure of.
func TestClaudeUsageFast(t *testing.T) {
	full := func(ln string) (string, claudeUsage, bool) {
		var l claudeUsageLine
		if json.Unmarshal([]byte(ln), &l) != nil || l.Type != "assistant" || l.IsSidechain || l.Message == nil ||
			l.Message.Usage == nil || l.Message.Model == "<synthetic>" {
			return "", claudeUsage{}, false
		}
		return l.Message.ID, *l.Message.Usage, true
	}
	var ls []string
	for _, dir := range []string{"testdata/state/claude", "testdata/claude-2.1.197"} {
		fs, _ := filepath.Glob(dir + "/*.jsonl")
		for _, f := range fs {
			b, _ := os.ReadFile(f)
			ls = append(ls, strings.Split(string(b), "\n")...)
		}
	}
	// A tool input holding a "usage" object, before the message's own.
	ls = append(ls, `{"isSidechain":false,"type":"assistant","message":{"id":"msg_x","model":"m","content":[{"type":"tool_use","name":"mcp","input":{"usage":{"input_tokens":999}}}],"usage":{"input_tokens":4,"output_tokens":2}}}`)
	n := 0
	for _, ln := range ls {
		id, u, ok := claudeUsageFast([]byte(ln))
		if !ok {
			continue
		}
		n++
		fid, fu, fok := full(ln)
		if !fok || fid != id || fu != u {
			t.Errorf("fast %q %+v, full %v %q %+v: %s", id, u, fok, fid, fu, ln)
		}
	}
	if n < 10 {
		t.Errorf("the shortcut read only %d lines", n)
	}
}

// TestUsageFast: the usage object's own reading gives what json.Unmarshal
// gives, or leaves the object to it.
func TestUsageFast(t *testing.T) {
	for _, obj := range []string{
		`{"input_tokens":3,"cache_creation_input_tokens":120,"cache_read_input_tokens":1000,"output_tokens":40}`,
		`{ "input_tokens" : 3 , "cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":120},"output_tokens":-4,"service_tier":"standard","server_tool_use":{"web_search_requests":0},"x":null,"y":true,"z":false}`,
		`{}`, `{"input_tokens":1,"input_tokens":2}`, `{"Input_Tokens":5}`, `{"input_tokens":5,"INPUT_TOKENS":6}`,
		`{"input_tokens":1.5}`, `{"input_tokens":1e3}`, `{"input_tokens":01}`, `{"input_tokens":"3"}`, `{"input_tokens":null}`,
		`{"input_tokens":99999999999999999999}`, `{"input_tokens":-}`, `{"a":[1,2],"input_tokens":3}`, `{"a":"\u0041","output_tokens":3}`,
		`{"output_tokens":3,}`, `{"output_tokens":3`, `{"output_tokens" 3}`, `{"a":tru,"output_tokens":3}`, `{"a":"é","output_tokens":3}`,
		`{"output_tokens":3} `, `{"output_tokens":3}x`,
	} {
		var want claudeUsage
		werr := json.Unmarshal([]byte(obj), &want)
		got, ok := usageFast([]byte(obj))
		if ok && (werr != nil || got != want) {
			t.Errorf("%s: %+v, json.Unmarshal %+v (%v)", obj, got, want, werr)
		}
	}
	if u, ok := usageFast([]byte(`{"input_tokens":3,"cache_creation":{"a":1},"output_tokens":40,"service_tier":"standard"}`)); !ok || u.Input != 3 || u.Output != 40 {
		t.Errorf("Claude's usage object not read: %+v %v", u, ok)
	}
}

// TestCodexTokensWindows: in a rollout too big to read whole, the newest
// token_count is still found in the tail, and a sub-agent's baseline is
// looked for in the head alone: not found there, the sums are absent
// rather than the parent's history counted as the child's.
func TestCodexTokensWindows(t *testing.T) {
	b, err := os.ReadFile("testdata/state/codex/subagent-fork.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(b), "\n")
	filler := strings.Repeat(`{"timestamp":"2026-12-01T13:20:00.500Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"`+strings.Repeat("y", 900)+`"}]}}`+"\n", 600)
	rel := "sessions/2026/12/01/rollout-2026-12-01T13-20-00-01a231bc-0000-7000-8000-000000000002.jsonl"
	for _, tc := range []struct {
		name, content, want string
	}{
		{"baseline in the head", ls[0] + ls[1] + filler + strings.Join(ls[2:], ""), "context 2000\ninput 500\noutput 400\ncache_read 1500\ncache_write 0"},
		{"baseline beyond the head", ls[0] + filler + strings.Join(ls[1:], ""), "context 2000"},
	} {
		f := newFx(t)
		f.write(".codex/"+rel, tc.content, at(900))
		var a Agent
		codexFill(f.env(".codex"), &a, rel)
		if got := a.Tokens.String(); got != tc.want {
			t.Errorf("%s: tokens %q, want %q", tc.name, got, tc.want)
		}
		if a.State != StateIdle {
			t.Errorf("%s: state %q, want idle", tc.name, a.State)
		}
	}
}

// TestCounts: a count is reused only while the file's identity, size and
// mtime are the ones it was made at.
func TestCounts(t *testing.T) {
	f := newFx(t)
	b, err := os.ReadFile("testdata/state/claude/null-text-tail.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := f.writeBytes(".claude/s.jsonl", b, at(900))
	env := f.env(".claude")
	env.Counts = &Counts{}
	a := Agent{Harness: "claude", Transcript: "s.jsonl"}
	if got := Count(env, a).String(); got != claudeTokens1 {
		t.Fatalf("first count %q", got)
	}
	// The same bytes with another output count, at the same size and
	// mtime: the cached count stands (this proves the cache is used).
	same := strings.Replace(string(b), `"output_tokens":8`, `"output_tokens":9`, 1)
	f.write(".claude/s.jsonl", same, at(900))
	if got := Count(env, a).String(); got != claudeTokens1 {
		t.Errorf("unchanged size and mtime: %q, want the cached count", got)
	}
	// A new mtime: counted again.
	if err := os.Chtimes(path, at(901), at(901)); err != nil {
		t.Fatal(err)
	}
	if got, want := Count(env, a).String(), strings.Replace(claudeTokens1, "output 8", "output 9", 1); got != want {
		t.Errorf("after a write: %q, want %q", got, want)
	}
	// A new file at the path (another inode), same size and mtime.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, at(901), at(901)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := Count(env, a).String(); got != claudeTokens1 {
		t.Errorf("after a rename over it: %q, want %q", got, claudeTokens1)
	}
}

// TestStateRealCaptures: the rules on what the real CLIs wrote (the
// captures of real-clis-2026-12.md in testdata/): each turn there ended.
func TestStateRealCaptures(t *testing.T) {
	for _, tc := range []struct {
		harness, file, via, since, tokens string
	}{
		{"claude", "testdata/claude-2.1.197/transcript.jsonl", "transcript (turn_duration)", "2026-12-01T13:13:03Z",
			"context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
		{"pi", "testdata/pi-0.73.1/session.jsonl", "transcript (stopReason stop)", "2026-12-01T13:13:06Z",
			"context 10\ninput 10\noutput 8\ncache_read 0\ncache_write 0"},
		{"gemini", "testdata/gemini/session-2026-12-01T17-42-f92f9950.jsonl", "transcript (reply without tool calls)", "2026-12-01T17:42:35Z",
			"context 10\ninput 10\noutput 8\ncache_read 0"},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(dir+"/x.jsonl", b, 0o600); err != nil {
			t.Fatal(err)
		}
		env := Env{Root: saferoot.New(dir)}
		a := Agent{Harness: tc.harness, Transcript: "x.jsonl"}
		switch tc.harness {
		case "claude":
			claudeFill(env, &a, "x.jsonl", time.Now())
		case "pi":
			piFill(env, &a, "x.jsonl")
		case "gemini":
			geminiFill(env, &a, "x.jsonl")
		}
		a.Tokens = Count(env, a)
		checkState(t, tc.file, a, stateCase{state: StateIdle, via: tc.via, since: tc.since, tokens: tc.tokens})
	}
}

// TestCountsGrow: a transcript that grew is read on from where the last
// count stopped, its running totals kept (a response's later line still
// replaces its earlier one); one whose counted bytes changed is counted
// afresh.
func TestCountsGrow(t *testing.T) {
	f := newFx(t)
	b, err := os.ReadFile("testdata/state/claude/streaming-tool-use.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(b), "\n")
	// msg_0, 8 KiB of other lines, the prompt, msg_1's first two lines.
	pad := strings.Repeat(`{"type":"progress","data":{}}`+"\n", 300)
	path := f.write(".claude/s.jsonl", ls[0]+pad+strings.Join(ls[1:4], ""), at(900))
	env := f.env(".claude")
	env.Counts = &Counts{}
	a := Agent{Harness: "claude", Transcript: "s.jsonl"}
	if got, want := Count(env, a).String(), "context 1110\ninput 20\noutput 7\ncache_read 2000\ncache_write 200"; got != want {
		t.Fatalf("before: %q, want %q", got, want)
	}
	// Half of msg_1's last line, then all of it.
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	half := len(ls[4]) / 2
	fh.WriteString(ls[4][:half])
	if got, want := Count(env, a).String(), "context 1110\ninput 20\noutput 7\ncache_read 2000\ncache_write 200"; got != want {
		t.Errorf("with a torn last line: %q, want %q", got, want)
	}
	fh.WriteString(ls[4][half:])
	if got := Count(env, a).String(); got != claudeTokens3 {
		t.Errorf("grown: %q, want %q (msg_1 once, its last line)", got, claudeTokens3)
	}
	// A byte changed before the fingerprint (the last 4 KiB counted), then
	// growth: the count reads on (the harnesses only append), which this
	// proves: afresh, msg_0 would count 6.
	whole, _ := os.ReadFile(path)
	early := strings.Replace(string(whole), `"output_tokens":5`, `"output_tokens":6`, 1)
	f.write(".claude/s.jsonl", early+ls[4], at(901))
	if got := Count(env, a).String(); got != claudeTokens3 {
		t.Errorf("read on: %q, want %q", got, claudeTokens3)
	}
	// The last counted bytes changed: counted afresh.
	cur, _ := os.ReadFile(path)
	changed := strings.Replace(string(cur), `"output_tokens":159`, `"output_tokens":150`, 2) + "\n"
	f.write(".claude/s.jsonl", changed, at(902))
	if got, want := Count(env, a).String(), strings.Replace(claudeTokens3, "output 164", "output 156", 1); got != want {
		t.Errorf("rewritten: %q, want a fresh count %q (msg_0's 6, msg_1's 150)", got, want)
	}
}

// TestCountsConcurrent: readers of the same and of different transcripts
// share one Counts (run under -race).
func TestCountsConcurrent(t *testing.T) {
	f := newFx(t)
	for _, n := range []string{"a", "b"} {
		f.fixture("claude", "streaming-tool-use.jsonl", ".claude/"+n+".jsonl", at(900))
	}
	env := f.env(".claude")
	env.Counts = &Counts{}
	done := make(chan string)
	for i := 0; i < 8; i++ {
		go func(i int) {
			a := Agent{Harness: "claude", Transcript: []string{"a", "b"}[i%2] + ".jsonl"}
			done <- Count(env, a).String()
		}(i)
	}
	for i := 0; i < 8; i++ {
		if got := <-done; got != claudeTokens3 {
			t.Errorf("count %q, want %q", got, claudeTokens3)
		}
	}
}

// TestStateClaudePermission: Claude 2.1.197 (and 2.1.332) publish a
// permission prompt as waitingFor "permission prompt", naming no tool
// (seen by test/realcli's TestEventsClaudePermission). The tool is the
// transcript's unanswered call of the newest response: "approve Bash".
// Other waitingFor words, and a tail with no unanswered call, are served
// as the registry wrote them.
func TestStateClaudePermission(t *testing.T) {
	const named = RouteRegistry + " (waitingFor permission prompt; the tool from the transcript's unanswered Bash call)"
	for _, tc := range []struct {
		file, waitingFor string
		waiting, via     string
	}{
		// The real transcript at the dialog: the prompt's user line was
		// written after the response's tool_use line.
		{"permission-prompt-2.1.197.jsonl", "permission prompt", "approve Bash", named},
		{"permission-prompt-2.1.197.jsonl", "input needed", "input needed", RouteRegistry},
		{"permission-prompt-2.1.197.jsonl", "approve Bash", "approve Bash", RouteRegistry},
		{"streaming-tool-use.jsonl", "permission prompt", "approve Bash", named},
		// The call answered (approved, run, the turn over): no tool to name.
		{"permission-approved-2.1.197.jsonl", "permission prompt", "permission prompt", RouteRegistry},
		{"tool-result.jsonl", "permission prompt", "permission prompt", RouteRegistry},
		{"turn-duration.jsonl", "permission prompt", "permission prompt", RouteRegistry},
	} {
		f := newFx(t)
		p, proj, _ := ccFixture(f, f.cwd())
		f.fixture("claude", tc.file, ".claude/"+proj+"/"+ccSID+".jsonl", at(950))
		rec := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"startedAt":%d,"procStart":"50424","version":"2.1.197","kind":"interactive","status":"waiting","waitingFor":%q,"updatedAt":%d,"statusUpdatedAt":%d}`,
			ccPID, ccSID, f.cwd(), at(505).UnixMilli(), tc.waitingFor, at(960).UnixMilli(), at(955).UnixMilli())
		f.write(".claude/sessions/345104.json", rec, at(960))
		a := claude{}.Resolve(f.env(".claude"), p)
		name := tc.file + " waitingFor " + tc.waitingFor
		if a.State != StateWaiting || a.Waiting != tc.waiting || a.StateVia != tc.via {
			t.Errorf("%s:\n got state=%q waiting=%q via=%q\nwant state=%q waiting=%q via=%q", name, a.State, a.Waiting, a.StateVia, StateWaiting, tc.waiting, tc.via)
		}
		if a.Status != "waiting" {
			t.Errorf("%s: status %q, want the registry's waiting", name, a.Status)
		}
	}
}

// TestClaudePending: the call a permission prompt is about.
func TestClaudePending(t *testing.T) {
	asst := func(id, blocks string) string {
		return `{"type":"assistant","isSidechain":false,"message":{"id":"` + id + `","model":"m","content":[` + blocks + `]}}`
	}
	user := func(blocks string) string {
		return `{"type":"user","isSidechain":false,"message":{"role":"user","content":[` + blocks + `]}}`
	}
	use := func(id, name string) string {
		return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":{}}`
	}
	res := func(id string) string { return `{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}` }
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"one call", []string{asst("m1", use("t1", "Bash"))}, "Bash"},
		{"answered", []string{asst("m1", use("t1", "Bash")), user(res("t1"))}, ""},
		{"first unanswered of parallel calls", []string{asst("m1", use("t1", "Read")), asst("m1", use("t2", "Bash")), asst("m1", use("t3", "Edit")), user(res("t1"))}, "Bash"},
		{"prompt line after the response", []string{asst("m1", use("t1", "Bash")), user(`{"type":"text","text":"go"}`)}, "Bash"},
		{"newest response has no call", []string{asst("m1", use("t1", "Bash")), asst("m2", `{"type":"text","text":"done"}`)}, ""},
		{"a sub-agent's call", []string{`{"type":"assistant","isSidechain":true,"message":{"id":"s1","model":"m","content":[` + use("t9", "Bash") + `]}}`}, ""},
		{"older response's call", []string{asst("m1", use("t1", "Bash")), user(res("t1")), asst("m2", use("t2", "Write"))}, "Write"},
	} {
		var tail [][]byte
		for _, l := range tc.lines {
			tail = append(tail, []byte(l))
		}
		if got := claudePending(tail); got != tc.want {
			t.Errorf("%s: claudePending = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestClaudePendingOneLine: a tool name is the transcript's text; served
// in waiting and in an /active/events line, it is one line.
func TestClaudePendingOneLine(t *testing.T) {
	tail := [][]byte{
		[]byte(`{"type":"assistant","message":{"id":"m1","model":"claude","content":[{"type":"tool_use","id":"t1","name":"Bash\n2026-12-01T00:00:00Z claude 1 idle"}]}}`),
	}
	if got, want := claudePending(tail), "Bash 2026-12-01T00:00:00Z claude 1 idle"; got != want {
		t.Errorf("claudePending = %q, want %q", got, want)
	}
}

// A transcript of many more messages than maxOpenIDs: the count's state
// stays bounded and the sums are those of every message (each id's last
// line), as long as an id's lines are not maxOpenIDs messages apart.
func TestCountBoundedState(t *testing.T) {
	var c claudeTokens
	const n = 5 * maxOpenIDs
	for i := 0; i < n; i++ {
		for out := 1; out <= 2; out++ { // a message's lines, its output final on the last
			c.line([]byte(fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_%d","model":"m","usage":{"input_tokens":1,"output_tokens":%d}}}`, i, out)))
		}
	}
	c.line([]byte(`{"type":"assistant","message":{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}}`))
	if len(c.byID.m) > maxOpenIDs || len(c.byID.order) > maxOpenIDs {
		t.Errorf("%d ids kept, want at most %d", len(c.byID.m), maxOpenIDs)
	}
	got := c.tokens(true)
	if *got.Input != n+1 || *got.Output != 2*n+1 {
		t.Errorf("input %d output %d, want %d and %d", *got.Input, *got.Output, n+1, 2*n+1)
	}
	var g geminiTokens
	for i := 0; i < n; i++ {
		for _, tok := range []string{`"input":0`, `"input":3,"output":2,"cached":1,"thoughts":1`} {
			g.line([]byte(fmt.Sprintf(`{"id":"r%d","type":"gemini","tokens":{%s}}`, i, tok)))
		}
	}
	if len(g.byID.m) > maxOpenIDs {
		t.Errorf("gemini: %d ids kept", len(g.byID.m))
	}
	if gt := g.tokens(true); *gt.Input != 2*n || *gt.Output != 3*n || *gt.CacheRead != n {
		t.Errorf("gemini: %s", gt)
	}
}

// TestStateClaudeAutoDialog: Claude 2.1.332 in its default permission mode,
// auto, whose check of an action runs on Anthropic's servers: against a
// model API that cannot run it (test/realcli's mock), the model's Agent call
// stops at the dialog "Auto mode can't check actions in this session",
// which waits for the user. The registry record and the transcript's tail
// are a real run's (TestEventsClaudeAutoDialog): waiting, "dialog open",
// not the permission prompt's "approve Agent".
func TestStateClaudeAutoDialog(t *testing.T) {
	f := newFx(t)
	p, proj, _ := ccFixture(f, f.cwd())
	f.write(".claude/"+proj+"/"+ccSID+".jsonl", fixture(t, "claude-2.1.332/auto-dialog-tail.jsonl", "SID", ccSID, "CWD", f.cwd()), at(950))
	f.write(".claude/sessions/345104.json", fixture(t, "claude-2.1.332/auto-dialog-registry.json",
		"PID", strconv.Itoa(ccPID), "SID", ccSID, "CWD", f.cwd(), "STARTED_MS", strconv.FormatInt(at(505).UnixMilli(), 10),
		"PROCSTART", strconv.Itoa(ccTick), "AT_MS", strconv.FormatInt(at(955).UnixMilli(), 10)), at(960))
	a := claude{}.Resolve(f.env(".claude"), p)
	if a.State != StateWaiting || a.Waiting != "dialog open" || a.StateVia != RouteRegistry {
		t.Errorf("at the auto-mode dialog: state=%q waiting=%q via=%q, want waiting, dialog open, %s", a.State, a.Waiting, a.StateVia, RouteRegistry)
	}
	if a.Session != ccSID {
		t.Errorf("session %q, want %q", a.Session, ccSID)
	}
}
