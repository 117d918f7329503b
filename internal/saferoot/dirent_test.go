package saferoot

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// The keyed sort gives strings.Compare's order, whatever the names share:
// a common prefix longer than the key, names that end inside the key, names
// that are prefixes of others, keys that tie, bytes above 0x7f. The large
// cases are read one buffer ahead (TestSortRuns covers the two runs).
func TestReadDirSortOrder(t *testing.T) {
	for _, c := range []struct {
		prefix string
		n      int
	}{
		{"", 500}, {"f", 500}, {"-home-user-src-project-", 500}, {strings.Repeat("p", 200), 500},
		{"-home-user-src-project-", 1500},
	} {
		prefix := c.prefix
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(1, uint64(len(prefix)+c.n)))
		want := map[string]bool{}
		alphabet := "ab\xc3\xa9z09-._"
		for len(want) < c.n {
			n := rng.IntN(12)
			b := []byte(prefix)
			if rng.IntN(3) == 0 {
				b = append(b, "12345678"[:rng.IntN(9)]...) // keys that tie
			}
			for range n {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			name := string(b)
			if ValidName(name) != nil || Excluded(name) || name == "" || len(name) > maxName {
				continue
			}
			want[name] = true
		}
		var names []string
		for name := range want {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		slices.Sort(names)
		ents, err := New(dir).ReadDir("")
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(ents))
		for i, e := range ents {
			got[i] = e.Name
		}
		if !slices.Equal(got, names) {
			t.Fatalf("prefix %q: order differs from strings.Compare", prefix)
		}
	}
}

// A listing above parallelSort is sorted as two runs merged as read: the
// merge gives strings.Compare's order, ties across the runs included.
func TestSortRuns(t *testing.T) {
	for _, prefix := range []string{"", "-home-user-src-project-"} {
		for _, n := range []int{parallelSort + 1, 3*parallelSort + 7} {
			rng := rand.New(rand.NewPCG(2, uint64(n)))
			s := &scratch{}
			alphabet := "ab\xc3\xa9z09-._"
			var want []string
			for range n {
				b := []byte(prefix)
				if rng.IntN(3) == 0 {
					b = append(b, "12345678"[:rng.IntN(9)]...) // keys that tie
				}
				for range rng.IntN(12) {
					b = append(b, alphabet[rng.IntN(len(alphabet))])
				}
				s.recs = append(s.recs, rec{off: uint32(len(s.names)), n: uint8(len(b))})
				s.names = append(s.names, b...)
				want = append(want, string(b))
			}
			slices.Sort(want)
			s.sort()
			if s.split == len(s.recs) {
				t.Fatalf("%d names: sorted as one run", n)
			}
			var got []string
			s.each(func(r *rec) { got = append(got, string(s.names[r.off:r.off+uint32(r.n)])) })
			if !slices.Equal(got, want) {
				t.Fatalf("prefix %q, %d names: order differs from strings.Compare", prefix, n)
			}
		}
	}
}

// A DirReader lists ReadDir's entries: a small directory as one batch in
// ReadDir's order; a big one in several batches that together hold each of
// ReadDir's entries once. A directory it cannot list is ReadDir's error,
// and Close gives its descriptor back.
func TestDirReader(t *testing.T) {
	for _, c := range []struct {
		n      int
		sorted bool
	}{{300, true}, {6000, false}} {
		dir := t.TempDir()
		for i := range c.n {
			name := filepath.Join(dir, strings.Repeat("n", i%7)+"f"+string(rune('a'+i%26))+strings.Repeat("x", i%13)+fmt.Sprint(i)+".jsonl")
			os.WriteFile(name, nil, 0o644)
		}
		os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		os.WriteFile(filepath.Join(dir, ".credentials.json"), nil, 0o600) // never listed
		r := New(dir)
		want, err := r.ReadDir("")
		if err != nil {
			t.Fatal(err)
		}
		fds := openFDs(t)
		d, err := r.OpenDir("")
		if err != nil {
			t.Fatal(err)
		}
		var got []Entry
		batches := 0
		for {
			k := len(got)
			more, err := d.Next(func(name []byte, dir bool, ino uint64) {
				got = append(got, Entry{Name: string(name), Dir: dir, Ino: ino})
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > k {
				batches++
			}
			if !more {
				break
			}
		}
		if more, _ := d.Next(func([]byte, bool, uint64) { t.Error("an entry after the end") }); more {
			t.Error("more after the end")
		}
		d.Close()
		d.Close()
		if n := openFDs(t); n != fds {
			t.Errorf("%d names: %d descriptors open after Close, %d before", c.n, n, fds)
		}
		if c.sorted {
			if batches != 1 || !slices.Equal(got, want) {
				t.Errorf("%d names: %d batches, %d entries; want ReadDir's %d in one batch, in its order", c.n, batches, len(got), len(want))
			}
			continue
		}
		if batches < 2 {
			t.Errorf("%d names: %d batch, want several", c.n, batches)
		}
		slices.SortFunc(got, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
		if !slices.Equal(got, want) {
			t.Errorf("%d names: the batches hold %d entries, not ReadDir's %d", c.n, len(got), len(want))
		}
	}
	r := New(t.TempDir())
	os.WriteFile(filepath.Join(r.Path(), "file"), nil, 0o644)
	for rel, kind := range map[string]errs.Kind{"missing": errs.NotExist, "file": errs.NotDir} {
		if _, err := r.OpenDir(rel); !errs.Is(err, kind) {
			t.Errorf("OpenDir(%q): %v, want %v", rel, err, kind)
		}
	}
}

// TestDirReaderCloseEarly: a big directory closed after its first batch,
// while its next buffer is being read ahead, leaves no descriptor open and
// no reader running, and Close waits for the reader before it closes the
// directory (the race detector sees the reader and Close).
func TestDirReaderCloseEarly(t *testing.T) {
	dir := t.TempDir()
	for i := range 20000 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("session-%06d.jsonl", i)), nil, 0o644)
	}
	r := New(dir)
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	for range 20 {
		d, err := r.OpenDir("")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		more, err := d.Next(func([]byte, bool, uint64) { n++ })
		if err != nil || !more || n == 0 || n >= 20000 {
			t.Fatalf("first batch: %d names, more %v, %v; want some of 20,000 and more", n, more, err)
		}
		d.Close()
		if more, _ := d.Next(func([]byte, bool, uint64) { t.Error("an entry after Close") }); more {
			t.Error("more after Close")
		}
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after the listings, %d before", n, fds)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the listings, %d before: a reader is left running", n, goroutines)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// BenchmarkDirReaderBatch: the parse and name checks of one streamed batch
// (a 64 KiB getdents64 buffer of 2,048 short regular files, made here), what
// a big listing pays beside the kernel's read.
func BenchmarkDirReaderBatch(b *testing.B) {
	var buf []byte
	for i := 0; ; i++ {
		name := fmt.Sprintf("f%06d", i)
		reclen := (direntName + len(name) + 1 + 7) &^ 7
		if len(buf)+reclen > getdentsBuf {
			break
		}
		r := make([]byte, reclen)
		binary.NativeEndian.PutUint64(r[direntIno:], uint64(1000+i))
		binary.NativeEndian.PutUint16(r[direntReclen:], uint16(reclen))
		r[direntType] = unix.DT_REG
		copy(r[direntName:], name)
		buf = append(buf, r...)
	}
	s := getScratch()
	for b.Loop() {
		s.names, s.recs = s.names[:0], s.recs[:0]
		if err := s.appendDirents(-1, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s.recs)), "ns/name")
}
