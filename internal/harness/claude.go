package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// claude is Claude Code (root ~/.claude, or $CLAUDE_CONFIG_DIR).
//
// Processes: the native install runs as argv[0] "claude" (its comm is often
// the version string, "2.1.212", so comm is never used); an old npm install
// rewrites its cmdline to just "claude" (process.title), or shows
// "node …/@anthropic-ai/claude-code/cli.js" when that is disabled. Background
// sessions' processes (claude_bg.go) run from the full versioned path
// (~/.local/share/claude/versions/2.1.201) or as "claude bg-spare
// --bg-spare"/"claude bg-pty-host --bg-pty-host": the pty hosts and the
// supervisor are helpers, a claimed worker is the session. Helpers too are
// the non-session subcommands (mcp, doctor, update, …) and a print run a
// program drives (-p with stream-json in or out: the Agent SDK passes
// --output-format stream-json for every run, editors' extensions
// --input-format too): the program is where it is answered, and a move
// would take it from the program. Any other print run (-p, what
// scripts and `claude -p … & disown` start) is a session: Claude writes
// it a registry record like its TUI's (kind "interactive", entrypoint
// "sdk-cli", status) and a transcript, it can work for hours, and it
// outlives the terminal it was started from, where a TUI exits when its
// terminal hangs up; its resume is the interactive `claude --resume ID`
// (-p and the prompt are not kept).
//
// Resolution: the live registry sessions/<pid>.json is the only exact route
// (Claude opens and closes its transcript per event, so no fd is held). A
// record is believed only if its procStart, when present, is the decimal
// starttime of this process (else the pid was reused) and its pidDomain,
// when both are known, is the daemon's pid namespace. Claude 2.1 writes no
// pidDomain, so a record without one is believed on procStart alone; a
// record whose pidDomain differs is still refused. Old builds' sessionId
// went stale after /clear (2.1 follows /clear at once); see claudeNewer.
type claude struct{}

func (claude) Name() string { return "claude" }

var (
	claudeFlags = flags{
		value: set("--model", "--session-id", "--settings", "--add-dir", "--permission-mode",
			"--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
			"--mcp-config", "--append-system-prompt", "--system-prompt", "--output-format",
			"--input-format", "--agents", "--agent", "--fallback-model", "--max-turns", "--betas",
			"--plugin-dir", "--setting-sources", "--debug-file", "-n", "--name", "--effort",
			"--tools", "--permission-prompt-tool", "--max-budget-usd", "--json-schema"),
		optional: set("-r", "--resume", "--debug", "-d", "-w", "--worktree", "--from-pr"),
	}
	claudeHelperWords = set("mcp", "config", "doctor", "update", "upgrade", "install",
		"setup-token", "plugin", "plugins", "migrate-installer", "auth", "login", "logout",
		"daemon", "serve", "gateway", "dashboard", "acp", "ps", "render", "export")
	claudeVersion = regexp.MustCompile(`^\d+(\.\d+)+([-+][0-9A-Za-z.-]+)?$`)
	claudeRecord  = regexp.MustCompile(`^\d+\.json$`)
)

// Classify implements Harness.
func (claude) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	var args []string
	switch {
	case strings.Contains(argv[0], "/claude/versions/") && claudeVersion.MatchString(b):
		// The versioned binary is only ever run by name by Claude itself,
		// for its background sessions' processes; the user's "claude" is
		// the symlink.
		k, _ := claudeBgKind(argv)
		return k
	case b == "claude" || b == "claude.exe":
		args = argv[1:]
	case isNode(b):
		script, rest := interpScript(argv[1:])
		if !strings.Contains(script, "/claude-code/") || !(strings.HasSuffix(script, "/cli.js") || strings.HasSuffix(script, "/cli.mjs")) {
			return None
		}
		args = rest
	default:
		return None
	}
	if k, ok := claudeBgKind(argv); ok {
		return k
	}
	if claudeHelperWords[claudeFlags.positional(args)] {
		return Helper
	}
	if hasFlag(args, "-p", "--print") && claudeProgramDriven(args) {
		return Helper
	}
	return Session
}

// claudeProgramDriven says whether a print run's input or output is
// stream-json: lines for a program to read, not a person.
func claudeProgramDriven(args []string) bool {
	in, _ := flagValue(args, "--input-format")
	out, _ := flagValue(args, "--output-format")
	return in == "stream-json" || out == "stream-json"
}

// claudeReg is a live-registry record, sessions/<pid>.json.
type claudeReg struct {
	PID       int             `json:"pid"`
	SessionID string          `json:"sessionId"`
	Cwd       string          `json:"cwd"`
	StartedAt json.RawMessage `json:"startedAt"` // ms since the epoch
	ProcStart json.RawMessage `json:"procStart"` // Linux: decimal starttime, as a string
	PIDDomain string          `json:"pidDomain"`
	Name      string          `json:"name"`
	Status    string          `json:"status"`
	// WaitingFor says what a "waiting" status waits for ("approve Bash");
	// StatusUpdatedAt (ms) is when status last changed.
	WaitingFor      string          `json:"waitingFor"`
	StatusUpdatedAt json.RawMessage `json:"statusUpdatedAt"`
	UpdatedAt       json.RawMessage `json:"updatedAt"`
	// Kind is "interactive" or "bg"; JobID the background job's short
	// id (jobs/<id>/, claude attach <id>).
	Kind  string `json:"kind"`
	JobID string `json:"jobId"`
}

