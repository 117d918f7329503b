package wire

import (
	"testing"
	"time"
)

// TestReadCap: a client that pipelines Treads gets at most MaxReads of them
// into p9 at once (each holds an msize buffer there); the others wait on the
// socket and are served, in full, as replies go out.
//
// Guards rule 10: bounded memory, fids, requests and connections.
func TestReadCap(t *testing.T) {
	h := start(t, true, Options{})
	h.cl.setup(65536)
	const n = 3 * MaxReads
	for i := range uint16(n) {
		h.cl.send(tread(10+i, 1, 0, 64))
	}
	entered := func(want int) {
		t.Helper()
		for range want {
			select {
			case <-h.fs.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("a read never started")
			}
		}
		select {
		case <-h.fs.entered:
			t.Fatalf("more than %d reads in p9 at once", MaxReads)
		case <-time.After(100 * time.Millisecond):
		}
	}
	entered(MaxReads)
	got := 0
	for got < n {
		h.fs.release <- struct{}{}
		m, err := h.cl.read(10 * time.Second)
		if err != nil || m.typ != msgRread || string(m.data()) != string(slowContent) {
			t.Fatalf("reply %d: %v %v", got, m, err)
		}
		got++
		if left := n - got; left >= MaxReads {
			entered(1)
		}
	}
}

// A client granted more than P9Msize is told its grant, while p9 runs with
// P9Msize: a Tread asking for more gets a short Rread (not EOF), and the
// file still reads whole.
func TestInnerMsize(t *testing.T) {
	h := start(t, true, Options{MaxMsize: 4 << 20})
	if got := h.cl.setup(4 << 20); got != 4<<20 {
		t.Fatalf("granted %d, want %d", got, 4<<20)
	}
	if h.wc.Msize() != 4<<20 {
		t.Fatalf("Msize %d", h.wc.Msize())
	}
	total := 0
	for off := uint64(0); ; {
		m := h.cl.rpc(tread(5, 3, off, 4<<20-24), msgRread)
		n := len(m.data())
		if n > P9Msize-rreadHdr {
			t.Fatalf("Rread of %d bytes, above p9's %d", n, P9Msize-rreadHdr)
		}
		if n == 0 {
			break
		}
		total += n
		off += uint64(n)
	}
	if total != bigSize {
		t.Fatalf("read %d bytes, want %d", total, bigSize)
	}
	// Asking for less than P9Msize: p9 runs with what was asked.
	h2 := start(t, true, Options{MaxMsize: 4 << 20})
	if got := h2.cl.setup(65536); got != 65536 {
		t.Fatalf("granted %d, want 65536", got)
	}
}
