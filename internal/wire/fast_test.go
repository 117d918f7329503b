package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
)

// The fast path (fast.go) as the client sees it: the same replies p9 would
// give, and Stats.Fast counting the requests it answered.

// dirListing is the test directory in Rreaddir's wire form: entry i has
// offset i+1.
func dirListing() [][]byte {
	var out [][]byte
	for i, n := range []string{"fast", "slow", "big"} {
		b := []byte{0}
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint64(b, uint64(2+i))
		b = binary.LittleEndian.AppendUint64(b, uint64(i+1))
		b = append(b, 8)
		b = append(b, str(n)...)
		out = append(out, b)
	}
	return out
}

// ReaddirWire makes the test directory a DirReader.
func (d *dir) ReaddirWire(off uint64, count uint32) ([]byte, error) {
	var b []byte
	for _, e := range dirListing()[min(off, 3):] {
		if len(b)+len(e) > int(count) {
			break
		}
		b = append(b, e...)
	}
	return b, nil
}

func bigAt(off uint64, n int) []byte {
	b := make([]byte, 0, n)
	for i := 0; i < n && off+uint64(i) < bigSize; i++ {
		b = append(b, byte(off+uint64(i)))
	}
	return b
}

// Pipelined Treads of a bound fid: every reply is the file's bytes at its
// offset (count clamped to msize-11, as p9 clamps), and the fast path
// answered each. The same requests without the fast path get the same
// replies from p9.
func TestFastRead(t *testing.T) {
	for _, fast := range []bool{true, false} {
		h := startWith(t, true, fast, Options{})
		cl := h.cl
		msize := cl.setup(64 << 10)
		var reqs [][]byte
		offs := []uint64{0, 1, 4095, 65536, bigSize - 100, bigSize, bigSize + 5}
		for i, off := range offs {
			reqs = append(reqs, tread(uint16(10+i), 3, off, msize)) // more than fits
		}
		before := h.stats().Fast
		cl.send(reqs...)
		for range offs {
			m := cl.recv()
			off := offs[m.tag-10]
			want := bigAt(off, int(msize-rreadHdr))
			if m.typ != msgRread || !bytes.Equal(m.data(), want) {
				t.Fatalf("fast=%v: Tread at %d: %d bytes (%v), want %d", fast, off, len(m.data()), m.typ, len(want))
			}
		}
		got := h.stats().Fast - before
		if want := map[bool]uint64{true: uint64(len(offs)), false: 0}[fast]; got != want {
			t.Fatalf("fast=%v: Stats.Fast grew by %d, want %d", fast, got, want)
		}
	}
}

// openFast starts a connection with the fast path, sets it up and opens
// fid on names (none: the directory).
func openFast(t *testing.T, fid uint32, names ...string) *harness {
	t.Helper()
	h := startFast(t, Options{})
	h.cl.setup(64 << 10)
	h.cl.rpc(twalk(1, 0, fid, names...), msgRwalk)
	h.cl.rpc(tlopen(1, fid), msgRlopen)
	return h
}

// wantFast checks how many requests the fast path answered.
func wantFast(t *testing.T, h *harness, n uint64) {
	t.Helper()
	if got := h.stats().Fast; got != n {
		t.Fatalf("Stats.Fast = %d, want %d", got, n)
	}
}

// An error from ReadAt comes back as p9 would send it: Rlerror with its errno.
func TestFastReadError(t *testing.T) {
	h := openFast(t, 20, "eio")
	if m := h.cl.rpc(tread(2, 20, 0, 100), msgRlerror); m.errno() != uint32(linux.EIO) {
		t.Fatalf("got %v, want EIO", m)
	}
	wantFast(t, h, 1)
}

// Treaddir of a bound directory is answered from the DirReader, whole
// entries within the count.
func TestFastReaddir(t *testing.T) {
	h := openFast(t, 30)
	cl := h.cl
	ents := dirListing()
	m := cl.rpc(treaddir(2, 30, 0, 8192), msgRreaddir)
	if want := bytes.Join(ents, nil); !bytes.Equal(m.body[4:], want) {
		t.Fatalf("Rreaddir %x, want %x", m.body, want)
	}
	m = cl.rpc(treaddir(3, 30, 1, uint32(len(ents[1])+len(ents[2])-1)), msgRreaddir)
	if !bytes.Equal(m.body[4:], ents[1]) {
		t.Fatalf("Rreaddir at 1 in a short count: %x, want %x", m.body, ents[1])
	}
	wantFast(t, h, 2)
}

