package harness

import (
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
	if len(p.Argv) == 0 {
		return None
	}
	argv := normArgv(p.Argv)
	b := base(argv[0])
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
	if t := nonEmpty(pinfo.env["TMPDIR"], pinfo.env["TMP"], pinfo.env["TEMP"]); len(t) > 0 {
		procTmp = t[0]
	}
	homes := nonEmpty(pinfo.env["HOME"], env.Home)
	tmps := nonEmpty(procTmp, env.TmpDir)
	resolvePi(&a, env, p, "agent/sessions", ompDirNames(cleanCwd(a.Cwd), homes, tmps))
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

// resolvePi is the route ladder omp and pi share: fd, then dir.
func resolvePi(a *Agent, env Env, p proc.Proc, sessions string, dirs []string) {
	if env.Root == nil {
		return
	}
	rel, via := piHeld(env, p.PID, sessions)
	if rel == "" {
		rel, via = piFromDirs(env, p, sessions, dirs, cleanCwd(a.Cwd))
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
	a.Agents = piSubs(env.Root, rel)
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
// started.
func piFromDirs(env Env, p proc.Proc, sessions string, dirs []string, cwd string) (string, string) {
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
	for i, c := range cands {
		if i == 16 {
			break
		}
		if haveStart && c.mtime.Before(since.Add(-time.Second)) {
			return "", "none (no transcript for this cwd written since the process started)"
		}
		if f := readPiFacts(env.Root, c.rel, false); f.header && sameDir(f.cwd, cwd) {
			return c.rel, "dir"
		}
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
		Role  string `json:"role"`
		Model string `json:"model"`
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

func piResume(name string, a Agent, env Env) ([]string, error) {
	if a.Transcript == "" || env.Root == nil || saferoot.CheckRel(a.Transcript) != nil {
		return nil, unresolved(name, a)
	}
	return []string{name, "--session", absPath(env.Root, a.Transcript)}, nil
}
