// Package ninep adapts the protocol-neutral tree to 9P2000.L on
// github.com/hugelgupf/p9. It is the only package that sees the library's
// large File interface; everything below it speaks package tree.
package ninep

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/tree"
)

// Attacher serves one tree to one connection. The daemon makes one per
// connection: p9's Attach takes no arguments, so binding the kernel-attested
// peer here is the only way the files it returns can know who asked.
type Attacher struct {
	Root tree.Dir
	UID  uint32 // owner reported for every file: the daemon's own uid
	GID  uint32
	// Writer is the connection's peer, as the kernel named it: the one
	// write (the move) is decided on it, never on the 9P uname.
	Writer tree.Writer
	// Ctx bounds writes. It is the daemon's, not the connection's: a move,
	// once started, completes whether or not the client stays.
	Ctx context.Context

	// listers holds a slot for each listing read in the background (see
	// lListers); nil: none is, every listing is read whole.
	listers chan struct{}
	// bytes charges what the connection's fids, listings, handles and
	// reads hold to its pool (budget.go); nil charges nothing.
	bytes *charger
}

// Attach implements p9.Attacher.
func (a *Attacher) Attach() (p9.File, error) {
	if err := a.bytes.charge(fileCost, "a fid"); err != nil {
		return nil, linux.EMFILE
	}
	return &file{a: a, node: a.Root, charged: fileCost}, nil
}

// QuickAttach implements p9.QuickAttacher: a Tattach of the root is
// served where the connection is read when the root answers from memory
// (every root the daemon serves: a static directory).
func (a *Attacher) QuickAttach() bool { return tree.Local(a.Root, nil) }

// file is a p9.File over a tree.Node. Unopened files own nothing: p9 keeps
// every intermediate file of a walk alive until the final fid is clunked.
type file struct {
	readOnly
	templatefs.XattrUnimplemented
	templatefs.NotLockable
	templatefs.NoopRenamed

	a    *Attacher
	node tree.Node
	up   *ancestor // nearest first; the root's ".." is the root
	here int64     // what node holds: walkCost of its name, 0 for the root
	// charged is what the walk that made this file charged (walkCost),
	// released by Close.
	charged int64

	mu       sync.Mutex
	h        tree.Handle // set by Open on a file
	hcharged int64       // what h holds (openCost), charged by Open
	snap     *listing    // the listing served by Readdir, taken at offset 0
	open     bool
	// reason, once a write on this fid has failed, is what a read of the
	// fid returns instead of the file (reason.go).
	reason []byte
}

// Every optional interface of the p9 fork the adapter implements, asserted
// here: the fork finds them by type assertion at run time, so a method
// renamed on either side would otherwise turn its path off in silence
// (splice reads, blocking reads, cancelled reads, inline requests).
var (
	_ p9.File            = (*file)(nil)
	_ p9.DirentsReader   = (*file)(nil)
	_ p9.QuickFile       = (*file)(nil)
	_ p9.HostFileReader  = (*file)(nil)
	_ p9.ReaderAtContext = (*file)(nil)
	_ p9.Blocker         = (*file)(nil)
	_ p9.Attacher        = (*Attacher)(nil)
	_ p9.QuickAttacher   = (*Attacher)(nil)
	// A mirrored file's handle, which HostFile hands the fork to splice.
	_ syscall.Conn = (*os.File)(nil)
)

func (f *file) clone() *file {
	return &file{a: f.a, node: f.node, up: f.up, here: f.here}
}

// walked charges nf, walked from f by names, to the connection: a fid
// that does not fit is refused EMFILE, as a fid beyond a count would be.
func (f *file) walked(nf *file, names []string) error {
	n := walkCost(names)
	if err := f.a.bytes.charge(n, "a fid"); err != nil {
		return linux.EMFILE
	}
	nf.charged = n
	return nil
}