// claudeRegistry reads and vets p's record. It returns nil and why when
// there is no record to believe.
func claudeRegistry(env Env, p proc.Proc) (*claudeReg, string) {
	reg, ok := env.Memo.claudeRecord(env.Root, "sessions/"+strconv.Itoa(p.PID)+".json")
	if !ok {
		return nil, "no registry record"
	}
	if reg.PID != 0 && reg.PID != p.PID {
		return nil, fmt.Sprintf("registry record names pid %d", reg.PID)
	}
	if ps := reg.ProcStart; len(ps) > 0 && string(ps) != "null" {
		var num [20]byte
		want := strconv.AppendUint(num[:0], p.Start, 10)
		s := ps
		switch {
		case len(ps) >= 2 && ps[0] == '"' && ps[len(ps)-1] == '"' && bytes.IndexByte(ps, '\\') < 0:
			s = ps[1 : len(ps)-1] // a plain string: what json.Unmarshal would give
		case ps[0] == '"':
			var q string
			if json.Unmarshal(ps, &q) == nil {
				s = []byte(q)
			}
		} // otherwise a bare number, compared as written
		if !bytes.Equal(s, want) {
			return nil, fmt.Sprintf("registry record is another process's: procStart %q, this process started at %s", s, want)
		}
	}
	if reg.PIDDomain != "" && env.PIDDomain != "" && !SamePIDDomain(reg.PIDDomain, env.PIDDomain) {
		return nil, "registry record is from another pid namespace (" + reg.PIDDomain + ")"
	}
	if !isUUID(reg.SessionID) {
		return nil, "registry record has no session id"
	}
	return reg, ""
}

// claudeSanitize is Claude's project-dir name for a path: every character
// that is not an ASCII letter or digit becomes '-', counted in UTF-16 code
// units as JavaScript does (an astral character becomes two).
func claudeSanitize(p string) string {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		case r > 0xffff:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// claudeProjectDir is the rel path of cwd's project dir. A sanitized name
// longer than 200 characters is cut and suffixed with a hash that differs
// between Claude's runtimes, so such a dir is found by its prefix, preferring
// one that holds sid's transcript.
func claudeProjectDir(r *saferoot.Root, memo *Memo, cwd, sid string) string {
	name := claudeSanitize(cwd)
	if len(name) <= 200 {
		return "projects/" + name
	}
	ents, err := memo.readDir(r, "projects")
	if err != nil {
		return ""
	}
	found := ""
	for _, e := range ents {
		if !e.Dir || !strings.HasPrefix(e.Name, name[:200]+"-") {
			continue
		}
		if found == "" {
			found = "projects/" + e.Name
		}
		if sid != "" {
			if _, err := r.Stat("projects/" + e.Name + "/" + sid + ".jsonl"); err == nil {
				return "projects/" + e.Name
			}
		}
	}
	return found
}

// claudeFind returns the project dir that holds sid's transcript, or "".
func claudeFind(r *saferoot.Root, memo *Memo, sid string) string {
	ents, err := memo.readDir(r, "projects")
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if !e.Dir {
			continue
		}
		if info, err := r.Stat("projects/" + e.Name + "/" + sid + ".jsonl"); err == nil && !info.Dir {
			return "projects/" + e.Name
		}
	}
	return ""
}

// claimedMax bounds the registry records the /clear check reads, and
// oldSubsMax the old-style sub-agent files of a project dir.
const (
	claimedMax = 4096
	oldSubsMax = 64
)

