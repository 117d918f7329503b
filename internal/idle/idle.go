// Package idle decides when a socket-activated server may exit: after it
// has been idle for a while. systemd starts it again on the next
// connection, so an idle user pays nothing. The daemon and the proc helper
// share it; each says what "idle" means for it.
package idle

import (
	"context"
	"time"
)

// Watch calls exit once since has reported being idle for at least d, and
// returns; it returns without calling exit when ctx is done. since returns
// when the server last became idle, or the zero time while it is busy (a
// connection open, a move in flight). It is polled every d/4, at most every
// second: an exit a moment late costs nothing, and a server that became
// busy in between is never stopped, since its idle start moved.
func Watch(ctx context.Context, d time.Duration, since func() time.Time, exit func()) {
	tick := max(min(d/4, time.Second), time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s := since(); !s.IsZero() && time.Since(s) >= d {
			exit()
			return
		}
	}
}
