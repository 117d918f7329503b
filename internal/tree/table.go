package tree

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// tableName is /active/table's name.
const tableName = "table"

// SessionTable is a SessionHost that can name the sessions of every pane of
// one tmux server with one call to that server. /active/table uses it so
// that one read asks each tmux server once, however many agents it serves;
// without it the table asks per agent, as the tmux file does.
type SessionTable interface {
	// TmuxServer asks the server at socket once (bounded by ctx) and
	// returns what TmuxSession would answer for an agent on that server,
	// given its pane and TMUX_TMPDIR.
	TmuxServer(ctx context.Context, socket string) func(agent proc.Proc, pane, tmpdir string) string
}

// tableFile is /active/table: the whole table of live agents as JSON Lines,
// one object per agent, sorted by harness, then pid. Each open derives it
// afresh (one scan of the process table, one resolve per agent), and the
// handle holds it, so a reader never sees a table torn across its reads.
//
// The keys are those of `9harness ps --json`, and stable: "harness" and
// "pid" (a number) always; "ppid" and "started" (numbers; started in unix
// seconds), "cwd", "name", "title", "session", "model", "via", "status",
// and every other fact file the agent's directory holds, under the file's
// name, where the fact is known (absent where the file is absent), its
// value the file's text without the final newline (a file of several
// lines, such as tokens and limits, keeps its inner newlines); "zmx" and "tmux"
// always ("" outside such a session, or when not shown); "transcript",
// the tree path of the agent's transcript file, and "agents", the names
// of its sub-agents (an array), where it has them. A row's values equal
// what the agent's own files hold at that moment, but for the facts its
// "pending" array names (title, model, tokens): those the read did not
// derive (harness.Env.Defer, harness.CountNow) are left out, and tokens
// holds only the counts derived (the context); they are derived after
// the read (harness.Counts.Later) for a later one.
//
// The agents sharing a directory share its reading (harness.Memo), so the
// cost of a read grows with the number of agents, not with its square;
// and each tmux server is asked once (SessionTable).
type tableFile struct{ a *active }

func (t *tableFile) Attr() (Attr, error) {
	s := t.a.start
	// Size 0, as /proc's generated files: a stat does not pay for the table.
	return Attr{Mode: 0o444, Nlink: 1, Atime: s, Mtime: s, Ctime: s, Path: SynthPath("/active/" + tableName)}, nil
}

func (t *tableFile) Open() (Handle, error) {
	b, err := t.a.table()
	if err != nil {
		return nil, err
	}
	return snapshot{bytesReader(b)}, nil
}

// table derives /active/table's content now.
func (a *active) table() ([]byte, error) {
	// The derivations earlier reads left pending wait while this one
	// runs (harness.Counts.Reading): it has the CPUs to itself.
	for _, c := range a.counts() {
		defer c.Reading()()
	}
	all, err := a.scanAgents()
	if err != nil {
		return nil, err
	}
	r := &tableRead{memo: harness.NewMemoCache(a.files), servers: map[string]*tmuxServer{},
		envs: map[string]harness.Env{}, terms: a.cfg.Procs.Terminals(a.cfg.UID)}
	defer r.release()
	// One budget for the read's window reads (harness.Env.Defer), when
	// what it leaves pending can be derived later (harness.Counts).
	r.deferred = harness.NewDefer(windowBudget)
	for _, d := range all {
		r.env(d) // every harness's Env made before the rows are shared out
	}
	// The rows are independent (what they share, the memo and the file
	// cache, is safe for concurrent use): they are derived on every CPU,
	// each run of rows into its own buffer (indexed by the run's first
	// row), and the runs joined in the table's order.
	runs := make([]*bytes.Buffer, len(all))
	defer func() {
		for _, b := range runs {
			if b != nil && b.Cap() <= runBufMax {
				b.Reset()
				a.runs.Put(b)
			}
		}
	}()
	proc.Split(len(all), func(lo, hi int) {
		out, ok := a.runs.Get()
		if !ok {
			out = new(bytes.Buffer)
		}
		runs[lo] = out
		out.Grow((hi - lo) * rowSize)
		for i := lo; i < hi; i++ {
			d := all[i]
			// No second check that the agent lives: the scan above has
			// just read its stat, and a process gone since then shows as
			// much in its row as in ps's (its cwd unreadable).
			env := r.envs[d.h]
			facts := harness.ByName(d.h).Resolve(env, d.p)
			d.row(out, facts, r, env)
		}
	})
	// What the rows left pending is derived once they are made, not
	// beside them.
	for i, d := range r.later {
		env := a.cfg.Envs[d.h]
		env.Counts.Later(env, a.files, d.p, r.laterA[i])
	}
	n := 0
	for _, b := range runs {
		if b != nil {
			n += b.Len()
		}
	}
	out := make([]byte, 0, n)
	for _, b := range runs {
		if b != nil {
			out = append(out, b.Bytes()...)
		}
	}
	return out, nil
}

