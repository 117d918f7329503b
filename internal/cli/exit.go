package cli

import (
	"errors"

	"github.com/9harness/9harness/internal/client"
)

// The exit statuses of 9harness, one table for every command (the EXIT
// STATUS of 9harness(1)); scripts branch on them, so a number never
// changes its meaning.
const (
	ExitOK    = 0 // done
	ExitError = 1 // an error or a refusal, and nothing was changed (a move: the agent untouched)
	ExitUsage = 2 // a usage error: a bad flag, operand or combination
	// ExitPartial: some hosts or agents did not answer; what the others
	// said was printed. For wait: the agents waited for exited first.
	ExitPartial = 3
	// ExitMoveFailed: a move failed after the agent was stopped; the
	// message says how to resume it by hand.
	ExitMoveFailed = 4
	// ExitTimeout: wait --timeout ran out, the status timeout(1) gives.
	ExitTimeout = 124
)

// ErrStatus is the status of a command that failed with err: a harness
// the daemon does not have (--harness nope) is a bad operand, a usage
// error as a bad sort key is; anything else is an error.
func ErrStatus(err error) int {
	var uh *client.UnknownHarnessError
	if errors.As(err, &uh) {
		return ExitUsage
	}
	return ExitError
}
