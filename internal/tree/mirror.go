package tree

import (
	"os"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// Kind of node a mirror mount point must be. A mount point of the wrong kind
// is absent, the same as a missing one: /claude/history is a file or nothing.
type want uint8

const (
	wantAny want = iota
	wantDir
	wantFile
)

// Mirror returns the node for rel under root, which must exist now and be of
// the wanted kind. rel is fixed by the layout (never client bytes).
func mirror(root *saferoot.Root, rel string, w want) (Node, error) {
	const op = "tree.mirror"
	info, err := root.Stat(rel)
	if err != nil {
		return nil, err
	}
	switch {
	case info.Dir && w != wantFile:
		return &mirrorDir{mirrorNode{root, rel, hostAttr(info)}}, nil
	case !info.Dir && w != wantDir:
		return &mirrorFile{mirrorNode{root, rel, hostAttr(info)}}, nil
	}
	return nil, errs.E(op, errs.NotExist, rel, nil)
}

// mirrorNode is a remembered (root, rel) pair. It owns no OS resource: the
// 9P server keeps every intermediate node of a walk alive until the fid is
// clunked, so holding an fd here would pin one per path component.
type mirrorNode struct {
	root *saferoot.Root
	rel  string
	// found is what the stat that made this node saw. Only LookupAttr
	// reads it, right after the lookup; Attr always stats anew.
	found Attr
}

func (m mirrorNode) lookupAttr() Attr { return m.found }

func (m mirrorNode) Attr() (Attr, error) {
	info, err := m.root.Stat(m.rel)
	if err != nil {
		return Attr{}, err
	}
	return hostAttr(info), nil
}

func hostAttr(info saferoot.Info) Attr {
	a := Attr{
		Dir:     info.Dir,
		Mode:    0o444,
		Size:    info.Size,
		Nlink:   info.Nlink,
		Atime:   info.Atime,
		Mtime:   info.Mtime,
		Ctime:   info.Ctime,
		Path:    HostPath(info.Dev, info.Ino),
		Version: Version(info.Mtime),
	}
	if info.Dir {
		a.Mode = 0o555
		a.Size = 0
	}
	return a
}

type mirrorDir struct{ mirrorNode }

// Lookup implements Dir. The name is vetted again here, where it becomes a
// host path component: CheckRel refuses separators, NUL, dot names and
// credential-shaped names before anything on the host is touched; ValidName
// first, because CheckRel alone would take "a/b" as two components and "" as
// the directory itself.
func (d *mirrorDir) Lookup(name string) (Node, error) {
	if err := saferoot.ValidName(name); err != nil {
		return nil, err
	}
	rel := name
	if d.rel != "" {
		rel = d.rel + "/" + name
	}
	if err := saferoot.CheckRel(rel); err != nil {
		return nil, err
	}
	return mirror(d.root, rel, wantAny)
}

// List implements Dir. Entries come from getdents with no stat per entry;
// the directory's own device (from an fstat of the same open) is mixed into
// each entry's Path so that it equals what a lookup of that entry reports.
func (d *mirrorDir) List() ([]Entry, error) {
	return ListAs(d, func(e Entry) Entry { return e })
}

// mirrorListAs is List with each entry passed through f (see ListAs). A
// method cannot have a type parameter, hence the function.
func mirrorListAs[T any](d *mirrorDir, f func(Entry) T) ([]T, error) {
	return saferoot.ReadDirFunc(d.root, d.rel, func(dev uint64, e saferoot.Entry) T {
		return f(Entry{Name: e.Name, Dir: e.Dir, Path: HostPath(dev, e.Ino)})
	})
}

type mirrorFile struct{ mirrorNode }

// Open implements File: every ReadAt of the handle is a pread of the live
// host file, so a transcript that grows is longer on the next read.
func (f *mirrorFile) Open() (Handle, error) {
	fh, err := f.root.Open(f.rel)
	if err != nil {
		return nil, err
	}
	return hostHandle{fh}, nil
}

type hostHandle struct{ *os.File }
