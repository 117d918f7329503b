// Package harness holds everything 9harness knows about the agent harnesses
// it lists under /active: how each one's processes look (which are
// interactive sessions, which are its daemons and helpers), how a live
// process resolves to its session (the route is named in Agent.Via), what the
// session's title, model and status are, and the fixed argv that resumes it.
//
// One file per harness (claude.go, codex.go, omp.go, ..., one more for
// each harness added; Claude's background sessions in claude_bg.go): its
// type, whose methods are the code
// (Classify, Resolve, Resume), its Spec (spec.go), which is everything
// else as data, its turn state and token counting, and the init that
// registers it. Every other package derives from the list of Specs. The
// formats they read are the ones the harnesses really write (samples in
// testdata/home, checked against the real CLIs by test/realcli), because
// a format guessed from documentation is wrong on the first update.
//
// Two rules hold throughout. Every harness file is read through the
// harness's saferoot.Root with a relative path, never by os.Open on a
// composed path, so no symlink and no credential-shaped name is ever
// followed. And every read is bounded: a transcript is read as a head and a
// tail window (about a megabyte at most), never whole, so a huge or growing
// file costs the same as a small one.
//
// Nothing is cached. Resolve derives every fact afresh from disk and the
// process table each time it is called; what it cannot establish stays
// empty, and Via says how the rest was found. (The shared caches an Env
// may carry, DBs and Counts, are re-validated against the file on every
// use.) Resolve also derives the agent's turn state (state.go) from the
// transcript's tail; the token sums that need a transcript read whole are
// left to Count (tokens.go), which a reader of the tokens file pays for.
package harness

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/dbsnap"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// Kind says what a process is to a harness.
type Kind int

const (
	None    Kind = iota // not this harness's
	Session             // an interactive agent: listed under /active
	Helper              // a daemon/helper/worker of this harness: never listed
)

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case Session:
		return "session"
	case Helper:
		return "helper"
	}
	return "kind(?)"
}

// Env is what a harness resolves against.
type Env struct {
	Procs     *proc.Table
	Root      *saferoot.Root // this harness's root (~/.claude etc.); may be nil, or absent on disk
	Home      string         // the user's home directory (omp's home-relative dir names)
	TmpDir    string         // os.TempDir() normally (omp's -tmp- scheme)
	PIDDomain string         // "linux::pid:[<inode>]" of the daemon's pid namespace, "" if unknown (Claude's pidDomain guard)
	// Relaunches, if not nil, is the daemon's record of the processes it
	// started itself to resume a session (the move). It is shared by every
	// copy of the Env (a pointer), and the mover fills it.
	Relaunches *Relaunches
	// DBs, if not nil, keeps the snapshots of the harnesses' SQLite
	// databases (Codex's state_5.sqlite, opencode.db) while the files are
	// unchanged, so a listing reads each once; shared like Relaunches.
	DBs *dbsnap.Cache
	// Counts, if not nil, keeps the tokens Count read from each transcript
	// while the file is unchanged; shared like Relaunches.
	Counts *Counts
	// Memo, if not nil, shares what one listing of many agents reads of
	// the directories they share (see Memo); nil for a single agent.
	Memo *Memo
	// Budget, if not nil, is charged the bytes a resolve decodes (zstd
	// logs) while it holds them: the daemon's pool.
	Budget *budget.Pool
	// Defer, if not nil, bounds what the resolves of one read of many
	// agents (the table) read for the facts that need a transcript's
	// windows (title, model) of a file never derived from before (a new
	// agent, or every agent at a daemon's first read): past it they are
	// left pending (Agent.Pending). Nil derives everything.
	Defer *Defer

	zw *zwork // what this resolve may still decode; set by Resolve
	// yield, if not nil, is called between pieces of a long derivation
	// (every countYieldBytes of a whole-file count): the Later
	// worker's Env waits there while reads are in progress.
	yield func()
}

