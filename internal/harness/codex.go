package harness

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/dbsnap"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// codex is the OpenAI Codex CLI (root ~/.codex, or $CODEX_HOME).
//
// Processes: the standalone install is a native binary, argv[0] basename
// "codex"; the npm install is a node wrapper (node …/bin/codex.js, or
// node …/bin/codex through the npm bin link) that spawns the native binary
// as a child, named "codex" in current layouts and "codex-<target triple>"
// (codex-x86_64-unknown-linux-musl) in mid-2025 ones.
//
// The wrapper decision: the native process is the session, and the node
// wrapper is a Helper. The native process is what holds the rollout open,
// so the fd route reads the listed process's own descriptors; it is the only
// process a standalone install has, so both installs list the same shape;
// and signalling it ends the wrapper too (the wrapper exits with its child),
// while the wrapper merely forwards signals to it. A native codex whose
// parent is itself a native codex is a helper that the session spawned (the
// arg0-dispatched apply-patch/sandbox runners, an exec-server), never a
// second session.
//
// Resolution: the rollout the native process holds open,
// sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl (or .jsonl.zst);
// the session id is the UUID that ends the name before ".jsonl" or before
// a reverted thread's "_<rollout id>" suffix (the timestamp in front holds
// dashes too). A rollout is created lazily on
// the first persisted item, so a fresh codex has no fd and stays unresolved.
// Since 0.169 a TUI is by default a client of a shared app-server daemon
// (`codex app-server --managed-daemon`, a Helper by its argv), which holds
// the rollouts instead: see Resolve and codexDaemonThread for that route.
// Titles: the thread's row in state_5.sqlite (its name after /rename,
// else its title, the first user message), read through dbsnap.
type codex struct{}

func (codex) Name() string { return "codex" }

var (
	codexFlags = flags{
		value: set("-c", "--config", "-m", "--model", "-p", "--profile", "-s", "--sandbox",
			"-a", "--ask-for-approval", "-C", "--cd", "-i", "--image", "--add-dir", "--enable",
			"--disable", "--local-provider", "--remote", "--color", "-o", "--output-last-message",
			"--output-schema"),
	}
	// Subcommands that are not an agent session (exec and review are: they
	// are agents at work with their own rollout).
	codexHelperWords = set("app-server", "mcp-server", "exec-server", "mcp", "login", "logout",
		"completion", "sandbox", "debug", "apply", "a", "cloud", "cloud-tasks",
		"responses-api-proxy", "stdio-to-uds", "features", "generate-ts", "proto", "p", "help",
		"update", "daemon", "serve", "acp")
	codexArches  = set("x86_64", "aarch64", "arm64", "armv7", "i686", "riscv64", "powerpc64le", "s390x", "loongarch64")
	codexRollout = regexp.MustCompile(`^sessions/\d{4}/\d{2}/\d{2}/rollout-[^/]+\.jsonl(\.zst)?$`)
)

// codexNative reports whether argv[0]'s basename is the native binary:
// "codex", or "codex-<arch>-<vendor>-<os>[-<abi>]".
func codexNative(b string) bool {
	if b == "codex" {
		return true
	}
	triple, ok := strings.CutPrefix(b, "codex-")
	parts := strings.Split(triple, "-")
	return ok && len(parts) >= 3 && codexArches[parts[0]]
}

// codexWrapper reports whether argv is the npm node wrapper, and its args.
func codexWrapper(argv []string) ([]string, bool) {
	if len(argv) < 2 || !isNode(base(argv[0])) {
		return nil, false
	}
	script, rest := interpScript(argv[1:])
	if strings.HasSuffix(script, "/codex.js") || script == "codex.js" ||
		(base(script) == "codex" && strings.Contains(script, "bin/codex")) {
		return rest, true
	}
	return nil, false
}

// Classify implements Harness.
func (codex) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	if _, ok := codexWrapper(argv); ok {
		return Helper // its native child is the session
	}
	if !codexNative(b) {
		return None
	}
	if _, pb := program(parent); codexNative(pb) {
		return Helper // spawned by a codex
	}
	args := argv[1:]
	for _, a := range args {
		if strings.HasPrefix(a, "--codex-run-as-") {
			return Helper
		}
	}
	if codexHelperWords[codexFlags.positional(args)] {
		return Helper
	}
	return Session
}

