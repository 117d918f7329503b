package harness

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// Spec is everything 9harness knows of one harness that is data: where its
// state lives and what of it the tree serves, what is secret in it, how
// its processes look, what a move of its agents keeps and drops, and what
// the docs say of it. What is code (Classify, Resolve, Resume, and, where
// the harness has them, Promote) stays methods of the Harness registered
// with the Spec. A harness is one file: its type, its Spec, and a
// variable whose initializer registers both (register). Every other
// package derives its lists from Specs and knows no harness by name.
type Spec struct {
	// Name is the harness's one name: its directory in the tree
	// (/NAME/), its directory under /active, its --root NAME, the
	// program its resume argv runs.
	Name string
	// Order is its place in All: the order of the tree's directories and
	// of classification (the first harness whose Classify claims a
	// process wins). Distinct per harness.
	Order int

	// ---- roots and mirrors ----

	// Root is its default root under home, given $XDG_DATA_HOME as the
	// harness reads it; nil means home/.NAME.
	Root func(home, xdgDataHome string) string
	// Mirrors are what /NAME/ serves of the root, the same for the owner
	// and a grantee; each is a path beneath /NAME/ ("projects",
	// "storage/session": the static directories between are made) and
	// the root's path it mirrors. A Mirror with At "" is /NAME/ itself,
	// the root's directory Rel served whole to the owner and, to a
	// grantee, through Grantee.
	Mirrors []Mirror
	// Grantee, for a harness whose mirror is whole (At ""), is what a
	// peer that is not the owner sees beneath it: paths relative to the
	// mirrored directory, each a child served whole or a deeper path.
	// Everything else there does not exist for that peer.
	Grantee []string
	// Skills is the root's skills directory served as /skills/NAME/; ""
	// for none.
	Skills string
	// SlugDirs are the root's directories whose entries the harness names
	// after a working directory (judged by the credential table's store
	// rules alone: saferoot.SetSlugDirs).
	SlugDirs []string
	// CopyStores are the root's paths ("*" any one name) where the harness
	// keeps copies of the projects' files: hidden from every view as a
	// credential is (saferoot.SetCopyStores).
	CopyStores []string

	// ---- credentials ----

	// Credentials are the names of the harness's own credential stores
	// and config files that may hold keys: joined into the one
	// credential table as store rules (hidden at every depth of every
	// root, and at a slug position too). The pattern syntax is the
	// table's (saferoot).
	Credentials []Credential
	// Stores are files at the top of the root that the credential table
	// hides from every view yet the harness itself reads to derive its
	// sessions' facts (opencode.db holds both): only the harness's own
	// reads, through saferoot.Root.Store, open them.
	Stores []string

	// ---- processes ----

	// Programs are argv[0] base names, other than NAME, that may be one
	// of its processes; ProgramPrefixes and PathParts widen that to base
	// names with a prefix and argv[0]s holding a path part. They are the
	// scan's cheap pre-filter (generous: Classify decides); node, bun
	// and python interpreters always pass it.
	Programs        []string
	ProgramPrefixes []string
	PathParts       []string
	// OwnExecutable says whether an executable path is this harness's
	// own binary beyond a base name equal to NAME (Claude's native
	// claude.exe, a file under claude/versions/): a move relaunches the
	// agent's own executable only when it is. nil: the base name alone.
	OwnExecutable func(exe string) bool
	// Env are the environment variables the harness reads of its
	// processes (its state directory's variable, its launcher's mark):
	// joined into the one list the proc helper answers (proc.Wanted).
	Env []string

	// ---- events ----

	// EventFiles are the files, relative to the root, beside the live
	// transcript, whose change may change the turn state of the agent
	// pid (Claude's registry record): /active/events watches them.
	EventFiles func(pid int) []string

	// ---- move ----

	// MoveDrop are the variables a moved agent of any harness does not
	// keep because this harness's launcher set them for its child
	// (Gemini CLI's mark of its relaunched child): the resumed agent
	// relaunches itself as a user's does. Beside them a move drops only
	// the session hosts' and systemd's variables; all else is kept.
	MoveDrop []string
	// Keep are the agent's own flags its resume argv keeps (an
	// allowlist, rule 7), and Flags the command line's flags that take a
	// value, so a dropped flag's value is skipped with it. A harness
	// with no Keep keeps no flag. FlagsBeforeID puts the kept flags
	// between the subcommand and the session id of a three-word resume
	// argv (codex resume [OPTIONS] ID) rather than after it.
	Keep          []keep
	Flags         flags
	FlagsBeforeID bool

	// ---- tokens ----

	// Summed says the session's token sums need the whole transcript
	// read (Count, with Counter's line parser); otherwise Resolve's
	// tokens are all there is. Summable, if not nil, says which of its
	// transcripts Counter can read (the others keep Resolve's tokens).
	Summed   bool
	Counter  func() counter
	Summable func(transcript string) bool

	// Messages, if not nil, renders the last n messages of a's
	// conversation for a harness that keeps it elsewhere than a JSON-lines
	// transcript (a database): one "ROLE: text" line each, oldest first,
	// a tool call as "[tool NAME]"; Messages (messages.go) bounds and
	// quotes them. An error is a read refused (the byte budget). Nil: the generic rendering of a's JSON-lines
	// transcript's tail.
	Messages func(env Env, a Agent, n int) ([]string, error)

	// Stale, if not nil, lists the records the harness keeps for agents
	// that no longer run (a registry naming a dead pid, a job whose
	// worker is gone), derived afresh from its files and the process
	// table: /stale/NAME/.
	Stale func(env Env) []Stale

	// ---- docs ----

	// Doc is what the README's harness table and the help texts say of it.
	Doc Doc
	// Verified is the CLI version whose formats and process shapes the
	// real-CLI tier (test/realcli) pins and checks; "" when that tier
	// cannot install the harness.
	Verified string
}

