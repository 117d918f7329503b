package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// qwen is Qwen Code (npm @qwen-code/qwen-code; root ~/.qwen), a
// descendant of Gemini CLI whose files took Claude Code's shape.
//
// Processes (measured, 0.24.4): the npm bin, node …/.bin/qwen (the
// package's cli-entry.js), is a wrapper: it runs
// node --expose-gc …/@qwen-code/qwen-code/cli.js [args] and waits. That
// process relaunches itself once more, the same command line, with
// QWEN_CODE_NO_RELAUNCH=true and an IPC channel, and waits too. The
// grandchild is the agent. So a cli.js process whose parent is a cli.js
// process is the session; one whose parent is not is the relauncher, a
// Helper, unless its environment says it does not relaunch (Promote: a
// qwen started from within an agent, or by a move that kept the
// variable, is the wrapper and one cli.js). The wrapper is always a
// Helper. A positional prompt without -i, -p, and the subcommands are
// one-shot or management runs: Helpers.
//
// On disk: sessions/<pid>.json is the live registry, written some
// seconds after start and rewritten by /clear, removed at exit:
// {pid, procStart "<boot id>:<starttime>", pidNs, sessionId, cwd, name,
// …, ipcPath, ipcToken}. The ipcToken drives the session over its
// socket, so the directory is never mirrored (only the harness reads it).
// The chats are projects/<cwd, every non-alphanumeric as '-'>/chats/
// <session id>.jsonl, written from the first prompt on (appendFile, no
// fd held) beside <session id>.runtime.json {pid, session_id, work_dir,
// started_at}, written at start (a killed qwen leaves it behind). A
// chat's records are {uuid, parentUuid, sessionId, timestamp, type, cwd,
// …}: type user {message.parts}, assistant {model, message.parts with
// text or functionCall, usageMetadata}, tool_result, and system with a
// subtype (custom_title {customTitle, titleSource} from /rename, written
// again at the end on every prompt; ui_telemetry; slash_command; …).
//
// Resolution: the registry, vetted by its procStart (the starttime after
// the boot id) and pid namespace; while it is not written yet, the
// runtime record of this pid begun since the process started. Title: the
// last custom_title, else the first prompt (Qwen's own session list);
// model: the last assistant record's.
type qwen struct{}

func (qwen) Name() string { return "qwen" }

var (
	qwenFlags = flags{
		value: set("-m", "--model", "-p", "--prompt", "-i", "--prompt-interactive", "--session-id",
			"--approval-mode", "-e", "--extensions", "--include-directories", "--add-dir",
			"--allowed-mcp-server-names", "--allowed-tools", "--core-tools", "--exclude-tools",
			"--disabled-slash-commands", "-o", "--output-format", "--input-format", "--auth-type",
			"--openai-api-key", "--openai-base-url", "--openai-logging-dir", "--system-prompt",
			"--append-system-prompt", "--output-style", "--mcp-config", "--fallback-model",
			"--max-session-turns", "--max-wall-time", "--max-tool-calls", "--max-subagent-depth",
			"--json-fd", "--json-file", "--json-schema", "--input-file", "--channel", "--proxy",
			"--sandbox-image", "--telemetry-target", "--telemetry-otlp-endpoint",
			"--telemetry-otlp-protocol", "--telemetry-outfile"),
		optional: set("-r", "--resume", "--worktree"),
	}
	// Subcommands: management and daemons, never an interactive agent.
	qwenHelperWords = set("auth", "board", "channel", "extensions", "extension", "hooks", "hook", "mcp",
		"review", "sandbox", "serve", "sessions", "update", "help")
)

// qwenProc is what a Qwen Code command line is: the npm wrapper, or the
// CLI proper (the relauncher and the agent share its command line).
type qwenProc int

const (
	qwenNone qwenProc = iota
	qwenWrapper
	qwenCLI
)

// qwenArgs reports whether argv is a Qwen Code process, which one, and
// its own arguments.
func qwenArgs(argv []string) (qwenProc, []string) {
	if len(argv) == 0 {
		return qwenNone, nil
	}
	argv = normArgv(argv)
	b := base(argv[0])
	if b == "qwen" {
		return qwenWrapper, argv[1:]
	}
	if !isNode(b) && b != "bun" {
		return qwenNone, nil
	}
	script, rest := interpScript(argv[1:])
	switch {
	case base(script) == "qwen",
		base(script) == "cli-entry.js" && strings.Contains(script, "qwen-code/"):
		return qwenWrapper, rest
	case base(script) == "cli.js" && strings.Contains(script, "/@qwen-code/qwen-code/"):
		return qwenCLI, rest
	}
	return qwenNone, nil
}