// codexID is the session id in a rollout's name: the UUID that ends it,
// or that ends it before a "_<rollout id>" suffix (a reverted thread's
// rollout is named rollout-<time>-<thread id>_<rollout id>.jsonl).
func codexID(rel string) string {
	name := strings.TrimSuffix(path.Base(rel), ".zst")
	name, ok := strings.CutSuffix(name, ".jsonl")
	if !ok {
		return ""
	}
	// Neither the time nor a UUID holds "_": the first one ends the id.
	if i := strings.IndexByte(name, '_'); i >= 0 {
		name = name[:i]
	}
	return codexTrailingUUID(name)
}

// codexTrailingUUID is the UUID name ends with, or "".
func codexTrailingUUID(name string) string {
	if len(name) < 36 {
		return ""
	}
	if id := name[len(name)-36:]; isUUID(id) {
		return id
	}
	return ""
}

// codexMeta is what a rollout's first line (session_meta) says of it.
type codexMeta struct {
	parent   string // the parent thread of a sub-agent's rollout
	nickname string
	role     string
}

// codexHead reads a rollout's first line, decompressing a .zst one. A first
// line longer than the probe (base_instructions can be long) comes back cut.
func codexHead(r *saferoot.Root, rel string) []byte {
	var b []byte
	if strings.HasSuffix(rel, ".zst") {
		raw, err := readSmall(r, rel, smallFile)
		if err != nil {
			return nil
		}
		b = unzstd(raw, smallFile)
	} else {
		var err error
		if b, err = readSmall(r, rel, smallFile); err != nil {
			return nil
		}
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return b
}

func codexReadMeta(r *saferoot.Root, rel string) codexMeta {
	var m codexMeta
	ln := codexHead(r, rel)
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			Source        json.RawMessage `json:"source"`
			AgentNickname string          `json:"agent_nickname"`
			AgentRole     string          `json:"agent_role"`
		} `json:"payload"`
	}
	if json.Unmarshal(ln, &l) == nil {
		if l.Type != "session_meta" {
			return m
		}
		var src struct {
			Subagent struct {
				ThreadSpawn struct {
					ParentThreadID string `json:"parent_thread_id"`
					AgentNickname  string `json:"agent_nickname"`
					AgentRole      string `json:"agent_role"`
				} `json:"thread_spawn"`
			} `json:"subagent"`
		}
		json.Unmarshal(l.Payload.Source, &src) // a plain "cli" source leaves it empty
		ts := src.Subagent.ThreadSpawn
		m.parent = ts.ParentThreadID
		m.nickname = pick(ts.AgentNickname, l.Payload.AgentNickname)
		m.role = pick(ts.AgentRole, l.Payload.AgentRole)
		return m
	}
	// A cut line: serde writes the source before the instructions, so the
	// thread_spawn fields are still in the probe.
	m.parent = stringField(ln, "parent_thread_id")
	m.nickname = stringField(ln, "agent_nickname")
	m.role = stringField(ln, "agent_role")
	return m
}

// stringField finds "key":"value" in a cut JSON line; "" if absent or if
// the value holds an escape (then it is not worth guessing).
func stringField(ln []byte, key string) string {
	k := []byte(`"` + key + `":"`)
	i := bytes.Index(ln, k)
	if i < 0 {
		return ""
	}
	rest := ln[i+len(k):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return ""
	}
	return string(rest[:j])
}

