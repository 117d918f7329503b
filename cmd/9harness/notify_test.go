package main

import (
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
