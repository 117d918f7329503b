package harness

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
)

// opencode is sst/opencode (npm opencode-ai; root $XDG_DATA_HOME/opencode,
// by default ~/.local/share/opencode).
//
// Processes: one native (Bun-compiled) process, argv[0] "opencode" (the
// npm package's bin/opencode.exe, linked as node_modules/.bin/opencode), or
// "opencode.exe" when started by that name. Older npm packages started a
// node wrapper (node …/opencode-ai/bin/opencode) that spawned the native
// binary: the wrapper is a Helper and its native child the session. The
// subcommands that are not an interactive agent (serve, web, acp, attach,
// mcp, models, session, db, …) are helpers; "opencode run" is an agent at
// work with a session of its own, like "codex exec".
//
// Storage: one SQLite database, opencode.db (WAL), holds every session
// (table session: id, parent_id, directory, title, model JSON,
// time_created, time_updated in ms) and message (data JSON: role,
// modelID, …). It also holds the account's access and refresh tokens
// (tables account, control_account, credential), so the credential table
// hides it from the tree: it is read only here, through the root's Store
// view, as a snapshot (dbsnap), and only derived facts are served. There is
// no transcript file: Transcript stays empty. A session row exists only
// once the first prompt is sent.
//
// pid → session: opencode keeps no per-process record. Its one log file
// (log/opencode.log) is shared by every process and tags lines with a
// random run id, never a pid; its lock files (~/.local/state/opencode/
// locks/*.lock/meta.json) name a pid but no session; the process holds the
// database open, which every opencode does. So the route is a heuristic,
// and Via says so: a session whose directory is the process's cwd, that was
// written since the process started, and that it could have begun (created
// since it started) or been started with (--session ID, --continue). One
// such session resolves (via "dir (heuristic: …)"); two or more, or one
// that another live opencode in the same cwd could equally have written,
// are never guessed between (via "ambiguous", facts absent, a move
// refused). A process that has written nothing since it started (a fresh
// TUI, or one just resumed by a move) resolves only to a session its argv
// names (via argv), or, when 9harness itself started it with that session
// (Env.Relaunches, keyed by pid and start time, holding the session id),
// via relaunch.
type opencode struct{}

func (opencode) Name() string { return "opencode" }

var (
	opencodeFlags = flags{
		value: set("--log-level", "--port", "--hostname", "--mdns-domain", "--cors", "-m", "--model",
			"-s", "--session", "--prompt", "--agent", "--replay-limit"),
	}
	// Subcommands that are not an interactive agent session.
	opencodeHelperWords = set("completion", "acp", "mcp", "attach", "debug", "providers", "auth",
		"agent", "upgrade", "uninstall", "serve", "web", "models", "stats", "export", "import",
		"github", "session", "plugin", "plug", "db", "help")
)

// opencodeNative reports whether b, an argv[0] basename, is the native binary.
func opencodeNative(b string) bool { return b == "opencode" || b == "opencode.exe" }

// opencodeWrapper reports whether argv is an npm node wrapper of opencode.
func opencodeWrapper(argv []string) bool {
	if len(argv) < 2 || !isNode(base(argv[0])) {
		return false
	}
	script, _ := interpScript(argv[1:])
	return opencodeNative(base(script)) && strings.Contains(script, "opencode")
}

// Classify implements Harness.
func (opencode) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	if opencodeWrapper(argv) {
		return Helper // its native child is the session
	}
	if !opencodeNative(b) {
		return None
	}
	if _, pb := program(parent); opencodeNative(pb) {
		return Helper // spawned by an opencode
	}
	args := argv[1:]
	if hasFlag(args, "-h", "--help", "-v", "--version") {
		return Helper
	}
	if opencodeHelperWords[opencodeFlags.positional(args)] {
		return Helper
	}
	return Session
}

// ocSession is one root session row of opencode.db.
type ocSession struct {
	ID, Dir, Title, Model string
	Created, Updated      int64 // ms since the epoch
}