// Resolve implements Harness.
//
// Routes, in order: the rollout the process holds open (fd: Codex without
// its app-server daemon); the rollout 9harness named when it relaunched the
// process (relaunch); then, for a TUI of Codex's shared app-server daemon
// (the default since 0.169: the daemon, not the TUI, holds every rollout,
// and no file names the TUI's pid or its connection), the thread in the
// TUI's own argv ("codex resume <id>": argv), else the guarded dir route
// over state_5.sqlite's threads (codexDaemonThread).
func (codex) Resolve(env Env, p proc.Proc) Agent {
	env.zw = newZWork(env.Budget, env.Memo.decodeWork())
	a, _ := start("codex", env, p)
	if env.Root == nil {
		return a
	}
	var main, subs []byMtime
	metas := map[string]codexMeta{}
	for _, rel := range held(env, p.PID, "sessions/") {
		if !codexRollout.MatchString(rel) || codexID(rel) == "" {
			continue
		}
		info, err := env.Root.Stat(rel)
		if err != nil || info.Dir {
			continue
		}
		m := codexReadMeta(env.Root, rel)
		metas[rel] = m
		if m.parent != "" {
			subs = append(subs, byMtime{rel, info.Mtime})
		} else {
			main = append(main, byMtime{rel, info.Mtime})
		}
	}
	if len(main) == 0 {
		main = subs // only sub-agent rollouts held: the newest stands for the session
	}
	var threads []codexThread
	var rel string
	switch {
	case len(main) > 0:
		newestFirst(main)
		rel = main[0].rel
		a.Via = RouteFD
	default:
		if t, ok := env.Relaunches.Lookup(p.PID, p.Start); ok && codexRollout.MatchString(t) && codexID(t) != "" {
			if info, err := env.Root.Stat(t); err == nil && !info.Dir {
				rel, a.Via = t, RouteRelaunch
				break
			}
		}
		threads = codexThreads(env.DBs, env.Root)
		rel, a.Via = codexDaemonThread(env, p, cleanCwd(a.Cwd), threads)
		if rel == "" {
			return a
		}
	}
	a.Session, a.Transcript = codexID(rel), rel
	a.Model, a.Title = codexFacts(env.zw, env.Root, rel)
	if threads == nil {
		threads = codexThreads(env.DBs, env.Root)
	}
	var th codexThread
	for _, t := range threads {
		if t.id == a.Session {
			th = t
		}
	}
	a.Model = pick(th.model, a.Model) // the rollout's last turn_context, else the row's
	// Title precedence: the /rename name (threads.name, else the index
	// /rename appends to), a thread_name the rollout recorded, then the
	// thread's title, which Codex sets to its first user message.
	a.Title = pick(pick(pick(cleanTitle(th.title), a.Title), codexIndexTitle(env.Root, a.Session)), cleanTitle(th.name))
	if th.id == "" && a.Title == "" {
		// No row (no state_5.sqlite, or not this thread yet): the title
		// Codex gives the row, its first user message, from the rollout.
		a.Title = codexFirstPrompt(env.zw, env.Root, rel)
	}
	codexFill(env, &a, rel) // before the sub-agents: its decoding comes first
	a.Agents = codexSubs(env.zw, env.Root, rel, a.Session, subs, metas)
	return a
}

// codexFacts reads a rollout's model (the last turn_context's) and the last
// thread name it recorded (event_msg thread_name_updated).
func codexFacts(zw *zwork, r *saferoot.Root, rel string) (model, title string) {
	var head, tail [][]byte
	if strings.HasSuffix(rel, ".zst") {
		var done func()
		head, tail, done, _ = zwindows(zw, r, rel, zHeadWindow, zTailWindow)
		defer done()
	} else {
		head, tail = windows(r, rel, headWindow, tailWindow)
	}
	for _, ln := range append(head, tail...) {
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Type       string `json:"type"`
				Model      string `json:"model"`
				ThreadName string `json:"thread_name"`
				Name       string `json:"name"`
			} `json:"payload"`
		}
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		switch {
		case l.Type == "turn_context":
			model = pick(model, l.Payload.Model)
		case l.Type == "event_msg" && l.Payload.Type == "thread_name_updated":
			title = pick(title, pick(l.Payload.Name, l.Payload.ThreadName))
		}
	}
	return model, cleanTitle(title)
}

// codexFirstPrompt is the thread's first user message as its rollout
// records it: an item_completed UserMessage in a paginated rollout (0.148
// on), a user_message event in a legacy one. Only the head is read.
func codexFirstPrompt(zw *zwork, r *saferoot.Root, rel string) string {
	var head [][]byte
	if strings.HasSuffix(rel, ".zst") {
		var done func()
		head, _, done, _ = zwindows(zw, r, rel, zHeadWindow, 0)
		defer done()
	} else {
		head, _ = windows(r, rel, headWindow, 0)
	}
	for _, ln := range head {
		if !bytes.Contains(ln, []byte("UserMessage")) && !bytes.Contains(ln, []byte("user_message")) {
			continue
		}
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Type    string `json:"type"`
				Message string `json:"message"`
				Item    struct {
					Type    string `json:"type"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"item"`
			} `json:"payload"`
		}
		if json.Unmarshal(ln, &l) != nil || l.Type != "event_msg" {
			continue
		}
		switch {
		case l.Payload.Type == "item_completed" && l.Payload.Item.Type == "UserMessage":
			var text strings.Builder
			for _, c := range l.Payload.Item.Content {
				text.WriteString(c.Text)
			}
			if t := cleanTitle(text.String()); t != "" {
				return t
			}
		case l.Payload.Type == "user_message":
			if t := cleanTitle(l.Payload.Message); t != "" {
				return t
			}
		}
	}
	return ""
}

