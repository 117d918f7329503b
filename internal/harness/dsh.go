package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// dsh is DeepSeek Harness (root ~/.dsh, or $DSH_HOME).
//
// Processes: "bin dsh" is a "#!/usr/bin/env node" script that never sets
// process.title, so a session is "node …/bin/dsh …" (or "dsh" where a
// wrapper exec'd it by name). "dsh web" (a server hosting many sessions),
// "dsh plugin …", the other non-session subcommands and
// "--profile headless" one-shots are helpers.
//
// Resolution: dsh opens and closes its log per append, so no fd is held
// (an fd is still tried first, via fd). The dir route reads the project dir
// sessions/--<projectKey>--/, newest session-*/session.jsonl.zstd first,
// skipping sub-agent sessions and believing one only if its header's cwd is
// the process's and it was written since the process started (via dir).
// The log is a concatenation of zstd frames (frame 1 is exactly the
// header line); all frames are decoded, a torn last frame tolerated.
type dsh struct{}

func (dsh) Name() string { return "dsh" }

var (
	dshFlags       = flags{value: set("--profile", "--resume", "--cwd", "--model", "--preset")}
	dshHelperWords = set("web", "plugin", "plugins", "daemon", "serve", "gateway", "dashboard",
		"mcp", "acp", "ps", "render", "export", "usage", "help", "version", "setup", "doctor", "update")
	dshLogName = regexp.MustCompile(`^session(\.v\d+)?\.jsonl(\.zstd)?$`)
)

// Classify implements Harness.
func (dsh) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	var args []string
	switch {
	case b == "dsh":
		args = argv[1:]
	case isNode(b) || b == "bun":
		script, rest := interpScript(argv[1:])
		if base(script) != "dsh" && !(strings.Contains(script, "/@deepseek-ai/dsh/") && strings.HasSuffix(script, "/bin.js")) {
			return None
		}
		args = rest
	default:
		return None
	}
	if prof, _ := flagValue(args, "--profile"); prof == "headless" {
		return Helper
	}
	if dshHelperWords[dshFlags.positional(args)] {
		return Helper
	}
	return Session
}

// dshProjectKey is dsh's project dir name for cwd: runs of / \ : become
// one '-', [A-Za-z0-9._-] stay, any other UTF-16 code unit (and '~')
// becomes ~XXXX, leading dashes are stripped, the result is cut to 251
// characters and wrapped in "--…--". No cwd is "_no-cwd".
func dshProjectKey(cwd string) string {
	if cwd == "" {
		return "_no-cwd"
	}
	var b strings.Builder
	sep := false
	for _, u := range utf16.Encode([]rune(cwd)) {
		switch {
		case u == '/' || u == '\\' || u == ':':
			if !sep {
				b.WriteByte('-')
			}
			sep = true
			continue
		case u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-'):
			b.WriteByte(byte(u))
		default:
			fmt.Fprintf(&b, "~%04X", u)
		}
		sep = false
	}
	key := strings.TrimLeft(b.String(), "-")
	if key == "" {
		key = "root"
	}
	if len(key) > 251 {
		key = key[:251]
	}
	return "--" + key + "--"
}

// dshHeader is a log's first line.
type dshHeader struct {
	Type            string `json:"type"`
	ID              string `json:"id"`
	CreatedAt       int64  `json:"createdAt"`
	Cwd             string `json:"cwd"`
	ParentSession   string `json:"parentSession"`
	Origin          string `json:"origin"`
	DelegationDepth int    `json:"delegationDepth"`
}

func (h dshHeader) sub() bool { return h.Origin == "subagent" || h.DelegationDepth > 0 }

// dshLog reads a log's header line.
func dshLog(r *saferoot.Root, rel string) (dshHeader, bool) {
	var ln []byte
	if strings.HasSuffix(rel, ".zstd") {
		ln = zfirstLine(r, rel)
	} else {
		ln = firstLine(r, rel, smallFile)
	}
	var h dshHeader
	ok := json.Unmarshal(ln, &h) == nil && h.Type == "session"
	return h, ok
}