// counts are the harnesses' token counts (one, the daemon's, shared by
// every Env).
func (a *active) counts() []*harness.Counts {
	var cs []*harness.Counts
	for _, env := range a.cfg.Envs {
		if env.Counts != nil && !slices.Contains(cs, env.Counts) {
			cs = append(cs, env.Counts)
		}
	}
	return cs
}

// runBufsKept bounds the run buffers kept between table reads, and
// runBufMax the size of each kept: a 500-agent read uses 32 runs of
// about 8 KiB.
const (
	runBufsKept = 64
	runBufMax   = 64 << 10
)

// rowSize is about what one row of the table takes (350–450 bytes for a
// Claude agent with a title): a run's buffer is sized for its rows once.
const rowSize = 512

// tableRead is what one read of the table shares between its agents.
type tableRead struct {
	memo    *harness.Memo
	mu      sync.Mutex
	servers map[string]*tmuxServer
	// envs is each harness's Env for this read: the read's memo, and its
	// root held open for the read (saferoot.Hold), so that the many files
	// of one root cost one open of the root, not one per file. It is
	// filled before the rows are derived, and only read after.
	envs map[string]harness.Env
	// terms is the user's terminals, read at most once for the read's
	// reach values (proc.Terminals).
	terms *proc.Terminals
	// later is the agents whose rows left facts pending, derived once
	// the table is made (harness.Counts.Later); under mu.
	later  []*agentDir
	laterA []harness.Agent
	// deferred is the read's budget of window bytes.
	deferred *harness.Defer
}

// windowBudget is what one table read may read of the windows of
// transcripts it never derived facts from (title, model): a few dozen new
// agents. Past it the facts are pending, and derived after the read for
// the next one: so a first read of hundreds of agents costs about what a
// later one does. An agent already shown whose transcript changed is
// derived again at once, whatever the budget.
var windowBudget int64 = 16 << 20

// countLater notes that d's row left a's pending facts underived.
func (r *tableRead) countLater(d *agentDir, a harness.Agent) {
	r.mu.Lock()
	r.later = append(r.later, d)
	r.laterA = append(r.laterA, a)
	r.mu.Unlock()
}

// env is the Env d's facts are resolved against in this read, made at
// the first agent of its harness.
func (r *tableRead) env(d *agentDir) harness.Env {
	env, ok := r.envs[d.h]
	if !ok {
		env = d.a.cfg.Envs[d.h]
		if env.Root != nil {
			env.Root = env.Root.Hold()
		}
		env.Memo = r.memo
		if env.Counts != nil {
			env.Defer = r.deferred
		}
		r.envs[d.h] = env
	}
	return env
}

// release closes the roots the read held, and lets go of its memo.
func (r *tableRead) release() {
	for _, env := range r.envs {
		env.Root.Release()
	}
	r.memo.Release()
}

// tmux is the tmux file's content for d, asking each server at most once
// per table read when the session host can answer for a whole server.
func (r *tableRead) tmux(d *agentDir, a harness.Agent) string {
	st, ok := d.a.cfg.Sessions.(SessionTable)
	if !ok || a.TmuxSocket == "" {
		return d.tmuxSession(a)
	}
	pane, _ := d.a.cfg.Procs.GetenvOf(d.p, "TMUX_PANE")
	if pane == "" {
		return "" // as tmuxSession: better unknown than wrong
	}
	tmpdir, _ := d.a.cfg.Procs.GetenvOf(d.p, "TMUX_TMPDIR")
	// One question per server, however many rows ask at once: the first
	// asks, the others wait for its answer.
	r.mu.Lock()
	srv := r.servers[a.TmuxSocket]
	if srv == nil {
		srv = &tmuxServer{}
		r.servers[a.TmuxSocket] = srv
	}
	r.mu.Unlock()
	srv.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), tmuxLookup)
		srv.ask = st.TmuxServer(ctx, a.TmuxSocket)
		cancel()
	})
	return srv.ask(d.p, pane, tmpdir)
}

// tmuxServer is one tmux server's answer, asked once per table read.
type tmuxServer struct {
	once sync.Once
	ask  func(agent proc.Proc, pane, tmpdir string) string
}