// codexIndexTitle is the newest thread_name session_index.jsonl holds for
// id. The index is append-only, so the newest is the last line naming id;
// only its tail is read.
func codexIndexTitle(r *saferoot.Root, id string) string {
	head, tail := windows(r, "session_index.jsonl", 0, indexTail)
	title := ""
	for _, ln := range append(head, tail...) {
		if !bytes.Contains(ln, []byte(id)) {
			continue
		}
		var e struct {
			ID         string `json:"id"`
			ThreadName string `json:"thread_name"`
		}
		if json.Unmarshal(ln, &e) == nil && e.ID == id {
			title = pick(title, e.ThreadName)
		}
	}
	return cleanTitle(title)
}

// codexSubs lists the sub-agent threads of session id: the rollouts whose
// session_meta names id as parent_thread_id. They are the sub-agent
// rollouts the process holds, and those begun later in the same day dir
// (the names sort by their start time, so only later names are read).
func codexSubs(zw *zwork, r *saferoot.Root, mainRel, id string, held []byMtime, metas map[string]codexMeta) []Sub {
	rels := map[string]bool{}
	for _, h := range held {
		if metas[h.rel].parent == id {
			rels[h.rel] = true
		}
	}
	dir := path.Dir(mainRel)
	if ents, err := r.ReadDir(dir); err == nil {
		n := 0
		for _, e := range ents {
			rel := dir + "/" + e.Name
			if e.Dir || rel <= mainRel || rels[rel] || !codexRollout.MatchString(rel) || codexID(rel) == "" {
				continue
			}
			if n++; n > 128 {
				break
			}
			m, ok := metas[rel]
			if !ok {
				m = codexReadMeta(r, rel)
				metas[rel] = m
			}
			if m.parent == id {
				rels[rel] = true
			}
		}
	}
	var subs []Sub
	var ids []string
	for rel := range rels {
		m := metas[rel]
		tid := codexID(rel)
		name := componentName(pick(m.role, m.nickname))
		if name == "" {
			name = tid
		}
		model, _ := codexFacts(zw, r, rel)
		subs = append(subs, Sub{Name: name, Model: model, Transcript: rel})
		ids = append(ids, tid)
	}
	return uniqueSubs(subs, ids)
}

