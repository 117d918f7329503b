package fusefs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// TestInoMap: within one connection a qid path keeps its number; two
// connections (two hosts, or one host dialed twice) never share one, even
// for the same path; and no number is the mount root's (1).
func TestInoMap(t *testing.T) {
	var next atomic.Uint64
	a, b := newInoMap(&next), newInoMap(&next)
	seen := map[uint64]string{}
	for _, tc := range []struct {
		name string
		m    *inoMap
		path uint64
	}{
		{"a/0", a, 0}, {"a/1", a, 1}, {"a/big", a, 1 << 63},
		{"b/0", b, 0}, {"b/1", b, 1}, {"b/big", b, 1 << 63},
	} {
		ino := tc.m.get(tc.path)
		if ino <= 1 {
			t.Errorf("%s: inode %d, reserved", tc.name, ino)
		}
		if other, dup := seen[ino]; dup {
			t.Errorf("%s and %s share inode %d", tc.name, other, ino)
		}
		seen[ino] = tc.name
		if again := tc.m.get(tc.path); again != ino {
			t.Errorf("%s: inode %d, then %d", tc.name, ino, again)
		}
	}
}

// TestDialWithin: a dial's own answer comes back as it is; one slower
// than the timeout is reported late once and still kept if it answers
// within the limit; one that does not is given up at the limit, or at
// stop, whichever comes first, and its context is cancelled (which ends
// its ssh). Each dial answers on an event, never on a clock, so that a
// busy machine cannot reorder them.
func TestDialWithin(t *testing.T) {
	refused := errors.New("refused")
	const short, long = 20 * time.Millisecond, time.Minute
	const (
		now       = iota // the dial answers at once
		afterLate        // once it was reported late
		never            // only once cancelled, or released after (refused)
	)
	for _, tc := range []struct {
		name           string
		answers        int
		err            error // what it answers
		timeout, limit time.Duration
		stopWhenLate   bool
		want           error
		wantLate       bool
	}{
		{"refused", now, refused, long, long, false, refused, false},
		{"quick", now, nil, long, long, false, nil, false},
		{"slow", afterLate, nil, short, long, false, nil, true},
		{"slow and refused", afterLate, refused, short, long, false, refused, true},
		{"past the limit", never, nil, short, 5 * short, false, errTimeout(5 * short), true},
		{"a limit no more than the timeout", never, nil, short, short, false, errTimeout(short), false},
		{"stopped", never, nil, short, long, true, errStopped, true},
	} {
		lateCh, release, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var aborted atomic.Bool
		abort := func() { aborted.Store(true) }
		var lates atomic.Int32
		cancelled := make(chan struct{})
		_, gotAbort, err := dialWithin(func(ctx context.Context) (*client.Client, func(), error) {
			switch tc.answers {
			case afterLate:
				<-lateCh
			case never:
				select {
				case <-ctx.Done():
					close(cancelled)
				case <-release:
				}
				return nil, nil, refused
			}
			if tc.err != nil {
				return nil, nil, tc.err
			}
			return nil, abort, nil
		}, tc.timeout, tc.limit, func(err error) {
			if lates.Add(1) == 1 {
				close(lateCh)
				if tc.stopWhenLate {
					close(stop)
				}
			}
			if err != errTimeout(tc.timeout) {
				t.Errorf("%s: told late with %v, want %v", tc.name, err, errTimeout(tc.timeout))
			}
		}, stop)
		if tc.answers == never {
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second): // a bound on a hang
				t.Errorf("%s: the dial given up on was not cancelled", tc.name)
			}
		}
		close(release)
		if err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && tc.err == nil {
			if gotAbort == nil {
				t.Errorf("%s: no abort for the dial's connection", tc.name)
			} else if gotAbort(); !aborted.Load() {
				t.Errorf("%s: the abort returned is not the dial's", tc.name)
			}
		}
		if n := lates.Load(); n != map[bool]int32{false: 0, true: 1}[tc.wantLate] {
			t.Errorf("%s: told late %d times, want late=%v", tc.name, n, tc.wantLate)
		}
	}
}
