package ninep

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// bigListing makes a mirrored directory "dsh/big" of n files, too big for
// one getdents64 read, and returns an Attacher on it with a slot for one
// listing read in the background.
func bigListing(t *testing.T, n int) *Attacher {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "big")
	os.Mkdir(dir, 0o755)
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("name-%06d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
	return &Attacher{Root: root, listers: make(chan struct{}, 1)}
}

// openBig walks a's root to dsh/big and opens it.
func openBig(t *testing.T, a *Attacher) *file {
	t.Helper()
	root, _ := a.Attach()
	_, d, err := root.Walk([]string{"dsh", "big"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	return d.(*file)
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
	}
}

// A big directory is listed while it is read, by a goroutine holding one
// of the connection's listers slots: readers at any offset, at once, get
// runs of consecutive entries, and together the whole directory once. The
// slot is given back when the directory has been read. Run with -race.
func TestReaddirStreamed(t *testing.T) {
	const n = 10000
	a := bigListing(t, n)
	d := openBig(t, a)
	first, err := d.ReaddirWire(0, 4096)
	if err != nil || len(first) == 0 {
		t.Fatalf("first window: %d bytes, %v", len(first), err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				off := uint64(1 + (g*4999+i*997)%n)
				ents := decodeDirents(mustWindow(t, d, off, 2048))
				for k, e := range ents {
					if e.Offset != off+uint64(k)+1 || len(e.Name) != len("name-000000") {
						t.Errorf("at offset %d, entry %d: %+v", off, k, e)
						return
					}
				}
			}
		}()
	}
	seen := map[string]bool{}
	for off := uint64(0); ; {
		ents := decodeDirents(mustWindow(t, d, off, 8192))
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			if seen[e.Name] {
				t.Fatalf("%s listed twice", e.Name)
			}
			seen[e.Name] = true
		}
		off = ents[len(ents)-1].Offset
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("listed %d names, want %d", len(seen), n)
	}
	eventually(t, "the listers slot is still held", func() bool { return len(a.listers) == 0 })
}

func mustWindow(t *testing.T, d *file, off uint64, count uint32) []byte {
	b, err := d.ReaddirWire(off, count)
	if err != nil {
		t.Errorf("window at %d: %v", off, err)
	}
	return b
}

// lListers bounds the listings read in the background: with the slot
// taken, a big listing is read whole before its first window returns.
func TestReaddirListersBound(t *testing.T) {
	a := bigListing(t, 5000)
	a.listers <- struct{}{}
	d := openBig(t, a)
	if _, err := d.ReaddirWire(0, 4096); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	l := d.snap
	d.mu.Unlock()
	l.mu.Lock()
	done, got := l.done, len(l.at)
	l.mu.Unlock()
	if !done || got != 5000 {
		t.Fatalf("with no slot free: done %v after %d entries, want the whole listing of 5000", done, got)
	}
}

// A clunk in the middle of a listing stops its reader: the directory is
// closed and the slot given back, whether or not it was read to the end.
func TestReaddirClunkStops(t *testing.T) {
	a := bigListing(t, 10000)
	d := openBig(t, a)
	fds := openFDs(t) // the root is held open from here (saferoot's hold)
	if _, err := d.ReaddirWire(0, 4096); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	l := d.snap
	d.mu.Unlock()
	d.Close()
	eventually(t, "the reader did not stop", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.done
	})
	eventually(t, "the listers slot is still held", func() bool { return len(a.listers) == 0 })
	eventually(t, "the directory is still open", func() bool { return openFDs(t) <= fds })
	if b, err := l.window(1<<20, 4096); b != nil || err != nil {
		t.Fatalf("a window past the end of a stopped listing: %d bytes, %v", len(b), err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Quick: every walk, getattr, open and clunk under a mirror or a static
// directory is served where the connection is read, and so is the attach
// of a static root; /active, and a walk that climbs with "..", are not.
func TestQuick(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "projects", "p"), 0o755)
	root := tree.New(tree.Config{
		Roots: map[string]*saferoot.Root{"claude": saferoot.New(home), "dsh": saferoot.New(home)},
		PID:   1, Start: time.Now(),
		Active: &tree.ActiveConfig{},
	})
	a := &Attacher{Root: root}
	if !a.QuickAttach() {
		t.Errorf("QuickAttach of the daemon's root = false, want true")
	}
	if (&Attacher{Root: nodeAt(t, root, "active").(tree.Dir)}).QuickAttach() {
		t.Errorf("QuickAttach of /active = true, want false")
	}
	r, _ := a.Attach()
	f := r.(*file)
	for _, c := range []struct {
		from  []string
		names []string
		quick bool
	}{
		{nil, nil, true},
		{nil, []string{"dsh", "projects"}, true},
		{nil, []string{"claude", "projects", "p"}, true},
		{nil, []string{"pid"}, true},
		{nil, []string{"active"}, false},
		{nil, []string{"active", "claude"}, false},
		{[]string{"dsh"}, []string{"projects"}, true},
		{[]string{"dsh"}, []string{"..", "active"}, false},
		{[]string{"pid"}, nil, true},
		{[]string{"active"}, nil, false},
		{[]string{"active"}, []string{"claude"}, false},
	} {
		from := f
		if c.from != nil {
			_, w, err := f.Walk(c.from)
			if err != nil {
				t.Fatalf("walk %v: %v", c.from, err)
			}
			from = w.(*file)
		}
		if got := from.Quick(c.names); got != c.quick {
			t.Errorf("from /%s, Quick(%q) = %v, want %v", strings.Join(c.from, "/"), c.names, got, c.quick)
		}
	}
}

// nodeAt is the node a walk of name from root reaches.
func nodeAt(t *testing.T, root tree.Dir, name string) tree.Node {
	t.Helper()
	r, _ := (&Attacher{Root: root}).Attach()
	_, w, err := r.Walk([]string{name})
	if err != nil {
		t.Fatalf("walk %s: %v", name, err)
	}
	return w.(*file).node
}