// Relaunches records, for each process 9harness itself started to resume
// a session, the transcript it named in that process's argv: pid and start
// time → transcript (relative to the harness root), or the session id for
// a harness that keeps no transcript file (opencode). It is the route for a
// harness whose resumed process shows nothing of its session (pi hides its
// argv, holds no fd and writes nothing until its next answer): the daemon
// named the file, so the record is the corroboration, not a guess.
//
// It is safe for concurrent use, bounded (the oldest entries go first),
// and a nil *Relaunches records nothing and finds nothing. An entry of a
// process that has exited is harmless: pid and start time together never
// name another process.
type Relaunches struct {
	mu    sync.Mutex
	m     map[relaunchKey]string
	order []relaunchKey
}

type relaunchKey struct {
	pid   int
	start uint64
}

// maxRelaunches bounds the record: far more than the moves a daemon makes
// while their agents live.
const maxRelaunches = 1024

// Note records that the process pid (started at start, the stat starttime)
// was started by 9harness to resume the session in transcript (relative to
// the harness root).
func (r *Relaunches) Note(pid int, start uint64, transcript string) {
	if r == nil || pid <= 0 || transcript == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[relaunchKey]string{}
	}
	k := relaunchKey{pid, start}
	if _, ok := r.m[k]; !ok {
		r.order = append(r.order, k)
	}
	r.m[k] = transcript
	for len(r.order) > maxRelaunches {
		delete(r.m, r.order[0])
		r.order = r.order[1:]
	}
}

// Lookup returns the transcript recorded for the process (pid, start).
func (r *Relaunches) Lookup(pid int, start uint64) (string, bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.m[relaunchKey{pid, start}]
	return t, ok
}

// Found is a process claimed as a session by a harness during a scan.
type Found struct {
	Harness string
	Proc    proc.Proc
}

// Agent is everything known about one live agent. Empty strings mean
// "absent" (the tree omits the file), never "empty value".
type Agent struct {
	Harness   string
	PID, PPID int
	Start     uint64
	Cwd       string
	Session   string // session id; "" when unresolved
	// Via names the route that resolved the session, as its first word
	// (Route), followed by a parenthesised note when routes disagree or a
	// guard refused one, e.g.
	// "transcript (registry session X is stale after /clear)". The words
	// are listed at Route.
	Via        string
	Transcript string // path relative to the harness root of the live transcript; "" if none
	// Name is the harness's own name for the session (Claude's registry
	// "name"). It is not a stable handle: Claude 2.1 derives a default
	// name from the cwd and a random byte, new on every start (so a moved
	// agent's name changes unless /rename set it).
	Name   string
	Title  string
	Model  string
	Status string // only where the harness itself publishes one (Claude's registry "status")
	// State is the turn state derived from what the harness writes (see
	// state.go): StateWorking, StateWaiting or StateIdle, "" when it
	// cannot be known. Waiting is what a waiting agent waits for, where
	// the harness says ("approve Bash"); Since is when it entered the
	// state (zero when unknown); StateVia names the route in Via's style,
	// and says why when State is "".
	State    string
	Waiting  string
	Since    time.Time
	StateVia string
	// Tokens is the session's token usage, each count nil where the
	// harness does not say (tokens.go).
	Tokens Tokens
	// Limits are the subscription windows the harness records (Codex's
	// rate_limits; limits.go), nil where it records none.
	Limits Limits
	// Attach is the command that reaches a session its harness hosts
	// itself (a Claude background session: "claude attach <id>"), ""
	// for every other; such a session is never moved.
	Attach string
	// Pending names the facts a resolve with a Defer left underived
	// (their fields are empty): "title" and "model" when their windows
	// did not fit the read's budget. A resolve without a Defer leaves none.
	Pending []string
	Zmx     string // the process's ZMX_SESSION, "" outside zmx
	// EnvKnown says the process's environment could be read: without it
	// Zmx and TmuxSocket are unknown, not "outside a session".
	EnvKnown   bool
	Tmux       string // always "": the session name is not in the environment; the caller asks tmux
	TmuxSocket string // first comma-field of $TMUX, "" outside tmux
	Agents     []Sub  // sub-agents, sorted by Name
	// Argv is the process's command line as the scan read it (process
	// titles undone). Only ResumeArgv reads it, for the flags a resume
	// keeps: it is never served and never journaled, because an agent's
	// flags can hold keys.
	Argv []string
}

