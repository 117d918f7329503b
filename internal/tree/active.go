package tree

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/freelist"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// ActiveConfig is what /active is derived from.
type ActiveConfig struct {
	Procs *proc.Table
	UID   uint32                 // only this uid's processes are agents
	Envs  map[string]harness.Env // per harness name
	// Self is the daemon's pid: its ancestry is never listed, so the
	// daemon can neither show nor act on the process tree it lives in.
	Self int
	Now  func() time.Time
	// Mover, if set (--allow-move), makes the zmx and tmux files writable.
	Mover Mover
	// Sessions names the tmux session of an agent for its tmux file. Nil:
	// the tmux file of an agent in tmux is empty.
	Sessions SessionHost
	// grantee is the view of a peer that is not the owner: no field
	// derived from an agent's environment (zmx, tmux), hardlinked
	// transcripts refused (tree.New sets it, with Mover nil).
	grantee bool
}

// Mover performs the move a write into zmx or tmux asks for.
type Mover interface {
	Move(ctx context.Context, w Writer, harness string, p proc.Proc, host string, value []byte) error
}

// SessionHost names the tmux session an agent's pane is in: the name is
// not in the agent's environment, only the server's socket and the pane
// are, so the answer comes from the tmux server, through a tmux client
// process. The tree asks only when a tmux file is read, never for a
// listing, a lookup or a stat, so that walking /active starts no process.
type SessionHost interface {
	// TmuxSession returns what the tmux file shows for agent, whose
	// environment names the server at socket, the pane, and TMUX_TMPDIR
	// (tmpdir, "" when unset): NAME, or LABEL:NAME on a server other than
	// the default one. "" when it cannot be told.
	TmuxSession(ctx context.Context, agent proc.Proc, socket, pane, tmpdir string) string
}

// active is /active. It remembers only what identifies each agent
// (harness, pid, start time), refreshed by a scan of the process table;
// every field is derived again from disk when it is opened.
//
// When the table is scanned. A listing of /active scans, and so does a
// lookup that misses. A listing of /active/<h> scans too, unless the last
// scan was made by a listing of /active, started after the previous listing
// of /active/<h>, is less than scanReuse old, and every agent of h it found
// is still alive: then the listing uses it. So the usual burst (list
// /active, then every /active/<h>) costs one scan, not seven, and:
//
//   - an exited agent is never listed, and a reused pid is seen at once: the
//     entries of a reused scan are checked with proc.Alive (pid and start
//     time), and if any has gone the listing scans instead;
//   - a new agent is listed by the next listing of its harness directory
//     at the latest (by the first one, unless it started in the moment
//     between the listing of /active and that of its directory): two
//     listings of the same directory never share a scan, and one that
//     reuses a scan uses one that started after the previous listing of
//     that directory, and less than scanReuse ago.
type active struct {
	cfg   ActiveConfig
	start time.Time

	mu  sync.Mutex
	byH map[string]map[int]proc.Proc
	// scanAt is when the remembered scan started (monotonic clock), and
	// reusable whether a listing of /active made it; listed is when each
	// /active/<h> listing last took its entries.
	scanAt   time.Time
	reusable bool
	listed   map[string]time.Time
	// files keeps facts derived from harness files while the files are
	// unchanged (re-validated by a stat on every read).
	files *harness.FileCache
	// events is /active/events's watcher and readers.
	events *events
	// runs are the buffers of table reads' runs of rows, kept for the
	// next read: only the joined table is the read's own.
	runs freelist.List[*bytes.Buffer]
}

// scanReuse bounds the age of a scan that a listing of /active/<h> may use
// instead of scanning.
const scanReuse = time.Second

func newActive(cfg ActiveConfig, start time.Time) *active {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &active{cfg: cfg, start: start, listed: map[string]time.Time{}, files: harness.NewFileCache(),
		runs: freelist.List[*bytes.Buffer]{Max: runBufsKept}}
	a.events = newEvents(a)
	return a
}

