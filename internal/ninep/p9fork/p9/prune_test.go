package p9_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// anyDir is a directory in which every name is a directory, and from
// which nothing can be unlinked.
type anyDir struct {
	templatefs.NoopFile
}

func (d *anyDir) Attach() (p9.File, error) { return &anyDir{}, nil }

func (d *anyDir) Walk(names []string) ([]p9.QID, p9.File, error) {
	qids := make([]p9.QID, len(names))
	for i := range qids {
		qids[i] = p9.QID{Type: p9.TypeDir, Path: uint64(i + 2)}
	}
	return qids, &anyDir{}, nil
}

func (d *anyDir) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	return p9.QID{Type: p9.TypeDir, Path: 1}, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeDirectory | 0o555}, nil
}

func (d *anyDir) UnlinkAt(string, uint32) error { return linux.EROFS }

const tTunlinkat = 76

// A connection keeps no path node for a name no fid holds: walking to
// many names one after the other (each fid clunked), and asking to
// unlink many names, leaves the heap where it was. Unpruned, each name
// would leave about 480 bytes and itself until the connection ends.
func TestPathNodesPruned(t *testing.T) {
	r := serve(t, &anyDir{})
	r.session(1 << 16)
	const n = 20000
	pad := strings.Repeat("x", 200)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// Pipelined in batches whose replies fit the socket buffers.
	run := func(frames func(i int) []byte, want ...uint8) {
		const batch = 128
		for next := 0; next < n; next += batch {
			var b []byte
			for i := next; i < next+batch; i++ {
				b = append(b, frames(i)...)
			}
			r.write(b)
			// Replies to requests on different fids may come in any
			// order.
			for k := 0; k < batch*len(want); k++ {
				m := r.recv()
				if m.typ != want[0] && m.typ != want[len(want)-1] {
					t.Fatalf("a reply of type %d, want one of %v", m.typ, want)
				}
			}
		}
	}
	before := heap()
	run(func(i int) []byte {
		name := pad + strings.Repeat("y", i%7) + string(rune('a'+i%26)) + itoa(i)
		tag, fid := uint16(2*(i%128)), uint32(1+i%128)
		return append(frame(tTwalk, tag, uint32(0), fid, uint16(1), name), frame(tTclunk, tag+1, fid)...)
	}, tRwalk, tRclunk)
	walked := heap()
	run(func(i int) []byte { return frame(tTunlinkat, uint16(i%128), uint32(0), pad+itoa(i), uint32(0)) }, tRlerror)
	unlinked := heap()
	t.Logf("walks: %d bytes, unlinks: %d bytes", int64(walked)-int64(before), int64(unlinked)-int64(walked))
	const limit = 2 << 20 // each leak is above 8 MiB
	if g := int64(walked) - int64(before); g > limit {
		t.Errorf("%d walks, each clunked, left %d bytes on the heap", n, g)
	}
	if g := int64(unlinked) - int64(walked); g > limit {
		t.Errorf("%d refused unlinks left %d bytes on the heap", n, g)
	}
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}
