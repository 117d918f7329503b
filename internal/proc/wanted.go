package proc

import (
	"slices"
	"strings"
)

// wanted is every environment variable 9harness reads of an agent for the
// tree (/active): where its session host's sockets are (zmx, tmux), what
// its paths resolve against, and the variables the harnesses declare
// (AddWanted: each one's state directory, a launcher's mark). Nothing else
// of an environment is ever asked of the proc helper's Environ op; the
// whole environment is a separate question (MoveEnviron), asked only for a
// move.
var wanted = map[string]bool{
	// Session hosts.
	"ZMX_SESSION": true, "ZMX_DIR": true, "ZMX_SESSION_PREFIX": true,
	"TMUX": true, "TMUX_PANE": true, "TMUX_TMPDIR": true,
	// What paths resolve against.
	"HOME": true, "PATH": true, "TMPDIR": true, "TMP": true, "TEMP": true,
	"XDG_RUNTIME_DIR": true, "XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true, "XDG_STATE_HOME": true,
}

// AddWanted adds names to Wanted. It is for package initialization (the
// harnesses declare their variables this way): the set is read without a
// lock.
func AddWanted(names ...string) {
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			panic("proc: bad variable name " + n)
		}
		wanted[n] = true
	}
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
