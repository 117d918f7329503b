package tree

import (
	"hash/maphash"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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
	return mirrorAs(root, rel, w, false)
}

// mirrorAs is mirror for the owner's view (grantee false) or a grantee's.
// A grantee is never served a regular file with more than one link (a
// hardlink inside a root to ~/.ssh/id_ed25519 would otherwise hand the
// grantee a file the host refuses it), and sees a directory's link count as
// 2 plus its visible subdirectories (the real count tells how many excluded
// ones there are).
func mirrorAs(root *saferoot.Root, rel string, w want, grantee bool) (Node, error) {
	info, err := root.Stat(rel)
	if err != nil {
		return nil, err
	}
	return mirrorFrom(mirrorNode{root: root, name: rel, grantee: grantee}, info, w)
}

// mirrorFrom makes n, which a stat of its path found as info, a node of
// the wanted kind.
func mirrorFrom(n mirrorNode, info saferoot.Info, w want) (Node, error) {
	const op = "tree.mirror"
	var err error
	if n.found, err = n.attrOf(info); err != nil {
		return nil, err
	}
	switch {
	case info.Dir && w != wantFile:
		return &mirrorDir{n}, nil
	case !info.Dir && w != wantDir:
		return &mirrorFile{n}, nil
	}
	return nil, errs.E(op, errs.NotExist, n.rel(), nil)
}

// mirrorNode is a remembered (root, rel) pair. It owns no OS resource: the
// 9P server keeps every intermediate node of a walk alive until the fid is
// clunked, so holding an fd here would pin one per path component.
//
// A node looked up in a mirrored directory keeps its parent and its own
// name, not its whole path: the 9P server keeps every node of a walk, and
// a path string per node would make a fid's cost grow with the square of
// its depth (16 names of 250 bytes: 30 KiB of paths per fid). The path is
// joined when a call needs it, the allocation of one host call's path.
type mirrorNode struct {
	root *saferoot.Root
	up   *mirrorNode // the directory it was looked up in; nil: name is the whole rel
	name string
	// found is what the stat that made this node saw. Only LookupAttr
	// reads it, right after the lookup; Attr always stats anew.
	found   Attr
	grantee bool
}

func (m mirrorNode) lookupAttr() Attr { return m.found }

// rel is the node's path under its root.
func (m *mirrorNode) rel() string {
	if m.up == nil {
		return m.name
	}
	n := len(m.name)
	for p := m.up; p != nil; p = p.up {
		if p.name != "" {
			n += len(p.name) + 1
		}
	}
	b := make([]byte, n)
	i := n
	for p := m; p != nil; p = p.up {
		if p.name == "" {
			continue
		}
		if i < n {
			i--
			b[i] = '/'
		}
		i -= len(p.name)
		copy(b[i:], p.name)
	}
	return string(b[i:])
}

func (m *mirrorNode) Attr() (Attr, error) {
	info, err := m.root.Stat(m.rel())
	if err != nil {
		return Attr{}, err
	}
	return m.attrOf(info)
}

// attrOf is the attributes of info as m's viewer sees them.
func (m *mirrorNode) attrOf(info saferoot.Info) (Attr, error) {
	a := hostAttr(info)
	if !m.grantee {
		return a, nil
	}
	if !info.Dir {
		if info.Nlink > 1 {
			return Attr{}, errs.E("tree.mirror", errs.NotExist, m.rel(), nil)
		}
		return a, nil
	}
	a.Nlink = 2 + subdirs.count(m.root, m.rel(), info)
	return a, nil
}

// subdirs remembers grantee directories' visible-subdirectory counts:
// every lookup of a grantee's directory needs one (its link count), so a
// walk of depth 8 would otherwise list 8 directories, and a tree walked
// by several clients would be listed again and again.
var subdirs = subdirCache{m: map[subdirKey]subdirCount{}}

// subdirSettle is how long after a directory's last change (its ctime) a
// count must have started to be kept. Every change to a directory's
// entries sets its ctime from the kernel's coarse clock (a tick of a few
// milliseconds), so a change made just after a count began may leave the
// ctime as the count saw it; a count begun a second after the ctime cannot
// have missed one. A directory changed in the last second is listed anew.
const subdirSettle = time.Second

// subdirCacheMax bounds the cache (each entry is some 64 bytes): when it
// is full it is emptied.
const subdirCacheMax = 4096

type subdirCache struct {
	mu   sync.Mutex
	m    map[subdirKey]subdirCount
	seed maphash.Seed
	once sync.Once
}

// subdirKey names a directory as a listing sees it: which entries a
// listing shows depends on the root and the path (slug directories, copy
// stores), as well as on the directory itself.
type subdirKey struct {
	root     *saferoot.Root
	rel      uint64 // maphash of the rel path
	dev, ino uint64
}

type subdirCount struct {
	ctime, mtime time.Time
	n            uint64
}

// count is visibleSubdirs(root, rel), reusing a count made earlier when
// info, a stat made for this request, shows the directory unchanged since
// (the design's freshness rule: work whose inputs a stat made after the
// request arrived shows unchanged may be shared).
func (c *subdirCache) count(root *saferoot.Root, rel string, info saferoot.Info) uint64 {
	c.once.Do(func() { c.seed = maphash.MakeSeed() })
	k := subdirKey{root: root, rel: maphash.String(c.seed, rel), dev: info.Dev, ino: info.Ino}
	c.mu.Lock()
	got, ok := c.m[k]
	c.mu.Unlock()
	if ok && got.ctime.Equal(info.Ctime) && got.mtime.Equal(info.Mtime) {
		return got.n
	}
	started := time.Now()
	n := visibleSubdirs(root, rel)
	if started.Sub(info.Ctime) < subdirSettle {
		return n
	}
	c.mu.Lock()
	if len(c.m) >= subdirCacheMax {
		clear(c.m)
	}
	c.m[k] = subdirCount{ctime: info.Ctime, mtime: info.Mtime, n: n}
	c.mu.Unlock()
	return n
}