// ocProc is what the pairing knows of one live opencode process.
type ocProc struct {
	PID      int
	Start    int64  // ms since the epoch
	Session  string // the session its argv names (--session), "" if none
	Continue bool   // started with --continue: it may have taken any older session
}

// ocSlack is how far a session's times may precede a process's start and
// still be its own: the start from /proc has a 10 ms tick, and the two
// clocks are read apart.
const ocSlack = 1000

// mayOwn reports whether q could have written s: s was written since q
// started, and q began s, or was started with it.
func (q ocProc) mayOwn(s ocSession) bool {
	if s.Updated < q.Start-ocSlack {
		return false
	}
	return s.Created >= q.Start-ocSlack || s.ID == q.Session || q.Continue
}

// ocPair pairs self with its session among sessions (the root sessions of
// self's cwd, plus the one its argv names), given the other live opencode
// processes in the same cwd, which peers lists (called only when one
// session is left: listing them costs a scan of the process table). It
// returns the session ("" when none is chosen) and Via.
func ocPair(self ocProc, peers func() []ocProc, sessions []ocSession) (string, string) {
	var mine []ocSession
	for _, s := range sessions {
		if self.mayOwn(s) {
			mine = append(mine, s)
		}
	}
	switch len(mine) {
	case 0:
		if self.Session != "" && slices.ContainsFunc(sessions, func(s ocSession) bool { return s.ID == self.Session }) {
			return self.Session, RouteArgv + " (nothing written since the process started; the session its --session names)"
		}
		return "", RouteNone + " (no session in the cwd written since the process started)"
	case 1:
	default:
		return "", fmt.Sprintf("%s (%d sessions in the cwd written since the process started)", RouteAmbiguous, len(mine))
	}
	s := mine[0]
	for _, q := range peers() {
		if q.PID != self.PID && q.mayOwn(s) {
			return "", fmt.Sprintf("%s (opencode pid %d in the same cwd could have written session %s too)", RouteAmbiguous, q.PID, s.ID)
		}
	}
	return s.ID, RouteDir + " (heuristic: the one session in the cwd written since the process started)"
}

// ocArgs reads what a process's argv says of its session.
func ocArgs(p *ocProc, argv []string) {
	args := agentArgs(argv)
	if v, ok := flagValue(args, "-s", "--session"); ok && safeArg(v) {
		p.Session = v
	}
	p.Continue = hasFlag(args, "-c", "--continue")
}

// ocMaxSessions bounds the rows read for one cwd: far more than the
// sessions written since any one process started (more than that is
// ambiguous whichever are read).
const ocMaxSessions = 1024

// Resolve implements Harness.
func (opencode) Resolve(env Env, p proc.Proc) Agent { return ocResolve("opencode", env, p) }

// ocResolve resolves p, a process of harness name (opencode, or a harness
// built on it that keeps the same tables in NAME.db), to its session by
// the heuristic over NAME.db, with the other live processes of the
// harness in the cwd as the peers that could have written it.
func ocResolve(name string, env Env, p proc.Proc) Agent {
	a, _ := start(name, env, p)
	dbName := name + ".db"
	if env.Root == nil {
		return a
	}
	st, ok := started(env, p)
	if !ok {
		a.Via = "none (no boot time to compare the sessions' times with)"
		return a
	}
	self := ocProc{PID: p.PID, Start: st.UnixMilli()}
	ocArgs(&self, a.Argv)
	cwd := cleanCwd(a.Cwd)
	if cwd == "" {
		a.Via = "none (cwd unknown)"
		return a
	}
	db, release, err := env.DBs.Open(env.Root.Store(), dbName)
	if errs.Is(err, errs.NotExist) {
		a.Via = "none (no " + dbName + ")"
		return a
	}
	if err != nil {
		a.Via = "none (" + dbName + " could not be read: " + errs.KindOf(err).String() + ")"
		return a
	}
	defer release()
	sessions, err := ocSessions(db, cwd, self.Start-ocSlack, self.Session)
	if err != nil {
		a.Via = "none (" + dbName + " has no session table this harness knows)"
		return a
	}
	id, via := ocPair(self, func() []ocProc { return peersOf(name, env, p, cwd) }, sessions)
	// A process 9harness itself started with --session ID (a move) is
	// quiet until its next answer, so the heuristic finds nothing; the
	// daemon's own record names its session, as for pi. The record is
	// keyed by pid and start time, and holds the session id.
	if r, ok := env.Relaunches.Lookup(p.PID, p.Start); ok && r == self.Session && (id == "" || id == r) &&
		!strings.HasPrefix(via, RouteAmbiguous) && slices.ContainsFunc(sessions, func(s ocSession) bool { return s.ID == r }) {
		id, via = r, RouteRelaunch+" (9harness resumed this session in this process)"
	}
	a.Via = strings.Replace(via, "opencode pid", name+" pid", 1)
	if id == "" {
		return a
	}
	a.Session = id
	for _, s := range sessions {
		if s.ID == id {
			a.Title = cleanTitle(s.Title)
			a.Model = ocMessageModel(db, id)
			if a.Model == "" {
				a.Model = ocModelID(s.Model)
			}
		}
	}
	a.Agents = ocSubs(db, id)
	ocTurn(db, id).set(&a)
	a.Tokens = ocTokens(db, id)
	return a
}