// claudeNewer looks for the session that /clear started without telling the
// registry: the newest transcript in projDir other than sid's, written after
// sid's (than; zero when sid's does not exist) and begun at or after since
// (the registry's startedAt), that no other registry record claims and that
// is not a sidechain. It returns that session id, or "". With no since
// there is nothing to compare with, and every newer transcript would look
// like this process's: it returns "".
//
// The project dir's listing, the registry records and the heads it reads
// come from memo, and the transcripts no record claims are set apart once
// per memo: so the agents of one listing that share a project dir read
// each file once, and each agent looks at a bounded number of candidates
// however many agents share the dir.
func claudeNewer(r *saferoot.Root, memo *Memo, projDir, sid string, than, since time.Time, pid int) string {
	if since.IsZero() {
		return ""
	}
	within := func(c byMtime) bool { return c.mtime.After(than) && !c.mtime.Before(since) }
	// Newest first: when neither of the newest two is a candidate, none is.
	found := false
	for i, c := range memo.claudeTranscripts(r, projDir) {
		if i == 2 || !within(c) {
			break
		}
		if c.rel != sid {
			found = true
			break
		}
	}
	if !found {
		return ""
	}
	recs := memo.claudeRecords(r)
	own := strconv.Itoa(pid) + ".json"
	// The candidates: the unclaimed transcripts, and the one only this
	// process's own record names (not another's claim).
	var cands []byMtime
	for _, c := range memo.claudeUnclaimed(r, projDir) {
		if !within(c) || len(cands) > 9 { // 8 tried, and sid's skipped
			break
		}
		cands = append(cands, c)
	}
	if o := recs.sidOf[own]; o != "" && o != sid && recs.count[o] == 1 {
		for _, c := range memo.claudeTranscripts(r, projDir) {
			if c.rel == o && within(c) {
				cands = append(cands, c)
			}
		}
	}
	newestFirst(cands)
	tried := 0
	for _, c := range cands {
		if c.rel == sid || recs.claimedBy(c.rel, own) {
			continue
		}
		if tried++; tried > 8 {
			break
		}
		if h := memo.claudeHead(r, projDir+"/"+c.rel+".jsonl"); h.ok && !h.ts.Before(since) {
			return c.rel
		}
	}
	return ""
}

// claudeArgvSession is the session a process without a registry record was
// started on, when its argv still shows it (native builds before the
// registry existed; npm builds overwrite their argv).
func claudeArgvSession(argv []string) string {
	if len(argv) < 2 {
		return ""
	}
	for _, names := range [][]string{{"--resume", "-r"}, {"--session-id"}} {
		if v, ok := flagValue(argv[1:], names...); ok && isUUID(v) {
			return v
		}
	}
	return ""
}

// Resolve implements Harness.
func (claude) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("claude", env, p)
	if env.Root == nil {
		return a
	}
	reg, why := claudeRegistry(env, p)
	procStart, haveStart := started(env, p)
	cwd := cleanCwd(a.Cwd)
	if env.Memo == nil {
		// One agent alone: the memo spares only its own repeated reads.
		env.Memo = NewMemo()
	}
	var sid, via string
	var since time.Time
	switch {
	case reg != nil:
		a.Name, a.Status = reg.Name, reg.Status
		if t, ok := claudeRegTurn(reg.Status, reg.WaitingFor, reg.StatusUpdatedAt); ok {
			t.set(&a)
		}
		claudeBg(env, &a, reg)
		sid, via = reg.SessionID, "registry"
		if reg.Cwd != "" {
			cwd = reg.Cwd // the launch cwd names the project dir
		}
		if ms, ok := number(reg.StartedAt); ok && ms > 0 {
			since = time.UnixMilli(int64(ms))
		} else if haveStart {
			since = procStart
		}
	default:
		sid = claudeArgvSession(normArgv(p.Argv))
		if sid == "" || !haveStart {
			a.Via = "none (" + why + ")"
			return a
		}
		via, since = RouteArgv+" (no registry; session from argv)", procStart
	}
	a.Session, a.Via = sid, via
	projDir := claudeProjectDir(env.Root, env.Memo, cwd, sid)
	if projDir == "" {
		return a
	}
	tr := projDir + "/" + sid + ".jsonl"
	var than time.Time
	info, err := env.Memo.Stat(env.Root, tr)
	if err == nil {
		than = info.Mtime
	}
	if newer := claudeNewer(env.Root, env.Memo, projDir, sid, than, since, p.PID); newer != "" {
		if reg != nil {
			a.Via = "transcript (registry session " + sid + " is stale after /clear)"
		} else {
			a.Via = RouteArgv + " (no registry; argv session " + sid + " is stale after /clear)"
		}
		a.Session, sid = newer, newer
		tr, err = projDir+"/"+newer+".jsonl", nil
	}
	if err != nil {
		// Claude's own resume also looks beyond the cwd's project dir
		// (worktrees, a cwd that moved): the session id is unique, so a
		// transcript of that id under another project dir is this one.
		other := claudeFind(env.Root, env.Memo, sid)
		if other == "" {
			return a // the session has written nothing yet
		}
		projDir, tr = other, other+"/"+sid+".jsonl"
		a.Via += " (transcript under another project dir)"
	}
	claudeTranscriptFacts(env, &a, projDir, sid, tr)
	return a
}

// claudeTranscriptFacts gives a what its transcript tr (session sid, under
// projDir) tells: title and model (or pending), turn, tokens and limits,
// and its subagents.
func claudeTranscriptFacts(env Env, a *Agent, projDir, sid, tr string) {
	a.Transcript = tr
	if claudeFactsNow(env, a.Harness, tr) {
		facts := fileCached(env.Memo, env.Root, "claude-facts", tr, func() [2]string {
			t, m := claudeFacts(env.Root, tr)
			return [2]string{t, m}
		})
		a.Title, a.Model = facts[0], facts[1]
	} else {
		a.Pending = append(a.Pending, "title", "model")
	}
	claudeFill(env, a, tr, time.Now())
	a.Agents = claudeSubs(env.Root, env.Memo, projDir, sid)
}

