package main

import (
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/move"
)

// TestCheckSessionName: the client refuses exactly the names the daemon
// would (move.ValidName, and tmux's '.' and ':'), so that its early
// refusal never stops a move the daemon would make.
func TestCheckSessionName(t *testing.T) {
	names := []string{"rescued", "a-b_c.d", "x", strings.Repeat("n", 100), strings.Repeat("n", 101),
		"", ".", "..", "-x", "a b", "a/b", "a:b", "a.b", "é", "a\nb", "a\n", "under_score", "9"}
	for _, host := range []string{"zmx", "tmux"} {
		for _, n := range names {
			_, err := move.ValidName([]byte(n))
			daemonOK := err == nil && n != "a\n" // the daemon strips echo's newline; a typed name has none
			if host == "tmux" && strings.ContainsAny(n, ".:") {
				daemonOK = false
			}
			if got := checkSessionName(n, host) == nil; got != daemonOK {
				t.Errorf("%s name %q: client ok %v, daemon ok %v", host, n, got, daemonOK)
			}
		}
	}
}
