package ps

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/9harness/9harness/internal/client"
)

// psSortKeys compares two agents by each --sort key; ties fall to harness,
// then pid, in sortAgents.
var psSortKeys = map[string]func(a, b client.Agent) int{
	"harness": func(a, b client.Agent) int { return 0 },
	"pid":     func(a, b client.Agent) int { return cmp.Compare(a.PID, b.PID) },
	// The youngest first (the smallest AGE); an unknown start
	// (0) is the oldest.
	"age": func(a, b client.Agent) int {
		return knownFirst(a.Started > 0, b.Started > 0, cmp.Compare(b.Started, a.Started))
	},
	"cwd":    func(a, b client.Agent) int { return compareKnown(a.Cwd, b.Cwd) },
	"title":  func(a, b client.Agent) int { return compareKnown(a.Title, b.Title) },
	"status": func(a, b client.Agent) int { return compareKnown(a.Status, b.Status) },
	// The agents that need you first: waiting, then idle, then working.
	"state": func(a, b client.Agent) int {
		ra, rb := stateRank[a.State], stateRank[b.State]
		return knownFirst(ra > 0, rb > 0, cmp.Compare(ra, rb))
	},
	// The largest context first.
	"tokens": func(a, b client.Agent) int {
		ca, oka := a.Tokens["context"]
		cb, okb := b.Tokens["context"]
		return knownFirst(oka, okb, cmp.Compare(cb, ca))
	},
}

// stateRank orders the states for --sort state; 0 is a state this client
// does not know, sorted with the unknown ones.
var stateRank = map[string]int{"waiting": 1, "idle": 2, "working": 3}

// sortAgents orders agents by key ("" is harness), then harness, then pid;
// reverse reverses the whole order.
func sortAgents(agents []client.Agent, key string, reverse bool) {
	by := psSortKeys[key]
	if by == nil {
		by = psSortKeys["harness"]
	}
	slices.SortStableFunc(agents, func(a, b client.Agent) int {
		return cmp.Or(by(a, b), cmp.Compare(a.Harness, b.Harness), cmp.Compare(a.PID, b.PID))
	})
	if reverse {
		slices.Reverse(agents)
	}
}

// compareKnown orders strings with the empty one (a fact the daemon does
// not know) last.
func compareKnown(a, b string) int {
	return knownFirst(a != "", b != "", strings.Compare(a, b))
}

func knownFirst(aKnown, bKnown bool, c int) int {
	switch {
	case aKnown && !bKnown:
		return -1
	case !aKnown && bKnown:
		return 1
	case !aKnown:
		return 0
	}
	return c
}

// SortKeys is --sort's keys, sorted, for the shell completions.
func SortKeys() []string { return slices.Sorted(maps.Keys(psSortKeys)) }