// claudeFactsNow says whether the resolve derives tr's title and model:
// always without env.Defer; with it, when the file cache has them or had
// them for an earlier version of the file (an agent the reads already
// show, at work: its title is derived at every change, as without a
// Defer), or when the windows claudeFacts reads fit what the read has
// left to spend, and no derivation of them is queued already
// (Counts.Later): a read does not do again what the worker will do for
// it, so the reads that come while it works cost what a later one does.
func claudeFactsNow(env Env, harness, tr string) bool {
	if env.Defer == nil || derivedBefore(env.Memo, env.Root, "claude-facts", tr) {
		return true
	}
	if env.Counts.queuedLater(harness, tr) {
		return false
	}
	info, err := env.Memo.Stat(env.Root, tr)
	if err != nil {
		return true // claudeFacts finds nothing either
	}
	return env.Defer.spend(min(info.Size, headWindow+tailWindow))
}

// claudeLine is the part of a transcript line Resolve reads.
type claudeLine struct {
	Type        string `json:"type"`
	IsSidechain bool   `json:"isSidechain"`
	IsMeta      bool   `json:"isMeta"`
	SessionID   string `json:"sessionId"`
	AgentName   string `json:"agentName"`
	CustomTitle string `json:"customTitle"`
	AITitle     string `json:"aiTitle"`
	LastPrompt  string `json:"lastPrompt"`
	Summary     string `json:"summary"`
	Message     *struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// claudeFacts reads a transcript's title and model from its head and tail
// windows. The title follows Claude's own listing (2.1.x ranks
// agentName||customTitle||aiTitle||summary||firstPrompt): the last
// agent-name (written by /rename since 2.1), else the last customTitle,
// else the last aiTitle, else the last summary, else the last lastPrompt,
// else the first real user prompt. The model is the last assistant line's
// (synthetic messages carry "<synthetic>" and are skipped).
//
// Only the lines that may say one of these are decoded (mayHold): the
// model is looked for from the end, and the title in the lines that name
// a title's type, so the cost of a transcript is not a decoding of its
// every line.
func claudeFacts(r *saferoot.Root, rel string) (title, model string) {
	head, tail := windows(r, rel, headWindow, tailWindow)
	all := append(head, tail...)
	for i := len(all) - 1; i >= 0 && model == ""; i-- {
		var l claudeLine
		if !mayHold(all[i], `"assistant"`) || json.Unmarshal(all[i], &l) != nil {
			continue
		}
		if l.Type == "assistant" && l.Message != nil && l.Message.Model != "" && l.Message.Model != "<synthetic>" {
			model = l.Message.Model
		}
	}
	var agentName, custom, ai, prompt, summary, first string
	for _, ln := range all {
		var l claudeLine
		if !mayHold(ln, `"agent-name"`, `"custom-title"`, `"ai-title"`, `"last-prompt"`, `"summary"`) &&
			(first != "" || !mayHold(ln, `"user"`)) {
			continue
		}
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		switch l.Type {
		case "agent-name":
			agentName = pick(agentName, l.AgentName)
		case "custom-title":
			custom = pick(custom, l.CustomTitle)
		case "ai-title":
			ai = pick(ai, l.AITitle)
		case "last-prompt":
			prompt = pick(prompt, l.LastPrompt)
		case "summary":
			summary = pick(summary, l.Summary)
		case "user":
			if first == "" && !l.IsMeta && !l.IsSidechain && l.Message != nil {
				first = claudeUserText(l.Message.Content)
			}
		}
	}
	for _, t := range []string{agentName, custom, ai, summary, prompt, first} {
		if t = cleanTitle(t); t != "" {
			return t, model
		}
	}
	return "", model
}

// pick keeps the later non-empty value.
func pick(old, new string) string {
	if strings.TrimSpace(new) != "" {
		return new
	}
	return old
}

// claudeUserText is the prompt a user line carries, or "" for tool results
// and the command/hook wrappers Claude records as user lines.
func claudeUserText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) != nil {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(content, &blocks) != nil {
			return ""
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return ""
			}
			if b.Type == "text" && s == "" {
				s = b.Text
			}
		}
	}
	if s = strings.TrimSpace(s); strings.HasPrefix(s, "<") {
		return ""
	}
	return s
}