// step walks one name from f in place and reports what it reached.
func (f *file) step(name string) (tree.Attr, error) {
	if name == ".." {
		if f.up != nil {
			f.node, f.here, f.up = f.up.node, f.up.here, f.up.up
		}
		return f.node.Attr()
	}
	d, ok := f.node.(tree.Dir)
	if !ok {
		return tree.Attr{}, linux.ENOTDIR
	}
	n, a, err := tree.LookupAttr(d, name)
	if err != nil {
		return tree.Attr{}, err
	}
	f.up = &ancestor{node: f.node, here: f.here, up: f.up, total: f.here + f.up.chain()}
	f.node, f.here = n, walkCost([]string{name})
	return a, nil
}

// Walk implements p9.File.
func (f *file) Walk(names []string) ([]p9.QID, p9.File, error) {
	nf := f.clone()
	qids := make([]p9.QID, 0, len(names))
	for _, name := range names {
		a, err := nf.step(name)
		if err != nil {
			return nil, nil, Errno(err)
		}
		qids = append(qids, qidOf(a))
	}
	if err := f.walked(nf, names); err != nil {
		return nil, nil, err
	}
	return qids, nf, nil
}

// WalkGetAttr implements p9.File. The server walks one component at a time
// and always wants the attributes, so doing both here saves a stat per
// component (tree.LookupAttr).
func (f *file) WalkGetAttr(names []string) ([]p9.QID, p9.File, p9.AttrMask, p9.Attr, error) {
	nf := f.clone()
	qids := make([]p9.QID, 0, len(names))
	var a tree.Attr
	for _, name := range names {
		var err error
		if a, err = nf.step(name); err != nil {
			return nil, nil, p9.AttrMask{}, p9.Attr{}, Errno(err)
		}
		qids = append(qids, qidOf(a))
	}
	if len(names) == 0 {
		var err error
		if a, err = nf.node.Attr(); err != nil {
			return nil, nil, p9.AttrMask{}, p9.Attr{}, Errno(err)
		}
	}
	if err := f.walked(nf, names); err != nil {
		return nil, nil, p9.AttrMask{}, p9.Attr{}, err
	}
	return qids, nf, attrMask, f.a.attr(a), nil
}

// GetAttr implements p9.File.
func (f *file) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	a, err := f.node.Attr()
	if err != nil {
		return p9.QID{}, p9.AttrMask{}, p9.Attr{}, Errno(err)
	}
	return qidOf(a), attrMask, f.a.attr(a), nil
}

// StatFS implements p9.File.
func (f *file) StatFS() (p9.FSStat, error) {
	return p9.FSStat{Type: 0x01021997, BlockSize: 4096, NameLength: 255}, nil
}

// Open implements p9.File. Only a read-only open of anything is allowed,
// except of a writable node, which may also be opened for writing (echo
// name > zmx opens with O_TRUNC), or read-write so that a read after a
// failed write returns the reason (reason.go). p9 calls it at most once per
// file.
func (f *file) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	h, err := openNode(f.node, mode.Mode() != p9.ReadOnly || mode&oTrunc != 0, true)
	if err != nil {
		return p9.QID{}, 0, Errno(err)
	}
	held := openCost(h)
	if err := f.a.bytes.charge(held, "an open file's snapshot"); err != nil {
		h.Close()
		return p9.QID{}, 0, Errno(err)
	}
	a, err := f.node.Attr()
	if err != nil {
		if h != nil {
			h.Close()
		}
		f.a.bytes.release(held)
		return p9.QID{}, 0, Errno(err)
	}
	f.mu.Lock()
	f.h, f.hcharged = h, held
	f.open = true
	f.mu.Unlock()
	return qidOf(a), 0, nil
}

// ReadAt implements p9.File. After a failed write on this fid, it reads
// the reason instead of the file.
func (f *file) ReadAt(p []byte, off int64) (int, error) { return f.read(nil, p, off) }

// ReadAtContext implements p9.ReaderAtContext: the p9 fork cancels ctx
// when a Tflush names the read or the connection ends, which ends a read
// that waits (a ContextReader handle, the events file) with EINTR.
func (f *file) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return f.read(ctx, p, off)
}