// rescan walks the process table once. reusable says a listing of /active
// asked for it, so listings of /active/<h> may use it.
func (a *active) rescan(reusable bool) error {
	began := time.Now()
	exclude := map[int]bool{}
	if a.cfg.Self > 0 {
		for _, pid := range a.cfg.Procs.Ancestry(a.cfg.Self) {
			exclude[pid] = true
		}
	}
	found, err := harness.Scan(a.cfg.Procs, a.cfg.UID, exclude)
	if err != nil {
		return errs.E("active.scan", errs.IO, "/active", err)
	}
	// A process whose shape alone does not make it an agent (a Claude
	// background worker no job has claimed) is asked of its harness's files.
	found = harness.Confirmed(found, func(h string) harness.Env { return a.cfg.Envs[h] })
	count := make(map[string]int, len(Harnesses))
	for _, f := range found {
		count[f.Harness]++
	}
	byH := make(map[string]map[int]proc.Proc, len(count))
	live := make([]proc.Proc, 0, len(found))
	for _, f := range found {
		live = append(live, f.Proc)
		if byH[f.Harness] == nil {
			byH[f.Harness] = make(map[int]proc.Proc, count[f.Harness]) // sized once
		}
		byH[f.Harness][f.Proc.PID] = f.Proc
	}
	a.cfg.Procs.RetainEnv(live)
	a.mu.Lock()
	// Concurrent scans: the one that started last is the freshest.
	if !began.Before(a.scanAt) {
		a.byH, a.scanAt, a.reusable = byH, began, reusable
	}
	a.mu.Unlock()
	return nil
}

// scanAgents scans the process table and returns every agent it found,
// sorted by harness, then pid: what a read of the whole table derives its
// rows (or its events) from.
func (a *active) scanAgents() ([]*agentDir, error) {
	if err := a.rescan(false); err != nil {
		return nil, err
	}
	var all []*agentDir
	a.mu.Lock()
	for h, m := range a.byH {
		for _, p := range m {
			all = append(all, a.agent(h, p))
		}
	}
	a.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		if all[i].h != all[j].h {
			return all[i].h < all[j].h
		}
		return all[i].p.PID < all[j].p.PID
	})
	return all, nil
}

func (a *active) known(h string, pid int) (proc.Proc, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.byH[h][pid]
	return p, ok
}

