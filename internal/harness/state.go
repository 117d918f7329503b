package harness

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/saferoot"
)

// The turn states. An agent is working (a turn is in flight), waiting
// (it needs the user: a permission, a question, a dialog) or idle (the
// turn is over, it is at its prompt). Where the files a harness writes do
// not tell which, the state is unknown ("") and StateVia says why: a state
// is never guessed.
const (
	StateWorking = "working"
	StateWaiting = "waiting"
	StateIdle    = "idle"
)

// settle is how long a transcript must have been still before a reply
// that Claude never stamped with a stop reason is read as the turn's end.
const settle = 2 * time.Second

// turn is a derived state.
type turn struct {
	state, waiting, via string
	since               time.Time
	// pending is the tool a Claude transcript's tail has a call of and no
	// result for yet (claudePending): what a permission prompt asks about.
	pending string
}

func (t turn) set(a *Agent) {
	a.State, a.Waiting, a.StateVia, a.Since = t.state, t.waiting, t.via, t.since.UTC()
	if t.since.IsZero() {
		a.Since = time.Time{}
	}
	if t.state == "" {
		a.Waiting, a.Since = "", time.Time{}
	}
}

func unknown(why string) turn { return turn{via: RouteNone + " (" + why + ")"} }

// lineTime reads an RFC 3339 "timestamp".
func lineTime(s string) time.Time {
	t, _ := parseTime(s)
	return t
}

// ---- Claude ----

// claudeRegTurn is the state Claude's registry publishes: status busy,
// idle or waiting (with waitingFor: "permission prompt", "input needed",
// "dialog open", …). Old builds write no status: then ok is false and the
// transcript decides.
func claudeRegTurn(status, waitingFor string, updated json.RawMessage) (turn, bool) {
	t := turn{via: RouteRegistry}
	if ms, ok := number(updated); ok && ms > 0 {
		t.since = time.UnixMilli(int64(ms))
	}
	switch status {
	case "busy":
		t.state = StateWorking
	case "idle":
		t.state = StateIdle
	case "waiting":
		t.state, t.waiting = StateWaiting, cleanTitle(waitingFor)
	default:
		return turn{}, false
	}
	return t, true
}

type claudeTurnLine struct {
	Type              string `json:"type"`
	Subtype           string `json:"subtype"`
	IsSidechain       bool   `json:"isSidechain"`
	IsMeta            bool   `json:"isMeta"`
	IsCompactSummary  bool   `json:"isCompactSummary"`
	IsAPIErrorMessage bool   `json:"isApiErrorMessage"`
	Timestamp         string `json:"timestamp"`
	PermissionMode    string `json:"permissionMode"`
	Message           *struct {
		ID         string          `json:"id"`
		Model      string          `json:"model"`
		StopReason *string         `json:"stop_reason"`
		Content    json.RawMessage `json:"content"`
	} `json:"message"`
}

type claudeBlock struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Text      string `json:"text"`
	ID        string `json:"id"`          // a tool_use's
	ToolUseID string `json:"tool_use_id"` // the call a tool_result answers
}

func claudeBlocks(content json.RawMessage) (blocks []claudeBlock, text string) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return nil, s
	}
	json.Unmarshal(content, &blocks)
	for _, b := range blocks {
		if b.Type == "text" {
			text += b.Text
		}
	}
	return blocks, text
}

// claudeInput are the tools by which Claude asks the user something: a
// pending one is a question, not a permission.
var claudeInput = map[string]bool{"AskUserQuestion": true, "ExitPlanMode": true}