// Resume implements Harness: codex resume <sid>. Codex finds the rollout by
// id wherever it is, but the caller still starts it in the session's cwd.
// A thread with no rollout yet (never prompted) is refused: there is
// nothing for "codex resume" to open.
func (codex) Resume(a Agent, env Env) ([]string, error) {
	if !isUUID(a.Session) {
		return nil, unresolved("codex", a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet("codex", a, "session "+a.Session+" has no rollout; Codex writes it at the first prompt")
	}
	return []string{"codex", "resume", a.Session}, nil
}

// codexThread is a row of state_5.sqlite's threads table.
type codexThread struct {
	id, rel, cwd  string // rel: the rollout, relative to the Codex root
	title, name   string // title: the first user message; name: the /rename name
	model, source string
	created       time.Time
	sub           bool // a sub-agent's thread
}

// codexStateDB is Codex's state database (threads, since 0.16x).
const codexStateDB = "state_5.sqlite"

// codexThreads reads the threads of state_5.sqlite through a dbsnap
// snapshot (saferoot only, nothing written, a live writer's WAL applied).
// Missing or unreadable: none.
func codexThreads(dbs *dbsnap.Cache, r *saferoot.Root) []codexThread {
	db, release, err := dbs.Open(r, codexStateDB)
	if err != nil {
		return nil
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Columns by name, so an older schema without one of them still
	// reads: a column it lacks is selected as NULL.
	cols := map[string]bool{}
	if rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('threads')`); err == nil {
		for rows.Next() {
			var n string
			if rows.Scan(&n) == nil {
				cols[n] = true
			}
		}
		rows.Close()
	}
	if !cols["id"] || !cols["rollout_path"] || !cols["cwd"] {
		return nil
	}
	col := func(n string) string {
		if cols[n] {
			return n
		}
		return "NULL"
	}
	q := `SELECT id, rollout_path, cwd, ` + col("title") + `, ` + col("name") + `, ` + col("model") + `, ` +
		col("source") + `, ` + col("created_at_ms") + `, ` + col("created_at") + `, ` + col("agent_path") + `, ` +
		col("attached_thread_parent_id") + ` FROM threads`
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []codexThread
	for rows.Next() && len(out) < maxCodexThreads {
		var id, rp, cwd string
		var title, name, model, source, agentPath, parent sql.NullString
		var ms, secs sql.NullInt64
		if rows.Scan(&id, &rp, &cwd, &title, &name, &model, &source, &ms, &secs, &agentPath, &parent) != nil {
			continue
		}
		t := codexThread{id: id, cwd: cwd, title: title.String, name: name.String, model: model.String, source: source.String}
		// rollout_path is absolute, in whatever spelling Codex's home had:
		// the part from sessions/ on is the path under the root.
		if i := strings.LastIndex(rp, "/sessions/"); i >= 0 {
			if rel := rp[i+1:]; codexRollout.MatchString(rel) && codexID(rel) == id {
				t.rel = rel
			}
		}
		switch {
		case ms.Valid:
			t.created = time.UnixMilli(ms.Int64)
		case secs.Valid:
			t.created = time.Unix(secs.Int64, 0)
		}
		t.sub = agentPath.String != "" || parent.String != "" || strings.HasPrefix(strings.TrimSpace(t.source), "{")
		out = append(out, t)
	}
	return out
}

// maxCodexThreads bounds the rows kept of one snapshot (rule 10): far more
// threads than one person starts, each row a few hundred bytes here.
const maxCodexThreads = 100000

// codexStartSlack widens "created since the TUI started". None is needed:
// /proc's start time is boot time (whole seconds, rounded down) plus
// ticks, so it is up to a second early and never late, which already errs
// toward counting a thread as begun since (more ambiguity, never a wrong
// thread), and toward counting a TUI as a rival.
const codexStartSlack = 0

// codexResumeID is the thread "codex resume <id>" names in argv, or "".
func codexResumeID(argv []string) string {
	if len(argv) < 2 {
		return ""
	}
	args := argv[1:]
	i := codexFlags.positionalAt(args)
	if i < 0 || args[i] != "resume" {
		return "" // another subcommand, or a prompt
	}
	if id := codexFlags.positional(args[i+1:]); isUUID(id) {
		return id
	}
	return ""
}

// codexDaemonThread is the route from a TUI that holds no rollout (it is a
// client of Codex's shared app-server daemon) to its thread, and the via
// that says how it was found.
//
// Measured with Codex 0.169.0: nothing on disk or in /proc names the TUI
// with its thread. The daemon holds every loaded thread's rollout and
// writer lock; tui-thread-reference-capabilities/<id> is an empty file
// per thread (its mtime the thread's start, untouched by a resume);
// logs_2.sqlite keys the TUI's own rows by its pid but gives them no
// thread id; /proc/net/unix names no peer. So:
//
//   - "codex resume <id>" in the TUI's argv names the thread (argv; the
//     TUI may since have switched threads with /new or /resume, which
//     nothing shows);
//   - else the guarded dir route over the threads table: the one thread
//     of the TUI's cwd created since the TUI started, when no other
//     Codex TUI in that cwd could have created it. A TUI with several
//     such threads, or a thread another TUI could own, is ambiguous:
//     none is chosen and a move is refused. A resumed thread (created
//     before its TUI) is found only by argv.
func codexDaemonThread(env Env, p proc.Proc, cwd string, threads []codexThread) (rel, via string) {
	argv := normArgv(p.Argv)
	if len(argv) == 0 && env.Procs != nil {
		argv, _ = env.Procs.Argv(p.PID)
		argv = normArgv(argv)
	}
	if id := codexResumeID(argv); id != "" {
		for _, t := range threads {
			if t.id == id && t.rel != "" {
				if info, err := env.Root.Stat(t.rel); err == nil && !info.Dir {
					return t.rel, RouteArgv + " (codex resume " + id + ")"
				}
			}
		}
		return "", RouteNone + " (codex resume " + id + ": no rollout of that thread)"
	}
	if len(threads) == 0 {
		return "", RouteNone + " (no rollout open yet)"
	}
	since, ok := started(env, p)
	if !ok || cwd == "" {
		return "", RouteNone + " (no rollout open; the process's start or cwd is unknown)"
	}
	var cands []codexThread
	for _, t := range threads {
		if !t.sub && t.rel != "" && !t.created.IsZero() && !t.created.Before(since.Add(-codexStartSlack)) && sameDir(t.cwd, cwd) {
			if info, err := env.Root.Stat(t.rel); err == nil && !info.Dir {
				cands = append(cands, t)
			}
		}
	}
	switch len(cands) {
	case 0:
		return "", RouteNone + " (no rollout open, and no thread of this cwd begun since the process started)"
	case 1:
	default:
		return codexSwitched(env, p, cwd, cands)
	}
	if other := codexRival(env, p, cwd, cands[0].created); other != 0 {
		return "", RouteAmbiguous + " (the one thread of this cwd begun since the process started could be codex " + strconv.Itoa(other) + "'s, in the same cwd)"
	}
	return cands[0].rel, RouteDir + " (the one thread of this cwd begun since the process started; Codex's app-server daemon holds it, not the TUI)"
}

// codexSwitched picks among several threads of the TUI's cwd begun since it
// started. With no other TUI in that cwd that could have begun any of them,
// all are this TUI's: it left each for the next with /new or /fork (a new
// thread in the same process), and the one the user sees is the one written
// last. Any possible rival leaves it ambiguous.
func codexSwitched(env Env, p proc.Proc, cwd string, cands []codexThread) (rel, via string) {
	// A rival started before the newest of them could have begun that one.
	newest := cands[0].created
	for _, t := range cands[1:] {
		if t.created.After(newest) {
			newest = t.created
		}
	}
	if other := codexRival(env, p, cwd, newest); other != 0 {
		return "", RouteAmbiguous + " (" + strconv.Itoa(len(cands)) + " threads of this cwd begun since the process started, which could be codex " + strconv.Itoa(other) + "'s, in the same cwd; Codex's app-server daemon holds them, not the TUI)"
	}
	// Written last; of two written in the same instant, the newer thread.
	var last, created time.Time
	for _, t := range cands {
		info, err := env.Root.Stat(t.rel)
		if err != nil || info.Dir {
			continue
		}
		if rel == "" || info.Mtime.After(last) || (info.Mtime.Equal(last) && t.created.After(created)) {
			rel, last, created = t.rel, info.Mtime, t.created
		}
	}
	if rel == "" {
		return "", RouteNone + " (no rollout open, and no thread of this cwd begun since the process started)"
	}
	return rel, RouteDir + " (the last written of " + strconv.Itoa(len(cands)) + " threads of this cwd begun since the process started, after /new or a fork; Codex's app-server daemon holds them, not the TUI)"
}

// codexRival is another live Codex TUI in cwd, started by created (so it
// could have created that thread), that neither holds its own rollout nor
// names its thread in argv: 0 when there is none.
func codexRival(env Env, p proc.Proc, cwd string, created time.Time) int {
	if env.Procs == nil {
		return 0
	}
	pids, err := env.Procs.PIDs()
	if err != nil {
		return -1 // unknown: as good as a rival
	}
	boot, err := env.Procs.BootTime()
	if err != nil {
		return -1
	}
	for _, pid := range pids {
		if pid == p.PID {
			continue
		}
		// argv first: only a native codex costs the reads of a Stat.
		if argv, err := env.Procs.Argv(pid); err != nil || len(argv) == 0 || !codexNative(base(normArgv(argv)[0])) {
			continue
		}
		q, err := env.Procs.Stat(pid)
		if err != nil || len(q.Argv) == 0 {
			continue
		}
		parent, _ := env.Procs.Stat(q.PPID)
		if (codex{}).Classify(q, parent) != Session {
			continue
		}
		if qc, err := env.Procs.Cwd(pid); err != nil || !sameDir(cleanCwd(qc), cwd) {
			continue
		}
		if proc.Started(boot, q.Start).After(created.Add(codexStartSlack)) || codexResumeID(normArgv(q.Argv)) != "" {
			continue
		}
		if len(held(env, pid, "sessions/")) > 0 {
			continue // a TUI that hosts its own app-server holds its rollout
		}
		return pid
	}
	return 0
}

var _ = register(codex{}, &codexSpec)

var codexSpec = Spec{
	Name:  "codex",
	Order: 20,
	Mirrors: []Mirror{
		{At: "sessions", Rel: "sessions"},
		{At: "session-index", Rel: "session_index.jsonl", File: true},
		{At: "history", Rel: "history.jsonl", File: true},
	},
	Skills: "skills",
	Credentials: []Credential{
		{"config.toml", "Codex (MCP env)"},
		{"auth.json", "Codex ~/.codex/auth.json"},
		{"installation_id", "Codex: installation identity"},
	},
	ProgramPrefixes: []string{"codex-"},
	Env:             []string{"CODEX_HOME", "CODEX_SQLITE_HOME"},
	Keep: []keep{
		{names: []string{"-c", "--config"}, emit: "--config", value: true, max: 8 << 10},
		{names: []string{"-m", "--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"-p", "--profile"}, emit: "--profile", value: true, max: 256},
		{names: []string{"-s", "--sandbox"}, emit: "--sandbox", value: true, max: 64, ok: word},
		{names: []string{"-a", "--ask-for-approval"}, emit: "--ask-for-approval", value: true, max: 64, ok: word},
	},
	Flags:         codexFlags,
	FlagsBeforeID: true,
	Verified:      "0.171.0",
	Doc: Doc{
		Title:   "Codex",
		Root:    "~/.codex",
		Process: "the native TUI, not the node wrapper nor the app-server daemon",
		Via:     "`fd` (no daemon); under the default app-server daemon `dir` (the one thread of the cwd created since the TUI started, from `state_5.sqlite`), `argv` for `codex resume ID`, `relaunch` after a move; after `/new` or `/fork`, the last written of the cwd's threads begun since; `ambiguous` when two TUIs could own a thread",
		Resume:  "`codex resume ID`",
		RealCLI: "0.171.0",
	},
}

// ---- turn state ----

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

// ---- tokens ----

// codexUsage is a token_count's cumulative or last usage. input_tokens
// includes the cached input.
type codexUsage struct {
	Input      *int64 `json:"input_tokens"`
	Cached     *int64 `json:"cached_input_tokens"`
	CacheWrite *int64 `json:"cache_write_input_tokens"`
	Output     *int64 `json:"output_tokens"`
}

func (u codexUsage) zero() bool {
	for _, v := range []*int64{u.Input, u.Cached, u.CacheWrite, u.Output} {
		if v != nil && *v != 0 {
			return false
		}
	}
	return true
}

type codexTokenLine struct {
	Type    string `json:"type"`
	Payload struct {
		Type string `json:"type"`
		Info *struct {
			Total *codexUsage `json:"total_token_usage"`
			Last  *codexUsage `json:"last_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

// codexTokenCount decodes a token_count line with its info, or nil.
func codexTokenCount(ln []byte) *codexTokenLine {
	if !bytes.Contains(ln, []byte(`"token_count"`)) {
		return nil
	}
	var l codexTokenLine
	if json.Unmarshal(ln, &l) != nil || l.Type != "event_msg" || l.Payload.Type != "token_count" ||
		l.Payload.Info == nil || l.Payload.Info.Total == nil {
		return nil
	}
	return &l
}

// codexTokens is a rollout's usage: the newest cumulative token_count
// (Codex re-emits it unchanged, so only the newest is read), minus, for a
// fork or a sub-agent, the parent's total its replayed history begins
// with (its first token_count, whose last usage is all zeros). A fork
// whose baseline cannot be seen in head gives no sums. head and tail are
// windows' halves: tail is nil when head is the whole file.
func codexTokens(head, tail [][]byte, child bool) Tokens {
	var newest *codexTokenLine
	for i := len(tail) - 1; i >= 0 && newest == nil; i-- {
		newest = codexTokenCount(tail[i])
	}
	for i := len(head) - 1; i >= 0 && newest == nil; i-- {
		newest = codexTokenCount(head[i])
	}
	if newest == nil {
		return Tokens{}
	}
	var t Tokens
	if l := newest.Payload.Info.Last; l != nil && l.Input != nil {
		t.Context = i64(*l.Input)
	}
	var base codexUsage
	if child {
		// The first token_count is looked for in the head alone (the whole
		// file when it fits): one found only in the tail is not the first.
		var first *codexTokenLine
		for _, ln := range head {
			if first = codexTokenCount(ln); first != nil {
				break
			}
		}
		if first == nil || first.Payload.Info.Last == nil || !first.Payload.Info.Last.zero() {
			return t // the parent's share cannot be told from the child's
		}
		base = *first.Payload.Info.Total
	}
	tot := *newest.Payload.Info.Total
	sub := func(v, b *int64) *int64 {
		if v == nil {
			return nil
		}
		n := *v
		if b != nil {
			n -= *b
		}
		return i64(max(n, 0))
	}
	input, baseInput := tot.Input, base.Input
	if input != nil && tot.Cached != nil {
		input = i64(*input - *tot.Cached)
	}
	if baseInput != nil && base.Cached != nil {
		baseInput = i64(*baseInput - *base.Cached)
	}
	t.Input = sub(input, baseInput)
	t.Output = sub(tot.Output, base.Output)
	t.CacheRead = sub(tot.Cached, base.Cached)
	t.CacheWrite = sub(tot.CacheWrite, base.CacheWrite)
	return t
}

// ---- limits ----

// codexWindow is a rate_limits window of a token_count: resets_at (unix
// seconds) in current builds, resets_in_seconds (from the event) in older
// ones.
type codexWindow struct {
	UsedPercent     *float64 `json:"used_percent"`
	WindowMinutes   *int64   `json:"window_minutes"`
	ResetsAt        *int64   `json:"resets_at"`
	ResetsInSeconds *int64   `json:"resets_in_seconds"`
}

type codexLimitsLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type       string `json:"type"`
		RateLimits *struct {
			LimitID   *string      `json:"limit_id"`
			Primary   *codexWindow `json:"primary"`
			Secondary *codexWindow `json:"secondary"`
		} `json:"rate_limits"`
	} `json:"payload"`
}

// codexLimits are the windows of the newest token_count event of the
// rollout's lines (tail, then head: the halves codexFill read once for
// the state and the tokens too) that carries the account's rate_limits
// (limit_id "codex", or none in older builds). Codex copies the newest
// limits it has into every token_count, so the newest event is the
// harness's current word; its null windows (a provider that sends no
// rate-limit headers) are absent, as is everything when no event has any.
func codexLimits(head, tail [][]byte) Limits {
	for _, part := range [][][]byte{tail, head} {
		for i := len(part) - 1; i >= 0; i-- {
			ln := part[i]
			if !bytes.Contains(ln, []byte(`"token_count"`)) || !bytes.Contains(ln, []byte(`"rate_limits"`)) {
				continue
			}
			var l codexLimitsLine
			if json.Unmarshal(ln, &l) != nil || l.Type != "event_msg" || l.Payload.Type != "token_count" {
				continue
			}
			rl := l.Payload.RateLimits
			if rl == nil || (rl.LimitID != nil && *rl.LimitID != "codex") {
				continue
			}
			at := lineTime(l.Timestamp)
			var out Limits
			for _, w := range []struct {
				name string
				w    *codexWindow
			}{{"primary", rl.Primary}, {"secondary", rl.Secondary}} {
				if lim, ok := w.w.limit(w.name, at); ok {
					out = append(out, lim)
				}
			}
			return out
		}
	}
	return nil
}

// limit is w as a Limit; at is its event's time, which resets_in_seconds
// counts from (unknown without it).
func (w *codexWindow) limit(name string, at time.Time) (Limit, bool) {
	if w == nil || w.UsedPercent == nil || math.IsNaN(*w.UsedPercent) || math.IsInf(*w.UsedPercent, 0) {
		return Limit{}, false
	}
	l := Limit{Name: name, UsedPercent: *w.UsedPercent}
	if w.WindowMinutes != nil && *w.WindowMinutes > 0 {
		l.WindowMinutes = i64(*w.WindowMinutes)
	}
	switch {
	case w.ResetsAt != nil && *w.ResetsAt > 0:
		l.ResetsAt = time.Unix(*w.ResetsAt, 0).UTC()
	case w.ResetsInSeconds != nil && *w.ResetsInSeconds >= 0 && !at.IsZero():
		l.ResetsAt = at.Add(time.Duration(*w.ResetsInSeconds) * time.Second).UTC().Truncate(time.Second)
	}
	return l, true
}