// claudeSubs lists the sub-agents of session sid:
// <projDir>/<sid>/subagents/[<group>/…]agent-<id>.jsonl with an optional
// agent-<id>.meta.json sidecar ({agentType, description}), plus the
// agent-<id>.jsonl files old builds wrote straight into the project dir
// (those name their session inside, on every line).
func claudeSubs(r *saferoot.Root, memo *Memo, projDir, sid string) []Sub {
	var files []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := r.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if len(files) >= 256 {
				return
			}
			switch {
			case e.Dir && depth < 3:
				walk(dir+"/"+e.Name, depth+1)
			case !e.Dir && strings.HasPrefix(e.Name, "agent-") && strings.HasSuffix(e.Name, ".jsonl"):
				files = append(files, dir+"/"+e.Name)
			}
		}
	}
	if memo.mayHaveDir(r, projDir, sid) {
		walk(projDir+"/"+sid+"/subagents", 0)
	}
	for _, o := range memo.claudeOldSubs(r, projDir) {
		if o.sid == sid {
			files = append(files, projDir+"/"+o.name)
		}
	}
	var subs []Sub
	var ids []string
	for _, f := range files {
		id := strings.TrimSuffix(strings.TrimPrefix(path.Base(f), "agent-"), ".jsonl")
		name := "agent-" + id
		var meta struct {
			AgentType string `json:"agentType"`
		}
		if readJSON(r, strings.TrimSuffix(f, ".jsonl")+".meta.json", smallFile, &meta) {
			if t := componentName(meta.AgentType); t != "" {
				name = t + "-" + componentName(id)
			}
		}
		model := fileCached(memo, r, "claude-submodel", f, func() string { return claudeSubModel(r, f) })
		subs = append(subs, Sub{Name: name, Model: model, Transcript: f})
		ids = append(ids, id)
	}
	return uniqueSubs(subs, ids)
}

// claudeSubModel is the last assistant model of a sub-agent transcript.
func claudeSubModel(r *saferoot.Root, rel string) string {
	head, tail := windows(r, rel, 0, subTail)
	model := ""
	for _, ln := range append(head, tail...) {
		var l claudeLine
		if json.Unmarshal(ln, &l) == nil && l.Type == "assistant" && l.Message != nil && l.Message.Model != "" && l.Message.Model != "<synthetic>" {
			model = l.Message.Model
		}
	}
	return model
}

// Resume implements Harness: claude --resume <sid>, run in the session's
// cwd. Claude can resume only a session it has written: one started and
// never prompted has a registry record and no transcript, and
// "claude --resume" of it prints "No conversation found" and exits, so it
// is refused here, before anything is stopped.
func (claude) Resume(a Agent, env Env) ([]string, error) {
	if err := claudeBgRefusal(a); err != nil {
		return nil, err
	}
	if !isUUID(a.Session) {
		return nil, unresolved("claude", a)
	}
	if !haveTranscript(a, env) {
		why := "session " + a.Session + " has no transcript; Claude writes it at the first prompt"
		if hasFlag(a.Argv, "--no-session-persistence") {
			why = "a print run with --no-session-persistence writes no transcript of session " + a.Session
		}
		return nil, nothingYet("claude", a, why)
	}
	return []string{"claude", "--resume", a.Session}, nil
}

// unresolved is the refusal for an agent whose session is not known.
func unresolved(name string, a Agent) error {
	return errs.E("harness.Resume", errs.Permission, "", fmt.Errorf("%s pid %d: session unresolved (via %s)", name, a.PID, a.Via))
}

// NothingYet is the text of the refusal for an agent whose session has
// written nothing a resume could start from.
const NothingYet = "nothing to resume yet"

// nothingYet is the refusal for an agent whose session exists but has
// nothing a resume could start from: the relaunched harness would exit at
// once and the agent would be lost.
func nothingYet(name string, a Agent, why string) error {
	return errs.E("harness.Resume", errs.Permission, "", fmt.Errorf("%s pid %d: %s: %s", name, a.PID, NothingYet, why))
}

// haveTranscript reports whether a's transcript is named and, where the
// root is known, is a file there now.
func haveTranscript(a Agent, env Env) bool {
	if a.Transcript == "" || checkRel(env, a.Transcript) != nil {
		return false
	}
	if env.Root == nil {
		return true
	}
	info, err := env.Root.Stat(a.Transcript)
	return err == nil && !info.Dir
}

// SamePIDDomain compares two pid domains as Claude's registry writes them,
// "linux:<machine-id>:pid:[<inode>]" (2.1.3xx) or "linux::pid:[<inode>]"
// (older builds, and no machine id known): the namespaces must be the same,
// and the machines too where both name one.
func SamePIDDomain(a, b string) bool {
	am, ans, aok := splitPIDDomain(a)
	bm, bns, bok := splitPIDDomain(b)
	if !aok || !bok {
		return a == b
	}
	return ans == bns && (am == "" || bm == "" || am == bm)
}

func splitPIDDomain(d string) (machine, ns string, ok bool) {
	rest, ok := strings.CutPrefix(d, "linux:")
	if !ok {
		return "", "", false
	}
	machine, ns, ok = strings.Cut(rest, ":")
	return machine, ns, ok && strings.HasPrefix(ns, "pid:[")
}

var _ = register(claude{}, &claudeSpec)