// claudeTurn derives the state from a transcript's tail, newest line
// first: the newest line that says something of the turn decides.
// Sub-agent lines, metadata lines, isMeta, compact-summary and
// command-echo user lines, and synthetic assistant lines (a --resume's "No response requested.")
// say nothing. settled says the file has not grown for the settle time.
func claudeTurn(tail [][]byte, settled bool) turn {
	parse := func(i int) (claudeTurnLine, bool) {
		var l claudeTurnLine
		if json.Unmarshal(tail[i], &l) != nil || l.IsSidechain {
			return l, false
		}
		return l, true
	}
	for i := len(tail) - 1; i >= 0; i-- {
		l, ok := parse(i)
		if !ok {
			continue // torn, or a sub-agent's
		}
		at := lineTime(l.Timestamp)
		switch l.Type {
		case "system":
			if l.Subtype == "turn_duration" || l.Subtype == "stop_hook_summary" {
				return turn{state: StateIdle, via: "transcript (" + l.Subtype + ")", since: at}
			}
		case "user":
			if l.IsMeta || l.IsCompactSummary || l.Message == nil {
				continue // a reminder, or /compact's summary: no prompt
			}
			blocks, text := claudeBlocks(l.Message.Content)
			if strings.HasPrefix(strings.TrimSpace(text), "[Request interrupted by user") {
				return turn{state: StateIdle, via: "transcript (interrupted)", since: at}
			}
			for _, b := range blocks {
				if b.Type == "tool_result" {
					return turn{state: StateWorking, via: "transcript (tool result: a model call is in flight)", since: claudeTurnStart(tail, i)}
				}
			}
			if claudeUserText(l.Message.Content) != "" {
				return turn{state: StateWorking, via: "transcript (user prompt)", since: at}
			}
		case "assistant":
			if l.Message == nil {
				continue
			}
			if l.Message.Model == "<synthetic>" {
				if l.IsAPIErrorMessage {
					return turn{state: StateIdle, via: "transcript (api error)", since: at}
				}
				continue
			}
			stop := ""
			if l.Message.StopReason != nil {
				stop = *l.Message.StopReason
			}
			blocks, _ := claudeBlocks(l.Message.Content)
			var tools []string
			text := false
			for _, b := range blocks {
				switch b.Type {
				case "tool_use":
					tools = append(tools, b.Name)
				case "text":
					text = true
				}
			}
			switch {
			case stop == "end_turn" || stop == "stop_sequence" || stop == "max_tokens" || stop == "refusal":
				return turn{state: StateIdle, via: "transcript (stop_reason " + stop + ")", since: at}
			case stop == "pause_turn":
				return turn{state: StateWorking, via: "transcript (stop_reason pause_turn)", since: claudeTurnStart(tail, i)}
			case stop == "tool_use" || (stop == "" && len(tools) > 0):
				return claudeToolTurn(tail, i, l.Message.ID, at)
			case stop == "" && text && settled:
				return turn{state: StateIdle, via: "transcript (text reply with stop_reason null, file settled)", since: at}
			case stop == "":
				return turn{state: StateWorking, via: "transcript (response streaming: stop_reason null)", since: claudeTurnStart(tail, i)}
			default:
				return unknown("transcript: stop_reason " + stop + " is not known")
			}
		}
	}
	return unknown("no turn in the transcript's tail")
}

// claudeToolTurn is the state when the newest response ends in a tool
// call no result has answered yet. A question tool is the user's to
// answer; under bypassPermissions a tool is never a permission prompt;
// otherwise it runs or awaits approval, and only the registry says which.
func claudeToolTurn(tail [][]byte, i int, id string, at time.Time) turn {
	var tools []string
	for j := i; j >= 0; j-- {
		var l claudeTurnLine
		if json.Unmarshal(tail[j], &l) != nil || l.Type != "assistant" || l.Message == nil {
			continue
		}
		if l.Message.ID != id || (id == "" && j != i) {
			break
		}
		blocks, _ := claudeBlocks(l.Message.Content)
		for k := len(blocks) - 1; k >= 0; k-- {
			if blocks[k].Type == "tool_use" {
				tools = append([]string{blocks[k].Name}, tools...)
			}
		}
	}
	for _, name := range tools {
		if claudeInput[name] {
			return turn{state: StateWaiting, waiting: "approve " + name, via: "transcript (" + name + " pending)", since: at}
		}
	}
	names := strings.Join(tools, ",")
	if claudePermissionMode(tail, i) == "bypassPermissions" {
		return turn{state: StateWorking, via: "transcript (tool_use " + names + " in flight; bypassPermissions)", since: claudeTurnStart(tail, i)}
	}
	return unknown("tool_use " + names + " in flight: running or awaiting approval, which only the registry tells")
}

