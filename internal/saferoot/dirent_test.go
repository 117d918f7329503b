package saferoot

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The keyed sort gives strings.Compare's order, whatever the names share:
// a common prefix longer than the key, names that end inside the key, names
// that are prefixes of others, keys that tie, bytes above 0x7f.
func TestReadDirSortOrder(t *testing.T) {
	for _, prefix := range []string{"", "f", "-home-user-src-project-", strings.Repeat("p", 200)} {
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(1, uint64(len(prefix))))
		want := map[string]bool{}
		alphabet := "ab\xc3\xa9z09-._"
		for len(want) < 500 {
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