// visibleSubdirs counts the subdirectories of rel a listing shows: none if
// it cannot be listed (a listing would fail the same way). It counts as
// the directory is read, batch by batch, and keeps no name: every stat of
// a grantee's directory counts, and reading a directory of 50,000 long
// names whole would hold 15 MB per stat, charged to no one.
func visibleSubdirs(root *saferoot.Root, rel string) uint64 {
	r, err := root.OpenDir(rel)
	if err != nil {
		return 0
	}
	defer r.Close()
	var n uint64
	for {
		more, err := r.Next(func(_ []byte, dir bool, _ uint64) {
			if dir {
				n++
			}
		})
		if err != nil {
			return 0
		}
		if !more {
			return n
		}
	}
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
	rel := join1(d.rel(), name)
	if err := d.root.CheckRel(rel); err != nil {
		return nil, err
	}
	info, err := d.root.Stat(rel)
	if err != nil {
		return nil, err
	}
	return mirrorFrom(mirrorNode{root: d.root, up: &d.mirrorNode, name: name, grantee: d.grantee}, info, wantAny)
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
	if d.grantee {
		return granteeList(d, f)
	}
	return saferoot.ReadDirFunc(d.root, d.rel(), func(dev uint64, e saferoot.Entry) T {
		return f(Entry{Name: e.Name, Dir: e.Dir, Path: HostPath(dev, e.Ino)})
	})
}

// Batches lists a mirrored directory batch by batch, as it is read (see
// saferoot.DirReader: one sorted batch for a directory that fits one read,
// the filesystem's order for a bigger one). Entries are List's, with the
// same Paths; a grantee's are granteeList's, each file stat'ed as it
// passes, so that a big directory is never held whole to be filtered.
type Batches struct {
	r       *saferoot.DirReader
	root    *saferoot.Root
	rel     string
	grantee bool
	name    []byte // join1(rel, name) of the entry being stat'ed
}

// OpenBatches opens d for a listing by batches. ok is false for a directory
// that cannot (not a mirror): the caller uses List.
func OpenBatches(d Dir) (b *Batches, ok bool, err error) {
	m, isMirror := d.(*mirrorDir)
	if !isMirror {
		return nil, false, nil
	}
	rel := m.rel()
	r, err := m.root.OpenDir(rel)
	if err != nil {
		return nil, true, err
	}
	return &Batches{r: r, root: m.root, rel: rel, grantee: m.grantee}, true, nil
}

// Next passes the next batch's entries to each, a name valid only during
// the call, and reports whether more may follow (saferoot.DirReader.Next).
func (b *Batches) Next(each func(name []byte, dir bool, path uint64)) (bool, error) {
	dev := b.r.Dev()
	if !b.grantee {
		return b.r.Next(func(name []byte, dir bool, ino uint64) { each(name, dir, HostPath(dev, ino)) })
	}
	return b.r.Next(func(name []byte, dir bool, ino uint64) {
		b.name = append(b.name[:0], b.rel...)
		if b.rel != "" {
			b.name = append(b.name, '/')
		}
		b.name = append(b.name, name...)
		info, err := b.root.Stat(string(b.name))
		if err != nil || info.Dir != dir || (!info.Dir && info.Nlink > 1) {
			return
		}
		each(name, dir, HostPath(info.Dev, info.Ino))
	})
}

// Hint is about how many entries the directory holds.
func (b *Batches) Hint() int { return b.r.Hint() }

// Close closes the directory.
func (b *Batches) Close() { b.r.Close() }

// granteeList is a grantee's listing: a regular file is listed only if a
// stat of it, made now, finds one link (see mirrorAs). A file that vanished
// meanwhile is left out, as a listing made a moment later would.
func granteeList[T any](d *mirrorDir, f func(Entry) T) ([]T, error) {
	rel := d.rel()
	ents, err := d.root.ReadDir(rel)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(ents))
	for _, e := range ents {
		info, err := d.root.Stat(join1(rel, e.Name))
		if err != nil || info.Dir != e.Dir || (!info.Dir && info.Nlink > 1) {
			continue
		}
		out = append(out, f(Entry{Name: e.Name, Dir: e.Dir, Path: HostPath(info.Dev, info.Ino)}))
	}
	return out, nil
}

// join1 is rel/name, or name at the root.
func join1(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

type mirrorFile struct{ mirrorNode }

// Open implements File: every ReadAt of the handle is a pread of the live
// host file, so a transcript that grows is longer on the next read.
func (f *mirrorFile) Open() (Handle, error) {
	rel := f.rel()
	fh, err := f.root.Open(rel)
	if err != nil {
		return nil, err
	}
	if f.grantee {
		// Checked on the open file, not only at lookup: a link made since
		// the lookup is seen here, and this is the file that is read.
		var st unix.Stat_t
		if err := unix.Fstat(int(fh.Fd()), &st); err != nil || st.Nlink > 1 {
			fh.Close()
			return nil, errs.E("tree.Open", errs.NotExist, rel, err)
		}
	}
	return hostHandle{fh}, nil
}

type hostHandle struct{ *os.File }