// claudePermissionMode is the newest permissionMode a user line at or
// before i records.
func claudePermissionMode(tail [][]byte, i int) string {
	for j := i; j >= 0; j-- {
		if !bytes.Contains(tail[j], []byte(`"permissionMode"`)) {
			continue
		}
		var l claudeTurnLine
		if json.Unmarshal(tail[j], &l) == nil && l.PermissionMode != "" {
			return l.PermissionMode
		}
	}
	return ""
}

// claudeTurnStart is when the turn in flight at line i began: the newest
// user prompt at or before it, zero if the tail does not hold it.
func claudeTurnStart(tail [][]byte, i int) time.Time {
	for j := i; j >= 0; j-- {
		// Only a user line or a system line ends the search: a line that
		// names neither type is not decoded (a turn's many assistant lines).
		if !mayHold(tail[j], `"user"`, `"system"`) {
			continue
		}
		var l claudeTurnLine
		if json.Unmarshal(tail[j], &l) != nil || l.IsSidechain {
			continue
		}
		switch {
		case l.Type == "system" && (l.Subtype == "turn_duration" || l.Subtype == "stop_hook_summary"):
			return time.Time{}
		case l.Type == "user" && !l.IsMeta && l.Message != nil && claudeUserText(l.Message.Content) != "":
			return lineTime(l.Timestamp)
		}
	}
	return time.Time{}
}

// claudePermission is the registry's waitingFor for a permission prompt,
// whatever the tool: Claude 2.1.197 to 2.1.332 write it, not the
// "approve <tool>" of older sources.
const claudePermission = "permission prompt"

// claudePending is the tool a permission prompt asks about: the first
// tool call, in file order, of the newest response that made one, that
// no tool_result in the tail answers. Claude asks about its calls one at
// a time, in order; a call it runs unasked (Read) has its result by the
// time a later one is asked about, unless they run at once. The newest
// response is found by its message id, not its place: Claude may write
// the prompt's user line after the response's first lines.
func claudePending(tail [][]byte) string {
	id := ""
	for i := len(tail) - 1; i >= 0 && id == ""; i-- {
		var l claudeTurnLine
		if json.Unmarshal(tail[i], &l) != nil || l.IsSidechain || l.Type != "assistant" || l.Message == nil || l.Message.Model == "<synthetic>" {
			continue
		}
		blocks, _ := claudeBlocks(l.Message.Content)
		for _, b := range blocks {
			if b.Type == "tool_use" {
				id = l.Message.ID
			}
		}
		if id == "" {
			return "" // the newest response calls no tool
		}
	}
	answered := map[string]bool{}
	var calls []claudeBlock
	for _, line := range tail {
		var l claudeTurnLine
		if json.Unmarshal(line, &l) != nil || l.IsSidechain || l.Message == nil {
			continue
		}
		blocks, _ := claudeBlocks(l.Message.Content)
		for _, b := range blocks {
			switch {
			case l.Type == "user" && b.Type == "tool_result":
				answered[b.ToolUseID] = true
			case l.Type == "assistant" && b.Type == "tool_use" && l.Message.ID == id:
				calls = append(calls, b)
			}
		}
	}
	for _, b := range calls {
		if !answered[b.ID] {
			// The name is the transcript's text, served in waiting and
			// in an events line: one line, as the registry's waitingFor.
			return cleanTitle(b.Name)
		}
	}
	return ""
}