// qwenKind classifies a qwen command line's arguments: a one-shot run
// (-p, or a positional prompt without -i), a listing, an editor's agent
// protocol or a subcommand is a Helper.
func qwenKind(args []string) Kind {
	if hasFlag(args, "-p", "--prompt", "-l", "--list-extensions", "-v", "--version", "-h", "--help",
		"--acp", "--json-schema", "--input-format", "-o", "--output-format") {
		return Helper
	}
	pos := qwenFlags.positional(args)
	if qwenHelperWords[pos] || pos != "" && !hasFlag(args, "-i", "--prompt-interactive") {
		return Helper
	}
	return Session
}

// Classify implements Harness.
func (qwen) Classify(p, parent proc.Proc) Kind {
	k, args := qwenArgs(p.Argv)
	switch {
	case k == qwenNone:
		return None
	case k == qwenWrapper || qwenKind(args) == Helper:
		return Helper
	}
	if pk, _ := qwenArgs(parent.Argv); pk == qwenCLI {
		return Session // the relaunched agent
	}
	return Helper // the relauncher: its child is the agent
}

// Promote implements promoter: a cli.js process that does not relaunch
// itself is the agent.
func (qwen) Promote(p proc.Proc, getenv func(string) (string, bool)) bool {
	k, args := qwenArgs(p.Argv)
	if k != qwenCLI || qwenKind(args) != Session {
		return false
	}
	v, ok := getenv("QWEN_CODE_NO_RELAUNCH")
	return ok && v != ""
}

// qwenReg is a live-registry record, sessions/<pid>.json (only the fields
// read: never the ipcToken).
type qwenReg struct {
	PID       int             `json:"pid"`
	ProcStart string          `json:"procStart"`
	PIDNs     json.RawMessage `json:"pidNs"`
	SessionID string          `json:"sessionId"`
	Cwd       string          `json:"cwd"`
	Name      string          `json:"name"`
}

// qwenRegistry reads and vets p's record: its pid, the starttime after
// the boot id in procStart, and its pid namespace when both are known.
func qwenRegistry(env Env, p proc.Proc) (*qwenReg, string) {
	var reg qwenReg
	if !readJSON(env.Root, "sessions/"+strconv.Itoa(p.PID)+".json", smallFile, &reg) {
		return nil, "no registry record"
	}
	if reg.PID != p.PID {
		return nil, fmt.Sprintf("registry record names pid %d", reg.PID)
	}
	st := reg.ProcStart
	if i := strings.LastIndexByte(st, ':'); i >= 0 {
		st = st[i+1:]
	}
	if st != strconv.FormatUint(p.Start, 10) {
		return nil, fmt.Sprintf("registry record is another process's: procStart %q, this process started at %d", reg.ProcStart, p.Start)
	}
	if ns := strings.TrimSpace(string(reg.PIDNs)); ns != "" && ns != "null" && env.PIDDomain != "" {
		if _, inode, ok := strings.Cut(env.PIDDomain, "pid:["); ok && strings.TrimSuffix(inode, "]") != ns {
			return nil, "registry record is from another pid namespace (" + ns + ")"
		}
	}
	if !isUUID(reg.SessionID) {
		return nil, "registry record has no session id"
	}
	return &reg, ""
}

// qwenChats is the rel path of the chats dir of the project at cwd: its
// name is Claude's sanitizing (every UTF-16 unit that is not an ASCII
// letter or digit is '-'), with no length cut.
func qwenChats(cwd string) string { return "projects/" + claudeSanitize(cwd) + "/chats" }

// qwenRelaunched is the relaunch route: the chat 9harness itself named
// (by its session id) when it started this process's wrapper to resume
// it, found on the process or the qwen processes above it (the wrapper,
// and the relauncher between). A resumed qwen writes its registry record
// only once its TUI is up, tens of seconds on a loaded machine. The chat
// must be the cwd's.
func qwenRelaunched(env Env, p proc.Proc, cwd string) (string, bool) {
	if env.Relaunches == nil || cwd == "" {
		return "", false
	}
	rel, ok := env.Relaunches.Lookup(p.PID, p.Start)
	for up, pid := 0, p.PPID; !ok && up < 2 && pid > 1 && env.Procs != nil; up++ {
		pp, err := env.Procs.IdentStat(pid)
		if err != nil {
			return "", false
		}
		argv, err := env.Procs.Argv(pid)
		if k, _ := qwenArgs(argv); err != nil || k == qwenNone {
			return "", false
		}
		rel, ok = env.Relaunches.Lookup(pp.PID, pp.Start)
		pid = pp.PPID
	}
	dir, name, _ := strings.Cut(rel, "/chats/")
	if !ok || checkRel(env, rel) != nil || dir+"/chats" != qwenChats(cwd) || !strings.HasSuffix(name, ".jsonl") ||
		!isUUID(strings.TrimSuffix(name, ".jsonl")) {
		return "", false
	}
	if info, err := env.Memo.Stat(env.Root, rel); err != nil || info.Dir {
		return "", false
	}
	return rel, true
}

