package harness

import (
	"time"
)

// The turn states. An agent is working (a turn is in flight), waiting
// (it needs the user: a permission, a question, a dialog) or idle (the
// turn is over, it is at its prompt). Where the files a harness writes do
// not tell which, the state is unknown ("") and StateVia says why: a state
// is never guessed.
const (
	StateWorking = "working"
	StateWaiting = "waiting"
	StateIdle    = "idle"
)

// settle is how long a transcript must have been still before a reply
// that Claude never stamped with a stop reason is read as the turn's end.
const settle = 2 * time.Second

// turn is a derived state.
type turn struct {
	state, waiting, via string
	since               time.Time
	// pending is the tool a Claude transcript's tail has a call of and no
	// result for yet (claudePending): what a permission prompt asks about.
	pending string
}

func (t turn) set(a *Agent) {
	a.State, a.Waiting, a.StateVia, a.Since = t.state, t.waiting, t.via, t.since.UTC()
	if t.since.IsZero() {
		a.Since = time.Time{}
	}
	if t.state == "" {
		a.Waiting, a.Since = "", time.Time{}
	}
}

func unknown(why string) turn { return turn{via: RouteNone + " (" + why + ")"} }

// lineTime reads an RFC 3339 "timestamp".
func lineTime(s string) time.Time {
	t, _ := parseTime(s)
	return t
}
