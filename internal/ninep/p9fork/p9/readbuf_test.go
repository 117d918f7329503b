package p9_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// WithReadBuffers: a Tread's buffer is charged before it is taken and
// released once its reply is written; a read waiting for an event holds
// its charge while it waits, until it is flushed; a charge refused is
// ENOMEM, and nothing is held after it.
func TestReadBuffersCharged(t *testing.T) {
	var held, limit atomic.Int64
	limit.Store(1 << 20)
	charge := func(n int64) error {
		if held.Add(n) > limit.Load() {
			held.Add(-n)
			return errors.New("over")
		}
		return nil
	}
	release := func(n int64) {
		if held.Add(-n) < 0 {
			t.Errorf("released more than was charged")
		}
	}
	fs := newTestFS()
	r := serve(t, fs, p9.WithReadBuffers(charge, release))
	r.session(1 << 16)
	r.walkOpen(1, "file")
	r.send(tTread, 4, uint32(1), uint64(0), uint32(8192))
	r.expect(tRread, 4)
	// Released once the reply is written, which the client may see first.
	if h := settled(&held, 0); h != 0 {
		t.Fatalf("%d bytes held 10 s after the reply", h)
	}

	r.walkOpen(2, "slow")
	r.send(tTread, 5, uint32(2), uint64(0), uint32(8192))
	select {
	case <-fs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking read never started")
	}
	if h := held.Load(); h != 8192 {
		t.Fatalf("%d bytes held while a read of 8192 waits, want 8192", h)
	}
	r.send(tTflush, 6, uint16(5))
	r.expect(tRlerror, 5)
	r.expect(tRflush, 6)
	if h := settled(&held, 0); h != 0 {
		t.Fatalf("%d bytes held 10 s after the flushed read's reply", h)
	}

	limit.Store(4096)
	r.send(tTread, 7, uint32(1), uint64(0), uint32(8192))
	r.expectErr(7, linux.ENOMEM)
	if h := settled(&held, 0); h != 0 {
		t.Fatalf("%d bytes held 10 s after a refused read", h)
	}
}

// settled waits up to 10 s for held to be want, and returns it then.
func settled(held *atomic.Int64, want int64) int64 {
	for deadline := time.Now().Add(10 * time.Second); held.Load() != want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return held.Load()
}
