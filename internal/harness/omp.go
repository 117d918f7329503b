package harness

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// omp is oh-my-pi (root ~/.omp; its agent dir is ~/.omp/agent, sessions
// under agent/sessions/).
//
// Processes: a compiled binary runs as argv[0] "omp"; a bun install runs
// "bun …/omp" or "bun …/oh-my-pi/…/cli.ts", and sets process.title, which
// under bun may change only comm, so comm "omp" on a bun process counts too.
// The worker-daemon broker (__omp_worker_daemon_broker) and the daemon-word
// subcommands are helpers, as are one-shot print and rpc/json modes.
//
// Resolution: the transcript the process holds open under agent/sessions/
// (Jan 2026 omp keeps its writer fd; newer builds may not), newest first
// (via fd); else the session dir named after its cwd, under both naming
// schemes (see ompDirNames), newest transcript first, believed only if its
// header's cwd is the process's and it was written since the process
// started (via dir).
type omp struct{}

func (omp) Name() string { return "omp" }

var (
	piFlags = flags{
		value: set("--model", "--models", "--provider", "--session", "--session-dir", "--mode",
			"--thinking", "--tools", "--append-system-prompt", "--system-prompt", "--api-key",
			"-e", "--extension", "--fork", "--session-id", "--export", "--cwd"),
		optional: set("-r", "--resume"),
	}
	piHelperWords = set("daemon", "serve", "gateway", "dashboard", "mcp", "mcp-server", "acp",
		"ps", "render", "export", "update", "config", "install", "remove", "list", "help")
)

// piKind classifies the args of an omp or pi command line.
func piKind(args []string) Kind {
	for _, a := range args {
		if a == "__omp_worker_daemon_broker" || strings.HasPrefix(a, "__omp_worker") {
			return Helper
		}
	}
	if hasFlag(args, "-p", "--print", "--export") {
		return Helper
	}
	if m, ok := flagValue(args, "--mode"); ok && (m == "rpc" || m == "json") {
		return Helper
	}
	if piHelperWords[piFlags.positional(args)] {
		return Helper
	}
	return Session
}

// Classify implements Harness.
func (omp) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	switch {
	case b == "omp":
		return piKind(argv[1:])
	case b == "bun" || isNode(b):
		script, rest := interpScript(argv[1:])
		if base(script) == "omp" || (strings.Contains(script, "oh-my-pi") && (strings.HasSuffix(script, "/cli.ts") || strings.HasSuffix(script, "/cli.js"))) {
			return piKind(rest)
		}
		if b == "bun" && p.Comm == "omp" {
			return piKind(rest)
		}
	}
	return None
}

