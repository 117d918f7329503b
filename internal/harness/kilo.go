package harness

import (
	"path/filepath"
	"strings"

	"github.com/9harness/9harness/internal/proc"
)

// kilo is Kilo Code's CLI (npm @kilocode/cli; root $XDG_DATA_HOME/kilo, by
// default ~/.local/share/kilo), a descendant of opencode that kept its
// storage: one SQLite database, kilo.db (WAL), whose session and message
// tables are opencode's (same columns, same JSON in message.data), beside
// tables of its own (kilo_board, session_context_epoch, …). The account's
// tokens live in the same file (account, control_account, credential), so
// the credential table hides it and only derived facts are served, read
// with opencode's code (the oc* functions).
//
// Processes (measured, 7.7.7): the npm bin, node …/.bin/kilo (the
// package's bin/kilo script), is a wrapper that spawns the native
// Bun-compiled binary …/@kilocode/cli/bin/.kilo with the same arguments
// and waits: the wrapper is a Helper, the native child the session. A
// native binary started by its own name ("kilo") is the session too. The
// subcommands that are not an interactive agent (serve, acp, daemon,
// remote, cloud, …) are helpers; "kilo run" is an agent at work.
//
// pid → session: as for opencode, nothing ties a process to its session
// (its logs are shared and tag a run id, never a pid), so the same
// heuristic and the same refusal to guess apply. The title is the
// session row's: "New session - <ISO time>" until its title agent's
// answer replaces it, which it asks the small model for after the first
// turn.
type kilo struct{}

func (kilo) Name() string { return "kilo" }

var (
	kiloFlags = flags{
		value: set("--log-level", "--port", "--hostname", "--mdns-domain", "--cors", "-m", "--model",
			"-s", "--session", "--prompt", "--agent", "--worktree", "--replay-limit"),
	}
	// Subcommands that are not an interactive agent session.
	kiloHelperWords = set("completion", "acp", "mcp", "attach", "debug", "providers", "auth",
		"agent", "upgrade", "uninstall", "serve", "web", "models", "stats", "export", "import",
		"github", "pr", "session", "plugin", "plug", "db", "console", "cloud", "roll-call",
		"profile", "remote", "daemon", "config", "worktree", "help")
)

// kiloNative reports whether b, an argv[0] basename, is the native binary:
// the npm package's hidden .kilo, or a kilo started by that name.
func kiloNative(b string) bool { return b == ".kilo" || b == "kilo" || b == "kilocode" }

// kiloWrapper reports whether argv is the npm node wrapper of kilo.
func kiloWrapper(argv []string) bool {
	if len(argv) < 2 || !isNode(base(argv[0])) {
		return false
	}
	script, _ := interpScript(argv[1:])
	b := base(script)
	return (b == "kilo" || b == "kilocode") && strings.Contains(script, "kilo")
}

// Classify implements Harness.
func (kilo) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	if kiloWrapper(argv) {
		return Helper // its native child is the session
	}
	if !kiloNative(b) {
		return None
	}
	if _, pb := program(parent); kiloNative(pb) {
		return Helper // spawned by a kilo
	}
	args := argv[1:]
	if hasFlag(args, "-h", "--help", "-v", "--version") {
		return Helper
	}
	if kiloHelperWords[kiloFlags.positional(args)] {
		return Helper
	}
	return Session
}

// Resolve implements Harness: opencode's heuristic over kilo.db, with
// the other live kilos in the cwd as the peers that could have written
// the same session.
func (kilo) Resolve(env Env, p proc.Proc) Agent { return ocResolve("kilo", env, p) }

// Resume implements Harness: kilo --session <id>, in the session's cwd.
func (kilo) Resume(a Agent, env Env) ([]string, error) { return ocResume("kilo", a) }

var _ = register(kilo{}, &kiloSpec)

var kiloSpec = Spec{
	Name:  "kilo",
	Order: 100,
	// It follows the XDG base directories, as opencode does.
	Root: xdgDataRoot("kilo"),
	// Only the JSON sessions of the storage/ tree it inherited from
	// opencode (its sessions are in kilo.db, which the credential table
	// hides with the account's tokens). Never the root whole: auth.json,
	// snapshot/ copies of the projects' files, log/.
	Mirrors:    ocMirrors,
	CopyStores: []string{"snapshot"},
	Credentials: []Credential{
		{"auth.json", "kilo ~/.local/share/kilo/auth.json"},
		{"mcp-auth.json", "kilo ~/.local/share/kilo/mcp-auth.json"},
		{"kilo*.db", "kilo ~/.local/share/kilo/kilo.db: access and refresh tokens"},
	},
	Stores:   []string{"kilo.db"},
	Programs: []string{".kilo", "kilocode"},
	// The npm package's native binary is bin/.kilo, beside its bin/kilo
	// node script: a move may run it directly.
	OwnExecutable: func(exe string) bool {
		return filepath.Base(exe) == ".kilo" && strings.Contains(exe, "kilo")
	},
	Keep: []keep{
		{names: []string{"-m", "--model"}, emit: "--model", value: true, max: 256},
		{names: []string{"--agent"}, emit: "--agent", value: true, max: 64, ok: word},
		{names: []string{"--pure"}, emit: "--pure"},
	},
	Flags:    kiloFlags,
	Messages: ocMessages("kilo"),
	Verified: "7.7.7",
	Doc: Doc{
		Title:   "Kilo CLI",
		Root:    "~/.local/share/kilo",
		Process: "the native `.kilo` under its node wrapper `kilo`; `serve`, `acp`, `daemon`, … are helpers",
		Via:     "`dir (heuristic: …)` from `kilo.db` as for opencode, `argv` for `--session ID`, `relaunch`; `ambiguous` when two could be",
		Resume:  "`kilo --session ID`",
		RealCLI: "7.7.7",
	},
}
