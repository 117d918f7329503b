package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// gemini is Google's Gemini CLI (npm @google/gemini-cli; root ~/.gemini).
//
// Processes: the npm bin runs as node …/gemini (bundle/gemini.js behind
// the .bin link). Unless GEMINI_CLI_NO_RELAUNCH or SANDBOX is set, that
// process is only a launcher: it relaunches itself as a child,
// node [--max-old-space-size=N] …/gemini [args], with
// GEMINI_CLI_NO_RELAUNCH=true, waits for it (relaunching again on exit
// code 199) and ignores SIGINT, SIGTERM and SIGHUP. The child is the agent.
// A SEA build ("gemini" as argv[0]) does the same with its own binary. So
// a gemini process whose parent is a gemini process is the session; one
// whose parent is not is the launcher, a Helper, unless its environment
// says it does not relaunch (Promote: a 9harness move hands the child's
// environment on, so the resumed gemini is one process).
//
// On disk: ~/.gemini/projects.json maps a project root (the cwd) to a
// slug; the chats are tmp/<slug>/chats/session-<UTC minute>-<first 8 hex
// of the session id>.jsonl (tmp/<sha256 of the root>/ in older layouts).
// Line 1 is the metadata {sessionId, projectHash, startTime, lastUpdated,
// kind}; then message records {id, type, content, model, …} (a repeated id
// replaces the earlier one), {"$set":{…}} metadata patches (lastUpdated,
// summary, sessionId on resume, a whole "messages" checkpoint) and
// {"$rewindTo":id}. Every record is appended with appendFileSync: no fd is
// held.
//
// Resolution (measured, 0.61.0): a new chat is created while the process
// starts, with startTime then, a few seconds after its TUI shows. A resume
// (--resume <uuid>) first begins a stub chat under the same id (metadata
// and context only, named by the current minute), then, once its TUI is
// up, appends {"$set":{"sessionId"}} and a {"$set":{"messages"}}
// checkpoint to the session's own file, and writes there from then on.
// The routes, in order: relaunch, the chat
// 9harness named when it started this process or its launcher (a move);
// dir, among the cwd's chats the one its argv names (--resume or
// --session-id <uuid>) if written since the process started, else the one
// begun since the process started; argv, the chat its argv names, not yet
// written. Two begun since are never guessed between (via ambiguous), and
// a move is refused while ambiguous. Title: the $set summary, else the
// first user message Gemini's own session list shows; model: the last
// gemini message's.
type gemini struct{}

func (gemini) Name() string { return "gemini" }

var (
	geminiFlags = flags{
		value: set("-m", "--model", "-p", "--prompt", "-i", "--prompt-interactive", "-r", "--resume",
			"--session-id", "--session-file", "--delete-session", "--approval-mode", "-e", "--extensions",
			"--include-directories", "--allowed-mcp-server-names", "--allowed-tools", "-o", "--output-format",
			"--policy", "--admin-policy"),
		optional: set("-w", "--worktree"),
	}
	// Subcommands and one-shot modes that are not an interactive agent.
	geminiHelperWords = set("mcp", "extensions", "extension", "skills", "skill", "hooks", "hook", "gemma", "update", "help")
)

// geminiArgs reports whether argv is a Gemini CLI process (node or bun
// running its bin or bundle, or a SEA binary), and its own arguments.
func geminiArgs(argv []string) ([]string, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	argv = normArgv(argv)
	b := base(argv[0])
	if b == "gemini" {
		return argv[1:], true
	}
	if !isNode(b) && b != "bun" {
		return nil, false
	}
	script, rest := interpScript(argv[1:])
	if base(script) == "gemini" || base(script) == "gemini.js" && strings.Contains(script, "gemini-cli/") ||
		strings.Contains(script, "@google/gemini-cli/") && strings.HasSuffix(script, "/index.js") {
		return rest, true
	}
	return nil, false
}