var claudeSpec = Spec{
	Stale: claudeStale,
	Name:  "claude",
	Order: 10,
	Mirrors: []Mirror{
		{At: "projects", Rel: "projects"},
		{At: "history", Rel: "history.jsonl", File: true},
		{At: "skills", Rel: "skills"},
	},
	Skills: "skills",
	// projects/<-home-u-src-x>/<session>.jsonl
	SlugDirs: []string{"projects"},
	// file-history/<session>/<hash>@v<n>: each edited file, before.
	CopyStores: []string{"file-history"},
	Credentials: []Credential{
		{"settings.json", "Claude Code (may hold API keys, MCP env)"},
		{"settings.local.json", "Claude Code"},
		{".credentials.json", "Claude Code ~/.claude/.credentials.json"},
		{".claude.json", "Claude Code ~/.claude.json: oauthAccount, MCP env (and backups/.claude.json.backup.<ms>)"},
	},
	Programs:  []string{"claude.exe"},
	PathParts: []string{"/claude/versions/"},
	OwnExecutable: func(exe string) bool {
		return path.Base(exe) == "claude.exe" || strings.Contains(exe, "/claude/versions/")
	},
	Env: []string{"CLAUDE_CONFIG_DIR"},
	// The live registry record, the first route of its state rule.
	EventFiles: func(pid int) []string { return []string{"sessions/" + strconv.Itoa(pid) + ".json"} },
	Keep: []keep{
		{names: []string{"--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"--permission-mode"}, emit: "--permission-mode", value: true, max: 64, ok: word},
		{names: []string{"--dangerously-skip-permissions"}, emit: "--dangerously-skip-permissions"},
		{names: []string{"--add-dir"}, emit: "--add-dir", value: true, many: true, max: 4 << 10},
		{names: []string{"--settings"}, emit: "--settings", value: true, max: 16 << 10},
		{names: []string{"--mcp-config"}, emit: "--mcp-config", value: true, many: true, max: 16 << 10},
	},
	Flags:    claudeFlags,
	Summed:   true,
	Counter:  func() counter { return &claudeTokens{} },
	Verified: "2.1.332",
	Doc: Doc{
		Title:   "Claude Code",
		Root:    "~/.claude",
		Process: "the native `claude` (npm or native install), print runs (`-p`) too but for those a program drives (stream-json in or out)",
		Via:     "`registry` (`sessions/<pid>.json`), else `transcript`",
		Resume:  "`claude --resume ID`",
		RealCLI: "2.1.332",
	},
}

// ---- turn state ----

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
	ls := readTail(f, st.Size(), contextEnd)
	var c claudeTokens
	for i := len(ls) - 1; i >= 0 && c.newest == nil; i-- {
		c.line(ls[i])
	}
	if c.newest == nil && st.Size() > contextEnd {
		return contextTail{}
	}
	return contextTail{tokens: c.tokens(false), found: true}
}

// ---- tokens ----

// claudeUsage is the usage an assistant line carries.
type claudeUsage struct {
	Input       int64 `json:"input_tokens"`
	CacheCreate int64 `json:"cache_creation_input_tokens"`
	CacheRead   int64 `json:"cache_read_input_tokens"`
	Output      int64 `json:"output_tokens"`
}

type claudeUsageLine struct {
	Type        string `json:"type"`
	IsSidechain bool   `json:"isSidechain"`
	Message     *struct {
		ID    string       `json:"id"`
		Model string       `json:"model"`
		Usage *claudeUsage `json:"usage"`
	} `json:"message"`
}

// claudeTokens counts a Claude transcript's usage. One response is written
// as several lines with the same message id, the output count growing and
// final only on the last, so each id counts once, its last line's usage.
// Sidechain lines (a sub-agent's) and synthetic ones are not the session's.
type claudeTokens struct {
	byID   lastByID[claudeUsage, *claudeUsage]
	noID   claudeUsage // the sum of the lines without an id
	n      int         // lines counted
	newest *claudeUsage
}

func (u *claudeUsage) add(v claudeUsage) {
	u.Input += v.Input
	u.Output += v.Output
	u.CacheRead += v.CacheRead
	u.CacheCreate += v.CacheCreate
}

func (c *claudeTokens) line(ln []byte) {
	// From the end, where Claude writes it: a search from the start
	// would try every quote of the content first.
	if bytes.LastIndex(ln, []byte(`"usage"`)) < 0 {
		return
	}
	id, u, ok := claudeUsageFast(ln)
	if !ok {
		var l claudeUsageLine
		if json.Unmarshal(ln, &l) != nil || l.Type != "assistant" || l.IsSidechain || l.Message == nil ||
			l.Message.Usage == nil || l.Message.Model == "<synthetic>" {
			return
		}
		id, u = l.Message.ID, *l.Message.Usage
	}
	c.newest = &u
	c.n++
	if id == "" {
		c.noID.add(u)
		return
	}
	c.byID.put(id, u)
}

// claudeUsageFast reads a main-chain assistant line's message id and usage
// without decoding its content (most of a transcript's bytes), for the
// layout Claude writes: the message object starting with its id, its
// usage after its content (so the last "usage" key is the message's).
// Anything else (a sub-agent's line, a synthetic one, another layout)
// is left to the full decoding: ok is false.
func claudeUsageFast(ln []byte) (id string, u claudeUsage, ok bool) {
	const msg = `"message":{"id":"`
	i := bytes.Index(ln, []byte(msg))
	// The marks of what is left to the full decoding are looked for by
	// a rarer part (one that does not start with a quote, which the
	// content is full of): more lines may match, and go to the full
	// decoding, none fewer.
	if i < 0 || !bytes.Contains(ln, []byte(`"type":"assistant"`)) ||
		bytes.Contains(ln, []byte(`Sidechain":true`)) || bytes.Contains(ln, []byte(`<synthetic>`)) {
		return "", u, false
	}
	rest := ln[i+len(msg):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return "", u, false
	}
	id = string(rest[:j])
	k := bytes.LastIndex(ln, []byte(`"usage":{`))
	if k < 0 {
		return "", u, false
	}
	obj := jsonObject(ln[k+len(`"usage":`):])
	if obj == nil {
		return "", u, false
	}
	if u, ok = usageFast(obj); ok {
		return id, u, true
	}
	if u = (claudeUsage{}); json.Unmarshal(obj, &u) != nil {
		return "", u, false
	}
	return id, u, true
}

// usageFast is json.Unmarshal of a usage object into a claudeUsage,
// without reflection, for the objects Claude writes: keys without
// escapes, the counts integers, other values strings without escapes,
// numbers, literals or objects of the same. Anything else is not read
// (ok false), so that what it gives is always what json.Unmarshal gives.
func usageFast(obj []byte) (u claudeUsage, ok bool) {
	fields := [...]struct {
		name string
		v    *int64
	}{{"input_tokens", &u.Input}, {"cache_creation_input_tokens", &u.CacheCreate},
		{"cache_read_input_tokens", &u.CacheRead}, {"output_tokens", &u.Output}}
	p := jsonScan{b: obj}
	ok = p.object(func(key []byte) bool {
		for _, f := range fields {
			if string(key) == f.name {
				n, ok := p.integer()
				*f.v = n
				return ok
			}
			if bytes.EqualFold(key, []byte(f.name)) {
				return false // json.Unmarshal's match ignores case
			}
		}
		return p.value()
	})
	p.space()
	return u, ok && p.i == len(p.b)
}

// jsonScan reads the strict subset of JSON usageFast takes.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScan) next(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads an object, each member's value by member (after its key
// and colon).
func (p *jsonScan) object(member func(key []byte) bool) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok || !p.next(':') {
			return false
		}
		p.space()
		if !member(key) {
			return false
		}
		if p.next('}') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

// str reads a string of printable ASCII without escapes, and gives its
// body.
func (p *jsonScan) str() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[p.i+1 : j]
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

// integer reads an integer that fits an int64.
func (p *jsonScan) integer() (int64, bool) {
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	d := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == d || j-d > 1 && p.b[d] == '0' || j < len(p.b) && (p.b[j] == '.' || p.b[j] == 'e' || p.b[j] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[p.i:j]), 10, 64)
	p.i = j
	return n, err == nil
}