// The routes Via can name, as its first word.
const (
	RouteRegistry   = "registry"   // the harness's live per-pid record (Claude, hermes), vetted by start time
	RouteFD         = "fd"         // the transcript the process holds open
	RouteDir        = "dir"        // the cwd's session dir, guarded: the transcript names the cwd and was written since the process started
	RouteRelaunch   = "relaunch"   // the transcript 9harness itself named when it started this process (Env.Relaunches)
	RouteTranscript = "transcript" // Claude's registry record followed to the newer transcript /clear began
	RouteArgv       = "argv"       // the session named in the process's own argv, and nothing else
	RouteOnly       = "only"       // the single transcript for the cwd, unguarded (a quiet pi)
	RouteAmbiguous  = "ambiguous"  // several transcripts could be this process's: none is chosen
	RouteNone       = "none"       // unresolved; the note says why
)

// Route is the first word of Via: which route resolved the session.
func (a Agent) Route() string {
	r, _, _ := strings.Cut(a.Via, " ")
	if r == "" {
		return RouteNone
	}
	return r
}

// Corroborated reports whether the session was found by a route that is
// more than the process's own argv or a lone file that nothing ties to the
// process: the live registry (vetted by start time), a held fd, the
// guarded dir route, the daemon's own relaunch record, or Claude's
// registry followed past /clear. A move's outcome is believed only on such
// a route, because a relaunched process's argv names the session before
// the harness has even checked that it can resume it.
func (a Agent) Corroborated() bool {
	if a.Session == "" {
		return false
	}
	switch a.Route() {
	case RouteRegistry, RouteFD, RouteDir, RouteRelaunch, RouteTranscript:
		return true
	}
	return false
}

// Sub is one sub-agent of a session. Name is unique within its session and
// is a valid single path component; Transcript is relative to the harness
// root.
type Sub struct{ Name, Model, Transcript string }

// Harness is one harness's knowledge.
type Harness interface {
	Name() string
	// Classify looks only at argv/comm (and the parent's, for wrappers) and says what p is.
	Classify(p, parent proc.Proc) Kind
	// Resolve derives the agent's facts fresh from disk and /proc. It never errors: what it cannot know stays empty.
	Resolve(env Env, p proc.Proc) Agent
	// Resume returns the fixed argv that resumes a's session (argv[0] is the program name to look up on PATH, e.g. "claude"), or an error saying why this harness/session cannot be resumed.
	Resume(a Agent, env Env) ([]string, error)
}

// all is the one list of harnesses, in their Specs' Order, and specs
// their Specs (everything else 9harness knows of them, spec.go), index by
// index: every other list (the tree's directories, the daemon's --root
// names, Scan's pre-filter, the credential table's stores) derives from
// them. Each harness's file adds itself (register).
var (
	all   []Harness
	specs []*Spec
)

// All returns the harnesses in the order they are listed.
func All() []Harness { return slices.Clone(all) }

// Names returns the harnesses' names in the order they are listed.
func Names() []string {
	n := make([]string, len(specs))
	for i, s := range specs {
		n[i] = s.Name
	}
	return n
}

// DefaultRoot is where the harness called name keeps its state under home
// when nothing says otherwise: its Spec's Root, given xdgDataHome
// ($XDG_DATA_HOME, as the harnesses read it), else $HOME/.NAME.
func DefaultRoot(name, home, xdgDataHome string) string {
	if s, ok := SpecOf(name); ok && s.Root != nil {
		return s.Root(home, xdgDataHome)
	}
	return home + "/." + name
}