// Mirror is one path the tree serves of a harness root: At beneath
// /NAME/ ("" is /NAME/ itself), Rel in the root, File for a regular file
// (a directory otherwise).
type Mirror struct {
	At, Rel string
	File    bool
}

// Credential is one store rule of the credential table: a pattern (a name,
// at most two '*') and where the secret comes from.
type Credential struct{ Pattern, From string }

// Doc is a harness's row of the README's harness table.
type Doc struct {
	Title   string // what its makers call it: "Claude Code"
	Root    string // its default root as the docs spell it: "~/.claude"
	Process string // which of its processes is the agent
	Via     string // the routes its sessions are found by
	Resume  string // its resume command, or why it has none
	RealCLI string // the real-CLI column: a version, or "fixtures only"
}

// Specs returns every harness's Spec, in All's order.
func Specs() []Spec {
	out := make([]Spec, len(specs))
	for i, s := range specs {
		out[i] = *s
	}
	return out
}

// SpecOf returns the Spec of the harness called name, and whether there is one.
func SpecOf(name string) (Spec, bool) {
	if i := indexOf(name); i >= 0 {
		return *specs[i], true
	}
	return Spec{}, false
}

// indexOf is the index in all and specs of the harness called name, or -1.
func indexOf(name string) int {
	return slices.IndexFunc(specs, func(s *Spec) bool { return s.Name == name })
}

// register adds h, described by s, to the list of harnesses, in s's
// Order. Each harness's file calls it from a package variable's
// initializer, var _ = register(h{}, &hSpec), so a harness is added by
// adding its file; every list derived from the specs is derived after the
// package is initialized (by the importers of this package, or lazily
// here). A variable rather than an init function because Go puts every
// package variable's initializer in the package's one init, beside the
// others, and a file's own init beside that file's code: the daemon
// would map a window of every harness's code at start to run ten calls.
func register(h Harness, s *Spec) bool {
	if s.Name == "" || s.Name != filepath.Base(s.Name) || strings.ContainsAny(s.Name, "/ .") {
		panic(fmt.Sprintf("harness: bad spec name %q", s.Name))
	}
	for _, o := range specs {
		if o.Name == s.Name || o.Order == s.Order {
			panic(fmt.Sprintf("harness: %s and %s share a name or an order", o.Name, s.Name))
		}
	}
	i, _ := slices.BinarySearchFunc(specs, s.Order, func(o *Spec, n int) int { return o.Order - n })
	all = slices.Insert(all, i, h)
	specs = slices.Insert(specs, i, s)
	harnessNames[s.Name] = true
	for _, p := range s.Programs {
		programs[p] = true
	}
	programPrefixes = append(programPrefixes, s.ProgramPrefixes...)
	pathParts = append(pathParts, s.PathParts...)
	if len(s.Keep) > 0 {
		keeps[s.Name] = s.Keep
	}
	if s.Flags.value != nil || s.Flags.optional != nil {
		valueFlags[s.Name] = s.Flags
	}
	registerShared(*s)
	return true
}

// registerShared hands the packages below this one (which know no
// harness) what s declares for them: its credential stores to the one
// credential table, its stores to the Store view, its variables to the
// list the proc helper answers.
func registerShared(s Spec) {
	rules := make([]saferoot.Rule, len(s.Credentials))
	for i, c := range s.Credentials {
		rules[i] = saferoot.Rule{Pattern: c.Pattern, From: c.From}
	}
	saferoot.AddStoreRules(rules...)
	saferoot.AddStores(s.Stores...)
	proc.AddWanted(s.Env...)
}

// StaleRecords lists the records harness name keeps for agents that no
// longer run, derived afresh from its files and the process table; nil for
// a harness that keeps none.
func StaleRecords(name string, env Env) []Stale {
	if sp, ok := SpecOf(name); ok && sp.Stale != nil {
		return sp.Stale(env)
	}
	return nil
}