// claudeFill sets a's state (unless the registry has) and context from
// the transcript rel's tail. The sums need the whole file: Count. A
// registry that says only "permission prompt" is told which tool from
// the tail: "approve Bash".
func claudeFill(env Env, a *Agent, rel string, now time.Time) {
	if strings.HasPrefix(a.StateVia, RouteRegistry) && !(a.State == StateWaiting && a.Waiting == claudePermission) {
		// The registry gave the state: of the tail only the context is
		// wanted, the newest usage line's, nearly always in the last
		// lines; claudeContext reads the file's end for it.
		c := fileCached(env.Memo, env.Root, "claude-context", rel, func() contextTail { return claudeContext(env.Root, rel) })
		if c.found {
			a.Tokens = c.tokens.clone()
			a.Limits = nil
			return
		}
	}
	f := fileCached(env.Memo, env.Root, "claude-tail", rel, func() tailFacts {
		s := scanFile(env.Root, rel)
		var c claudeTokens
		for i := len(s.tail) - 1; i >= 0 && c.newest == nil; i-- {
			c.line(s.tail[i])
		}
		t, settled := claudeTurn(s.tail, false), claudeTurn(s.tail, true)
		t.pending = claudePending(s.tail)
		settled.pending = t.pending
		return tailFacts{turn: t, settled: settled, tokens: c.tokens(false), mtime: s.mtime}
	})
	fromRegistry := strings.HasPrefix(a.StateVia, RouteRegistry)
	f.fill(a, a.State == "" && !fromRegistry, now)
	if fromRegistry && a.State == StateWaiting && a.Waiting == claudePermission && f.turn.pending != "" {
		a.Waiting = "approve " + f.turn.pending
		a.StateVia = RouteRegistry + " (waitingFor " + claudePermission + "; the tool from the transcript's unanswered " + f.turn.pending + " call)"
	}
}

// contextTail is the context a transcript's end gives (claudeContext).
type contextTail struct {
	tokens Tokens
	found  bool // false: the end did not tell; the whole tail must
}

// contextEnd is how much of a transcript's end claudeContext reads.
const contextEnd = 32 << 10

// claudeContext is the context claudeFill's tail would give, from the
// transcript's last contextEnd bytes: the newest main-chain usage line,
// scanning back from the end. A usage line found there, before reaching
// the window's cut first line, is the newest of the file too; a file
// that fits the window tells whether it has one at all. Otherwise found
// is false.
func claudeContext(r *saferoot.Root, rel string) contextTail {
	f, err := r.Open(rel)
	if err != nil {
		return contextTail{}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return contextTail{}
	}
	size := st.Size()
	off := max(size-contextEnd, 0)
	b := make([]byte, size-off)
	n, _ := f.ReadAt(b, off)
	b = b[:n]
	if off > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return contextTail{}
		}
		b = b[i+1:]
	}
	ls := lines(b)
	var c claudeTokens
	for i := len(ls) - 1; i >= 0 && c.newest == nil; i-- {
		c.line(ls[i])
	}
	if c.newest == nil && off > 0 {
		return contextTail{}
	}
	return contextTail{tokens: c.tokens(false), found: true}
}

// ---- Codex ----

// codexNoApproval is said of every Codex state: Codex writes no approval
// request to its rollout, so a turn waiting for one reads as working.
const codexNoApproval = "; approval prompts are not written, so waiting cannot be seen"