// ByName returns the harness called name, or nil.
func ByName(name string) Harness {
	if i := indexOf(name); i >= 0 {
		return all[i]
	}
	return nil
}

// Scan walks the table once: it reads argv for every process (nothing else
// for non-matches), reads stat and status only for the candidates, skips
// any pid in exclude (the daemon's own ancestry), and returns the sessions,
// each claimed by exactly one harness, in pid order. Helpers/daemons/workers
// are never returned. A process whose argv is empty (kernel thread, zombie)
// never matches. Only processes of uid `uid` are considered.
//
// The first harness (in All's order) whose Classify says Session or Helper
// claims the process; the others are not asked. The parent handed to
// Classify carries only PID and Argv: that is all the wrapper rules need,
// and it keeps a scan at one cmdline read per process.
//
// Every cmdline is read into one reused buffer with one read (the table
// keeps each process's file open between scans: proc's held files),
// except for a process whose /proc directory another user owns (proc's
// Owner: one stat, when uid is not root); a candidate's argv is the one
// the scan read (not read again), its identity comes from one read of
// stat, and a session's uid from one read of status. A pid reused between
// the two reads is caught by every later use: the agent is named by pid
// and start time, and the start time is the stat's.
//
// The reads are split over up to GOMAXPROCS goroutines, each with its own
// buffer and its own contiguous run of pids: /proc reads are independent
// syscalls, and on a machine with thousands of processes the scan is what
// a listing of /active costs. Results are merged in pid order, so the
// output does not depend on the split.
func Scan(t *proc.Table, uid uint32, exclude map[int]bool) ([]Found, error) {
	pids, err := t.PIDs()
	if err != nil {
		return nil, err
	}
	slices.Sort(pids)
	argvs := make([][]string, len(pids))
	// One buffer per goroutine of the split, not per run.
	bufs := sync.Pool{New: func() any { return new([8192]byte) }}
	proc.Split(len(pids), func(lo, hi int) {
		arr := bufs.Get().(*[8192]byte)
		defer bufs.Put(arr)
		buf := arr[:0]
		for i := lo; i < hi; i++ {
			// Another user's process costs one stat, not a read of its
			// cmdline: on a machine shared by many users each daemon
			// reads only its own user's cmdlines and root's.
			if uid != 0 {
				if o, ok, err := t.Owner(pids[i]); err != nil || ok && o != uid && o != 0 {
					continue
				}
			}
			b, err := t.ReadCmdline(pids[i], buf)
			if err != nil {
				continue
			}
			if argv := proc.SplitCmdline(b); len(argv) > 0 {
				argvs[i] = argv
			}
			buf = b[:0] // keep a grown buffer for the run
		}
	})
	argvOf := func(pid int) []string {
		if i, ok := slices.BinarySearch(pids, pid); ok {
			return argvs[i]
		}
		return nil
	}
	found := make([]Found, len(pids)) // Harness "": not an agent
	proc.Split(len(pids), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			pid, argv := pids[i], argvs[i]
			if exclude[pid] || len(argv) == 0 || !mayBeHarness(argv) {
				continue
			}
			// Classify on argv and stat alone; the uid (status) is read
			// only for a session, so a machine's many node and python
			// processes cost one read of stat each.
			p, err := t.IdentStat(pid)
			if err != nil {
				continue
			}
			p.Argv = argv
			parent := proc.Proc{PID: p.PPID, Argv: argvOf(p.PPID)}
			h, k := classify(p, parent)
			pr, promotes := h.(promoter)
			if k != Session && (k != Helper || !promotes) {
				continue
			}
			if p.UID, err = t.UID(pid); err != nil || p.UID != uid {
				continue
			}
			// A launcher-shaped process whose environment says it is
			// the agent (one environ read, for that harness only).
			if k == Helper && !pr.Promote(p, func(n string) (string, bool) { return t.Getenv(pid, n) }) {
				continue
			}
			found[i] = Found{Harness: h.Name(), Proc: p}
		}
	})
	out := found[:0] // in place: each agent moves down, never up
	for i, f := range found {
		if f.Harness != "" && !forkOfAgent(pids, argvs, found, i) {
			out = append(out, f)
		}
	}
	clear(found[len(out):])
	return out, nil
}

