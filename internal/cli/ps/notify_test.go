package ps

import (
	"slices"
	"strconv"
	"testing"

	"github.com/9harness/9harness/internal/client"
)

// TestWaitNoticesOnePrompt: one permission prompt, first published as
// "permission prompt" and then, with the same start, as "approve Bash",
// is one notice; a wait with a new start and a new object is another.
func TestWaitNoticesOnePrompt(t *testing.T) {
	at := func(what, since string) []client.Agent {
		a := agent("claude", 1, 1, "waiting", what)
		a.Since = since
		return []client.Agent{a}
	}
	var n waitNotices
	steps := []struct {
		table []client.Agent
		want  int
	}{
		{at("permission prompt", "2026-12-01T10:00:00Z"), 1},
		{at("approve Bash", "2026-12-01T10:00:00Z"), 0}, // the same wait, told better
		{at("approve Edit", "2026-12-01T10:00:07Z"), 1}, // a second prompt
		{at("approve Edit", "2026-12-01T10:00:09Z"), 0}, // the registry re-stamped it
		{at("approve Bash", ""), 1},                     // no start known: the object decides
	}
	for i, s := range steps {
		if got := len(n.changes(s.table)); got != s.want {
			t.Errorf("step %d: %d notices, want %d", i, got, s.want)
		}
	}
}

// TestWaitNotices: each wait is announced once: not again while the agent
// stays waiting for the same thing, again when it waits anew.
func TestWaitNotices(t *testing.T) {
	var n waitNotices
	steps := []struct {
		table []client.Agent
		want  []string
	}{
		{[]client.Agent{agent("claude", 1, 1, "waiting", "approve Bash"), agent("codex", 2, 2, "working", "")}, []string{"claude/1"}}, // already waiting at the start
		{[]client.Agent{agent("claude", 1, 1, "waiting", "approve Bash"), agent("codex", 2, 2, "working", "")}, nil},
		{[]client.Agent{agent("claude", 1, 1, "waiting", "approve Bash"), agent("codex", 2, 2, "waiting", "")}, []string{"codex/2"}},
		{[]client.Agent{agent("claude", 1, 1, "waiting", "approve Edit"), agent("codex", 2, 2, "waiting", "")}, []string{"claude/1"}},
		{[]client.Agent{agent("claude", 1, 1, "working", ""), agent("codex", 2, 2, "waiting", "")}, nil},
		{[]client.Agent{agent("claude", 1, 1, "idle", ""), agent("codex", 2, 2, "", "")}, nil},
		{[]client.Agent{agent("claude", 1, 1, "waiting", "approve Edit"), agent("codex", 2, 2, "waiting", "")}, []string{"claude/1", "codex/2"}},
		{[]client.Agent{agent("claude", 1, 5, "waiting", "approve Edit")}, []string{"claude/1"}}, // a reused pid is another agent
	}
	for i, s := range steps {
		var got []string
		for _, a := range n.changes(s.table) {
			got = append(got, a.Harness+"/"+strconv.Itoa(a.PID))
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d: announced %q, want %q", i, got, s.want)
		}
	}
}

func agent(h string, pid int, started int64, state, waiting string) client.Agent {
	return client.Agent{Harness: h, PID: pid, Started: started, State: state, Waiting: waiting}
}
