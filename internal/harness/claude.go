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
// workers run from the full versioned path
// (~/.local/share/claude/versions/2.1.201) with --bg-spare/--bg-pty-host:
// helpers. So are one-shot print runs (-p) and the non-session subcommands
// (mcp, doctor, update, …).
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
	if len(p.Argv) == 0 {
		return None
	}
	argv := normArgv(p.Argv)
	b := base(argv[0])
	var args []string
	switch {
	case strings.Contains(argv[0], "/claude/versions/") && claudeVersion.MatchString(b):
		// The versioned binary is only ever run by name by Claude itself,
		// for its background workers; the user's "claude" is the symlink.
		return Helper
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
	for _, a := range args {
		if strings.HasPrefix(a, "--bg-") {
			return Helper
		}
	}
	if hasFlag(args, "-p", "--print") || claudeHelperWords[claudeFlags.positional(args)] {
		return Helper
	}
	return Session
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
	a.Transcript = tr
	if claudeFactsNow(env, tr) {
		facts := fileCached(env.Memo, env.Root, "claude-facts", tr, func() [2]string {
			t, m := claudeFacts(env.Root, tr)
			return [2]string{t, m}
		})
		a.Title, a.Model = facts[0], facts[1]
	} else {
		a.Pending = append(a.Pending, "title", "model")
	}
	claudeFill(env, &a, tr, time.Now())
	a.Agents = claudeSubs(env.Root, env.Memo, projDir, sid)
	return a
}

// claudeFactsNow says whether the resolve derives tr's title and model:
// always without env.Defer; with it, when the file cache has them or had
// them for an earlier version of the file (an agent the reads already
// show, at work: its title is derived at every change, as without a
// Defer), or when the windows claudeFacts reads fit what the read has
// left to spend.
func claudeFactsNow(env Env, tr string) bool {
	if env.Defer == nil || derivedBefore(env.Memo, env.Root, "claude-facts", tr) {
		return true
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
	if !isUUID(a.Session) {
		return nil, unresolved("claude", a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet("claude", a, "session "+a.Session+" has no transcript; Claude writes it at the first prompt")
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
