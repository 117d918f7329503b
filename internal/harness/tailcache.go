package harness

import "time"

// tailFacts is what a transcript's tail says of its agent: the state (for
// Claude, both as it reads before and after the file has settled) and the
// tokens the tail holds. It is derived once per version of the file (device,
// inode, size, mtime; fileCached) and kept across the reads of a listing's
// FileCache, so a table read reads no tail of a file unchanged since the last
// read: the cost of an agent does not grow with its transcript.
type tailFacts struct {
	turn, settled turn // settled: Claude's, once the file has been still for settle
	tokens        Tokens
	limits        Limits    // the subscription windows the tail records
	mtime         time.Time // the file's, zero if unread
}

// fill sets a's tokens, limits and, when state, its state from f. now decides
// whether the file has settled.
func (f tailFacts) fill(a *Agent, state bool, now time.Time) {
	a.Tokens = f.tokens.clone()
	a.Limits = f.limits.clone()
	if !state {
		return
	}
	t := f.turn
	if !f.mtime.IsZero() && now.Sub(f.mtime) >= settle {
		t = f.settled
	}
	t.set(a)
}