// value reads and drops a value: a string, an integer, a literal, or an
// object of them.
func (p *jsonScan) value() bool {
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		return p.object(func([]byte) bool { return p.value() })
	case c == '-' || c >= '0' && c <= '9':
		_, ok := p.integer()
		return ok
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
			p.i += len(lit)
			return true
		}
	}
	return false
}

// jsonObject is the JSON object b starts with, found by matching braces
// outside strings; nil if b does not hold a whole one.
func jsonObject(b []byte) []byte {
	depth, inStr, esc := 0, false, false
	for i, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return b[:i+1]
			}
		}
	}
	return nil
}

// tokens is the count; with whole unset (the file was too big to scan)
// only the context, from the tail, is given.
func (c *claudeTokens) tokens(whole bool) Tokens {
	var t Tokens
	if c.newest != nil {
		t.Context = i64(c.newest.Input + c.newest.CacheRead + c.newest.CacheCreate)
	}
	if !whole || c.n == 0 {
		return t
	}
	sum := c.byID.sum()
	sum.add(c.noID)
	t.Input, t.Output, t.CacheRead, t.CacheWrite = i64(sum.Input), i64(sum.Output), i64(sum.CacheRead), i64(sum.CacheCreate)
	return t
}

// ---- what a listing of many agents shares (Memo) ----

// claudeTranscripts is every <uuid>.jsonl of projDir with its mtime,
// newest first: what claudeNewer compares each agent's transcript with.
func (m *Memo) claudeTranscripts(r *saferoot.Root, projDir string) []byMtime {
	return memoGet(m, r, "claude-transcripts", projDir, func() []byMtime {
		ents, err := m.readDir(r, projDir)
		if err != nil {
			return nil
		}
		var names []string
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name, ".jsonl"); ok && !e.Dir && isUUID(id) {
				names = append(names, e.Name)
			}
		}
		// A directory shared by hundreds of agents has hundreds of
		// transcripts: stat'ed on every CPU (their stats are the memo's,
		// which each agent's own facts use next).
		all := make([]byMtime, len(names))
		proc.Split(len(names), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if info, err := m.Stat(r, projDir+"/"+names[i]); err == nil {
					all[i] = byMtime{strings.TrimSuffix(names[i], ".jsonl"), info.Mtime}
				}
			}
		})
		out := all[:0]
		for _, t := range all {
			if t.rel != "" {
				out = append(out, t)
			}
		}
		newestFirst(out)
		return out
	})
}