// codexTurn derives the state from a rollout's tail: the newest of
// task_started (or user_message) and task_complete or turn_aborted.
// token_count and the other records are passive: Codex re-emits them
// after a turn.
func codexTurn(tail [][]byte) turn {
	for i := len(tail) - 1; i >= 0; i-- {
		var l struct {
			Timestamp string `json:"timestamp"`
			Type      string `json:"type"`
			Payload   struct {
				Type string `json:"type"`
			} `json:"payload"`
		}
		if json.Unmarshal(tail[i], &l) != nil || l.Type != "event_msg" {
			continue
		}
		at := lineTime(l.Timestamp)
		switch p := l.Payload.Type; p {
		case "task_started", "turn_started", "user_message":
			return turn{state: StateWorking, via: "transcript (" + p + codexNoApproval + ")", since: at}
		case "task_complete", "turn_complete", "turn_aborted":
			return turn{state: StateIdle, via: "transcript (" + p + ")", since: at}
		}
	}
	return unknown("no turn in the rollout's tail" + codexNoApproval)
}

// codexFill sets a's state, tokens and limits from the rollout rel. child says it
// is a fork or a sub-agent's, whose history replays its parent's.
func codexFill(env Env, a *Agent, rel string) {
	// A decode cut short by a bound is not kept for the file's version.
	f := cached(env.Memo, env.Root, "codex-tail", rel, false, func() (tailFacts, bool) {
		keep := true
		var head, tail [][]byte
		if strings.HasSuffix(rel, ".zst") {
			var done func()
			head, tail, done, keep = zwindows(env.zw, env.Root, rel, zHeadWindow, zTailWindow)
			defer done()
		} else {
			head, tail = windows(env.Root, rel, headWindow, stateTail)
		}
		all := tail
		if tail == nil {
			all = head // the whole file
		}
		t := codexTurn(all)
		child := false
		if len(head) > 0 {
			child = stringField(head[0], "forked_from_id") != "" || stringField(head[0], "parent_thread_id") != "" ||
				bytes.Contains(head[0], []byte(`"thread_source":"subagent"`))
		}
		return tailFacts{turn: t, settled: t, tokens: codexTokens(head, tail, child), limits: codexLimits(head, tail)}, keep
	})
	f.fill(a, true, time.Time{})
}

// ---- pi and omp ----

// piTurn derives the state from a pi/omp transcript's tail. Each message
// is appended once complete: the newest decides. An assistant's
// stopReason "toolUse" means its tools run (pi asks no permission);
// "stop", "length", "aborted" and "error" end the turn.
func piTurn(tail [][]byte) turn {
	for i := len(tail) - 1; i >= 0; i-- {
		var l struct {
			Type      string `json:"type"`
			Timestamp string `json:"timestamp"`
			Message   *struct {
				Role       string `json:"role"`
				StopReason string `json:"stopReason"`
			} `json:"message"`
		}
		if json.Unmarshal(tail[i], &l) != nil || l.Type != "message" || l.Message == nil {
			continue
		}
		at := lineTime(l.Timestamp)
		switch l.Message.Role {
		case "user":
			return turn{state: StateWorking, via: "transcript (user message)", since: at}
		case "toolResult":
			return turn{state: StateWorking, via: "transcript (tool result)", since: piTurnStart(tail, i)}
		case "assistant":
			switch r := l.Message.StopReason; r {
			case "stop", "length", "aborted", "error":
				return turn{state: StateIdle, via: "transcript (stopReason " + r + ")", since: at}
			case "toolUse":
				return turn{state: StateWorking, via: "transcript (stopReason toolUse: tools running)", since: piTurnStart(tail, i)}
			default:
				return unknown("transcript: stopReason " + r + " is not known")
			}
		}
	}
	return unknown("no message in the transcript's tail")
}

func piTurnStart(tail [][]byte, i int) time.Time {
	for j := i; j >= 0; j-- {
		var l struct {
			Type      string `json:"type"`
			Timestamp string `json:"timestamp"`
			Message   *struct {
				Role string `json:"role"`
			} `json:"message"`
		}
		if json.Unmarshal(tail[j], &l) == nil && l.Type == "message" && l.Message != nil && l.Message.Role == "user" {
			return lineTime(l.Timestamp)
		}
	}
	return time.Time{}
}

