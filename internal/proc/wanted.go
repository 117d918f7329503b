package proc

import (
	"slices"
	"strings"
)

// wanted is every environment variable 9harness reads of an agent for the
// tree (/active): where its session host's sockets are (zmx, tmux), what
// its paths resolve against, and each harness's own variable naming its
// state directory. Nothing else of an environment is ever asked of the
// proc helper's Environ op; the whole environment is a separate question
// (MoveEnviron), asked only for a move.
var wanted = map[string]bool{
	// Session hosts.
	"ZMX_SESSION": true, "ZMX_DIR": true, "ZMX_SESSION_PREFIX": true,
	"TMUX": true, "TMUX_PANE": true, "TMUX_TMPDIR": true,
	// What paths resolve against.
	"HOME": true, "PATH": true, "TMPDIR": true, "TMP": true, "TEMP": true,
	"XDG_RUNTIME_DIR": true, "XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true, "XDG_STATE_HOME": true,
	// The harnesses' own state directories.
	"CLAUDE_CONFIG_DIR":    true, // Claude Code
	"CODEX_HOME":           true, // Codex
	"CODEX_SQLITE_HOME":    true, // Codex's databases
	"PI_CODING_AGENT_DIR":  true, // pi
	"OMP_CODING_AGENT_DIR": true, // oh-my-pi
	"HERMES_HOME":          true, // hermes-agent
	"DSH_HOME":             true, // DeepSeek Harness
	"GEMINI_DIR":           true, // Gemini CLI
	// Gemini CLI's relaunched child (and a gemini that never relaunches)
	// has it: it tells the agent from its launcher.
	"GEMINI_CLI_NO_RELAUNCH": true,
}

// Wanted returns the names of the variables the tree reads of an agent,
// sorted. It is the one list: the proc helper answers these and no others
// to Environ.
func Wanted() []string {
	out := make([]string, 0, len(wanted))
	for k := range wanted {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// IsWanted reports whether name is one of Wanted.
func IsWanted(name string) bool { return wanted[name] }

// OnlyWanted returns the entries of env whose name is Wanted, in order. An
// entry without '=' is dropped.
func OnlyWanted(env []string) []string {
	var out []string
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && wanted[k] {
			out = append(out, kv)
		}
	}
	return out
}