// forkOfAgent says whether found[i] is a fork of an agent that has not
// exec'd yet: a process of the same harness whose parent is an agent with
// the very same command line. Every program an agent runs (a shell for a
// tool, git) is such a fork for a moment, and where a harness tells its
// agent by its parent (Qwen Code's and Gemini CLI's relaunched CLI, whose
// parent is the relauncher, never listed) the fork passes for an agent.
// No agent starts another with its own command line and stays its
// parent's child: a relaunch's parent is a launcher, not an agent.
func forkOfAgent(pids []int, argvs [][]string, found []Found, i int) bool {
	j, ok := slices.BinarySearch(pids, found[i].Proc.PPID)
	return ok && found[j].Harness == found[i].Harness && slices.Equal(argvs[j], argvs[i])
}

// promoter is a harness whose launcher and agent can share one command
// line (Gemini CLI relaunches itself with its own argv): Classify calls
// such a process a Helper, and Promote, given the process's environment
// (only the variables proc.Wanted names), says it is the agent after all.
type promoter interface {
	Promote(p proc.Proc, getenv func(string) (string, bool)) bool
}

// classify asks the harnesses in order; the first that says Session or
// Helper claims p. It returns nil, None when none does.
func classify(p, parent proc.Proc) (Harness, Kind) {
	for _, h := range all {
		if k := h.Classify(p, parent); k != None {
			return h, k
		}
	}
	return nil, None
}

// mayBeHarness is Scan's cheap pre-filter on argv alone: generous, so that
// Classify (which may also look at comm) decides.
func mayBeHarness(argv []string) bool {
	argv = normArgv(argv)
	b := base(argv[0])
	if harnessNames[b] || b == "bun" || isNode(b) || isPython(b) {
		return true
	}
	if programs[b] {
		return true
	}
	for _, p := range programPrefixes {
		if strings.HasPrefix(b, p) {
			return true
		}
	}
	for _, p := range pathParts {
		if strings.Contains(argv[0], p) {
			return true
		}
	}
	return false
}

// The pre-filter's words beyond the harnesses' names, from their Specs
// (register fills them).
var (
	programs        = map[string]bool{}
	programPrefixes []string
	pathParts       []string
)

// ---- argv helpers ----

// base is the last path element of an argv word.
func base(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// harnessNames is Names as a set, for normArgv (register fills it).
var harnessNames = map[string]bool{}

// normArgv undoes a process title that was written as one space-separated
// string over the argv area (process.title on some runtimes): when the whole
// cmdline is one word and its first field names a harness, it is split on
// spaces.
//
// A title written over argv[0] alone ("claude bg-spare", Claude's
// background workers, the rest of argv kept) is split the same way.
func normArgv(argv []string) []string {
	if len(argv) >= 1 && strings.ContainsRune(strings.TrimSpace(argv[0]), ' ') {
		f := strings.Fields(argv[0])
		if harnessNames[base(f[0])] {
			return append(f, argv[1:]...)
		}
	}
	return argv
}

// program is p's command line as the harnesses read it (normArgv) and
// the base name of its program, argv[0]; argv is nil when p has none.
func program(p proc.Proc) (argv []string, b string) {
	if len(p.Argv) == 0 {
		return nil, ""
	}
	argv = normArgv(p.Argv)
	return argv, base(argv[0])
}

func isNode(b string) bool { return b == "node" || b == "nodejs" || strings.HasPrefix(b, "node-") }

func isPython(b string) bool { return strings.HasPrefix(b, "python") }

// interpScript finds the script a node or bun process runs: the first
// argument that is not one of the interpreter's own options. It returns the
// script and the script's arguments.
func interpScript(args []string) (string, []string) {
	valued := map[string]bool{"-r": true, "--require": true, "--import": true, "--loader": true,
		"--experimental-loader": true, "--env-file": true, "--conditions": true, "-C": true, "--preload": true, "--cwd": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "run" || a == "x" || a == "--":
			// bun run <script>, bun x <bin>
			continue
		case a == "-e" || a == "--eval" || a == "-p" || a == "--print":
			return "", nil // inline code, no script
		case valued[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a, args[i+1:]
		}
	}
	return "", nil
}

// flags describes a command line's options: which take a value, and which
// take an optional one (consumed only when the next word is not a flag).
type flags struct {
	value, optional map[string]bool
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// positional returns the first argument that is neither an option nor an
// option's value: a subcommand or a prompt. Anything after "--" is a prompt,
// never a subcommand, so it returns "" there.
func (f flags) positional(args []string) string {
	if i := f.positionalAt(args); i >= 0 {
		return args[i]
	}
	return ""
}

// positionalAt is the index of positional's argument in args, or -1.
func (f flags) positionalAt(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return -1
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if strings.Contains(a, "=") {
				continue
			}
			if f.value[a] {
				i++
			} else if f.optional[a] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		default:
			return i
		}
	}
	return -1
}