// qwenRuntime finds p's runtime record in the chats dir: one naming its
// pid, begun since it started; the newest when there are several (a
// /clear begins another). A record a killed qwen left is older than the
// process that reused its pid.
func qwenRuntime(env Env, p proc.Proc, dir string) (string, string) {
	since, ok := started(env, p)
	if !ok {
		return "", "the process's start time is unknown"
	}
	ents, err := env.Memo.readDir(env.Root, dir)
	if err != nil {
		return "", "no chats dir for this cwd"
	}
	best, bestAt := "", 0.0
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name, ".runtime.json")
		if e.Dir || !ok || !isUUID(id) {
			continue
		}
		var rec struct {
			PID       int     `json:"pid"`
			SessionID string  `json:"session_id"`
			StartedAt float64 `json:"started_at"`
		}
		if !readJSON(env.Root, dir+"/"+e.Name, smallFile, &rec) || rec.PID != p.PID || !strings.EqualFold(rec.SessionID, id) {
			continue
		}
		if rec.StartedAt < float64(since.Unix()-1) || rec.StartedAt <= bestAt {
			continue
		}
		best, bestAt = id, rec.StartedAt
	}
	if best == "" {
		return "", "no runtime record of this pid begun since it started"
	}
	return best, ""
}

// Resolve implements Harness.
func (qwen) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("qwen", env, p)
	if env.Root == nil {
		return a
	}
	if env.Memo == nil {
		env.Memo = NewMemo()
	}
	cwd := cleanCwd(a.Cwd)
	reg, why := qwenRegistry(env, p)
	var sid string
	switch {
	case reg != nil:
		sid, a.Name, a.Via = reg.SessionID, cleanTitle(reg.Name), RouteRegistry
		if reg.Cwd != "" {
			cwd = cleanCwd(reg.Cwd) // the project root names the chats dir
		}
	case cwd == "":
		a.Via = RouteNone + " (" + why + "; no cwd)"
		return a
	default:
		if rel, ok := qwenRelaunched(env, p, cwd); ok {
			sid, a.Via = strings.TrimSuffix(rel[strings.LastIndexByte(rel, '/')+1:], ".jsonl"), RouteRelaunch
			break
		}
		id, why2 := qwenRuntime(env, p, qwenChats(cwd))
		if id == "" {
			a.Via = RouteNone + " (" + why + "; " + why2 + ")"
			return a
		}
		sid, a.Via = id, RouteRegistry+" (the runtime record; sessions/"+strconv.Itoa(p.PID)+".json is not written yet)"
	}
	a.Session = strings.ToLower(sid)
	rel := qwenChats(cwd) + "/" + a.Session + ".jsonl"
	if checkRel(env, rel) != nil {
		return a
	}
	if info, err := env.Memo.Stat(env.Root, rel); err != nil || info.Dir {
		return a // no prompt yet: the chat is written from the first on
	}
	a.Transcript = rel
	f := fileCached(env.Memo, env.Root, "qwen-facts", rel, func() qwenFacts { return readQwenFacts(env.Root, rel) })
	a.Title, a.Model = f.title, f.model
	qwenFill(env, &a, rel)
	return a
}

// qwenFacts is what a chat says of its session.
type qwenFacts struct {
	title, model string
	resumable    bool // a prompt or an answer: qwen --resume has something to load
}