// Blocking implements p9.Blocker: reads of a ContextReader handle wait
// for events, and hold the connection's blocking-read slots, not its
// request slots (maxBlockingReads).
func (f *file) Blocking() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.h.(ContextReader)
	return ok
}

// read is ReadAt, with ctx (if not nil) handed to a handle that waits.
func (f *file) read(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	h, reason := f.h, f.reason
	f.mu.Unlock()
	if reason != nil {
		if off >= int64(len(reason)) {
			return 0, io.EOF
		}
		return copy(p, reason[off:]), nil
	}
	if h == nil {
		if _, ok := f.node.(tree.Dir); ok {
			return 0, linux.EISDIR
		}
		return 0, linux.EBADF
	}
	// The buffer p is the p9 fork's, charged by it from before this
	// read until its reply is written (serveL, WithReadBuffers).
	var n int
	var err error
	if ctx != nil {
		n, err = readHandle(ctx, nil, h, p, off)
	} else {
		n, err = h.ReadAt(p, off)
	}
	if err == io.EOF {
		if n > 0 {
			return n, nil
		}
		return 0, io.EOF
	}
	if errs.KindOf(err) == errs.Interrupted {
		return n, linux.EINTR
	}
	if err != nil {
		return n, linux.EIO
	}
	return n, nil
}

// HostFile implements p9.HostFileReader: when ReadAt is a pread of an open
// host file (a mirrored file's handle is an *os.File, and nothing else in
// the tree is a syscall.Conn), the server may splice that file's bytes to
// the socket instead of calling ReadAt. Not after a failed write, whose
// reads are the reason, not the file.
func (f *file) HostFile() (syscall.Conn, bool) {
	f.mu.Lock()
	h, reason := f.h, f.reason
	f.mu.Unlock()
	if reason != nil || h == nil {
		return nil, false
	}
	sc, ok := h.(syscall.Conn)
	return sc, ok
}

// Readdir implements p9.File. The listing is snapshotted at offset 0 and
// offsets are indices into that snapshot (offset i+1 resumes after entry i),
// so one listing of any size is complete and consistent, and the next
// listing from 0 sees the directory as it is then. count is a byte budget.
//
// The p9 fork answers Treaddir with ReaddirWire (p9.DirentsReader), so
// Treaddir never reaches here; this is the path for a caller of the File
// itself, and it decodes the range it returns from the snapshot.
func (f *file) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	b, err := f.ReaddirWire(offset, count)
	if err != nil {
		if err == linux.EINVAL {
			err = linux.ENOTDIR
		}
		return nil, err
	}
	return decodeDirents(b), nil
}

// ReaddirWire implements p9.DirentsReader: the entries from offset that fit
// in count bytes, as a slice of the snapshot, which is kept in Rreaddir's
// wire form. Why: encoding each Rreaddir (p9 appends entry after entry into
// a buffer that grows as it goes) was most of what a listing allocated,
// and the garbage collector was what kept a 10,000-entry listing behind
// diod; now a listing is encoded once, at offset 0, and each reply is a
// slice of it, written as it is.
func (f *file) ReaddirWire(offset uint64, count uint32) ([]byte, error) {
	d, ok := f.node.(tree.Dir)
	if !ok {
		return nil, linux.EINVAL // what p9 answers a Treaddir of a file
	}
	f.mu.Lock()
	if !f.open {
		f.mu.Unlock()
		return nil, linux.EBADF
	}
	if offset == 0 || f.snap == nil {
		l, err := listDir(d, f.a.listers, f.a.bytes)
		if err != nil {
			f.mu.Unlock()
			return nil, Errno(err)
		}
		if f.snap != nil {
			f.snap.close()
		}
		f.snap = l
	}
	l := f.snap
	f.mu.Unlock()
	// The reply is a subslice of the snapshot: no copy per request. A later
	// listing from offset 0 replaces f.snap instead of writing into it, so
	// a reply still being written is never changed.
	b, err := l.window(offset, count)
	if err != nil {
		return nil, Errno(err)
	}
	return b, nil
}

