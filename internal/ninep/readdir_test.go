package ninep

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// A listing through the whole stack (the p9 fork, this adapter) in many
// small Rreaddirs, each a window of the encoded snapshot: every listable
// name exactly once, no excluded name, each qid what a walk of the name
// reports. With the server on the socket and behind a plain writer.
func TestReaddirWire(t *testing.T) {
	for _, socket := range []bool{true, false} {
		t.Run(fmt.Sprintf("socket=%v", socket), func(t *testing.T) { testReaddirWire(t, socket) })
	}
}

func testReaddirWire(t *testing.T, socket bool) {
	home := t.TempDir()
	dir := filepath.Join(home, "d")
	os.Mkdir(dir, 0o755)
	want := map[string]bool{}
	for i := range 3000 {
		name := fmt.Sprintf("entry-%04d", i)
		switch i % 10 {
		case 3:
			name = fmt.Sprintf("token-%04d", i)
		case 7:
			name = fmt.Sprintf("k%04d.pem", i)
		default:
			want[name] = true
		}
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	want["sub"] = true
	os.Symlink("entry-0000", filepath.Join(dir, "link"))

	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
	r := dialWith(t, root, 8192, socket)
	r.walk(t, 0, 1, "dsh", "d")
	r.open(t, 1)
	seen := map[string]uint64{}
	chunks := 0
	for off := uint64(0); ; chunks++ {
		r.begin(40)
		r.u32(1)
		r.u64(off)
		r.u32(r.msize - 24)
		_, body := r.rpc(t)
		cnt := binary.LittleEndian.Uint32(body)
		if cnt == 0 {
			break
		}
		for b := body[4 : 4+cnt]; len(b) > 0; {
			path := binary.LittleEndian.Uint64(b[5:])
			off = binary.LittleEndian.Uint64(b[13:])
			nl := int(binary.LittleEndian.Uint16(b[22:]))
			name := string(b[24 : 24+nl])
			b = b[24+nl:]
			if _, dup := seen[name]; dup {
				t.Fatalf("%s listed twice", name)
			}
			seen[name] = path
		}
	}
	if len(seen) != len(want) || chunks < 5 {
		t.Fatalf("listed %d names in %d Rreaddirs, want %d names", len(seen), chunks, len(want))
	}
	for name := range want {
		if _, ok := seen[name]; !ok {
			t.Fatalf("%s not listed", name)
		}
	}
	f, _ := (&Attacher{Root: root}).Attach()
	for _, name := range []string{"entry-0000", "entry-2999", "sub"} {
		q, _, err := f.Walk([]string{"dsh", "d", name})
		if err != nil || q[2].Path != seen[name] {
			t.Errorf("%s: walk qid %v %v, readdir path %x", name, q, err, seen[name])
		}
	}
}

// Readdirs of one fid may run at once (a client may pipeline them): a reply
// is a slice of the snapshot it was cut from, and a new listing from offset
// 0 replaces the snapshot instead of writing into it. Run with -race.
func TestReaddirConcurrent(t *testing.T) {
	root, _ := attach(t)
	_, d, err := root.Walk([]string{"dsh", "sub"})
	if err != nil {
		t.Fatal(err)
	}
	d.Open(p9.ReadOnly)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				ents, err := d.Readdir(uint64((g*7+i)%100), 1<<12)
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range ents {
					if len(e.Name) != 4 || e.Name[0] != 'f' {
						t.Errorf("entry %+v", e)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