// geminiKind classifies a gemini command line's arguments: a one-shot or
// listing mode, a subcommand or an editor's agent protocol is a Helper.
func geminiKind(args []string) Kind {
	if hasFlag(args, "-p", "--prompt", "--list-sessions", "--delete-session",
		"-l", "--list-extensions", "-v", "--version", "-h", "--help", "--acp", "--experimental-acp") {
		return Helper
	}
	if geminiHelperWords[geminiFlags.positional(args)] {
		return Helper
	}
	return Session
}

// Classify implements Harness.
func (gemini) Classify(p, parent proc.Proc) Kind {
	args, ok := geminiArgs(p.Argv)
	if !ok {
		return None
	}
	if geminiKind(args) == Helper {
		return Helper
	}
	if _, ok := geminiArgs(parent.Argv); ok {
		return Session // the relaunched child
	}
	return Helper // the launcher: its child is the agent
}

// Promote implements promoter: a gemini that Classify took for a launcher
// is the agent when its environment stops it relaunching itself.
func (gemini) Promote(p proc.Proc, getenv func(string) (string, bool)) bool {
	args, ok := geminiArgs(p.Argv)
	if !ok || geminiKind(args) != Session {
		return false
	}
	v, ok := getenv("GEMINI_CLI_NO_RELAUNCH")
	return ok && v != ""
}

// Resolve implements Harness.
func (gemini) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("gemini", env, p)
	if env.Root == nil {
		return a
	}
	cwd := cleanCwd(a.Cwd)
	if cwd == "" {
		a.Via = "none (no cwd)"
		return a
	}
	dirs := geminiProjectDirs(env.Root, cwd)
	if len(dirs) == 0 {
		a.Via = "none (no project dir for this cwd)"
		return a
	}
	rel, via := geminiRelaunched(env, p, dirs)
	if rel == "" {
		since, haveStart := started(env, p)
		args, _ := geminiArgs(a.Argv)
		var begun time.Time
		rel, via, begun = geminiPick(env.Root, dirs, cwd, args, since, haveStart)
		if via == RouteDir && geminiLater(env, p, cwd, begun) {
			rel, via = "", RouteAmbiguous+" (the one chat begun since the process started may be a later gemini's in this cwd)"
		}
	}
	a.Via = via
	if rel == "" {
		return a
	}
	f := readGeminiFacts(env.Root, rel, true)
	a.Transcript, a.Session, a.Model, a.Title = rel, f.id, f.model, f.title
	geminiFill(env, &a, rel)
	return a
}

// geminiRelaunched is the relaunch route: the chat 9harness itself named
// (by its session id) when it started this process, or this process's
// launcher, to resume it. A resumed gemini writes nothing until its next
// prompt, so without the record it could not be told from a fresh one.
// The chat must be in one of the cwd's project dirs.
func geminiRelaunched(env Env, p proc.Proc, dirs []string) (string, string) {
	rel, ok := env.Relaunches.Lookup(p.PID, p.Start)
	if !ok && env.Relaunches != nil && env.Procs != nil && p.PPID > 1 {
		if pp, err := env.Procs.IdentStat(p.PPID); err == nil {
			if argv, err := env.Procs.Argv(p.PPID); err == nil {
				if _, isGemini := geminiArgs(argv); isGemini {
					rel, ok = env.Relaunches.Lookup(pp.PID, pp.Start)
				}
			}
		}
	}
	if !ok || checkRel(env, rel) != nil || !containsStr(dirs, path.Dir(path.Dir(rel))) || !geminiChatFile(path.Base(rel)) {
		return "", ""
	}
	if info, err := env.Root.Stat(rel); err != nil || info.Dir {
		return "", ""
	}
	return rel, RouteRelaunch
}