// piFill sets a's state and context from the transcript rel's tail; the
// sums need the whole file: Count.
func piFill(env Env, a *Agent, rel string) {
	f := fileCached(env.Memo, env.Root, "pi-tail", rel, func() tailFacts {
		s := scanFile(env.Root, rel)
		var p piTokens
		for i := len(s.tail) - 1; i >= 0 && p.n == 0; i-- {
			p.line(s.tail[i])
		}
		t := piTurn(s.tail)
		return tailFacts{turn: t, settled: t, tokens: p.tokens(false)}
	})
	f.fill(a, true, time.Time{})
}

// ---- Gemini ----

// geminiTurn derives the state from a chat's tail. Gemini writes a tool
// call only once it has completed, and nothing of an approval prompt, nor
// a turn end: the newest user record is a turn in flight, the newest
// gemini record with tool calls is one (the model is called again with
// their results), and one with only text is the turn's end.
func geminiTurn(tail [][]byte) turn {
	for i := len(tail) - 1; i >= 0; i-- {
		var l struct {
			ID        string            `json:"id"`
			Type      string            `json:"type"`
			Timestamp string            `json:"timestamp"`
			Content   json.RawMessage   `json:"content"`
			ToolCalls []json.RawMessage `json:"toolCalls"`
		}
		if json.Unmarshal(tail[i], &l) != nil || l.ID == "" {
			continue
		}
		at := lineTime(l.Timestamp)
		switch l.Type {
		case "user":
			return turn{state: StateWorking, via: "transcript (user message; approval prompts are not written)", since: at}
		case "gemini":
			if len(l.ToolCalls) > 0 {
				return turn{state: StateWorking, via: "transcript (tool calls completed; approval prompts are not written)", since: at}
			}
			if geminiHasText(l.Content) {
				return turn{state: StateIdle, via: "transcript (reply without tool calls)", since: at}
			}
		case "error":
			return turn{state: StateIdle, via: "transcript (error)", since: at}
		}
	}
	return unknown("no message in the chat's tail")
}

func geminiHasText(c json.RawMessage) bool {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return strings.TrimSpace(s) != ""
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(c, &parts)
	for _, p := range parts {
		if strings.TrimSpace(p.Text) != "" {
			return true
		}
	}
	return false
}

func geminiFill(env Env, a *Agent, rel string) {
	if !strings.HasSuffix(rel, ".jsonl") {
		a.StateVia = RouteNone + " (a legacy whole-JSON chat: not read for the state)"
		return
	}
	f := fileCached(env.Memo, env.Root, "gemini-tail", rel, func() tailFacts {
		s := scanFile(env.Root, rel)
		var g geminiTokens
		for i := len(s.tail) - 1; i >= 0 && g.newest == nil; i-- {
			g.line(s.tail[i])
		}
		t := geminiTurn(s.tail)
		return tailFacts{turn: t, settled: t, tokens: g.tokens(false)}
	})
	f.fill(a, true, time.Time{})
}

// ---- opencode ----

