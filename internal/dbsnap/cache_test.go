package dbsnap

import (
	"path/filepath"
	"testing"

	"github.com/9harness/9harness/internal/saferoot"
)

// A Cache shares one snapshot while the files are unchanged, takes a new
// one at the first Open after a commit, and closes the old one only when
// its last user releases it.
func TestCache(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 3, 10)
	root := saferoot.New(dir)
	var c Cache

	a, relA, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two Opens of an unchanged database took two snapshots")
	}
	relB()

	insertTx(t, w, 2, 4, 10) // a commit: the -wal grows
	n, relN, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if n == a {
		t.Fatal("Open after a commit returned the old snapshot")
	}
	if got := count(t, n); got != 7 {
		t.Errorf("new snapshot: %d rows, want 7", got)
	}
	// The replaced snapshot still serves its user, as of its Version.
	if got := count(t, a); got != 3 {
		t.Errorf("old snapshot while held: %d rows, want 3", got)
	}
	relA()
	relA() // a second release is harmless
	if err := a.Ping(); err == nil {
		t.Error("the replaced snapshot is still open after its last release")
	}
	relN()
	if err := n.Ping(); err != nil {
		t.Errorf("the current snapshot was closed on release: %v", err)
	}

	// A nil Cache caches nothing; its release closes the snapshot.
	var nc *Cache
	d, relD, err := nc.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, d); got != 7 {
		t.Errorf("nil cache: %d rows, want 7", got)
	}
	relD()
	if err := d.Ping(); err == nil {
		t.Error("a nil Cache's release left the snapshot open")
	}
	if _, _, err := c.Open(root, "absent.db"); err == nil {
		t.Error("an absent database opened")
	}
}
