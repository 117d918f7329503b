package tree

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

func fixture(t *testing.T, harnesses ...string) (Dir, string) {
	t.Helper()
	home := t.TempDir()
	roots := map[string]*saferoot.Root{}
	for _, h := range Harnesses {
		roots[h] = saferoot.New(filepath.Join(home, "."+h))
	}
	for _, h := range harnesses {
		os.MkdirAll(filepath.Join(home, "."+h), 0o755)
	}
	return New(Config{Roots: roots, PID: 42, Start: time.Unix(1000, 0), Now: func() time.Time { return time.Unix(1100, 0) }}), home
}

func names(t *testing.T, d Dir) []string {
	t.Helper()
	ents, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A harness whose root is missing has no entry; its mirrors appear when the
// root does, with no restart.
func TestRootsAppearAndVanish(t *testing.T) {
	root, home := fixture(t)
	if got, want := names(t, root), []string{"pid", "skills", "uptime"}; !eq(got, want) {
		t.Fatalf("empty home: %q, want %q", got, want)
	}
	os.MkdirAll(filepath.Join(home, ".claude", "projects"), 0o755)
	os.MkdirAll(filepath.Join(home, ".omp", "agent", "skills"), 0o755)
	os.MkdirAll(filepath.Join(home, ".hermes"), 0o755)
	if got, want := names(t, root), []string{"claude", "hermes", "omp", "pid", "skills", "uptime"}; !eq(got, want) {
		t.Fatalf("after mkdir: %q, want %q", got, want)
	}
	c, err := root.Lookup("claude")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, c.(Dir)); !eq(got, []string{"projects"}) {
		t.Fatalf("/claude: %q", got)
	}
	s, _ := root.Lookup("skills")
	if got := names(t, s.(Dir)); !eq(got, []string{"omp"}) {
		t.Fatalf("/skills: %q", got)
	}
	os.RemoveAll(filepath.Join(home, ".claude"))
	if _, err := root.Lookup("claude"); !errs.Is(err, errs.NotExist) {
		t.Fatalf("vanished root: %v", err)
	}
}

// A mount point of the wrong kind is absent: /claude/history is a file or
// nothing, /omp a directory or nothing.
func TestMountKinds(t *testing.T) {
	root, home := fixture(t, "claude", "omp")
	os.Mkdir(filepath.Join(home, ".claude", "history.jsonl"), 0o755)
	os.WriteFile(filepath.Join(home, ".omp", "agent"), []byte("x"), 0o644)
	c, _ := root.Lookup("claude")
	if _, err := c.(Dir).Lookup("history"); !errs.Is(err, errs.NotExist) {
		t.Errorf("directory history.jsonl: %v", err)
	}
	if _, err := root.Lookup("omp"); !errs.Is(err, errs.NotExist) {
		t.Errorf("file agent: %v", err)
	}
}

// The facts: /pid and /uptime, one line each, snapshotted per open.
func TestFacts(t *testing.T) {
	root, _ := fixture(t)
	for name, want := range map[string]string{"pid": "42\n", "uptime": "100\n"} {
		n, err := root.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := n.(File).Open()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 64)
		k, _ := h.ReadAt(b, 0)
		if string(b[:k]) != want {
			t.Errorf("%s = %q, want %q", name, b[:k], want)
		}
		a, _ := n.Attr()
		if a.Size != int64(len(want)) || a.Mode != 0o444 || a.Dir {
			t.Errorf("%s attr %+v", name, a)
		}
	}
}

// Identity: a file walked twice has the same Path, a listing reports the
// Path a lookup reports, and generated and mirrored paths never collide.
func TestPaths(t *testing.T) {
	root, home := fixture(t, "dsh")
	os.WriteFile(filepath.Join(home, ".dsh", "a"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(home, ".dsh", "b"), 0o755)
	d, _ := root.Lookup("dsh")
	ents, err := d.(Dir).List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n1, _ := d.(Dir).Lookup(e.Name)
		n2, _ := d.(Dir).Lookup(e.Name)
		a1, _ := n1.Attr()
		a2, _ := n2.Attr()
		if a1.Path != a2.Path || a1.Path != e.Path || a1.Dir != e.Dir {
			t.Errorf("%s: lookup %x/%x, listing %x", e.Name, a1.Path, a2.Path, e.Path)
		}
		if a1.Path&synthBit != 0 {
			t.Errorf("%s: mirrored path has the synthetic bit", e.Name)
		}
	}
	if SynthPath("/pid")&synthBit == 0 || SynthPath("/pid") != SynthPath("/pid") || SynthPath("/pid") == SynthPath("/uptime") {
		t.Error("SynthPath is not a deterministic, marked hash")
	}
	if !sort.SliceIsSorted(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name }) {
		t.Error("listing not sorted")
	}
}

// Names are vetted where they become host paths.
func TestLookupRefusesBadNames(t *testing.T) {
	root, home := fixture(t, "dsh")
	os.WriteFile(filepath.Join(home, ".dsh", "auth.json"), []byte("x"), 0o644)
	d, _ := root.Lookup("dsh")
	for name, kind := range map[string]errs.Kind{
		"..": errs.Invalid, ".": errs.Invalid, "a/b": errs.Invalid, "a\x00": errs.Invalid, "": errs.Invalid,
		"auth.json": errs.Private,
	} {
		if _, err := d.(Dir).Lookup(name); errs.KindOf(err) != kind {
			t.Errorf("lookup %q: %v, want kind %v", name, err, kind)
		}
	}
}
