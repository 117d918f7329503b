// Package accept is the accept loop the daemon and its proc helper share:
// it takes connections off a listener until told to stop, rides out a
// shortage of descriptors or memory instead of exiting, and hands each
// connection to its caller, who judges it and serves it.
package accept

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// Loop accepts connections from l until ctx is done, when it closes l and
// returns nil, or until l fails for good, when it returns the error and
// leaves l to the caller. Each connection goes to handle, called in the
// loop itself: handle does there only what needs no byte from the peer
// (what the kernel recorded at connect time) and starts a goroutine for
// the rest, so that a slow peer never holds the next accept.
//
// A failure that passes (no descriptor left, no memory) pauses the loop,
// 5 ms at first and twice as long each time it recurs, up to 1 s, and is
// logged through logf (which may be nil): the connections wait in the
// backlog meanwhile, and the server goes on.
func Loop(ctx context.Context, l net.Listener, logf func(format string, args ...any), handle func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var pause time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			var ok bool
			if pause, ok = backoff(err, pause); ok {
				if logf != nil {
					logf("accept: %v: pausing %v", err, pause)
				}
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		handle(c)
	}
}

// backoff is how long the accept loop pauses after err, given the pause
// after the failure before it (0: none), and whether err is a failure
// that passes at all: no descriptor left (EMFILE, ENFILE) or no memory
// (ENOBUFS, ENOMEM).
func backoff(err error, last time.Duration) (time.Duration, bool) {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			if last == 0 {
				return 5 * time.Millisecond, true
			}
			return min(2*last, time.Second), true
		}
	}
	return 0, false
}
