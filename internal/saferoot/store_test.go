package saferoot

import (
	"os"
	"path/filepath"
	"slices"
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

// TestCopyStores: a copy store is hidden, with everything beneath it, from
// every listing, stat, open and directory read, in any case, through the
// root and its Hold and Store views; its siblings are served.
//
// Guards rule 2: no credential is listed or read (a copy of a project's key
// is one under another name).
func TestCopyStores(t *testing.T) {
	dir := t.TempDir()
	obj := "checkpoints/0123456789abcdef/objects/ab/cdef0123456789"
	for _, n := range []string{
		obj, "checkpoints/0123456789abcdef/HERMES_WORKDIR",
		"profiles/work/checkpoints/fedcba9876543210/objects/12/3456",
		"profiles/work/sessions/s.json", "profiles/work/state.db",
		"sessions/checkpoints/x.json", // deeper than declared: not a store
		"sessions/s.json", "CHECKPOINTS/x",
	} {
		write(t, filepath.Join(dir, n), "copy of deploy.key")
	}
	r := New(dir)
	r.SetCopyStores("checkpoints", "profiles/*/checkpoints")
	for _, x := range []struct {
		name string
		r    *Root
	}{{"root", r}, {"Hold view", r.Hold()}, {"Store view", r.Store()}} {
		for _, p := range []string{
			"checkpoints", obj, "checkpoints/0123456789abcdef", "checkpoints/0123456789abcdef/HERMES_WORKDIR",
			"profiles/work/checkpoints", "profiles/work/checkpoints/fedcba9876543210/objects/12/3456",
			"CHECKPOINTS", "CHECKPOINTS/x", "ſ" + "essions/../checkpoints",
		} {
			if _, err := x.r.Stat(p); err == nil {
				t.Errorf("%s: Stat(%q) served", x.name, p)
			}
			if f, err := x.r.Open(p); err == nil {
				f.Close()
				t.Errorf("%s: Open(%q) served", x.name, p)
			}
			if _, err := x.r.ReadDir(p); err == nil {
				t.Errorf("%s: ReadDir(%q) served", x.name, p)
			}
			if d, err := x.r.OpenDir(p); err == nil {
				d.Close()
				t.Errorf("%s: OpenDir(%q) served", x.name, p)
			}
		}
		for _, p := range []string{"sessions/s.json", "profiles/work/sessions/s.json", "sessions/checkpoints/x.json"} {
			if _, err := x.r.Stat(p); err != nil {
				t.Errorf("%s: Stat(%q) = %v", x.name, p, err)
			}
		}
		for rel, want := range map[string][]string{
			"":              {"profiles", "sessions"},
			"profiles/work": {"sessions", "state.db"},
			"sessions":      {"checkpoints", "s.json"},
		} {
			ents, err := x.r.ReadDir(rel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: ReadDir(%q) = %v, want %v", x.name, rel, got, want)
			}
			d, err := x.r.OpenDir(rel)
			if err != nil {
				t.Fatal(err)
			}
			got = got[:0]
			for more := true; more; {
				more, err = d.Next(func(name []byte, _ bool, _ uint64) { got = append(got, string(name)) })
				if err != nil {
					t.Fatal(err)
				}
			}
			d.Close()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: OpenDir(%q) = %v, want %v", x.name, rel, got, want)
			}
		}
		x.r.Release()
	}
}