// list returns h's agents for a listing of /active/<h>, scanning or not by
// the rule on active.
func (a *active) list(h string) ([]proc.Proc, error) {
	a.mu.Lock()
	reuse := a.reusable && a.scanAt.After(a.listed[h]) && time.Since(a.scanAt) < scanReuse
	out := make([]proc.Proc, 0, len(a.byH[h]))
	if reuse {
		for _, p := range a.byH[h] {
			out = append(out, p)
		}
	}
	a.mu.Unlock()
	if reuse && !a.cfg.Procs.AllAlive(out) {
		// Something exited, or a pid was reused: scan.
		reuse = false
	}
	if !reuse {
		if err := a.rescan(false); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	a.listed[h] = time.Now()
	if !reuse {
		out = out[:0]
		for _, p := range a.byH[h] {
			out = append(out, p)
		}
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// root is the /active directory: one directory per harness, always.
func (a *active) root() *activeRoot { return &activeRoot{a} }

type activeRoot struct{ a *active }

func (r *activeRoot) Attr() (Attr, error) {
	t := r.a.start
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath("/active")}, nil
}

func (r *activeRoot) Lookup(name string) (Node, error) {
	if name == tableName {
		return &tableFile{r.a}, nil
	}
	if name == eventsName {
		return &eventsFile{r.a.events}, nil
	}
	for _, h := range Harnesses {
		if h == name {
			return &activeHarness{a: r.a, h: h}, nil
		}
	}
	return nil, errs.E("active.Lookup", errs.NotExist, "/active/"+name, nil)
}

func (r *activeRoot) List() ([]Entry, error) {
	if err := r.a.rescan(true); err != nil {
		return nil, err
	}
	names := append([]string(nil), Harnesses...)
	sort.Strings(names)
	out := make([]Entry, len(names))
	for i, h := range names {
		out[i] = Entry{Name: h, Dir: true, Path: SynthPath("/active/" + h)}
	}
	// The table and the events file are found by name, not listed (as
	// /proc's thread ids): a walker of /active, such as an older client,
	// meets only harness directories, and a recursive reader (grep -r,
	// an indexer, a backup) never opens the events file, whose read
	// would block it forever.
	return out, nil
}

// activeHarness is /active/<harness>: one directory per live agent, named
// by pid, as /proc names processes.
type activeHarness struct {
	a *active
	h string
}

func (d *activeHarness) Attr() (Attr, error) {
	t := d.a.start
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath("/active/" + d.h)}, nil
}

func (d *activeHarness) Lookup(name string) (Node, error) {
	const op = "active.Lookup"
	pid, err := strconv.Atoi(name)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != name {
		return nil, errs.E(op, errs.NotExist, "/active/"+d.h+"/"+name, nil)
	}
	p, ok := d.a.known(d.h, pid)
	if !ok || !d.a.cfg.Procs.Alive(pid, p.Start) {
		// A miss rescans: an agent started since the last listing is
		// found by name, and a reused pid is seen for what it is.
		if err := d.a.rescan(false); err != nil {
			return nil, err
		}
		if p, ok = d.a.known(d.h, pid); !ok {
			return nil, errs.E(op, errs.NotExist, "/active/"+d.h+"/"+name, nil)
		}
	}
	return d.a.agent(d.h, p), nil
}

func (d *activeHarness) List() ([]Entry, error) {
	ps, err := d.a.list(d.h)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, p := range ps {
		name := strconv.Itoa(p.PID)
		out = append(out, Entry{Name: name, Dir: true, Path: agentPath(d.h, p)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// agentPath includes the start time: a reused pid is a different directory.
func agentPath(h string, p proc.Proc) uint64 {
	return SynthPath("/active/" + h + "/" + strconv.Itoa(p.PID) + "@" + strconv.FormatUint(p.Start, 10))
}

func (a *active) agent(h string, p proc.Proc) *agentDir {
	return &agentDir{a: a, h: h, p: p}
}

// agentDir is /active/<harness>/<pid>. It holds the identity only; the
// facts are resolved when it is listed or a field is looked up, and again
// when that field is opened.
type agentDir struct {
	a *active
	h string
	p proc.Proc
}

func (d *agentDir) treePath() string { return "/active/" + d.h + "/" + strconv.Itoa(d.p.PID) }

func (d *agentDir) alive() error {
	if !d.a.cfg.Procs.Alive(d.p.PID, d.p.Start) {
		return errs.E("active", errs.NotExist, d.treePath(), nil)
	}
	return nil
}

func (d *agentDir) started() time.Time {
	boot, err := d.a.cfg.Procs.BootTime()
	if err != nil {
		return d.a.start
	}
	return proc.Started(boot, d.p.Start)
}

// resolve derives the agent's facts now.
func (d *agentDir) resolve() (harness.Agent, error) {
	if err := d.alive(); err != nil {
		return harness.Agent{}, err
	}
	env := d.a.cfg.Envs[d.h]
	env.Memo = harness.NewMemoCache(d.a.files)
	defer env.Memo.Release()
	return harness.ByName(d.h).Resolve(env, d.p), nil
}

func (d *agentDir) Attr() (Attr, error) {
	if err := d.alive(); err != nil {
		return Attr{}, err
	}
	t := d.started()
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: agentPath(d.h, d.p)}, nil
}

// field is one fact of an agent: its value (without the newline) from a
// resolved Agent, and whether it is known at all.
type field struct {
	name  string
	value func(d *agentDir, a harness.Agent) (string, bool)
	// light fields come from /proc alone: no harness file is read for them.
	light bool
	// read, if set, is the content, derived at the first read of an open
	// handle; value then only says whether the file exists. It is for a
	// fact that costs a process to learn (tmux): a listing, a lookup, a
	// stat and an open for writing (the move) never pay for it.
	read func(d *agentDir, a harness.Agent) string
}

func str(v string) (string, bool) { return v, v != "" }

var fields = []field{
	{"pid", func(d *agentDir, a harness.Agent) (string, bool) { return strconv.Itoa(d.p.PID), true }, true, nil},
	{"ppid", func(d *agentDir, a harness.Agent) (string, bool) {
		ppid, start, err := d.a.cfg.Procs.Parent(d.p.PID)
		return strconv.Itoa(ppid), err == nil && start == d.p.Start && ppid > 0
	}, true, nil},
	{"started", func(d *agentDir, a harness.Agent) (string, bool) {
		return strconv.FormatInt(d.started().Unix(), 10), true
	}, true, nil},
	{"cwd", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Cwd) }, false, nil},
	{"name", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Name) }, false, nil},
	{"title", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Title) }, false, nil},
	{"session", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Session) }, false, nil},
	{"model", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Model) }, false, nil},
	{"via", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Via) }, false, nil},
	{"status", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Status) }, false, nil},
	// The turn state derived from the harness's files (harness/state.go):
	// each absent when it cannot be known; state.via says how it was
	// found, or why it was not.
	{"state", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.State) }, false, nil},
	{"waiting", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Waiting) }, false, nil},
	{"since", func(d *agentDir, a harness.Agent) (string, bool) {
		return a.Since.UTC().Format(time.RFC3339), !a.Since.IsZero()
	}, false, nil},
	{"state.via", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.StateVia) }, false, nil},
	// tokens' sums need the whole transcript for some harnesses
	// (harness.Summed): they are counted only when the file is read, so a
	// listing never reads every transcript whole.
	// It exists when Resolve saw a count (the context, from the tail).
	{name: "tokens", value: func(d *agentDir, a harness.Agent) (string, bool) {
		if harness.Summed(a.Harness) {
			return "", a.Tokens.Known()
		}
		return str(a.Tokens.String())
	}, read: func(d *agentDir, a harness.Agent) string {
		if !harness.Summed(a.Harness) {
			return a.Tokens.String()
		}
		return harness.Count(d.a.cfg.Envs[d.h], a).String()
	}},
	// The subscription windows the harness records (Codex's rate_limits),
	// one "NAME used_percent window_minutes resets_at" line each: an
	// account's, so the owner's view only.
	{"limits", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Limits.String()) }, false, nil},
	// zmx and tmux are present whenever the agent's environment could be
	// read: empty outside a session is itself the answer ("not in one"),
	// and the move writes here. When it could not be read (a daemon in a
	// user namespace without its proc helper) they are unknown, so absent.
	{"zmx", func(d *agentDir, a harness.Agent) (string, bool) { return a.Zmx, a.EnvKnown }, false, nil},
	// tmux's value is asked of the tmux server (SessionHost), so it is
	// derived only when the file is read: its stat shows size 0, as
	// /proc's generated files do.
	{name: "tmux", value: func(d *agentDir, a harness.Agent) (string, bool) { return "", a.EnvKnown }, read: (*agentDir).tmuxSession},
	// The command that reaches a session its harness hosts itself (a
	// Claude background session: "claude attach <id>"), where zmx and tmux
	// would be; absent for every other agent. Not derived from the
	// environment, so a grantee sees it.
	{"attach", func(d *agentDir, a harness.Agent) (string, bool) { return str(a.Attach) }, false, nil},
	// The shell line a move of the agent runs to resume its session (cd
	// to its directory, then the harness's resume argv with the flags a
	// move keeps), derived on every read by the move's own code; absent
	// where the move would refuse for the resume itself. Kept flag values
	// (--settings, -c) can hold keys, so the owner's view only.
	{"resume", func(d *agentDir, a harness.Agent) (string, bool) {
		line, err := harness.ResumeCommand(harness.ByName(d.h), a, d.a.cfg.Envs[d.h])
		return line, err == nil
	}, false, nil},
	// Who can answer the agent (reach): from its environment and the
	// kernel's view of its terminal, so the owner's view only.
	{"reach", func(d *agentDir, a harness.Agent) (string, bool) {
		return str(d.reach(a, d.a.cfg.Procs.Terminals(d.a.cfg.UID), false))
	}, false, nil},
}

