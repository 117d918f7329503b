// Package tree is the protocol-neutral model of the 9harness file tree:
// directories that look up and list children, files that open into handles,
// and the attributes both report. The wire adapters (package ninep) translate
// it to 9P; nothing here knows a message type or an errno.
//
// The model is read-only by absence: there is no create, remove, rename or
// setattr anywhere in it. The one write the design allows (the move) will be
// one explicit optional interface, so that a node that does not implement it
// cannot be written, whatever the wire says.
//
// Nothing is cached. Every Lookup, List, Attr and Open goes to the host (or
// recomputes a generated fact) when it is called, so an appended transcript is
// longer on the next stat and a vanished file answers NotExist on the next
// lookup.
package tree

import (
	"context"
	"hash/fnv"
	"io"
	"time"

	"github.com/9harness/9harness/internal/authz"
)

// Attr is what a node reports about itself.
type Attr struct {
	Dir     bool
	Mode    uint32 // permission bits only: 0555, 0444 (0644 for a writable node)
	Size    int64
	Nlink   uint64
	Atime   time.Time
	Mtime   time.Time
	Ctime   time.Time
	Path    uint64 // stable identity (the qid path): the same file walked twice has the same Path
	Version uint32 // changes when the content changes, where that is known (mtime)
}

// Node is anything in the tree.
type Node interface {
	Attr() (Attr, error)
}

// Dir is a directory node. Lookup is given one name component that the caller
// has already vetted; implementations vet it again, because they are the ones
// that turn it into a host path.
type Dir interface {
	Node
	Lookup(name string) (Node, error)
	// List returns the directory's entries, sorted by name. The result is a
	// fresh snapshot that the caller owns.
	List() ([]Entry, error)
}

// File is a regular file node.
type File interface {
	Node
	// Open returns a handle that reads the file. Generated files snapshot
	// their content here, so one reader never sees a value torn across its
	// reads; mirrored files read the live host file on every ReadAt.
	Open() (Handle, error)
}

// Handle reads an opened file.
type Handle interface {
	io.ReaderAt
	io.Closer
}

// Writer is who writes, as the kernel named them.
type Writer struct {
	Subject authz.Subject
	Comm    string
}

// Writable is the one write the tree has: a node that implements it takes
// a whole value. Every other node is read-only because it does not.
type Writable interface {
	Node
	Write(ctx context.Context, w Writer, data []byte) error
}

// Entry is one directory entry.
type Entry struct {
	Name string
	Dir  bool
	Path uint64 // equal to the Attr.Path a lookup of Name would report
}

// LookupAttr is d.Lookup(name) and the found node's Attr. A mirrored host
// node is made from a stat of its path (it must exist, and be of the right
// kind), and its attributes here are that stat's, taken during this call:
// as fresh as a second stat would be, and a walk then costs one confined
// stat per component, not two (5 syscalls each). The node's own Attr
// always stats anew.
func LookupAttr(d Dir, name string) (Node, Attr, error) {
	n, err := d.Lookup(name)
	if err != nil {
		return nil, Attr{}, err
	}
	if f, ok := n.(interface{ lookupAttr() Attr }); ok {
		return n, f.lookupAttr(), nil
	}
	a, err := n.Attr()
	if err != nil {
		return nil, Attr{}, err
	}
	return n, a, nil
}

// ListAs is d.List() with every entry passed through f, for a caller that
// keeps the listing in its own form (the 9P adapter keeps wire dirents). For
// a mirrored host directory, the largest listings there are, it makes one
// allocation of the result at its final size instead of a []Entry and then
// the caller's copy, which for a 10,000-entry directory would allocate
// several times the listing's own size per request.
func ListAs[T any](d Dir, f func(Entry) T) ([]T, error) {
	if m, ok := d.(*mirrorDir); ok {
		return mirrorListAs(m, f)
	}
	ents, err := d.List()
	if err != nil {
		return nil, err
	}
	out := make([]T, len(ents))
	for i, e := range ents {
		out[i] = f(e)
	}
	return out, nil
}

// synthBit marks the qid paths of generated nodes, so they can never collide
// with the inode-derived paths of mirrored files (which have the bit clear).
const synthBit = 1 << 63

// SynthPath is the qid path of a generated node: a hash of its tree path. It
// is deterministic across walks, connections, restarts and dialects, which a
// counter-based table (p9's fsimpl/qids, which also races) is not.
func SynthPath(treePath string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(treePath))
	return synthBit | h.Sum64()>>1
}

// HostPath is the qid path of a mirrored host file: its inode mixed with its
// device, so two roots on different filesystems cannot collide (the bug p9
// v0.4.0 fixed in localfs). The top bit is kept clear for SynthPath.
func HostPath(dev, ino uint64) uint64 {
	return (ino ^ dev*0x9e3779b97f4a7c15) &^ synthBit
}

// Version derives a qid version from a modification time: a rewritten or
// appended file gets a new version.
func Version(mtime time.Time) uint32 {
	return uint32(mtime.UnixNano())
}