// ompDirNames are the session-dir names omp has used for cwd, current
// scheme first: under the temp dir "-tmp-<rel>" ("-tmp" for itself); under
// home "-<rel>" ("-" for home itself), with / \ : becoming '-'; elsewhere
// (and, before Jan 2026, everywhere) the legacy "--<abs without its leading
// slash>--". Every home and temp spelling given is tried; the header's cwd
// decides.
func ompDirNames(cwd string, homes, tmps []string) []string {
	var out []string
	add := func(s string) {
		if s != "" && saferoot.ValidName(s) == nil && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, t := range tmps {
		if rel, ok := within(t, cwd); ok {
			add(piEncodeRel("-tmp", rel))
		}
	}
	for _, h := range homes {
		if rel, ok := within(h, cwd); ok {
			add(piEncodeRel("-", rel))
		}
	}
	add(piLegacyDir(cwd))
	return out
}

var piSep = strings.NewReplacer("/", "-", "\\", "-", ":", "-")

func piEncodeRel(prefix, rel string) string {
	enc := piSep.Replace(rel)
	switch {
	case enc == "":
		return prefix
	case strings.HasSuffix(prefix, "-"):
		return prefix + enc
	}
	return prefix + "-" + enc
}

// piLegacyDir is pi's (and old omp's) "--<cwd>--" dir name.
func piLegacyDir(cwd string) string {
	if len(cwd) > 0 && (cwd[0] == '/' || cwd[0] == '\\') {
		cwd = cwd[1:]
	}
	return "--" + piSep.Replace(cwd) + "--"
}

// within returns p relative to root when p is root or beneath it.
func within(root, p string) (string, bool) {
	root = strings.TrimSuffix(root, "/")
	if root == "" || p == "" {
		return "", false
	}
	if p == root {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, root+"/")
	return rel, ok
}

// Resolve implements Harness.
func (omp) Resolve(env Env, p proc.Proc) Agent {
	a, pinfo := start("omp", env, p)
	// omp names dirs by its own os.homedir() and os.tmpdir(): the process's
	// HOME and TMPDIR (node falls back to /tmp). The daemon's view is tried
	// too; the header's cwd decides between them.
	procTmp := "/tmp"
	if t := nonEmpty(pinfo.env.get("TMPDIR"), pinfo.env.get("TMP"), pinfo.env.get("TEMP")); len(t) > 0 {
		procTmp = t[0]
	}
	homes := nonEmpty(pinfo.env.get("HOME"), env.Home)
	tmps := nonEmpty(procTmp, env.TmpDir)
	resolvePi(&a, env, p, "agent/sessions", ompDirNames(cleanCwd(a.Cwd), homes, tmps), false)
	return a
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSuffix(s, "/"); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// resolvePi is the route ladder omp and pi share: fd, then the daemon's
// own relaunch record, then dir (guarded, else the cwd's only transcript).
// It never guesses between transcripts: where several could be this
// process's and nothing tells them apart, the session stays absent and Via
// says "ambiguous". With plain (pi's rules, not omp's), a quiet process
// may take the cwd's only transcript, and a session with no title is
// titled by its first user message, as pi's own session picker does.
func resolvePi(a *Agent, env Env, p proc.Proc, sessions string, dirs []string, plain bool) {
	if env.Root == nil {
		return
	}
	rel, via := piHeld(env, p.PID, sessions)
	if rel == "" {
		rel, via = piRelaunched(env, p, sessions)
	}
	if rel == "" {
		rel, via = piFromDirs(env, p, sessions, dirs, cleanCwd(a.Cwd), plain)
	}
	if rel == "" {
		a.Via = via
		return
	}
	f := readPiFacts(env.Root, rel, true)
	a.Via, a.Transcript = via, rel
	a.Session = f.id
	if a.Session == "" {
		a.Session = piFileID(rel)
	}
	a.Title, a.Model = f.title, f.model
	if a.Title == "" && plain {
		a.Title = f.firstUser
	}
	a.Agents = piSubs(env.Root, rel)
	piFill(env, a, rel)
}

// piRelaunched is the relaunch route: the transcript 9harness itself named
// when it started this very process (pid and start time) to resume it. A
// resumed pi hides its argv, holds no fd and writes nothing until its next
// answer, so without the record it could not be told from a fresh pi.
func piRelaunched(env Env, p proc.Proc, sessions string) (string, string) {
	rel, ok := env.Relaunches.Lookup(p.PID, p.Start)
	if !ok || checkRel(env, rel) != nil || !strings.HasPrefix(rel, sessions+"/") {
		return "", ""
	}
	if info, err := env.Root.Stat(rel); err != nil || info.Dir {
		return "", ""
	}
	return rel, RouteRelaunch
}

// piHeld is the fd route: the newest main transcript (sessions/<dir>/<file>.jsonl)
// the process holds open.
func piHeld(env Env, pid int, sessions string) (string, string) {
	var cands []byMtime
	for _, rel := range held(env, pid, sessions+"/") {
		rest := strings.TrimPrefix(rel, sessions+"/")
		if strings.Count(rest, "/") != 1 || !strings.HasSuffix(rest, ".jsonl") {
			continue // a sub-agent's transcript sits one level deeper
		}
		if info, err := env.Root.Stat(rel); err == nil && !info.Dir {
			cands = append(cands, byMtime{rel, info.Mtime})
		}
	}
	if len(cands) == 0 {
		return "", ""
	}
	newestFirst(cands)
	return cands[0].rel, "fd"
}

// piFromDirs is the dir route: the newest transcript in the cwd's session
// dirs whose header names the process's cwd, written since the process
// started (via dir). When none was written since, with only (pi: a
// resumed pi writes nothing until its next answer), the process is
// resolved if exactly one transcript names the cwd (via only); two or more
// are never guessed between (via ambiguous). omp keeps its writer fd, so
// for it a transcript older than the process is never its own.
func piFromDirs(env Env, p proc.Proc, sessions string, dirs []string, cwd string, only bool) (string, string) {
	if cwd == "" {
		return "", "none (no cwd)"
	}
	var cands []byMtime
	for _, d := range dirs {
		ents, err := env.Root.ReadDir(sessions + "/" + d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Dir || !strings.HasSuffix(e.Name, ".jsonl") {
				continue
			}
			rel := sessions + "/" + d + "/" + e.Name
			if info, err := env.Root.Stat(rel); err == nil {
				cands = append(cands, byMtime{rel, info.Mtime})
			}
		}
	}
	if len(cands) == 0 {
		return "", "none (no transcript for this cwd)"
	}
	newestFirst(cands)
	since, haveStart := started(env, p)
	names := func(rel string) bool {
		f := readPiFacts(env.Root, rel, false)
		return f.header && sameDir(f.cwd, cwd)
	}
	// The guarded route: written since the process started.
	i := 0
	for ; i < len(cands) && i < 16; i++ {
		c := cands[i]
		if haveStart && c.mtime.Before(since.Add(-time.Second)) {
			if !only {
				return "", "none (no transcript for this cwd written since the process started)"
			}
			break
		}
		if names(c.rel) {
			return c.rel, RouteDir
		}
	}
	// None written since: the cwd's only transcript, if it has one.
	var one string
	n := 0
	for j, c := range cands[i:] {
		if j == 16 {
			if n > 0 {
				n = 2 // one found and more not read: never a guess
			}
			break
		}
		if names(c.rel) {
			if n++; n > 1 {
				break
			}
			one = c.rel
		}
	}
	switch {
	case n == 1:
		return one, RouteOnly + " (the one transcript for this cwd; none written since the process started)"
	case n > 1:
		return "", RouteAmbiguous + " (several transcripts for this cwd, none written since the process started)"
	}
	return "", "none (no transcript in the cwd's session dir names this cwd)"
}

// piFileID is the session id in a transcript's name, <timestamp>_<id>.jsonl.
func piFileID(rel string) string {
	name := strings.TrimSuffix(path.Base(rel), ".jsonl")
	if i := strings.LastIndexByte(name, '_'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// piFacts is what a pi-format transcript says of its session.
type piFacts struct {
	header       bool // line 1 (or 2, after a title slot) is a session header
	id, cwd      string
	title, model string
	firstUser    string // the first user message's text, as a title
}

type piLine struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Cwd      string `json:"cwd"`
	Title    string `json:"title"`
	Name     string `json:"name"`
	Model    string `json:"model"`
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
	Message  *struct {
		Role    string          `json:"role"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// readPiFacts reads a transcript's header, and with full its title and
// model too. Layout v3: an optional fixed-width 256-byte title-slot line
// {"type":"title",…} (rewritten in place, so it is the current title),
// then the {"type":"session",…} header, then entries. Legacy files start
// with the header. The title is the slot's, else the header's, else the
// last title_change (or pi's session_info name). The model is the last of
// model_change (model "provider/id", or old provider+modelId) and assistant
// message.model, reported without its provider.
func readPiFacts(r *saferoot.Root, rel string, full bool) piFacts {
	var f piFacts
	var head, tail [][]byte
	if full {
		head, tail = windows(r, rel, headWindow, tailWindow)
	} else {
		head, _ = windows(r, rel, smallFile, 0)
	}
	slot, later := "", ""
	for i, ln := range head {
		if i >= 2 {
			break
		}
		var l piLine
		if json.Unmarshal(ln, &l) != nil {
			break
		}
		if i == 0 && l.Type == "title" {
			slot = l.Title
			continue
		}
		if l.Type == "session" {
			f.header, f.id, f.cwd, f.title = true, l.ID, l.Cwd, l.Title
		}
		break
	}
	if !full {
		return f
	}
	for _, ln := range append(head, tail...) {
		var l piLine
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		f.model = l.modelOr(f.model)
		if f.firstUser == "" && l.Type == "message" && l.Message != nil && l.Message.Role == "user" {
			f.firstUser = cleanTitle(piText(l.Message.Content))
		}
		switch l.Type {
		case "title_change":
			later = pick(later, l.Title)
		case "session_info":
			later = pick(later, l.Name)
		}
	}
	for _, t := range []string{slot, f.title, later} {
		if t = cleanTitle(t); t != "" {
			f.title = t
			return f
		}
	}
	f.title = ""
	return f
}

// piText is the text of a message's content: a string, or the text
// blocks of a block list joined by spaces.
func piText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}

// piModel is the last model a (sub-agent) transcript names, from its tail.
func piModel(r *saferoot.Root, rel string) string {
	head, tail := windows(r, rel, 0, subTail)
	model := ""
	for _, ln := range append(head, tail...) {
		var l piLine
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		model = l.modelOr(model)
	}
	return model
}

// modelOr is the model line l names (model_change, or an assistant
// message), else cur.
func (l piLine) modelOr(cur string) string {
	switch {
	case l.Type == "model_change" && l.ModelID != "":
		return l.ModelID
	case l.Type == "model_change" && l.Model != "":
		return withoutProvider(l.Model)
	case l.Type == "message" && l.Message != nil && l.Message.Role == "assistant" && l.Message.Model != "":
		return l.Message.Model
	}
	return cur
}

// withoutProvider cuts "provider/" off a model_change model, leaving the
// id the assistant messages carry ("openrouter/anthropic/x" → "anthropic/x").
func withoutProvider(m string) string {
	if _, id, ok := strings.Cut(m, "/"); ok && id != "" {
		return id
	}
	return m
}

// piSubs lists sub-agent transcripts: <session file minus .jsonl>/<agentId>.jsonl.
func piSubs(r *saferoot.Root, rel string) []Sub {
	dir := strings.TrimSuffix(rel, ".jsonl")
	ents, err := r.ReadDir(dir)
	if err != nil {
		return nil
	}
	var subs []Sub
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name, ".jsonl")
		if e.Dir || !ok || len(subs) >= 256 {
			continue
		}
		subs = append(subs, Sub{Name: componentName(id), Model: piModel(r, dir+"/"+e.Name), Transcript: dir + "/" + e.Name})
		ids = append(ids, id)
	}
	return uniqueSubs(subs, ids)
}

// Resume implements Harness: omp --session <absolute transcript path>, the
// form both the Jan 2026 omp (boolean --resume, --session <path>) and the
// current one (--session as an alias of --resume <id|path>) accept.
func (omp) Resume(a Agent, env Env) ([]string, error) {
	return piResume("omp", a, env)
}

// piResume is the resume of omp and pi. A session file is written only
// once the session has an answer, so a process whose cwd has no transcript
// at all has nothing to resume yet; one whose transcript is not known
// (ambiguous, or a file gone since) is refused as unresolved.
func piResume(name string, a Agent, env Env) ([]string, error) {
	if a.Transcript == "" && a.Via == "none (no transcript for this cwd)" && env.Root != nil {
		return nil, nothingYet(name, a, "no session file; "+name+" writes it at its first answer")
	}
	if a.Transcript == "" || env.Root == nil || checkRel(env, a.Transcript) != nil {
		return nil, unresolved(name, a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet(name, a, "the session file "+a.Transcript+" is gone")
	}
	return []string{name, "--session", absPath(env.Root, a.Transcript)}, nil
}

var _ = register(omp{}, &ompSpec)

var ompSpec = Spec{
	Name:    "omp",
	Order:   30,
	Mirrors: []Mirror{{At: "", Rel: "agent"}},
	Grantee: []string{"sessions", "skills"},
	Skills:  "agent/skills",
	// agent/sessions/<-src-x or --home-u-src-x-->/<ts>_<id>.jsonl. Its
	// sessions/<slug>/checkpoints/ hold only metadata (a tree hash, the
	// names skipped): the objects live in the project's own repository.
	SlugDirs: []string{"agent/sessions"},
	Credentials: []Credential{
		{"config.yml", "omp"},
		{"config.yaml", "omp"},
		{"models.yml", "omp provider definitions with keys"},
		{"models.yaml", "omp provider definitions with keys"},
		{"agent.db", "omp ~/.omp/agent/agent.db: auth_credentials table"},
	},
	Env: []string{"OMP_CODING_AGENT_DIR"},
	// omp's command line is pi's.
	Keep:    piKeep,
	Flags:   piFlags,
	Summed:  true,
	Counter: func() counter { return &piTokens{} },
	Doc: Doc{
		Title:   "omp",
		Root:    "~/.omp",
		Process: "`omp`",
		Via:     "`fd`, `dir`, `relaunch`",
		Resume:  "`omp --session FILE`",
		RealCLI: "fixtures only",
	},
}

// ---- turn state ----

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

// ---- tokens ----

// piTokens sums a pi/omp transcript's assistant message.usage (each
// message is one line, written once when complete).
type piTokens struct {
	sum, newest struct{ in, out, cr, cw int64 }
	n           int
}

func (p *piTokens) line(ln []byte) {
	if !bytes.Contains(ln, []byte(`"usage"`)) {
		return
	}
	var l struct {
		Type    string `json:"type"`
		Message *struct {
			Role  string `json:"role"`
			Usage *struct {
				Input      int64 `json:"input"`
				Output     int64 `json:"output"`
				CacheRead  int64 `json:"cacheRead"`
				CacheWrite int64 `json:"cacheWrite"`
			} `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(ln, &l) != nil || l.Type != "message" || l.Message == nil || l.Message.Role != "assistant" || l.Message.Usage == nil {
		return
	}
	u := l.Message.Usage
	p.n++
	p.newest.in, p.newest.out, p.newest.cr, p.newest.cw = u.Input, u.Output, u.CacheRead, u.CacheWrite
	p.sum.in += u.Input
	p.sum.out += u.Output
	p.sum.cr += u.CacheRead
	p.sum.cw += u.CacheWrite
}

func (p *piTokens) tokens(whole bool) Tokens {
	if p.n == 0 {
		return Tokens{}
	}
	t := Tokens{Context: i64(p.newest.in + p.newest.cr + p.newest.cw)}
	if whole {
		t.Input, t.Output, t.CacheRead, t.CacheWrite = i64(p.sum.in), i64(p.sum.out), i64(p.sum.cr), i64(p.sum.cw)
	}
	return t
}