// claudeRecords is what the registry records (sessions/<pid>.json, the
// first claimedMax in ReadDir's order) claim: for each record file the
// session id it names, and for each session id how many records name it.
type claudeRecords struct {
	sidOf map[string]string
	count map[string]int
}

func (m *Memo) claudeRecords(r *saferoot.Root) claudeRecords {
	return memoGet(m, r, "claude-records", "sessions", func() claudeRecords {
		out := claudeRecords{sidOf: map[string]string{}, count: map[string]int{}}
		ents, err := r.ReadDir("sessions")
		if err != nil {
			return out
		}
		var names []string
		for _, e := range ents {
			if !e.Dir && claudeRecord.MatchString(e.Name) && len(names) < claimedMax {
				names = append(names, e.Name)
			}
		}
		// Read on every CPU: hundreds of agents of one user mean hundreds
		// of records, each a stat (and a read when it changed).
		regs := make([]*claudeReg, len(names))
		proc.Split(len(names), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				regs[i], _ = m.claudeRecord(r, "sessions/"+names[i])
			}
		})
		for i, reg := range regs {
			if reg != nil && reg.SessionID != "" {
				out.sidOf[names[i]] = reg.SessionID
				out.count[reg.SessionID]++
			}
		}
		return out
	})
}

// claudeRecord is the registry record rel, parsed once per version of the
// file (fileCached): the agent's own resolve and every other agent's
// /clear check read it, and a table read re-reads no unchanged record.
// The record is shared by every request while its file is unchanged:
// callers read it and never modify it.
func (m *Memo) claudeRecord(r *saferoot.Root, rel string) (*claudeReg, bool) {
	reg := fileCached(m, r, "claude-record", rel, func() *claudeReg {
		reg := new(claudeReg)
		if !readJSON(r, rel, smallFile, reg) {
			return nil
		}
		return reg
	})
	return reg, reg != nil
}

// claimedBy reports whether a record other than own (a file name) names
// sid.
func (c claudeRecords) claimedBy(sid, own string) bool {
	n := c.count[sid]
	if c.sidOf[own] == sid {
		n--
	}
	return n > 0
}

// claudeUnclaimed is claudeTranscripts(projDir) less the transcripts a
// record names, newest first: the candidates of every agent's /clear
// check but the one its own record names.
func (m *Memo) claudeUnclaimed(r *saferoot.Root, projDir string) []byMtime {
	return memoGet(m, r, "claude-unclaimed", projDir, func() []byMtime {
		recs := m.claudeRecords(r)
		var out []byMtime
		for _, c := range m.claudeTranscripts(r, projDir) {
			if recs.count[c.rel] == 0 {
				out = append(out, c)
			}
		}
		return out
	})
}

// claudeHead is what claudeNewer reads of a transcript's head: whether its
// first line is a sidechain's, and the timestamp of the first line that
// has one (zero when none parses).
type claudeHead struct {
	sidechain bool
	ts        time.Time
	ok        bool
}

func (m *Memo) claudeHead(r *saferoot.Root, rel string) claudeHead {
	return memoGet(m, r, "claude-head", rel, func() claudeHead {
		head, _ := windows(r, rel, headWindow, 0)
		for j, ln := range head {
			var l struct {
				Timestamp   string `json:"timestamp"`
				IsSidechain bool   `json:"isSidechain"`
			}
			if json.Unmarshal(ln, &l) != nil {
				continue
			}
			if j == 0 && l.IsSidechain {
				return claudeHead{sidechain: true}
			}
			if l.Timestamp == "" {
				continue
			}
			ts, ok := parseTime(l.Timestamp)
			return claudeHead{ts: ts, ok: ok}
		}
		return claudeHead{}
	})
}

// claudeOldSub is an agent-<id>.jsonl straight in a project dir (old
// builds) and the session its first line names.
type claudeOldSub struct{ name, sid string }

func (m *Memo) claudeOldSubs(r *saferoot.Root, projDir string) []claudeOldSub {
	return memoGet(m, r, "claude-oldsubs", projDir, func() []claudeOldSub {
		ents, err := m.readDir(r, projDir)
		if err != nil {
			return nil
		}
		var out []claudeOldSub
		for _, e := range ents {
			if e.Dir || !strings.HasPrefix(e.Name, "agent-") || !strings.HasSuffix(e.Name, ".jsonl") {
				continue
			}
			if len(out) >= oldSubsMax {
				break
			}
			var l claudeLine
			json.Unmarshal(firstLine(r, projDir+"/"+e.Name, smallFile), &l)
			out = append(out, claudeOldSub{e.Name, l.SessionID})
		}
		return out
	})
}
