package ninep

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

func attach(t *testing.T) (p9.File, string) {
	t.Helper()
	home := t.TempDir()
	dsh := filepath.Join(home, ".dsh")
	os.MkdirAll(filepath.Join(dsh, "sub"), 0o755)
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(dsh, "sub", fmt.Sprintf("f%03d", i)), nil, 0o644)
	}
	os.WriteFile(filepath.Join(dsh, "file"), []byte("hello\n"), 0o644)
	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(dsh)}, PID: 1, Start: time.Now()})
	f, err := (&Attacher{Root: root}).Attach()
	if err != nil {
		t.Fatal(err)
	}
	return f, dsh
}

// The root's ".." is the root, and ".." elsewhere goes to the parent the
// walk came from, never to the host's.
func TestDotDot(t *testing.T) {
	root, _ := attach(t)
	_, _, _, rootAttr, _ := root.WalkGetAttr(nil)
	rq, _, _, _ := root.GetAttr(p9.AttrMaskAll)
	qids, f, err := root.Walk([]string{".."})
	if err != nil || len(qids) != 1 || qids[0] != rq {
		t.Fatalf("root ..: %v %v, want %v", qids, err, rq)
	}
	_, _, a, _ := f.GetAttr(p9.AttrMaskAll)
	if a != rootAttr {
		t.Fatalf("root .. attr differs")
	}
	qids, _, err = root.Walk([]string{"dsh", "sub", "..", "..", ".."})
	if err != nil || qids[4] != rq {
		t.Fatalf("dsh/sub/../../..: %v %v", qids, err)
	}
}

// Readdir: offsets resume after the entry, the byte budget is honoured, a
// small budget still makes progress one entry at a time, entry types are
// the DT_* values Linux expects, and qids equal what a walk reports.
func TestReaddir(t *testing.T) {
	root, _ := attach(t)
	_, d, err := root.Walk([]string{"dsh", "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	var all []p9.Dirent
	off := uint64(0)
	calls := 0
	for {
		ents, err := d.Readdir(off, 3*(direntSize+4))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == 0 {
			break
		}
		if len(ents) > 3 {
			t.Fatalf("budget for 3 entries returned %d", len(ents))
		}
		calls++
		all = append(all, ents...)
		off = ents[len(ents)-1].Offset
	}
	if len(all) != 100 || calls != 34 {
		t.Fatalf("%d entries in %d calls", len(all), calls)
	}
	for i, e := range all {
		if e.Name != fmt.Sprintf("f%03d", i) || e.Type != dtReg || e.Offset != uint64(i+1) {
			t.Fatalf("entry %d: %+v", i, e)
		}
		q, _, err := d.Walk([]string{e.Name})
		if err != nil || q[0].Path != e.QID.Path {
			t.Fatalf("%s: walk qid %v, readdir %v", e.Name, q, e.QID)
		}
	}
	_, top, _ := root.Walk([]string{"dsh"})
	top.Open(p9.ReadOnly)
	ents, _ := top.Readdir(0, 1<<16)
	types := map[string]p9.QIDType{}
	for _, e := range ents {
		types[e.Name] = e.Type
	}
	if types["sub"] != dtDir || types["file"] != dtReg {
		t.Fatalf("types %v", types)
	}
}

// Opens other than read-only are refused, reads see the file, and reading
// a directory or listing a file fail cleanly.
func TestOpenAndRead(t *testing.T) {
	root, dsh := attach(t)
	for _, mode := range []p9.OpenFlags{p9.WriteOnly, p9.ReadWrite, p9.ReadOnly | oTrunc} {
		_, f, _ := root.Walk([]string{"dsh", "file"})
		if _, _, err := f.Open(mode); err != linux.EROFS {
			t.Errorf("open %v: %v", mode, err)
		}
	}
	_, f, _ := root.Walk([]string{"dsh", "file"})
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 100)
	n, err := f.ReadAt(b, 0)
	if err != nil || string(b[:n]) != "hello\n" {
		t.Fatalf("read %q %v", b[:n], err)
	}
	if n, err := f.ReadAt(b, 6); n != 0 || err != io.EOF {
		t.Fatalf("read at end: %d %v", n, err)
	}
	// The file grows: the same open handle sees it (pread of the live file).
	os.WriteFile(filepath.Join(dsh, "file"), []byte("hello\nworld\n"), 0o644)
	if n, _ := f.ReadAt(b, 6); string(b[:n]) != "world\n" {
		t.Fatalf("growth not visible: %q", b[:n])
	}
	if _, err := f.Readdir(0, 1000); err != linux.ENOTDIR {
		t.Errorf("readdir of a file: %v", err)
	}
	if _, _, err := f.Walk([]string{"x"}); err != linux.ENOTDIR {
		t.Errorf("walk from a file: %v", err)
	}
	_, d, _ := root.Walk([]string{"dsh"})
	d.Open(p9.ReadOnly)
	if _, err := d.ReadAt(b, 0); err != linux.EISDIR {
		t.Errorf("read of a directory: %v", err)
	}
	for _, name := range []string{"nosuch", "auth.json"} {
		if _, _, err := d.Walk([]string{name}); err != linux.ENOENT {
			t.Errorf("walk %s: %v", name, err)
		}
	}
}