// The words of the reach file.
const (
	ReachZmx      = "zmx"      // in a zmx session: attach to it
	ReachTmux     = "tmux"     // in a tmux pane: attach to it
	ReachTTY      = "tty"      // a terminal some other process still holds (a window, an ssh session)
	ReachDetached = "detached" // no terminal, or one nobody else holds, and no session host
)

// reach says how the agent can be answered: in the session host its
// environment names (zmx, tmux) while it still has a terminal; at a
// terminal another process of the user holds (tty); or not at all
// (detached): no controlling terminal (never had one, or its window, ssh
// connection or pane was closed, which takes the terminal from it), or
// one only the agent and its own children hold. "" when the daemon cannot
// tell (the process is gone, its environment or descriptors cannot be
// read). It is derived on every read: the stat of the agent and, for one
// at a terminal with no session host, of the user's processes, read once
// for all the agents of a request (terms, proc.Terminals). scanned says
// that d.p comes from a scan this request made: its terminal, read with
// its identity (proc.Proc.TTY), is then not read again.
func (d *agentDir) reach(a harness.Agent, terms *proc.Terminals, scanned bool) string {
	procs := d.a.cfg.Procs
	dev, err := d.p.TTY, error(nil)
	if !scanned || !d.p.TTYRead {
		dev, err = procs.CtrlTTY(d.p.PID, d.p.Start)
	}
	switch {
	case err != nil:
		return ""
	case dev == 0:
		return ReachDetached
	case !a.EnvKnown:
		return ""
	case a.Zmx != "":
		return ReachZmx
	case a.TmuxSocket != "":
		return ReachTmux
	}
	held, err := terms.Held(d.p.PID, d.p.Start)
	switch {
	case err != nil:
		return ""
	case held:
		return ReachTTY
	}
	return ReachDetached
}