// geminiProjectDirs are the project dirs (tmp/<slug>) that can hold the
// cwd's chats: the slug projects.json maps the cwd to, and the legacy
// tmp/<sha256 of the cwd>. A dir whose .project_root marker names another
// directory is not the cwd's.
func geminiProjectDirs(r *saferoot.Root, cwd string) []string {
	var slugs []string
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if readJSON(r, "projects.json", 1<<20, &reg) {
		for root, slug := range reg.Projects {
			if sameDir(root, cwd) {
				slugs = append(slugs, slug)
			}
		}
	}
	slugs = append(slugs, geminiHash(cwd))
	var out []string
	for _, s := range slugs {
		if saferoot.ValidName(s) != nil {
			continue
		}
		d := "tmp/" + s
		if info, err := r.Stat(d); err != nil || !info.Dir {
			continue
		}
		if b, err := readSmall(r, d+"/.project_root", 4096); err == nil {
			if root := strings.TrimSpace(string(b)); root != "" && !sameDir(root, cwd) {
				continue
			}
		}
		if !containsStr(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// geminiHash is Gemini's project hash: the SHA-256 of the root, in hex.
func geminiHash(root string) string {
	h := sha256.Sum256([]byte(root))
	return hex.EncodeToString(h[:])
}

// geminiChatFile reports whether name is a main session's chat file.
func geminiChatFile(name string) bool {
	return strings.HasPrefix(name, "session-") && strings.HasSuffix(name, ".jsonl")
}

// geminiPick chooses the process's chat among the cwd's: the one its
// argv names (--resume or --session-id with a uuid) when that was written
// since the process started (a resume re-states its id and history there
// once its TUI is up), else the one begun since the process started. It
// never guesses between two.
func geminiPick(r *saferoot.Root, dirs []string, cwd string, args []string, since time.Time, haveStart bool) (string, string, time.Time) {
	if !haveStart {
		return "", "none (the process's start time is unknown)", time.Time{}
	}
	guard := since.Add(-time.Second) // btime is whole seconds
	named := ""
	if v, ok := flagValue(args, "-r", "--resume", "--session-id"); ok && isUUID(v) {
		named = strings.ToLower(v)
	}
	hash := geminiHash(cwd)
	var begun []string
	var begunAt time.Time
	namedRel, namedWritten, stubNamed := "", false, false
	seen := false
	for _, d := range dirs {
		ents, err := r.ReadDir(d + "/chats")
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Dir || !geminiChatFile(e.Name) {
				continue
			}
			rel := d + "/chats/" + e.Name
			info, err := r.Stat(rel)
			if err != nil || info.Dir {
				continue
			}
			seen = true
			written := !info.Mtime.Before(guard)
			isNamed := named != "" && strings.HasSuffix(e.Name, "-"+named[:8]+".jsonl")
			if !written && !isNamed {
				continue // neither begun since nor named: not read
			}
			m := readGeminiFacts(r, rel, false)
			if !m.header || m.kind == "subagent" || m.hash != "" && m.hash != hash {
				continue
			}
			if isNamed && strings.EqualFold(m.id, named) {
				// A resume begins a stub chat under the same id (its
				// metadata and context only) before it switches to the
				// session's own file, which it then writes: the one
				// with a prompt or an answer is the session, as for
				// gemini's own --resume; the stub only when there is
				// none (a fresh --session-id).
				if readGeminiFacts(r, rel, true).resumable {
					if namedRel == "" || stubNamed || written {
						namedRel, namedWritten, stubNamed = rel, written, false
					}
				} else if namedRel == "" {
					namedRel, namedWritten, stubNamed = rel, written, true
				}
				continue
			}
			if st, ok := parseTime(m.start); ok && !st.Before(guard) {
				begun, begunAt = append(begun, rel), st
			}
		}
	}
	switch {
	case namedRel != "" && namedWritten:
		return namedRel, RouteDir + " (the session its argv names, written since the process started)", time.Time{}
	case len(begun) == 1:
		return begun[0], RouteDir, begunAt
	case len(begun) > 1:
		return "", RouteAmbiguous + " (several chats for this cwd begun since the process started)", time.Time{}
	case namedRel != "":
		return namedRel, RouteArgv + " (the session its argv names; not written since the process started)", time.Time{}
	case !seen:
		return "", "none (no chat for this cwd)", time.Time{}
	}
	return "", "none (no chat for this cwd begun since the process started)", time.Time{}
}

// geminiLater reports whether a chat begun at begun, the one begun since p
// started, could be another gemini's: a gemini process of p's user in
// p's cwd that started after p and no later than the chat. Gemini 0.61
// deletes, at start, every chat of its project that has no prompt yet,
// a live agent's included, so a second gemini in one cwd can leave the
// first with only the second's chat begun since it started: that one
// is never taken for the first's. A process whose cwd cannot be read
// counts as in this cwd.
func geminiLater(env Env, p proc.Proc, cwd string, begun time.Time) bool {
	if env.Procs == nil {
		return false
	}
	boot, err := env.Procs.BootTime()
	pids, err2 := env.Procs.PIDs()
	uid, err3 := env.Procs.UID(p.PID)
	if err != nil || err2 != nil || err3 != nil {
		return true
	}
	buf := make([]byte, 0, 4096)
	for _, pid := range pids {
		if pid == p.PID {
			continue
		}
		b, err := env.Procs.ReadCmdline(pid, buf)
		if err != nil {
			continue
		}
		argv := proc.SplitCmdline(b)
		buf = b[:0]
		if _, ok := geminiArgs(argv); !ok {
			continue
		}
		q, err := env.Procs.IdentStat(pid)
		if err != nil || q.Start <= p.Start || proc.Started(boot, q.Start).After(begun.Add(time.Second)) {
			continue
		}
		if u, err := env.Procs.UID(pid); err != nil || u != uid {
			continue
		}
		if c, err := env.Procs.Cwd(pid); err == nil && !sameDir(cleanCwd(c), cwd) {
			continue
		}
		return true
	}
	return false
}

// geminiFacts is what a chat file says of its session.
type geminiFacts struct {
	header          bool // line 1 is the metadata record
	id, hash, kind  string
	start           string
	title, model    string
	summary, prompt string
	// resumable: the chat holds a message Gemini would resume (a prompt
	// or an answer); --resume refuses a chat without one.
	resumable bool
}

// geminiRecord is one line of a chat file: metadata, message, or patch.
type geminiRecord struct {
	SessionID   string          `json:"sessionId"`
	ProjectHash string          `json:"projectHash"`
	StartTime   string          `json:"startTime"`
	Kind        string          `json:"kind"`
	Summary     string          `json:"summary"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Content     json.RawMessage `json:"content"`
	Model       string          `json:"model"`
	Messages    []geminiRecord  `json:"messages"`
	Set         *geminiRecord   `json:"$set"`
}

// readGeminiFacts reads a chat's metadata line, and with full its title
// and model from the head and tail windows. A torn last line (a record
// being appended) is skipped.
func readGeminiFacts(r *saferoot.Root, rel string, full bool) geminiFacts {
	var f geminiFacts
	var head, tail [][]byte
	if full {
		head, tail = windows(r, rel, headWindow, tailWindow)
	} else {
		if ln := firstLine(r, rel, smallFile); ln != nil {
			head = [][]byte{ln}
		}
	}
	if len(head) == 0 {
		return f
	}
	var meta geminiRecord
	if json.Unmarshal(head[0], &meta) == nil && meta.SessionID != "" && meta.ID == "" {
		f.header = true
		f.id, f.hash, f.kind, f.start, f.summary = meta.SessionID, meta.ProjectHash, meta.Kind, meta.StartTime, meta.Summary
		f.prompt = geminiFirstPrompt(meta.Messages)
	}
	if !full {
		return f
	}
	for _, ln := range append(head[1:], tail...) {
		var l geminiRecord
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		switch {
		case l.Set != nil:
			if l.Set.SessionID != "" {
				f.id = l.Set.SessionID
			}
			if l.Set.Summary != "" {
				f.summary = l.Set.Summary
			}
			if f.prompt == "" {
				f.prompt = geminiFirstPrompt(l.Set.Messages)
			}
			for _, m := range l.Set.Messages {
				f.noteAnswer(m)
			}
		case l.ID != "":
			if f.prompt == "" {
				f.prompt = geminiFirstPrompt([]geminiRecord{l})
			}
			f.noteAnswer(l)
		}
	}
	f.resumable = f.resumable || f.prompt != ""
	f.title = cleanTitle(geminiClean(f.summary))
	if f.title == "" {
		f.title = cleanTitle(f.prompt)
	}
	return f
}

// noteAnswer takes the model and resumability of a gemini message.
func (f *geminiFacts) noteAnswer(m geminiRecord) {
	if m.Type != "gemini" {
		return
	}
	if m.Model != "" {
		f.model = m.Model
	}
	if strings.TrimSpace(geminiText(m.Content)) != "" {
		f.resumable = true
	}
}

// geminiFirstPrompt is the text of the first user message among msgs that
// Gemini's session list would show: not a slash or ? command, not the
// <session_context> or <hook_context> it injects, not empty.
func geminiFirstPrompt(msgs []geminiRecord) string {
	for _, m := range msgs {
		if m.Type != "user" {
			continue
		}
		t := strings.TrimSpace(geminiText(m.Content))
		if t == "" || strings.HasPrefix(t, "/") || strings.HasPrefix(t, "?") ||
			strings.HasPrefix(t, "<session_context>") || strings.HasPrefix(t, "<hook_context>") {
			continue
		}
		return geminiClean(t)
	}
	return ""
}

// geminiText is a message's content as text: a string, or its parts'
// text joined, as Gemini's partListUnionToString does for text parts.
func geminiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		var one struct {
			Text string `json:"text"`
		}
		json.Unmarshal(raw, &one)
		return one.Text
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

// geminiClean is Gemini's cleanMessage: whitespace runs become one space,
// everything outside printable ASCII is dropped, and the ends trimmed.
func geminiClean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e {
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// Resume implements Harness: gemini --resume <session uuid>, in the
// project root (the agent's cwd: sessions are project-scoped).
func (gemini) Resume(a Agent, env Env) ([]string, error) {
	if a.Transcript == "" && a.Via == "none (no chat for this cwd)" && env.Root != nil {
		return nil, nothingYet("gemini", a, "no chat file; gemini writes it at start")
	}
	if a.Session == "" || a.Transcript == "" || !isUUID(a.Session) || !safeArg(a.Session) ||
		!strings.HasPrefix(path.Base(a.Transcript), "session-") {
		return nil, unresolved("gemini", a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet("gemini", a, "the chat file "+a.Transcript+" is gone")
	}
	if env.Root != nil && !readGeminiFacts(env.Root, a.Transcript, true).resumable {
		return nil, nothingYet("gemini", a, "no prompt yet; gemini --resume refuses a chat without one")
	}
	return []string{"gemini", "--resume", a.Session}, nil
}

var _ = register(gemini{}, &geminiSpec)

var geminiSpec = Spec{
	Name:  "gemini",
	Order: 70,
	// The chats (tmp/<slug>/chats/…) and the slug map; never the root
	// whole (oauth_creds.json, settings.json, the history/ shadow git
	// repos of the projects' files).
	Mirrors: []Mirror{
		{At: "tmp", Rel: "tmp"},
		{At: "projects", Rel: "projects.json", File: true},
	},
	// tmp/<x or x-1>/chats/session-<minute>-<id8>.jsonl
	SlugDirs: []string{"tmp"},
	// history/<project hash>/: shadow git repositories.
	CopyStores: []string{"history"},
	Credentials: []Credential{
		{"settings.json", "Gemini CLI (may hold API keys, MCP env)"},
		{"mcp-oauth-tokens.json", "Gemini CLI"},
		{"a2a-oauth-tokens.json", "Gemini CLI"},
		{"gemini-credentials.json", "Gemini CLI (keychain fallback file)"},
		{"oauth_creds.json", "Gemini CLI ~/.gemini/oauth_creds.json"},
		{"google_accounts.json", "Gemini CLI ~/.gemini/google_accounts.json: account identity"},
		{"installation_id", "Gemini CLI: installation identity"},
	},
	// GEMINI_CLI_NO_RELAUNCH: the relaunched child (and a gemini that
	// never relaunches) has it; it tells the agent from its launcher.
	Env: []string{"GEMINI_DIR", "GEMINI_CLI_NO_RELAUNCH"},
	// The launcher's mark of its relaunched child: the resumed gemini
	// relaunches itself as a user's does, with its memory flags.
	MoveDrop: []string{"GEMINI_CLI_NO_RELAUNCH"},
	Keep: []keep{
		{names: []string{"-m", "--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"--approval-mode"}, emit: "--approval-mode", value: true, max: 64, ok: word},
		{names: []string{"-y", "--yolo"}, emit: "--yolo"},
		{names: []string{"-s", "--sandbox"}, emit: "--sandbox"},
		{names: []string{"--include-directories"}, emit: "--include-directories", value: true, many: true, max: 4 << 10},
	},
	Flags:   geminiFlags,
	Summed:  true,
	Counter: func() counter { return &geminiTokens{} },
	// Only its JSONL chats are read line by line; any other transcript keeps
	// Resolve's tokens.
	Summable: func(transcript string) bool { return strings.HasSuffix(transcript, ".jsonl") },
	Verified: "0.61.0",
	Doc: Doc{
		Title:   "Gemini CLI",
		Root:    "~/.gemini",
		Process: "the relaunched child (`GEMINI_CLI_NO_RELAUNCH`); the launcher is never listed",
		Via:     "`dir` (the chat of the cwd begun since the process started), `argv`, `relaunch`; `ambiguous` when two could be",
		Resume:  "`gemini --resume ID`",
		RealCLI: "0.61.0",
	},
}

// ---- turn state ----

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

// ---- tokens ----

// geminiTokens counts a chat's tokens: on "gemini" records, last-wins by
// record id (a record is appended again when its tokens arrive). input
// includes the cached part; thoughts are output.
type geminiTokens struct {
	byID   lastByID[geminiUsage, *geminiUsage]
	newest *geminiUsage
}

type geminiUsage struct {
	Input    int64 `json:"input"`
	Output   int64 `json:"output"`
	Cached   int64 `json:"cached"`
	Thoughts int64 `json:"thoughts"`
}

func (u *geminiUsage) add(v geminiUsage) {
	u.Input += v.Input
	u.Output += v.Output
	u.Cached += v.Cached
	u.Thoughts += v.Thoughts
}

func (g *geminiTokens) line(ln []byte) {
	if !bytes.Contains(ln, []byte(`"tokens"`)) {
		return
	}
	var l struct {
		ID     string       `json:"id"`
		Type   string       `json:"type"`
		Tokens *geminiUsage `json:"tokens"`
	}
	if json.Unmarshal(ln, &l) != nil || l.Type != "gemini" || l.ID == "" || l.Tokens == nil {
		return
	}
	g.byID.put(l.ID, *l.Tokens)
	u := *l.Tokens
	g.newest = &u
}

func (g *geminiTokens) tokens(whole bool) Tokens {
	if g.newest == nil {
		return Tokens{}
	}
	t := Tokens{Context: i64(g.newest.Input)}
	if whole {
		u := g.byID.sum()
		t.Input, t.Output, t.CacheRead = i64(u.Input-u.Cached), i64(u.Output+u.Thoughts), i64(u.Cached)
	}
	return t
}
