package ninep

import (
	"errors"
	"strings"

	"github.com/9harness/9harness/internal/errs"
)

// Why a write was refused travels back to the client on the fid that
// wrote. 9P2000.L's Rlerror carries only an errno, and the daemon's reason
// ("claude is not on the agent's PATH", "nothing to resume yet") is what a
// person needs; so after a failed write, a read of the same fid (opened
// read-write) returns the reason instead of the file's content. The reason
// belongs to that fid alone: it cannot race with another client's write,
// and it does not vanish with the agent. Plain 9P2000 also puts it in the
// Rerror string.
//
// The reason is one line, and its first word says what happened:
//
//	refused: <why>   nothing was changed (the agent runs as before)
//	failed: <why>    the write had begun to act and did not complete (a
//	                 move that failed after the agent was signalled: the
//	                 reason says how to resume it by hand)
//
// 9harness move exits 1 for the first and 4 for the second.
const (
	ReasonRefused = "refused"
	ReasonFailed  = "failed"
)

// maxReason bounds the reason a fid keeps: one journal line's worth.
const maxReason = 4 << 10

// stopper is implemented by a write error that says whether the write had
// begun to act (for a move: whether the agent was signalled) before it
// failed.
type stopper interface{ Stopped() bool }

// reasonOf is the reason line a failed write leaves on its fid. An error
// that does not say whether it came after the write began to act counts
// as failed when its kind is IO (the move's errors after the signal are
// EIO), refused otherwise: telling a person that nothing changed when the
// agent was stopped would be the worse mistake.
func reasonOf(err error) []byte {
	word := ReasonRefused
	var s stopper
	switch {
	case errors.As(err, &s):
		if s.Stopped() {
			word = ReasonFailed
		}
	case errs.KindOf(err) == errs.IO:
		word = ReasonFailed
	}
	text := err.Error()
	// The outermost classified error's cause is the reason as the daemon
	// journaled it; its "op path: kind:" prefix says nothing to a person.
	var e *errs.Error
	if errors.As(err, &e) {
		if e.Err != nil {
			text = e.Err.Error()
		} else {
			text = e.Kind.String()
		}
	}
	text = strings.Join(strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' || r == 0 }), " ")
	line := word + ": " + text
	if len(line) > maxReason-1 {
		line = strings.ToValidUTF8(line[:maxReason-1], "")
	}
	return []byte(line + "\n")
}
