package cli

import (
	"slices"
	"testing"

	"github.com/9harness/9harness/internal/client"
)

// TestNotifyCmdEnv: the agent's facts, printable, and no HARNESS_
// variable of the caller's own.
func TestNotifyCmdEnv(t *testing.T) {
	a := client.Agent{Harness: "claude", PID: 42, State: "waiting", Waiting: "approve Bash", Cwd: "/src/x",
		Title: "$(touch /tmp/p) \x1b]0;x\x07\nnext"}
	env := NotifyCmdEnv([]string{"PATH=/bin", "HARNESS_TITLE=stale", "HARNESS_X=1", "HOME=/h"}, a, "box")
	want := []string{"PATH=/bin", "HOME=/h", "HARNESS_NAME=claude", "HARNESS_PID=42", "HARNESS_STATE=waiting",
		"HARNESS_WAITING=approve Bash", "HARNESS_CWD=/src/x", "HARNESS_TITLE=$(touch /tmp/p) ?]0;x? next", "HARNESS_HOST=box"}
	if !slices.Equal(env, want) {
		t.Errorf("env\n%q\nwant\n%q", env, want)
	}
}