// hasTranscript reports whether d's transcript file exists as its agent
// directory shows it (d.transcript, then its Attr: a file, and for a
// grantee not a hard link), from the stat the read's memo shares with the
// transcript's other facts.
func (r *tableRead) hasTranscript(env harness.Env, d *agentDir, rel string) bool {
	if rel == "" || env.Root == nil || env.Root.CheckRel(rel) != nil {
		return false
	}
	info, err := r.memo.Stat(env.Root, rel)
	return err == nil && !info.Dir && (!d.a.cfg.grantee || info.Nlink <= 1)
}

// resolveWith is resolve with the facts of shared directories from memo.
func (d *agentDir) resolveWith(memo *harness.Memo) (harness.Agent, error) {
	if err := d.alive(); err != nil {
		return harness.Agent{}, err
	}
	env := d.a.cfg.Envs[d.h]
	env.Memo = memo
	return harness.ByName(d.h).Resolve(env, d.p), nil
}

// numeric are the fields the table (and ps --json) carries as numbers.
var numeric = map[string]bool{"pid": true, "ppid": true, "started": true}

// row appends d's line of the table: what its files hold, from facts a,
// resolved against env (the read's).
func (d *agentDir) row(out *bytes.Buffer, a harness.Agent, r *tableRead, env harness.Env) {
	// The facts the resolve left pending (a.Pending), and the token sums
	// if CountNow does: absent from the row, or (tokens) only the counts
	// derived, and named under "pending".
	pending := slices.Clone(a.Pending)
	defer func() {
		if len(pending) > 0 {
			a.Pending = pending
			r.countLater(d, a)
		}
	}()
	out.WriteString(`{"harness":`)
	jsonString(out, d.h)
	for _, f := range fields {
		if f.name == "resume" {
			// The agent's own file only: the table is read for every
			// agent at once, and no column shows it.
			continue
		}
		v, shown, partial := d.cell(f, a, r, env)
		if !shown {
			continue
		}
		if partial {
			pending = append(pending, f.name)
		}
		out.WriteString(`,`)
		jsonString(out, f.name)
		out.WriteString(`:`)
		if numeric[f.name] {
			out.WriteString(v)
		} else {
			jsonString(out, v)
		}
	}
	if r.hasTranscript(env, d, a.Transcript) {
		out.WriteString(`,"transcript":`)
		jsonString(out, d.treePath()+"/transcript")
	}
	var subs []string
	for _, s := range a.Agents {
		if saferoot.ValidName(s.Name) == nil {
			subs = append(subs, s.Name)
		}
	}
	if len(subs) > 0 {
		sort.Strings(subs)
		b, _ := json.Marshal(subs)
		out.WriteString(`,"agents":`)
		out.Write(b)
	}
	if len(pending) > 0 {
		b, _ := json.Marshal(pending)
		out.WriteString(`,"pending":`)
		out.Write(b)
	}
	out.WriteString("}\n")
}

// cell is f's value in d's row, from facts a resolved against env;
// shown reports whether the row carries f at all (zmx and tmux always,
// empty when unknown), and partial that the value (the token sums) is
// only what could be counted without reading the whole transcript.
func (d *agentDir) cell(f field, a harness.Agent, r *tableRead, env harness.Env) (v string, shown, partial bool) {
	v, ok := "", d.shows(f)
	switch {
	case ok && f.name == "reach":
		// The terminal as this read's scan has just read it, as ppid.
		v = d.reach(a, r.terms, true)
		ok = v != ""
	case ok && f.name == "ppid" && d.p.PPID > 0:
		// From this read's scan, which resolveWith has just checked
		// is still this process: no second read of its stat.
		v = strconv.Itoa(d.p.PPID)
	case ok:
		v, ok = f.value(d, a)
	}
	switch {
	case !ok:
		return v, f.name == "zmx" || f.name == "tmux", false
	case f.name == "tmux":
		return r.tmux(d, a), true, false
	case f.name == "tokens" && harness.Summed(a.Harness):
		// The transcript's stat, shared with its other facts. Sums
		// that need the whole file read are pending, and counted
		// after the read for the next one.
		t, complete := harness.CountNow(env, a)
		return t.String(), true, !complete
	case f.read != nil:
		return f.read(d, a), true, false
	}
	return v, true, false
}

func jsonString(out *bytes.Buffer, s string) {
	if plainJSON(s) {
		// Most values (pids, paths, ids, models): nothing to escape, so no
		// encoder is made for them.
		out.WriteByte('"')
		out.WriteString(s)
		out.WriteByte('"')
		return
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	out.Truncate(out.Len() - 1) // Encode's newline
}

// plainJSON reports whether s is its own JSON string body: printable
// ASCII without a quote or a backslash (anything else, the encoder
// escapes).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