// ocMaxSubs bounds the sub-agent sessions listed for one session.
const ocMaxSubs = 64

// ocSubs lists the sub-agents of session id: the sessions its task tool
// began (parent_id), each named by its agent ("general", "explore"), else
// its title. They have no transcript file.
func ocSubs(db *sql.DB, id string) []Sub {
	rows, err := db.Query(`SELECT id, COALESCE(agent, ''), title, COALESCE(model, '') FROM session
		WHERE parent_id = ? ORDER BY time_created, id LIMIT ?`, id, ocMaxSubs)
	if err != nil {
		return nil
	}
	type child struct{ id, agent, title, model string }
	var kids []child
	for rows.Next() {
		var c child
		if rows.Scan(&c.id, &c.agent, &c.title, &c.model) == nil {
			kids = append(kids, c)
		}
	}
	rows.Close()
	var subs []Sub
	var ids []string
	for _, c := range kids {
		name := componentName(pick(c.title, c.agent))
		if name == "" {
			name = componentName(c.id)
		}
		model := ocMessageModel(db, c.id)
		if model == "" {
			model = ocModelID(c.model)
		}
		subs = append(subs, Sub{Name: name, Model: model})
		ids = append(ids, c.id)
	}
	if len(subs) == 0 {
		return nil
	}
	return uniqueSubs(subs, ids)
}

// ocSessions reads the root sessions of dir written since the time since
// (ms; newest first, bounded) and the session named, wherever it is and
// whenever it was written. The directory is compared here, not in SQL:
// opencode may record the cwd under a spelling through a symlink (its
// $PWD), which sameDir resolves.
func ocSessions(db *sql.DB, dir string, since int64, named string) ([]ocSession, error) {
	rows, err := db.Query(`SELECT id, directory, title, COALESCE(model, ''), time_created, time_updated
		FROM session WHERE (parent_id IS NULL AND time_updated >= ?) OR id = ?
		ORDER BY id = ? DESC, time_updated DESC LIMIT ?`, since, named, named, ocMaxSessions)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ocSession
	for rows.Next() {
		var s ocSession
		if err := rows.Scan(&s.ID, &s.Dir, &s.Title, &s.Model, &s.Created, &s.Updated); err != nil {
			return nil, err
		}
		if safeArg(s.ID) && (s.ID == named || sameDir(s.Dir, dir)) {
			out = append(out, s)
		}
	}
	return out, rows.Err()
}

