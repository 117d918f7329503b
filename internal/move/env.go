package move

import (
	"strings"

	"github.com/9harness/9harness/internal/harness"
)

// specDrop is every harness's MoveDrop: dropped from every move, whatever
// the harness moved, as the variables of the session hosts are.
var specDrop = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range harness.Specs() {
		for _, k := range s.MoveDrop {
			m[k] = true
		}
	}
	return m
}()

// scrub removes the variables a moved agent does not keep: those of the
// session host it leaves and systemd's activation variables.
func scrub(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "ZMX_SESSION", k == "TMUX", k == "TMUX_PANE", k == "STY", strings.HasPrefix(k, "ZELLIJ"),
			strings.HasPrefix(k, "LISTEN_"), k == "NOTIFY_SOCKET":
			continue
		// What a parent set for this one child: node's IPC channel (an fd
		// the relaunch does not have: node fails on it), and the marks a
		// harness's launcher sets on its child (each Spec's MoveDrop).
		case k == "NODE_CHANNEL_FD", k == "NODE_CHANNEL_SERIALIZATION_MODE", specDrop[k]:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// sanitize keeps the entries exec can pass on as they are: NAME=value with
// a valid name, each under the kernel's per-string limit. An entry without
// '=' or with a name a shell could not have exported is not an environment
// variable anyone set on purpose; it is dropped and counted, not guessed at.
func sanitize(env []string) (kept []string, dropped int) {
	kept = make([]string, 0, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) || len(kv) > MaxArgString || strings.IndexByte(kv, 0) >= 0 {
			dropped++
			continue
		}
		kept = append(kept, kv)
	}
	return kept, dropped
}

// validEnvName is a POSIX name ([A-Za-z_][A-Za-z0-9_]*), or the name bash
// gives an exported function (BASH_FUNC_name%%), which environment-module
// setups rely on.
func validEnvName(k string) bool {
	if rest, ok := strings.CutPrefix(k, "BASH_FUNC_"); ok {
		if body, ok := strings.CutSuffix(rest, "%%"); ok && body != "" {
			for i := 0; i < len(body); i++ {
				c := body[i]
				if !(isAlnum(c) || c == '_' || c == '-' || c == '.' || c == ':') {
					return false
				}
			}
			return true
		}
	}
	if k == "" || '0' <= k[0] && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func envSize(env []string) int {
	n := 0
	for _, kv := range env {
		n += len(kv) + 1
	}
	return n
}

func getenv(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if key, v, ok := strings.Cut(env[i], "="); ok && key == k {
			return v
		}
	}
	return ""
}