// tmuxLookup bounds the question to the tmux server: a read of the tmux
// file waits at most this long for a wedged server.
const tmuxLookup = 2 * time.Second

// tmuxSession is the tmux file's content: the session the agent's pane is
// in, asked of the session host.
func (d *agentDir) tmuxSession(a harness.Agent) string {
	if a.TmuxSocket == "" || d.a.cfg.Sessions == nil {
		return ""
	}
	pane, _ := d.a.cfg.Procs.GetenvOf(d.p, "TMUX_PANE")
	if pane == "" {
		// Without the pane, tmux would answer with its current session,
		// which need not be the agent's: better unknown than wrong.
		return ""
	}
	tmpdir, _ := d.a.cfg.Procs.GetenvOf(d.p, "TMUX_TMPDIR")
	ctx, cancel := context.WithTimeout(context.Background(), tmuxLookup)
	defer cancel()
	return d.a.cfg.Sessions.TmuxSession(ctx, d.p, a.TmuxSocket, pane, tmpdir)
}

// shows reports whether f is in this view: a grantee is shown no field
// derived from the agent's environment (zmx, tmux, reach), nor the
// account's limits, nor the resume line (its kept flags' values).
func (d *agentDir) shows(f field) bool {
	if !d.a.cfg.grantee {
		return true
	}
	switch f.name {
	case "zmx", "tmux", "reach", "limits", "resume":
		return false
	}
	return true
}

