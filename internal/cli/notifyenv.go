package cli

import (
	"os"
	"strconv"
	"strings"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// NotifyCmdEnv is the environment of --notify's command: the caller's, less
// any HARNESS_ variable of its own, and the agent's facts, made printable
// (a title is text anyone who can name a session chose).
func NotifyCmdEnv(base []string, a client.Agent, host string) []string {
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "HARNESS_") {
			env = append(env, kv)
		}
	}
	for _, kv := range [][2]string{
		{"HARNESS_NAME", a.Harness},
		{"HARNESS_PID", strconv.Itoa(a.PID)},
		{"HARNESS_STATE", a.State},
		{"HARNESS_WAITING", a.Waiting},
		{"HARNESS_CWD", a.Cwd},
		{"HARNESS_TITLE", a.Title},
		{"HARNESS_HOST", host},
	} {
		env = append(env, kv[0]+"="+fleet.Printable(kv[1]))
	}
	return env
}

// NotifyHost is HARNESS_HOST: the --ssh destination, or this machine's
// short name.
func NotifyHost(g *Globals) string {
	if g.Remote() {
		return g.SSHDest
	}
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	return h
}