// dshLogIn finds the log file of a session dir.
func dshLogIn(r *saferoot.Root, dir string) (string, time.Time, bool) {
	for _, name := range []string{"session.jsonl.zstd", "session.jsonl"} {
		if info, err := r.Stat(dir + "/" + name); err == nil && !info.Dir {
			return dir + "/" + name, info.Mtime, true
		}
	}
	ents, err := r.ReadDir(dir)
	if err != nil {
		return "", time.Time{}, false
	}
	for _, e := range ents {
		if !e.Dir && dshLogName.MatchString(e.Name) {
			if info, err := r.Stat(dir + "/" + e.Name); err == nil {
				return dir + "/" + e.Name, info.Mtime, true
			}
		}
	}
	return "", time.Time{}, false
}

// Resolve implements Harness.
func (dsh) Resolve(env Env, p proc.Proc) Agent {
	env.zw = newZWork(env.Budget, env.Memo.decodeWork())
	a, _ := start("dsh", env, p)
	if env.Root == nil {
		return a
	}
	cwd := cleanCwd(a.Cwd)
	projDir := "sessions/" + dshProjectKey(cwd)
	var cands []byMtime
	if ents, err := env.Root.ReadDir(projDir); err == nil {
		for _, e := range ents {
			if !e.Dir || len(cands) >= 4096 {
				continue
			}
			if rel, mt, ok := dshLogIn(env.Root, projDir+"/"+e.Name); ok {
				cands = append(cands, byMtime{rel, mt})
			}
		}
	}
	newestFirst(cands)

	rel, via := "", ""
	var hdr dshHeader
	for _, h := range held(env, p.PID, "sessions/") {
		if dshLogName.MatchString(h[strings.LastIndexByte(h, '/')+1:]) {
			if hh, ok := dshLog(env.Root, h); ok && !hh.sub() {
				rel, via, hdr = h, "fd", hh
				break
			}
		}
	}
	if rel == "" {
		rel, hdr, via = dshFromDir(env, p, cands, cwd)
	}
	if rel == "" {
		a.Via = via
		return a
	}
	a.Session, a.Transcript, a.Via = hdr.ID, rel, via
	if !safeArg(a.Session) {
		a.Session = ""
	}
	a.Title, a.Model = dshFacts(env.zw, env.Root, rel, true)
	dshFill(env, &a, rel) // before the sub-agents: its decoding comes first
	a.Agents = dshSubs(env.zw, env.Root, cands, rel, hdr)
	return a
}

// dshFromDir is the dir route over the project dir's logs, newest first.
func dshFromDir(env Env, p proc.Proc, cands []byMtime, cwd string) (string, dshHeader, string) {
	if cwd == "" {
		return "", dshHeader{}, "none (no cwd)"
	}
	if len(cands) == 0 {
		return "", dshHeader{}, "none (no session log for this cwd)"
	}
	since, haveStart := started(env, p)
	for i, c := range cands {
		if i == 32 {
			break
		}
		if haveStart && c.mtime.Before(since.Add(-time.Second)) {
			return "", dshHeader{}, "none (no session log for this cwd written since the process started)"
		}
		h, ok := dshLog(env.Root, c.rel)
		if ok && !h.sub() && sameDir(h.Cwd, cwd) {
			return c.rel, h, "dir"
		}
	}
	return "", dshHeader{}, "none (no session log in the project dir names this cwd)"
}

// dshEvent is the part of a log event Resolve reads.
type dshEvent struct {
	Type string `json:"type"`
	Data struct {
		Title   string `json:"title"`
		Message *struct {
			Source struct {
				Model string `json:"model"`
			} `json:"source"`
		} `json:"message"`
	} `json:"data"`
}

// dshFacts reads a log's title (the latest session/title event's) and model
// (the last assistant/message's source.model) from its decoded head and
// tail windows (with full unset, from a short tail only: a sub-agent's model).
func dshFacts(zw *zwork, r *saferoot.Root, rel string, full bool) (title, model string) {
	var head, tail [][]byte
	done := func() {}
	defer func() { done() }()
	switch {
	case strings.HasSuffix(rel, ".zstd") && full:
		head, tail, done, _ = zwindows(zw, r, rel, zHeadWindow, zTailWindow)
	case strings.HasSuffix(rel, ".zstd"):
		head, tail, done, _ = zwindows(zw, r, rel, 0, subTail)
	case full:
		head, tail = windows(r, rel, headWindow, tailWindow)
	default:
		head, tail = windows(r, rel, 0, subTail)
	}
	for _, ln := range append(head, tail...) {
		var e dshEvent
		if json.Unmarshal(ln, &e) != nil {
			continue
		}
		switch e.Type {
		case "session/title":
			title = pick(title, e.Data.Title)
		case "assistant/message":
			if e.Data.Message != nil {
				model = pick(model, e.Data.Message.Source.Model)
			}
		}
	}
	return cleanTitle(title), model
}

