package saferoot

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// ReadDirEach hands over exactly ReadDir's entries, in its order, after
// announcing their number and the length of their names; a directory it
// cannot list is ReadDir's error, and nothing is handed over.
func TestReadDirEach(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		name := filepath.Join(dir, strings.Repeat("n", i%7)+"f"+string(rune('a'+i%26))+strings.Repeat("x", i%13)+string(rune('0'+i%10))+".jsonl")
		os.WriteFile(name, nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, ".credentials.json"), nil, 0o600) // never listed
	r := New(dir)
	want, err := r.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	var got []Entry
	n, nameBytes, calls := 0, 0, 0
	err = ReadDirEach(r, "", func(count, bytes int) { n, nameBytes = count, bytes; calls++ },
		func(dev uint64, name []byte, dir bool, ino uint64) {
			got = append(got, Entry{Name: string(name), Dir: dir, Ino: ino})
		})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range want {
		total += len(e.Name)
	}
	if calls != 1 || n != len(want) || nameBytes != total {
		t.Errorf("sized: %d calls, (%d, %d), want one call with (%d, %d)", calls, n, nameBytes, len(want), total)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ReadDirEach gave %d entries, not ReadDir's %d, in its order", len(got), len(want))
	}
	if err := ReadDirEach(r, "missing", func(int, int) { t.Error("sized called for a missing directory") },
		func(uint64, []byte, bool, uint64) { t.Error("an entry of a missing directory") }); !errs.Is(err, errs.NotExist) {
		t.Errorf("missing directory: %v, want NotExist", err)
	}
}