// Quick implements p9.QuickFile: a walk, getattr, open or clunk is served
// where the connection is read when every node it touches is tree.Local.
// A walk through ".." may climb out of a Local subtree (into /active), so
// it never is.
func (f *file) Quick(names []string) bool {
	for _, n := range names {
		if n == ".." {
			return false
		}
	}
	return tree.Local(f.node, names)
}

// ReaddirReady implements p9.DirentsReader: whether a Treaddir at offset
// can be answered from the listing at hand without waiting for the
// directory to be read further.
func (f *file) ReaddirReady(offset uint64) bool {
	f.mu.Lock()
	l := f.snap
	f.mu.Unlock()
	return l != nil && l.ready(offset)
}

// Close implements p9.File.
func (f *file) Close() error {
	f.mu.Lock()
	h := f.h
	if f.snap != nil {
		f.snap.close()
	}
	f.h, f.snap = nil, nil
	f.a.bytes.release(f.charged + f.hcharged)
	f.charged, f.hcharged = 0, 0
	f.mu.Unlock()
	if h != nil {
		return h.Close()
	}
	return nil
}

// WriteAt implements p9.File: the whole value arrives in one write at
// offset 0 (echo name > file), and the write returns when the move it asks
// for has completed or been refused.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	err := writeNode(f.a.Ctx, f.node, f.a.Writer, p, off, func(reason []byte) {
		f.mu.Lock()
		f.reason = reason
		f.mu.Unlock()
	})
	if err != nil {
		return 0, Errno(err)
	}
	return len(p), nil
}

// SetAttr implements p9.File. A shell's truncation of a writable file
// (O_TRUNC as a setattr of size 0) is accepted and does nothing; every
// other change is refused.
func (f *file) SetAttr(valid p9.SetAttrMask, attr p9.SetAttr) error {
	if _, ok := f.node.(tree.Writable); ok && valid.Size && attr.Size == 0 &&
		!valid.Permissions && !valid.UID && !valid.GID && !valid.ATime && !valid.MTime && !valid.CTime {
		return nil
	}
	return linux.EROFS
}

// Readlink implements p9.File: the tree has no symlinks.
func (f *file) Readlink() (string, error) { return "", linux.EINVAL }

func qidOf(a tree.Attr) p9.QID {
	q := p9.QID{Type: p9.TypeRegular, Version: a.Version, Path: a.Path}
	if a.Dir {
		q.Type = p9.TypeDir
	}
	return q
}

var attrMask = p9.AttrMask{Mode: true, NLink: true, UID: true, GID: true, RDev: true,
	ATime: true, MTime: true, CTime: true, INo: true, Size: true, Blocks: true}

func (a *Attacher) attr(t tree.Attr) p9.Attr {
	mode := p9.FileMode(t.Mode) | p9.ModeRegular
	if t.Dir {
		mode = p9.FileMode(t.Mode) | p9.ModeDirectory
	}
	return p9.Attr{
		Mode:             mode,
		UID:              p9.UID(a.UID),
		GID:              p9.GID(a.GID),
		NLink:            p9.NLink(t.Nlink),
		Size:             uint64(t.Size),
		BlockSize:        4096,
		Blocks:           (uint64(t.Size) + 511) / 512,
		ATimeSeconds:     uint64(t.Atime.Unix()),
		ATimeNanoSeconds: uint64(t.Atime.Nanosecond()),
		MTimeSeconds:     uint64(t.Mtime.Unix()),
		MTimeNanoSeconds: uint64(t.Mtime.Nanosecond()),
		CTimeSeconds:     uint64(t.Ctime.Unix()),
		CTimeNanoSeconds: uint64(t.Ctime.Nanosecond()),
	}
}

// oTrunc is Linux's O_TRUNC: Tlopen carries the client's Linux open flags,
// and a read-only open that truncates is still a write.
const oTrunc = p9.OpenFlags(0o1000)
