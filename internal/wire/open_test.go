package wire

import (
	"testing"
)

// TestPipelinedOpenRead: a client sends Tlopen and Tread of one fid in one
// write, without waiting for the Rlopen. Stock p9 runs them concurrently
// and its tlopen sets the fid's opened flag outside the lock tread reads it
// under: a data race (go test -race) and, when the read wins, EINVAL. The
// wrapper holds the Tread until the Rlopen is written, so every read gets
// the file. A Tread on another, already open fid is not held (it is sent
// behind the Tlopen and may be answered before it).
func TestPipelinedOpenRead(t *testing.T) {
	h := start(t, true, Options{})
	cl := h.cl
	cl.setup(64 << 10)
	const rounds = 200
	for i := range rounds {
		fid := uint32(100 + i)
		cl.rpc(twalk(1, 0, fid, "fast"), msgRwalk)
		cl.send(tlopen(2, fid), tread(3, fid, 0, 4096), tread(4, 2, 0, 4096))
		got := map[uint16]rmsg{}
		for range 3 {
			m := cl.recv()
			got[m.tag] = m
		}
		if m := got[2]; m.typ != msgRlopen {
			t.Fatalf("round %d: Tlopen: %v", i, m)
		}
		for _, tag := range []uint16{3, 4} {
			if m := got[tag]; m.typ != msgRread || len(m.data()) == 0 {
				t.Fatalf("round %d: Tread tag %d: %v, want the file's bytes", i, tag, m)
			}
		}
	}
}