func (d *agentDir) Lookup(name string) (Node, error) {
	for _, f := range fields {
		if f.name == name && f.light {
			if err := d.alive(); err != nil {
				return nil, err
			}
			if _, ok := f.value(d, harness.Agent{}); !ok {
				return nil, errs.E("active.Lookup", errs.NotExist, d.treePath()+"/"+name, nil)
			}
			return &factFile{d: d, f: f}, nil
		}
	}
	a, err := d.resolve()
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if f.name == name && d.shows(f) {
			if _, ok := f.value(d, a); !ok {
				break
			}
			// The facts resolved for the lookup serve its stat; an open
			// derives them again.
			if (f.name == "zmx" || f.name == "tmux") && d.a.cfg.Mover != nil {
				return &hostFile{factFile{d: d, f: f, walked: &a}}, nil
			}
			return &factFile{d: d, f: f, walked: &a}, nil
		}
	}
	switch name {
	case "transcript":
		if n, err := d.transcript(a.Transcript); err == nil {
			return n, nil
		}
	case "messages":
		if d.hasMessages(a) {
			return &messagesFile{d: d}, nil
		}
	case "agents":
		if len(a.Agents) > 0 {
			return &subAgents{d: d}, nil
		}
	}
	return nil, errs.E("active.Lookup", errs.NotExist, d.treePath()+"/"+name, nil)
}

func (d *agentDir) transcript(rel string) (Node, error) {
	env := d.a.cfg.Envs[d.h]
	if rel == "" || env.Root == nil {
		return nil, errs.E("active.transcript", errs.NotExist, d.treePath()+"/transcript", nil)
	}
	if err := env.Root.CheckRel(rel); err != nil {
		return nil, err
	}
	return mirrorAs(env.Root, rel, wantFile, d.a.cfg.grantee)
}