// hasFlag reports whether args hold one of names, alone or as name=value.
func hasFlag(args []string, names ...string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, n := range names {
			if a == n || strings.HasPrefix(a, n+"=") {
				return true
			}
		}
	}
	return false
}

// flagValue returns the value of the first of names in args.
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			return "", false
		}
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// ---- agent helpers ----

// procInfo is what every harness reads of a process before it looks at disk.
type procInfo struct {
	env envVars // the few variables harnesses care about
}

// envVars are the variables of wantEnv a process has, each at its name's
// index there ("" when it has none): a table read fills one per agent.
type envVars [len(wantEnv)]string

var wantEnv = [...]string{"ZMX_SESSION", "TMUX", "HOME", "TMPDIR", "TMP", "TEMP"}

// get is the variable name (one of wantEnv), or "".
func (e *envVars) get(name string) string {
	for i, n := range wantEnv {
		if n == name {
			return e[i]
		}
	}
	return ""
}

// start fills what /proc alone says of p: identity, cwd, and the session
// hosts from its environment. Via starts as "none".
func start(name string, env Env, p proc.Proc) (Agent, procInfo) {
	a := Agent{Harness: name, PID: p.PID, PPID: p.PPID, Start: p.Start, Via: "none", Argv: slices.Clone(normArgv(p.Argv))}
	var info procInfo
	if env.Procs == nil {
		return a, info
	}
	if len(p.Argv) == 0 {
		if argv, err := env.Procs.Argv(p.PID); err == nil && len(argv) > 0 {
			a.Argv = normArgv(argv) // a fresh slice: Argv allocated it
		}
	}
	if cwd, err := env.Procs.Cwd(p.PID); err == nil {
		a.Cwd = cwd
	}
	if vars, err := env.Procs.EnvironOf(p); err == nil {
		a.EnvKnown = true
		for _, kv := range vars {
			if k, v, ok := strings.Cut(kv, "="); ok {
				if i := slices.Index(wantEnv[:], k); i >= 0 {
					info.env[i] = v
				}
			}
		}
	}
	a.Zmx = info.env.get("ZMX_SESSION")
	if t := info.env.get("TMUX"); t != "" {
		a.TmuxSocket, _, _ = strings.Cut(t, ",")
	}
	return a, info
}

// started is the wall-clock start of p, when the table has a boot time.
func started(env Env, p proc.Proc) (time.Time, bool) {
	if env.Procs == nil {
		return time.Time{}, false
	}
	boot, err := env.Procs.BootTime()
	if err != nil {
		return time.Time{}, false
	}
	return proc.Started(boot, p.Start), true
}