// ocMessageModel is the model of the session's newest message that names
// one: an assistant's modelID (the model that answered), or a user
// message's model.modelID (the model it was sent to).
func ocMessageModel(db *sql.DB, id string) string {
	rows, err := db.Query(`SELECT data FROM message WHERE session_id = ?
		ORDER BY time_created DESC, id DESC LIMIT 16`, id)
	if err != nil {
		return ""
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if rows.Scan(&data) != nil {
			return ""
		}
		var m struct {
			Role    string `json:"role"`
			ModelID string `json:"modelID"`
			Model   struct {
				ModelID string `json:"modelID"`
			} `json:"model"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m := pick(m.Model.ModelID, m.ModelID); m != "" {
			return m
		}
	}
	return ""
}

// ocModelID reads a session row's model column, {"id":…,"providerID":…}.
func ocModelID(raw string) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(raw), &m) != nil {
		return ""
	}
	return m.ID
}

// peersOf lists the other live sessions of harness (opencode, or a
// harness built on it) of the same uid whose cwd is cwd.
func peersOf(harness string, env Env, self proc.Proc, cwd string) []ocProc {
	if env.Procs == nil {
		return nil
	}
	found, err := Scan(env.Procs, self.UID, map[int]bool{self.PID: true})
	if err != nil {
		return nil
	}
	boot, err := env.Procs.BootTime()
	if err != nil {
		return nil
	}
	var out []ocProc
	for _, f := range found {
		if f.Harness != harness {
			continue
		}
		c, err := env.Procs.Cwd(f.Proc.PID)
		if err != nil || cleanCwd(c) != cwd {
			continue
		}
		q := ocProc{PID: f.Proc.PID, Start: proc.Started(boot, f.Proc.Start).UnixMilli()}
		ocArgs(&q, f.Proc.Argv)
		out = append(out, q)
	}
	return out
}

// Resume implements Harness: opencode --session <id>, in the session's
// cwd. An ambiguous or unresolved agent is refused: its session is absent.
func (opencode) Resume(a Agent, env Env) ([]string, error) { return ocResume("opencode", a) }

// ocResume is the resume of a of harness name (opencode, or a harness
// built on it): name --session <id>.
func ocResume(name string, a Agent) ([]string, error) {
	if !strings.HasPrefix(a.Session, "ses_") || !safeArg(a.Session) {
		return nil, unresolved(name, a)
	}
	return []string{name, "--session", a.Session}, nil
}

var _ = register(opencode{}, &opencodeSpec)

// xdgDataRoot is the Root of a harness that follows the XDG base
// directories: $XDG_DATA_HOME/name when that is absolute, else
// ~/.local/share/name.
func xdgDataRoot(name string) func(home, xdgDataHome string) string {
	return func(home, xdgDataHome string) string {
		if filepath.IsAbs(xdgDataHome) {
			return filepath.Join(xdgDataHome, name)
		}
		return home + "/.local/share/" + name
	}
}

// ocMirrors are the mirrors of opencode's root, and of a harness that
// kept its storage: only the JSON sessions, messages and parts of the
// pre-1.2 storage/ tree. Never the root whole (auth.json, snapshot/ git
// copies of the projects' files, storage/session_share/ share secrets).
var ocMirrors = []Mirror{
	{At: "storage/session", Rel: "storage/session"},
	{At: "storage/message", Rel: "storage/message"},
	{At: "storage/part", Rel: "storage/part"},
}

var opencodeSpec = Spec{
	Name:  "opencode",
	Order: 80,
	Root:  xdgDataRoot("opencode"),
	// Its sessions now live in opencode.db, which also holds the
	// account's tokens: the credential table hides it, and /active
	// serves only what is derived from it.
	Mirrors: ocMirrors,
	// snapshot/: git copies of the projects' files.
	CopyStores: []string{"snapshot"},
	Credentials: []Credential{
		{"auth.json", "opencode ~/.local/share/opencode/auth.json"},
		{"mcp-auth.json", "opencode ~/.local/share/opencode/mcp-auth.json"},
		{"account.json", "opencode ~/.local/share/opencode/account.json"},
		{"service.json", "opencode ~/.local/state/opencode/service.json: server password"},
		{"opencode*.db", "opencode ~/.local/share/opencode/opencode*.db: access and refresh tokens"},
	},
	// Its sessions and its account tokens are one SQLite file: never
	// served, yet the only record of which session an opencode works on.
	Stores:   []string{"opencode.db"},
	Programs: []string{"opencode.exe"},
	Keep: []keep{
		{names: []string{"-m", "--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"--agent"}, emit: "--agent", value: true, max: 64, ok: word},
		{names: []string{"--auto"}, emit: "--auto"},
		{names: []string{"--pure"}, emit: "--pure"},
	},
	Flags:    opencodeFlags,
	Messages: ocMessages("opencode"),
	Verified: "1.18.33",
	Doc: Doc{
		Title:   "opencode",
		Root:    "~/.local/share/opencode",
		Process: "the native `opencode`; `serve`, `web`, `acp`, … are helpers",
		Via:     "`dir (heuristic: …)` from `opencode.db` (nothing ties a process to its session), `argv` for `--session ID`, `relaunch`; `ambiguous` when two could be",
		Resume:  "`opencode --session ID`",
		RealCLI: "1.18.33",
	},
}

// ---- messages ----

// ocMessageText bounds what one part gives of its text: the messages
// file cuts each line shorter still (Messages), and the part's whole
// data (a tool's output can be megabytes) is never read into the daemon.
const ocMessageText = 8 << 10

// ocMessages renders the last n messages of the session of an agent of
// harness name from NAME.db: each message row's role and its parts in
// order, the text parts' text (not the synthetic ones opencode adds) and
// each tool part as "[tool NAME]"; reasoning and the rest are left out.
// SQLite's JSON functions pick the fields, so only ocMessageText of a
// part is read. A snapshot the budget refuses is refused.
func ocMessages(name string) func(env Env, a Agent, n int) ([]string, error) {
	return func(env Env, a Agent, n int) ([]string, error) {
		if env.Root == nil || a.Session == "" {
			return nil, nil
		}
		db, release, err := env.DBs.Open(env.Root.Store(), name+".db")
		if errs.Is(err, errs.NotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		defer release()
		rows, err := db.Query(`SELECT id, COALESCE(json_extract(data, '$.role'), '') FROM message
			WHERE session_id = ? ORDER BY time_created DESC, id DESC LIMIT ?`, a.Session, n)
		if err != nil {
			return nil, nil // not a table this harness knows
		}
		type msg struct{ id, role string }
		var msgs []msg
		for rows.Next() {
			var m msg
			if rows.Scan(&m.id, &m.role) != nil {
				break
			}
			msgs = append(msgs, m)
		}
		rows.Close()
		var out []string
		for i := len(msgs) - 1; i >= 0; i-- {
			if texts := ocParts(db, msgs[i].id); len(texts) > 0 {
				out = append(out, msgs[i].role+": "+strings.Join(texts, " "))
			}
		}
		return out, nil
	}
}

// ocMaxParts bounds the parts read of one message.
const ocMaxParts = 64

// ocParts is the text of message id's parts, in order, until it holds
// ocMessageText: a message's line is cut shorter still (Messages).
func ocParts(db *sql.DB, id string) []string {
	rows, err := db.Query(`SELECT COALESCE(json_extract(data, '$.type'), ''),
		COALESCE(substr(json_extract(data, '$.text'), 1, ?), ''),
		COALESCE(json_extract(data, '$.tool'), ''),
		COALESCE(json_extract(data, '$.synthetic'), 0)
		FROM part WHERE message_id = ? ORDER BY id LIMIT ?`, ocMessageText, id, ocMaxParts)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	held := 0
	for held < ocMessageText && rows.Next() {
		var typ, text, tool string
		var synthetic any
		if rows.Scan(&typ, &text, &tool, &synthetic) != nil {
			break
		}
		switch {
		case typ == "text" && synthetic != int64(1) && strings.TrimSpace(text) != "":
			out = append(out, strings.Join(strings.Fields(text), " "))
		case typ == "tool" && tool != "":
			out = append(out, "[tool "+tool+"]")
		default:
			continue
		}
		held += len(out[len(out)-1])
	}
	return out
}

// ---- turn state ----

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
