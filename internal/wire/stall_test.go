package wire

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestTimeoutDefaults(t *testing.T) {
	a, _ := socketpair(t)
	defer a.Close()
	for _, c := range []struct {
		in, wantR, wantW time.Duration
	}{{0, DefaultReadTimeout, DefaultWriteTimeout}, {-1, 0, 0}, {time.Second, time.Second, time.Second}} {
		w := New(a, a, Options{ReadTimeout: c.in, WriteTimeout: c.in})
		if w.rto != c.wantR || w.wto != c.wantW {
			t.Errorf("Options %v: bounds %v/%v, want %v/%v", c.in, w.rto, w.wto, c.wantR, c.wantW)
		}
	}
}

// goodStillServed checks that an unrelated connection answers at once.
func goodStillServed(t *testing.T, good *harness) {
	t.Helper()
	t0 := time.Now()
	if m := good.cl.rpc(tread(1, 2, 0, 64), msgRread); !bytes.Equal(m.data(), fastContent) {
		t.Fatalf("good connection: %v", m)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("good connection took %v", d)
	}
}

// TestHalfFrameStall: a peer that sends half a frame and stalls is closed
// after ReadTimeout; an idle peer between frames is not; neither holds an
// unrelated connection back.
//
// Guards rule 10: bounded memory, fids, requests and connections.
func TestHalfFrameStall(t *testing.T) {
	const bound = 200 * time.Millisecond
	baseline := runtime.NumGoroutine()
	good := start(t, true, Options{ReadTimeout: bound})
	good.cl.setup(8192)

	idle := start(t, true, Options{ReadTimeout: bound})
	idle.cl.setup(8192)

	for _, cut := range []int{1, 3, 7, 12} { // inside the header, and after it
		bad := start(t, true, Options{ReadTimeout: bound})
		bad.cl.setup(8192)
		bad.cl.send(tread(9, 2, 0, 64)[:cut])
		t0 := time.Now()
		for time.Since(t0) < bound/2 {
			goodStillServed(t, good)
			time.Sleep(10 * time.Millisecond)
		}
		bad.cl.wantClosed()
		bad.waitDone(t)
		d := time.Since(t0)
		cause := context.Cause(bad.wc.Context())
		if d < bound-20*time.Millisecond || d > bound+3*time.Second || cause == nil || !strings.Contains(cause.Error(), "stalled") {
			t.Fatalf("cut %d: closed after %v (bound %v), cause %v", cut, d, bound, cause)
		}
		t.Logf("cut after %d bytes: closed after %v: %v", cut, d.Round(time.Millisecond), cause)
		goodStillServed(t, good)
	}

	// The idle connection sat through all of that between frames. A frame
	// that arrives in pieces, whole within the bound, is served. (The bound
	// covers the whole frame from its first byte, so a trickle of one byte
	// per almost-bound cannot hold a connection.)
	if idle.wc.Context().Err() != nil {
		t.Fatalf("idle connection closed: %v", context.Cause(idle.wc.Context()))
	}
	f := tread(9, 2, 0, 64)
	for i := 0; i < len(f); i += 6 {
		idle.cl.send(f[i:min(i+6, len(f))])
		time.Sleep(bound / 8)
	}
	if m := idle.cl.recv(); !bytes.Equal(m.data(), fastContent) {
		t.Fatalf("slow frame: %v", m)
	}
	// Idle between frames for several bounds: still open.
	time.Sleep(3 * bound)
	if idle.wc.Context().Err() != nil {
		t.Fatalf("idle connection closed: %v", context.Cause(idle.wc.Context()))
	}
	if m := idle.cl.rpc(tread(1, 2, 0, 64), msgRread); !bytes.Equal(m.data(), fastContent) {
		t.Fatalf("idle connection: %v", m)
	}
	good.cl.c.Close()
	idle.cl.c.Close()
	good.waitDone(t)
	idle.waitDone(t)
	if n := settleGoroutines(baseline); n > baseline {
		t.Fatalf("goroutines: %d, baseline %d", n, baseline)
	}
}

// TestNonReader: a peer that sends requests and never reads the replies is
// closed after WriteTimeout, its handlers return, and an unrelated
// connection is served throughout.
func TestNonReader(t *testing.T) {
	const bound = 300 * time.Millisecond
	baseline := runtime.NumGoroutine()
	good := start(t, true, Options{WriteTimeout: bound})
	good.cl.setup(65536)

	bad := start(t, true, Options{WriteTimeout: bound})
	bad.cl.setup(65536)
	// 64 reads of 64 KiB of /big: 4 MiB of replies, far beyond any socket
	// buffer. Written raw, from a goroutine: the server may stop reading.
	var reqs []byte
	for i := range uint16(64) {
		reqs = append(reqs, tread(100+i, 3, uint64(i)*65536/2, 65536)...)
	}
	go bad.cl.c.Write(reqs)

	t0 := time.Now()
	for bad.wc.Context().Err() == nil {
		if time.Since(t0) > bound+10*time.Second {
			t.Fatal("non-reading peer never dropped")
		}
		goodStillServed(t, good)
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(t0)
	cause := context.Cause(bad.wc.Context())
	if cause == nil || !strings.Contains(cause.Error(), "did not take a reply") {
		t.Fatalf("cause %v", cause)
	}
	bad.waitDone(t)
	t.Logf("non-reader dropped after %v (bound %v): %v", d.Round(time.Millisecond), bound, cause)
	goodStillServed(t, good)
	good.cl.c.Close()
	bad.cl.c.Close()
	good.waitDone(t)
	if n := settleGoroutines(baseline); n > baseline {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d, baseline %d\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
}