// cleanCwd is a /proc cwd as a path: a deleted directory's " (deleted)"
// suffix removed.
func cleanCwd(cwd string) string {
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	if cwd == "" {
		return ""
	}
	return filepath.Clean(cwd)
}

// sameDir reports whether a directory recorded by a harness is the process's
// cwd. /proc gives the canonical path; a harness may have recorded a
// spelling through a symlink, which is resolved before giving up.
func sameDir(recorded, cwd string) bool {
	if recorded == "" || cwd == "" {
		return false
	}
	recorded, cwd = filepath.Clean(recorded), cleanCwd(cwd)
	if recorded == cwd {
		return true
	}
	if !filepath.IsAbs(recorded) {
		return false
	}
	real, err := filepath.EvalSymlinks(recorded)
	return err == nil && real == cwd
}

// rootPrefixes are the spellings of the root's path that an fd link may
// start with: as configured, and with its symlinks resolved (the kernel
// reports the resolved path).
func rootPrefixes(r *saferoot.Root) []string {
	p := filepath.Clean(r.Path())
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	out := []string{p + "/"}
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		out = append(out, real+"/")
	}
	return out
}

// held returns the files pid holds open beneath the root's dir `under`
// (a rel prefix ending in "/"), as valid rel paths, without duplicates.
// A deleted file is not held for this purpose.
func held(env Env, pid int, under string) []string {
	if env.Procs == nil || env.Root == nil {
		return nil
	}
	targets, err := env.Procs.FDs(pid)
	if err != nil {
		return nil
	}
	prefixes := rootPrefixes(env.Root)
	var out []string
	for _, t := range targets {
		if strings.HasSuffix(t, " (deleted)") {
			continue
		}
		for _, pre := range prefixes {
			rel, ok := strings.CutPrefix(t, pre)
			if !ok || !strings.HasPrefix(rel, under) || checkRel(env, rel) != nil {
				continue
			}
			if !slices.Contains(out, rel) {
				out = append(out, rel)
			}
			break
		}
	}
	return out
}

// absPath is rel beneath the root as an absolute path (for resume argv that
// takes a file).
func absPath(r *saferoot.Root, rel string) string {
	p := r.Path()
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	return filepath.Join(p, rel)
}

// isUUID reports whether s is the 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// safeArg reports whether a session id read from disk can be one argv word
// of a resume command: printable, and not an option.
func safeArg(s string) bool {
	if s == "" || s[0] == '-' || len(s) > 512 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// componentName makes s a safe, readable single path component for a
// sub-agent name: runs of anything outside [A-Za-z0-9._-] become one '-'.
func componentName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if len(out) > 100 {
		out = out[:100]
	}
	return out
}

// uniqueSubs sorts subs by name and makes names unique by suffixing the
// distinguishing id where two collide.
func uniqueSubs(subs []Sub, ids []string) []Sub {
	seen := map[string]int{}
	for _, s := range subs {
		seen[s.Name]++
	}
	for i := range subs {
		if seen[subs[i].Name] > 1 || subs[i].Name == "" {
			subs[i].Name = strings.TrimPrefix(subs[i].Name+"-"+componentName(ids[i]), "-")
		}
	}
	slices.SortFunc(subs, func(a, b Sub) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(subs, func(a, b Sub) bool { return a.Name == b.Name })
}

// checkRel vets a path under the harness's root with that root's own rules,
// which know the directories named after working directories (an agent in
// ~/src/oauth-server keeps its transcript), or with the plain rules when
// the root is not known.
func checkRel(env Env, rel string) error {
	if env.Root != nil {
		return env.Root.CheckRel(rel)
	}
	return saferoot.CheckRel(rel)
}

// Verified names the version of each harness's CLI whose formats and
// process shapes the real-CLI tier (test/realcli) drives and checks, for
// the harnesses that tier can install; "" for the others. The tier pins
// exactly these, so help and docs that quote them cannot drift from it.
func Verified(name string) string {
	s, _ := SpecOf(name)
	return s.Verified
}
