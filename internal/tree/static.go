package tree

import (
	"bytes"
	"sort"
	"time"

	"github.com/9harness/9harness/internal/errs"
)

// Child is one named entry of a Static directory. Make is called on every
// lookup and listing, so a child whose backing root has vanished is absent
// (Make returns a NotExist error) without anything being invalidated.
//
// Slow marks a child whose subtree is not Local (see Local); every other
// child of a Static, and everything below it, must be.
type Child struct {
	Name string
	Make func() (Node, error)
	Slow bool
}

// Static is a directory whose names are fixed by the design (the root,
// /claude, /skills, ...) but whose children are made fresh on every request.
type Static struct {
	path     string
	mtime    time.Time
	children []Child // sorted by Name
}

// NewStatic returns a directory at tree path p with the given children.
func NewStatic(p string, mtime time.Time, children ...Child) *Static {
	cs := append([]Child(nil), children...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return &Static{path: p, mtime: mtime, children: cs}
}

// Attr implements Node.
func (d *Static) Attr() (Attr, error) {
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: d.mtime, Mtime: d.mtime, Ctime: d.mtime, Path: SynthPath(d.path)}, nil
}

// Lookup implements Dir.
func (d *Static) Lookup(name string) (Node, error) {
	const op = "tree.Lookup"
	i := sort.Search(len(d.children), func(i int) bool { return d.children[i].Name >= name })
	if i == len(d.children) || d.children[i].Name != name {
		return nil, errs.E(op, errs.NotExist, join(d.path, name), nil)
	}
	return d.children[i].Make()
}

// List implements Dir. A child that is absent right now is left out; any
// other failure of a child is the listing's failure, because a listing that
// silently drops an entry cannot be told apart from a smaller directory.
func (d *Static) List() ([]Entry, error) {
	out := make([]Entry, 0, len(d.children))
	for _, c := range d.children {
		n, err := c.Make()
		if err == nil {
			var a Attr
			if a, err = n.Attr(); err == nil {
				out = append(out, Entry{Name: c.Name, Dir: a.Dir, Path: a.Path})
				continue
			}
		}
		if absent(err) {
			continue
		}
		return nil, err
	}
	return out, nil
}

func absent(err error) bool {
	k := errs.KindOf(err)
	return k == errs.NotExist || k == errs.Private
}

// Gen is a generated file: its content is computed when it is opened and
// held by the handle, so every read of one open sees the same bytes.
type Gen struct {
	path    string
	mtime   func() time.Time
	content func() []byte
}

// NewGen returns a generated file at tree path p.
func NewGen(p string, mtime func() time.Time, content func() []byte) *Gen {
	return &Gen{path: p, mtime: mtime, content: content}
}

// Attr implements Node. The size is that of the content computed now; a
// reader that opens later may see another value of the same fact.
func (g *Gen) Attr() (Attr, error) {
	t := g.mtime()
	return Attr{Mode: 0o444, Size: int64(len(g.content())), Nlink: 1, Atime: t, Mtime: t, Ctime: t, Path: SynthPath(g.path)}, nil
}

// Open implements File.
func (g *Gen) Open() (Handle, error) { return snapshot{bytes.NewReader(g.content())}, nil }

type snapshot struct{ *bytes.Reader }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func (snapshot) Close() error { return nil }

func (s snapshot) held() int64 { return s.Size() }

// Held is about how many bytes the open handle h holds in memory: a
// generated file's snapshot, an events reader's queue at its bound; 0 for
// a handle whose reads go to the host. The wire adapters charge it to the
// connection's byte budget for as long as h is open.
func Held(h Handle) int64 {
	if s, ok := h.(interface{ held() int64 }); ok {
		return s.held()
	}
	return 0
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