// ocTurn derives the state from the session's newest message row: a user
// message, or an assistant one not completed or stopped for tool calls,
// is a turn in flight; a completed one (or one with an error) ends it.
// Whether opencode stores a pending permission is not known, so it never
// says waiting.
func ocTurn(db *sql.DB, id string) turn {
	var data []byte
	err := db.QueryRow(`SELECT data FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC LIMIT 1`, id).Scan(&data)
	if err != nil {
		return unknown("no message for the session")
	}
	var m struct {
		Role string `json:"role"`
		Time struct {
			Created   int64 `json:"created"`
			Completed int64 `json:"completed"`
		} `json:"time"`
		Finish string          `json:"finish"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil {
		return unknown("the newest message could not be read")
	}
	ms := func(v int64) time.Time {
		if v <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(v)
	}
	switch {
	case m.Role == "user":
		return turn{state: StateWorking, via: "db (user message)", since: ms(m.Time.Created)}
	case m.Role != "assistant":
		return unknown("the newest message's role is " + m.Role)
	case len(m.Error) > 0 && string(m.Error) != "null":
		return turn{state: StateIdle, via: "db (assistant error)", since: ms(max(m.Time.Completed, m.Time.Created))}
	case m.Time.Completed == 0:
		return turn{state: StateWorking, via: "db (assistant message not completed)", since: ms(m.Time.Created)}
	case m.Finish == "tool-calls":
		return turn{state: StateWorking, via: "db (finish tool-calls)", since: ms(m.Time.Created)}
	case m.Finish == "":
		return unknown("the newest assistant message is completed with no finish")
	}
	return turn{state: StateIdle, via: "db (finish " + m.Finish + ")", since: ms(m.Time.Completed)}
}

// ocTokens reads the session row's totals and the newest assistant's
// prompt size.
func ocTokens(db *sql.DB, id string) Tokens {
	var t Tokens
	var in, out, reason, cr, cw sql.NullInt64
	if db.QueryRow(`SELECT tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, tokens_cache_write
		FROM session WHERE id = ?`, id).Scan(&in, &out, &reason, &cr, &cw) == nil {
		if in.Valid {
			t.Input = i64(in.Int64)
		}
		if out.Valid {
			t.Output = i64(out.Int64 + reason.Int64)
		}
		if cr.Valid {
			t.CacheRead = i64(cr.Int64)
		}
		if cw.Valid {
			t.CacheWrite = i64(cw.Int64)
		}
	}
	rows, err := db.Query(`SELECT data FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC LIMIT 16`, id)
	if err != nil {
		return t
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if rows.Scan(&data) != nil {
			break
		}
		var m struct {
			Role   string `json:"role"`
			Tokens *struct {
				Input int64 `json:"input"`
				Cache struct {
					Read  int64 `json:"read"`
					Write int64 `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
		}
		if json.Unmarshal(data, &m) == nil && m.Role == "assistant" && m.Tokens != nil {
			t.Context = i64(m.Tokens.Input + m.Tokens.Cache.Read + m.Tokens.Cache.Write)
			break
		}
	}
	return t
}

// ---- dsh ----

// dshTurn derives what can be known from a dsh log: a user message newer
// than any answer is a turn in flight. dsh writes no stop reason or turn
// end, so an answer does not tell a finished turn from one that goes on.
func dshTurn(evs [][]byte) turn {
	for i := len(evs) - 1; i >= 0; i-- {
		var e struct {
			Type string `json:"type"`
			Time int64  `json:"time"`
		}
		if json.Unmarshal(evs[i], &e) != nil {
			continue
		}
		switch e.Type {
		case "user/message":
			var at time.Time
			if e.Time > 0 {
				at = time.UnixMilli(e.Time)
			}
			return turn{state: StateWorking, via: "transcript (user message)", since: at}
		case "assistant/message":
			return unknown("dsh writes no turn end: an answer does not tell whether the turn goes on")
		}
	}
	return unknown("no message in the log's tail")
}

func dshFill(env Env, a *Agent, rel string) {
	// A decode cut short by a bound is not kept for the file's version.
	f := cached(env.Memo, env.Root, "dsh-tail", rel, false, func() (tailFacts, bool) {
		keep := true
		var head, tail [][]byte
		if strings.HasSuffix(rel, ".zstd") {
			var done func()
			head, tail, done, keep = zwindows(env.zw, env.Root, rel, zHeadWindow, zTailWindow)
			defer done()
		} else {
			head, tail = windows(env.Root, rel, headWindow, tailWindow)
		}
		whole := tail == nil
		all := tail
		if whole {
			all = head
		}
		t := dshTurn(all)
		return tailFacts{turn: t, settled: t, tokens: dshTokens(all, whole)}, keep
	})
	f.fill(a, true, time.Time{})
}
