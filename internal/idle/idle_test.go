package idle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Busy holds the exit off however long it lasts; idle for d lets it happen;
// a cancelled context returns without it.
func TestWatch(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	var since atomic.Int64 // unix nanoseconds; 0 while busy
	sinceFn := func() time.Time {
		if busy.Load() {
			return time.Time{}
		}
		return time.Unix(0, since.Load())
	}
	exited := make(chan time.Time, 1)
	go Watch(context.Background(), 100*time.Millisecond, sinceFn, func() { exited <- time.Now() })

	time.Sleep(300 * time.Millisecond) // three times d, busy throughout
	select {
	case <-exited:
		t.Fatal("exited while busy")
	default:
	}
	start := time.Now()
	since.Store(start.UnixNano())
	busy.Store(false)
	select {
	case at := <-exited:
		if at.Sub(start) < 100*time.Millisecond {
			t.Errorf("exited %v after becoming idle, before d", at.Sub(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit after being idle")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Watch(ctx, time.Hour, func() time.Time { return time.Now() }, func() { t.Error("exit called") })
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return on cancel")
	}
}