// dshSubs lists the sub-agent sessions of the session in rel: the logs in
// the same project dir whose header names it as parentSession, among the
// newest 32 written since it was created.
func dshSubs(zw *zwork, r *saferoot.Root, cands []byMtime, rel string, hdr dshHeader) []Sub {
	created := time.UnixMilli(hdr.CreatedAt)
	var subs []Sub
	var ids []string
	for i, c := range cands {
		if i == 32 || c.mtime.Before(created) {
			break
		}
		if c.rel == rel {
			continue
		}
		h, ok := dshLog(r, c.rel)
		if !ok || h.ParentSession != hdr.ID || hdr.ID == "" {
			continue
		}
		_, model := dshFacts(zw, r, c.rel, false)
		subs = append(subs, Sub{Name: componentName(h.ID), Model: model, Transcript: c.rel})
		ids = append(ids, h.ID)
	}
	return uniqueSubs(subs, ids)
}

// Resume implements Harness: always refused. dsh's resume is
// "dsh --profile tui --resume <id>", which exists only where a tui profile
// is installed; the profiles it ships take no resume flag.
func (dsh) Resume(a Agent, env Env) ([]string, error) {
	return nil, errs.E("harness.Resume", errs.Permission, "", errors.New("dsh's shipped profiles take no resume flag"))
}

var _ = register(dsh{}, &dshSpec)

var dshSpec = Spec{
	Name:    "dsh",
	Order:   60,
	Mirrors: []Mirror{{At: "", Rel: ""}},
	// The session index beside the sessions.
	Grantee: []string{"sessions", "storages/workspace.json"},
	// sessions/<--home-u-src-x-->/session-<id>/session.jsonl.zstd. Its own
	// layout (sessions/, storages/, profiles/) holds no copy store.
	SlugDirs: []string{"sessions"},
	Credentials: []Credential{
		{"config.yml", "dsh"},
		{"config.yaml", "dsh"},
	},
	Env: []string{"DSH_HOME"},
	Doc: Doc{
		Title:   "dsh",
		Root:    "~/.dsh",
		Process: "`dsh`",
		Via:     "`fd`, `dir`",
		Resume:  "none (dsh's profiles take no resume flag): never moved",
		RealCLI: "fixtures only",
	},
}

// ---- turn state ----

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

// ---- tokens ----

// dshTokens sums usage{inputTokens, outputTokens} of assistant/message
// events, last-wins by message id. dsh reports no cache counts.
func dshTokens(evs [][]byte, whole bool) Tokens {
	type u struct{ in, out int64 }
	byID := map[string]u{}
	var order []string
	n := 0
	for _, ln := range evs {
		var e struct {
			Type string `json:"type"`
			Data struct {
				Message *struct {
					ID string `json:"id"`
				} `json:"message"`
				Usage *struct {
					Input  int64 `json:"inputTokens"`
					Output int64 `json:"outputTokens"`
				} `json:"usage"`
			} `json:"data"`
		}
		if json.Unmarshal(ln, &e) != nil || e.Type != "assistant/message" || e.Data.Usage == nil {
			continue
		}
		id := ""
		if e.Data.Message != nil {
			id = e.Data.Message.ID
		}
		if id == "" {
			n++
			id = "\x00" + strconv.Itoa(n)
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = u{e.Data.Usage.Input, e.Data.Usage.Output}
	}
	if len(order) == 0 || !whole {
		return Tokens{}
	}
	var in, out int64
	for _, id := range order {
		in += byID[id].in
		out += byID[id].out
	}
	return Tokens{Input: i64(in), Output: i64(out)}
}