// qwenRecord is one line of a chat, the fields read.
type qwenRecord struct {
	UUID      string `json:"uuid"`
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	Timestamp string `json:"timestamp"`
	Model     string `json:"model"`
	Message   *struct {
		Parts []struct {
			Text             *string         `json:"text"`
			FunctionCall     json.RawMessage `json:"functionCall"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"message"`
	SystemPayload *struct {
		CustomTitle string  `json:"customTitle"`
		DisplayText *string `json:"displayText"`
	} `json:"systemPayload"`
	Usage *qwenUsage `json:"usageMetadata"`
}

// text is the first text part, as Qwen's session list reads a prompt.
func (l qwenRecord) text() string {
	if l.Message == nil {
		return ""
	}
	for _, p := range l.Message.Parts {
		if p.Text != nil {
			return *p.Text
		}
	}
	return ""
}

func (l qwenRecord) calls() bool {
	if l.Message == nil {
		return false
	}
	for _, p := range l.Message.Parts {
		if len(p.FunctionCall) > 0 && string(p.FunctionCall) != "null" {
			return true
		}
	}
	return false
}

// readQwenFacts reads a chat's title and model from its head and tail
// windows: the last custom_title (Qwen writes it again at the end on every
// prompt, for its picker's tail scan), else the first prompt, as
// extractFirstPromptFromRecords reads it (displayText when set, else the
// first text part); the model of the last assistant record. A torn last
// line is skipped.
func readQwenFacts(r *saferoot.Root, rel string) qwenFacts {
	var f qwenFacts
	head, tail := windows(r, rel, headWindow, tailWindow)
	custom, prompt := "", ""
	for _, ln := range append(head, tail...) {
		if !mayHold(ln, `"user"`, `"assistant"`, `"custom_title"`) {
			continue
		}
		var l qwenRecord
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		switch {
		case l.Type == "system" && l.Subtype == "custom_title" && l.SystemPayload != nil:
			if t := cleanTitle(l.SystemPayload.CustomTitle); t != "" {
				custom = t
			}
		case l.Type == "user" && l.Subtype == "":
			t := l.text()
			if l.SystemPayload != nil && l.SystemPayload.DisplayText != nil {
				t = *l.SystemPayload.DisplayText
			}
			if prompt == "" {
				prompt = cleanTitle(t)
			}
			f.resumable = f.resumable || strings.TrimSpace(t) != ""
		case l.Type == "assistant" && l.Subtype == "":
			if l.Model != "" {
				f.model = l.Model
			}
			f.resumable = true
		}
	}
	f.title = custom
	if f.title == "" {
		f.title = prompt
	}
	return f
}

// ---- state ----

// qwenTurn derives the state from a chat's tail, newest record first: a
// prompt or a tool's result is a turn in flight, an answer with text and
// no call is its end. An answer that calls a tool says nothing of whether
// the tool runs or waits for the user's approval (Qwen writes the call
// before it asks, and nothing of the asking), so the state is unknown.
func qwenTurn(tail [][]byte) turn {
	for i := len(tail) - 1; i >= 0; i-- {
		var l qwenRecord
		if !mayHold(tail[i], `"user"`, `"assistant"`, `"tool_result"`) || json.Unmarshal(tail[i], &l) != nil || l.Subtype != "" {
			continue
		}
		at := lineTime(l.Timestamp)
		switch l.Type {
		case "user":
			return turn{state: StateWorking, via: "transcript (user prompt)", since: at}
		case "tool_result":
			return turn{state: StateWorking, via: "transcript (tool result: a model call is in flight)", since: at}
		case "assistant":
			if l.calls() {
				return unknown("a tool call without its result: running or awaiting approval, which Qwen does not write")
			}
			return turn{state: StateIdle, via: "transcript (reply without tool calls)", since: at}
		}
	}
	return unknown("no message in the chat's tail")
}

func qwenFill(env Env, a *Agent, rel string) {
	f := fileCached(env.Memo, env.Root, "qwen-tail", rel, func() tailFacts {
		s := scanFile(env.Root, rel)
		var c qwenTokens
		for i := len(s.tail) - 1; i >= 0 && c.newest == nil; i-- {
			c.line(s.tail[i])
		}
		t := qwenTurn(s.tail)
		return tailFacts{turn: t, settled: t, tokens: c.tokens(false)}
	})
	f.fill(a, true, time.Time{})
}

// ---- tokens ----

// qwenUsage is an assistant record's usageMetadata, Gemini's counts:
// the prompt includes its cached part; thoughts are output.
type qwenUsage struct {
	Prompt     int64 `json:"promptTokenCount"`
	Candidates int64 `json:"candidatesTokenCount"`
	Thoughts   int64 `json:"thoughtsTokenCount"`
	Cached     int64 `json:"cachedContentTokenCount"`
}

func (u *qwenUsage) add(v qwenUsage) {
	u.Prompt += v.Prompt
	u.Candidates += v.Candidates
	u.Thoughts += v.Thoughts
	u.Cached += v.Cached
}

// qwenTokens counts a chat's assistant records, last-wins by uuid (each
// is written once; a record repeated counts once).
type qwenTokens struct {
	byID   lastByID[qwenUsage, *qwenUsage]
	newest *qwenUsage
}

func (q *qwenTokens) line(ln []byte) {
	if !bytes.Contains(ln, []byte(`"usageMetadata"`)) {
		return
	}
	var l qwenRecord
	if json.Unmarshal(ln, &l) != nil || l.Type != "assistant" || l.Subtype != "" || l.UUID == "" || l.Usage == nil {
		return
	}
	q.byID.put(l.UUID, *l.Usage)
	u := *l.Usage
	q.newest = &u
}

func (q *qwenTokens) tokens(whole bool) Tokens {
	if q.newest == nil {
		return Tokens{}
	}
	t := Tokens{Context: i64(q.newest.Prompt)}
	if whole {
		u := q.byID.sum()
		t.Input, t.Output, t.CacheRead = i64(u.Prompt-u.Cached), i64(u.Candidates+u.Thoughts), i64(u.Cached)
	}
	return t
}

// ---- resume ----

// Resume implements Harness: qwen --resume <session id>, in the project
// root (the agent's cwd: sessions are project-scoped). Qwen writes a chat
// from the first prompt on; a session without one cannot be resumed.
func (qwen) Resume(a Agent, env Env) ([]string, error) {
	if !isUUID(a.Session) || !safeArg(a.Session) {
		return nil, unresolved("qwen", a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet("qwen", a, "session "+a.Session+" has no chat; Qwen writes it at the first prompt")
	}
	if env.Root != nil && !readQwenFacts(env.Root, a.Transcript).resumable {
		return nil, nothingYet("qwen", a, "the chat "+a.Transcript+" holds no prompt yet")
	}
	return []string{"qwen", "--resume", a.Session}, nil
}

var _ = register(qwen{}, &qwenSpec)

var qwenSpec = Spec{
	Name:  "qwen",
	Order: 90,
	// The chats (projects/<slug>/chats/…) and the skills; never the root
	// whole: sessions/<pid>.json holds each live session's ipcToken,
	// which drives it over its socket, beside settings.json, .env,
	// oauth_creds.json and the file-history/ copies of the projects'
	// files.
	Mirrors: []Mirror{
		{At: "projects", Rel: "projects"},
		{At: "skills", Rel: "skills"},
	},
	Skills: "skills",
	// projects/<-home-u-src-x>/chats/<session>.jsonl
	SlugDirs: []string{"projects"},
	// file-history/<session>/: each edited file, before; the projects'
	// checkpoints under tmp/<project hash>/.
	CopyStores: []string{"file-history", "tmp/*/checkpoints"},
	Credentials: []Credential{
		{"settings.json", "Qwen Code ~/.qwen/settings.json (may hold API keys, model providers, MCP env)"},
		{"oauth_creds.json", "Qwen Code ~/.qwen/oauth_creds.json (Qwen OAuth)"},
		{"mcp-oauth-tokens.json", "Qwen Code"},
		{"peer-controllers.json", "Qwen Code ~/.qwen/peer-controllers.json: the controller tokens that may drive its sessions"},
	},
	// The relaunched agent (and a qwen that never relaunches) has it: it
	// tells the agent from the relauncher.
	Env: []string{"QWEN_CODE_NO_RELAUNCH"},
	// What the wrapper and the relauncher set for their child: the
	// resumed qwen is wrapped and relaunched as a user's is, and stamps
	// its own version and paths.
	MoveDrop: []string{"QWEN_CODE_NO_RELAUNCH", "QWEN_CODE_PRIVATE_RELAUNCH_ENV_PROVENANCE", "QWEN_CODE_LAUNCHER_PID",
		"QWEN_CODE_STARTUP_VERSION", "QWEN_CODE_MANAGED_NPM_PIN", "QWEN_CODE_MANAGED_NPM_ROOT", "QWEN_CODE_CLI"},
	Keep: []keep{
		{names: []string{"-m", "--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"--approval-mode"}, emit: "--approval-mode", value: true, max: 64, ok: word},
		{names: []string{"-y", "--yolo"}, emit: "--yolo"},
		{names: []string{"--auth-type"}, emit: "--auth-type", value: true, max: 64, ok: word},
		{names: []string{"--include-directories", "--add-dir"}, emit: "--include-directories", value: true, many: true, max: 4 << 10},
	},
	Flags:    qwenFlags,
	Summed:   true,
	Counter:  func() counter { return &qwenTokens{} },
	Verified: "0.24.4",
	Doc: Doc{
		Title:   "Qwen Code",
		Root:    "~/.qwen",
		Process: "the relaunched `cli.js` (`QWEN_CODE_NO_RELAUNCH`); the `qwen` wrapper and the relauncher are never listed",
		Via:     "`registry` (`sessions/<pid>.json`, else the chat's runtime record), `relaunch` after a move",
		Resume:  "`qwen --resume ID`",
		RealCLI: "0.24.4",
	},
}