func (d *agentDir) List() ([]Entry, error) {
	a, err := d.resolve()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, f := range fields {
		if !d.shows(f) {
			continue
		}
		if _, ok := f.value(d, a); ok {
			out = append(out, Entry{Name: f.name, Path: SynthPath(d.treePath() + "/" + f.name + "@" + strconv.FormatUint(d.p.Start, 10))})
		}
	}
	if n, err := d.transcript(a.Transcript); err == nil {
		if at, err := n.Attr(); err == nil {
			out = append(out, Entry{Name: "transcript", Path: at.Path})
		}
	}
	if d.hasMessages(a) {
		out = append(out, Entry{Name: "messages", Path: (&messagesFile{d: d}).path()})
	}
	if len(a.Agents) > 0 {
		out = append(out, Entry{Name: "agents", Dir: true, Path: SynthPath(d.treePath() + "/agents@" + strconv.FormatUint(d.p.Start, 10))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// factFile is one fact. Its content is derived when it is opened and held
// by the handle, so one reader never sees a value torn across its reads.
type factFile struct {
	d      *agentDir
	f      field
	walked *harness.Agent // the facts the lookup resolved, for stat; nil for light fields
}

// content derives the fact; fresh says to resolve again rather than use the
// facts of the lookup (an open is always fresh).
func (ff *factFile) content(fresh bool) ([]byte, error) {
	var a harness.Agent
	switch {
	case ff.f.light:
		if err := ff.d.alive(); err != nil {
			return nil, err
		}
	case ff.walked != nil && !fresh:
		a = *ff.walked
	default:
		var err error
		if a, err = ff.d.resolve(); err != nil {
			return nil, err
		}
	}
	v, ok := ff.f.value(ff.d, a)
	if !ok {
		return nil, errs.E("active.Open", errs.NotExist, ff.d.treePath()+"/"+ff.f.name, nil)
	}
	if v == "" {
		return nil, nil
	}
	return []byte(v + "\n"), nil
}

func (ff *factFile) Attr() (Attr, error) {
	b, err := ff.content(false)
	if err != nil {
		return Attr{}, err
	}
	t := ff.d.started()
	return Attr{Mode: 0o444, Size: int64(len(b)), Nlink: 1, Atime: t, Mtime: t, Ctime: t,
		Path: SynthPath(ff.d.treePath() + "/" + ff.f.name + "@" + strconv.FormatUint(ff.d.p.Start, 10))}, nil
}

func (ff *factFile) Open() (Handle, error) {
	if ff.f.read != nil {
		a, err := ff.d.resolve()
		if err != nil {
			return nil, err
		}
		if _, ok := ff.f.value(ff.d, a); !ok {
			return nil, errs.E("active.Open", errs.NotExist, ff.d.treePath()+"/"+ff.f.name, nil)
		}
		return &readLater{get: func() []byte {
			if v := ff.f.read(ff.d, a); v != "" {
				return []byte(v + "\n")
			}
			return nil
		}}, nil
	}
	b, err := ff.content(true)
	if err != nil {
		return nil, err
	}
	return snapshot{bytesReader(b)}, nil
}

// readLater is a handle whose content is derived at its first read and
// held after, so one reader never sees a value torn across its reads.
type readLater struct {
	once   sync.Once
	get    func() []byte
	getErr func() ([]byte, error) // instead of get, for a derivation that can be refused
	b      []byte
	err    error
}

func (h *readLater) ReadAt(p []byte, off int64) (int, error) {
	h.once.Do(func() {
		if h.getErr != nil {
			h.b, h.err = h.getErr()
			return
		}
		h.b = h.get()
	})
	if h.err != nil {
		return 0, h.err
	}
	return bytesReader(h.b).ReadAt(p, off)
}

func (h *readLater) Close() error { return nil }

// hostFile is zmx or tmux when moves are allowed: reading gives the
// session the agent lives in; writing a name moves it into a new one.
type hostFile struct{ factFile }

var _ Writable = (*hostFile)(nil)

func (h *hostFile) Attr() (Attr, error) {
	a, err := h.factFile.Attr()
	a.Mode = 0o644
	return a, err
}

// Write implements Writable.
func (h *hostFile) Write(ctx context.Context, w Writer, data []byte) error {
	if err := h.d.a.cfg.Mover.Move(ctx, w, h.d.h, h.d.p, h.f.name, data); err != nil {
		return err
	}
	h.d.a.events.moved(h.d.h, h.d.p, h.f.name+" "+string(data))
	return nil
}

// hasMessages reports whether the agent has a messages file in this view:
// where its harness can render a conversation (harness.HasMessages); for
// a grantee, only one rendered from a transcript the grantee may read
// itself (the transcript file is served to it), so the file never shows
// it a byte it could not read: a conversation kept in a database that is
// never served (opencode.db, kilo.db) is the owner's alone.
func (d *agentDir) hasMessages(a harness.Agent) bool {
	if !harness.HasMessages(a) {
		return false
	}
	if !d.a.cfg.grantee {
		return true
	}
	if s, ok := harness.SpecOf(d.h); !ok || s.Messages != nil {
		return false
	}
	_, err := d.transcript(a.Transcript)
	return err == nil
}

// messagesFile is /active/<harness>/<pid>/messages: the last messages of
// the agent's conversation as its harness renders them
// (harness.Messages), derived at the first read of an open handle and
// held by it. Its stat shows size 0, as tmux's and /proc's generated
// files do: a listing or a stat never reads a transcript or a database
// for it.
type messagesFile struct{ d *agentDir }

func (m *messagesFile) path() uint64 {
	return SynthPath(m.d.treePath() + "/messages@" + strconv.FormatUint(m.d.p.Start, 10))
}

func (m *messagesFile) Attr() (Attr, error) {
	if err := m.d.alive(); err != nil {
		return Attr{}, err
	}
	t := m.d.started()
	return Attr{Mode: 0o444, Nlink: 1, Atime: t, Mtime: t, Ctime: t, Path: m.path()}, nil
}

func (m *messagesFile) Open() (Handle, error) {
	a, err := m.d.resolve()
	if err != nil {
		return nil, err
	}
	if !m.d.hasMessages(a) {
		return nil, errs.E("active.Open", errs.NotExist, m.d.treePath()+"/messages", nil)
	}
	env := m.d.a.cfg.Envs[m.d.h]
	return &readLater{getErr: func() ([]byte, error) {
		lines, err := harness.Messages(env, a, harness.MessagesMax, m.d.a.cfg.grantee)
		if err != nil {
			return nil, err
		}
		var b []byte
		for _, l := range lines {
			b = append(append(b, l...), '\n')
		}
		return b, nil
	}}, nil
}

// subAgents is /active/<harness>/<pid>/agents: one directory per sub-agent
// with its model and transcript.
type subAgents struct{ d *agentDir }

func (s *subAgents) Attr() (Attr, error) {
	if err := s.d.alive(); err != nil {
		return Attr{}, err
	}
	t := s.d.started()
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t,
		Path: SynthPath(s.d.treePath() + "/agents@" + strconv.FormatUint(s.d.p.Start, 10))}, nil
}

func (s *subAgents) subs() ([]harness.Sub, error) {
	a, err := s.d.resolve()
	if err != nil {
		return nil, err
	}
	return a.Agents, nil
}

func (s *subAgents) Lookup(name string) (Node, error) {
	subs, err := s.subs()
	if err != nil {
		return nil, err
	}
	for _, sub := range subs {
		if sub.Name == name && saferoot.ValidName(name) == nil {
			return &subAgent{d: s.d, name: name}, nil
		}
	}
	return nil, errs.E("active.Lookup", errs.NotExist, s.d.treePath()+"/agents/"+name, nil)
}

func (s *subAgents) List() ([]Entry, error) {
	subs, err := s.subs()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, sub := range subs {
		if saferoot.ValidName(sub.Name) != nil {
			continue
		}
		out = append(out, Entry{Name: sub.Name, Dir: true, Path: SynthPath(s.d.treePath() + "/agents/" + sub.Name + "@" + strconv.FormatUint(s.d.p.Start, 10))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type subAgent struct {
	d    *agentDir
	name string
}

func (s *subAgent) sub() (harness.Sub, error) {
	a, err := s.d.resolve()
	if err != nil {
		return harness.Sub{}, err
	}
	for _, sub := range a.Agents {
		if sub.Name == s.name {
			return sub, nil
		}
	}
	return harness.Sub{}, errs.E("active", errs.NotExist, s.d.treePath()+"/agents/"+s.name, nil)
}

func (s *subAgent) path() string {
	return s.d.treePath() + "/agents/" + s.name + "@" + strconv.FormatUint(s.d.p.Start, 10)
}

func (s *subAgent) Attr() (Attr, error) {
	if _, err := s.sub(); err != nil {
		return Attr{}, err
	}
	t := s.d.started()
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath(s.path())}, nil
}

func (s *subAgent) Lookup(name string) (Node, error) {
	sub, err := s.sub()
	if err != nil {
		return nil, err
	}
	switch name {
	case "model":
		if sub.Model != "" {
			return NewGen(s.path()+"/model", s.d.started, func() []byte {
				sub, err := s.sub()
				if err != nil || sub.Model == "" {
					return nil
				}
				return []byte(sub.Model + "\n")
			}), nil
		}
	case "transcript":
		if n, err := s.d.transcript(sub.Transcript); err == nil {
			return n, nil
		}
	}
	return nil, errs.E("active.Lookup", errs.NotExist, s.path()+"/"+name, nil)
}

func (s *subAgent) List() ([]Entry, error) {
	sub, err := s.sub()
	if err != nil {
		return nil, err
	}
	var out []Entry
	if sub.Model != "" {
		out = append(out, Entry{Name: "model", Path: SynthPath(s.path() + "/model")})
	}
	if n, err := s.d.transcript(sub.Transcript); err == nil {
		if at, err := n.Attr(); err == nil {
			out = append(out, Entry{Name: "transcript", Path: at.Path})
		}
	}
	return out, nil
}
