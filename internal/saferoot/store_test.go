package saferoot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/9harness/9harness/internal/errs"
)

// TestStoreView: the Store view opens a store and its SQLite companions at
// the root's top level and nothing more; the root itself, and any listing,
// still hide them.
func TestStoreView(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"opencode.db", "opencode.db-wal", "opencode.db-shm", "auth.json", "sub/opencode.db", "opencode-beta.db", "log/opencode.log"} {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "opencode.db"), filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	r := New(dir)
	v := r.Store()
	for _, c := range []struct {
		rel        string
		root, view bool // opens through r, through v
	}{
		{"opencode.db", false, true},
		{"opencode.db-wal", false, true},
		{"opencode.db-shm", false, true},
		{"auth.json", false, false},
		{"sub/opencode.db", false, false},
		{"opencode-beta.db", false, false},
		{"OPENCODE.DB", false, false},
		{"log/opencode.log", true, true},
	} {
		for _, x := range []struct {
			name string
			r    *Root
			want bool
		}{{"root", r, c.root}, {"Store view", v, c.view}} {
			f, err := x.r.Open(c.rel)
			if f != nil {
				f.Close()
			}
			if (err == nil) != x.want {
				t.Errorf("%s: Open(%q) = %v, want opened %v", x.name, c.rel, err, x.want)
			}
			if _, err := x.r.Stat(c.rel); (err == nil) != x.want {
				t.Errorf("%s: Stat(%q) = %v, want found %v", x.name, c.rel, err, x.want)
			}
		}
	}
	// A store replaced by a symlink is not followed, even by the view.
	os.Remove(filepath.Join(dir, "opencode.db"))
	if err := os.Symlink(filepath.Join(dir, "auth.json"), filepath.Join(dir, "opencode.db")); err != nil {
		t.Fatal(err)
	}
	if f, err := v.Open("opencode.db"); err == nil || !errs.Is(err, errs.NotExist) {
		if f != nil {
			f.Close()
		}
		t.Errorf("Store view opened a symlinked store: %v", err)
	}
	for _, x := range []*Root{r, v} {
		ents, err := x.ReadDir("")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if Excluded(e.Name) {
				t.Errorf("ReadDir listed %q", e.Name)
			}
		}
	}
}