// A client cannot forge a token: bits 24-31 of its Tlopen flags never
// reach the File, and the File sees the Conn's own mark instead.
//
// Guards rule 3: a peer the kernel does not allow gets nothing; Tattach is never trusted; a client talks only to its own uid's server.
func TestFastForgedToken(t *testing.T) {
	h := startFast(t, Options{})
	cl := h.cl
	cl.setup(64 << 10)
	cl.rpc(twalk(1, 0, 40, "fast"), msgRwalk)
	cl.rpc(tlopenFlags(1, 40, 0xff000000|0o100000), msgRlopen) // O_LARGEFILE
	h.fs.mu.Lock()
	got := h.fs.lastOpen
	h.fs.mu.Unlock()
	if want := uint32(tokMark | 0o100000); got != want { // token 0: none other in flight
		t.Fatalf("File.Open saw flags %#x, want %#x", got, want)
	}
	if m := cl.rpc(tread(2, 40, 0, 100), msgRread); !bytes.Equal(m.data(), fastContent) {
		t.Fatalf("read %q", m.data())
	}
}

// A fid rebound after its open is never served from the old binding: a
// Twalk onto the open fid (p9 replaces it with an unopened file), and a
// clunk and new open of the fid on another file.
func TestFastRebind(t *testing.T) {
	h := openFast(t, 50, "big")
	cl := h.cl
	cl.rpc(tread(1, 50, 0, 16), msgRread)

	cl.rpc(twalk(1, 0, 50, "fast"), msgRwalk) // newfid in use: p9 replaces it
	if m := cl.rpc(tread(2, 50, 0, 16), msgRlerror); m.errno() != uint32(linux.EINVAL) {
		t.Fatalf("Tread of a rebound, unopened fid: %v, want EINVAL from p9", m)
	}
	cl.rpc(tlopen(1, 50), msgRlopen)
	if m := cl.rpc(tread(2, 50, 0, 100), msgRread); !bytes.Equal(m.data(), fastContent) {
		t.Fatalf("after reopen: %q, want the new file", m.data())
	}

	cl.rpc(tclunk(1, 50), 121)
	cl.rpc(twalk(1, 0, 50, "big"), msgRwalk)
	if m := cl.rpc(tread(2, 50, 0, 16), msgRlerror); m.errno() != uint32(linux.EINVAL) {
		t.Fatalf("Tread of a clunked and rewalked fid: %v, want EINVAL", m)
	}
	cl.rpc(tlopen(1, 50), msgRlopen)
	if m := cl.rpc(tread(2, 50, 0, 16), msgRread); !bytes.Equal(m.data(), bigAt(0, 16)) {
		t.Fatalf("after reopen: %x", m.data())
	}
	wantFast(t, h, 3) // the reads of opened fids
}

// With more Tlopens in flight than there are tokens, the opens past the
// 128th carry none, are read through p9, and every read is right.
func TestFastTokensExhausted(t *testing.T) {
	h := startFast(t, Options{})
	cl := h.cl
	cl.setup(64 << 10)
	const n = nTokens + 5
	for i := range n {
		cl.rpc(twalk(1, 0, uint32(100+i), "gated"), msgRwalk)
	}
	var opens [][]byte
	for i := range n {
		opens = append(opens, tlopen(uint16(100+i), uint32(100+i)))
	}
	cl.send(opens...)
	// Let the opens finish only once all are in flight, so the tokens run
	// out.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h.wc.mu.Lock()
		inFlight := len(h.wc.openTag)
		h.wc.mu.Unlock()
		if inFlight == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Tlopens in flight", inFlight, n)
		}
	}
	for range n {
		h.fs.gate <- struct{}{}
	}
	for range n {
		if m := cl.recv(); m.typ != msgRlopen {
			t.Fatalf("Tlopen: %v", m)
		}
	}
	for i := range n {
		if m := cl.rpc(tread(1, uint32(100+i), 0, 100), msgRread); !bytes.Equal(m.data(), gatedContent) {
			t.Fatalf("fid %d: %q", 100+i, m.data())
		}
	}
	wantFast(t, h, nTokens) // one per token
}

// A Tflush of a Tread the fast path answered comes after that Rread, as
// for any reply (the oldtag is not in flight once its reply is written).
func TestFastFlush(t *testing.T) {
	h := startFast(t, Options{})
	cl := h.cl
	cl.setup(64 << 10)
	for i := range 50 {
		cl.send(tread(5, 3, uint64(i), 10), tflush(6, 5))
		if m := cl.recv(); m.typ != msgRread || m.tag != 5 {
			t.Fatalf("round %d: first reply %v, want the Rread", i, m)
		}
		if m := cl.recv(); m.typ != msgRflush || m.tag != 6 {
			t.Fatalf("round %d: second reply %v, want the Rflush", i, m)
		}
	}
}
