package p9client

import (
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// TypeDir is the QID type bit of a directory.
const TypeDir = uint8(p9.TypeDir)

// QID is a file's identity on the server.
type QID struct {
	Type    uint8 // TypeDir and the other QID type bits
	Version uint32
	Path    uint64 // unique per file on the server: an inode number
}

// IsDir tells whether the QID is a directory's.
func (q QID) IsDir() bool { return q.Type&TypeDir != 0 }

// Attr is what a Tgetattr answers.
type Attr struct {
	Perm      uint32 // the permission bits (and setuid, setgid, sticky)
	UID, GID  uint32
	NLink     uint64
	Size      uint64
	BlockSize uint64
	Blocks    uint64
	Atime     time.Time
	Mtime     time.Time
	Ctime     time.Time
}

// Entry is one name of a directory listing.
type Entry struct {
	Name   string
	QID    QID
	Offset uint64 // where the listing goes on after this entry
}

// FSStat is what a Tstatfs answers.
type FSStat struct {
	BlockSize  uint32
	Blocks     uint64
	Files      uint64
	NameLength uint32
}

// Mode is how a fid is opened.
type Mode uint32

const (
	ReadOnly  = Mode(p9.ReadOnly)
	WriteOnly = Mode(p9.WriteOnly)
	ReadWrite = Mode(p9.ReadWrite)
)

// ConnError is a request that got no answer from the server: the
// connection failed, or the library gave up on it. An answer from the
// server is a syscall.Errno, never a ConnError.
type ConnError struct{ Err error }

func (e *ConnError) Error() string { return e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// Errno is the errno the server answered with, if err is such an answer
// (an Rlerror) rather than a failed connection.
func Errno(err error) (syscall.Errno, bool) {
	var ce *ConnError
	if err == nil || errors.As(err, &ce) {
		return 0, false
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e, true
	}
	return 0, false
}

// wireError is err as this package returns it: an Rlerror becomes its
// syscall.Errno, io.EOF stays, anything else is a *ConnError.
func wireError(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var e linux.Errno
	if errors.As(err, &e) {
		return syscall.Errno(e)
	}
	var ce *ConnError
	if errors.As(err, &ce) {
		return err
	}
	return &ConnError{err}
}

// File is a fid. The caller closes it (Tclunk).
type File struct {
	f p9.File
}

// Fid is the library's fid behind f, for tests that send the messages
// File does not offer (the mutations the daemon must refuse).
func Fid(f *File) p9.File { return f.f }

// Walk walks the names from f to a new fid; no names clone f.
func (f *File) Walk(names []string) (*File, error) {
	_, nf, err := f.f.Walk(names)
	if err != nil {
		return nil, wireError(err)
	}
	return &File{f: nf}, nil
}

// WalkStat walks one name from f to a new fid and returns its QID and
// attributes with it (one round trip where the server has Twalkgetattr).
func (f *File) WalkStat(name string) (*File, QID, Attr, error) {
	qids, nf, _, a, err := f.f.WalkGetAttr([]string{name})
	if err != nil {
		return nil, QID{}, Attr{}, wireError(err)
	}
	if len(qids) != 1 {
		nf.Close()
		return nil, QID{}, Attr{}, syscall.ENOENT
	}
	return &File{f: nf}, qid(qids[0]), attr(a), nil
}

// Stat returns f's QID and attributes.
func (f *File) Stat() (QID, Attr, error) {
	q, _, a, err := f.f.GetAttr(p9.AttrMaskAll)
	if err != nil {
		return QID{}, Attr{}, wireError(err)
	}
	return qid(q), attr(a), nil
}

// Open opens f (Tlopen).
func (f *File) Open(mode Mode) error {
	_, _, err := f.f.Open(p9.OpenFlags(mode))
	return wireError(err)
}

// ReadAt reads at most one Tread: len(p) must fit the granted msize. At
// the end of the file it returns 0 and io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	return n, wireError(err)
}

// WriteAt writes p at off.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	return n, wireError(err)
}

// Readdir lists an opened directory from the offset off (0, or the last
// entry's Offset), at most count bytes of entries; none is the end.
func (f *File) Readdir(off uint64, count uint32) ([]Entry, error) {
	ds, err := f.f.Readdir(off, count)
	if err != nil {
		return nil, wireError(err)
	}
	out := make([]Entry, len(ds))
	for i, d := range ds {
		out[i] = Entry{Name: d.Name, QID: qid(d.QID), Offset: d.Offset}
	}
	return out, nil
}

// StatFS asks for the file system's sizes.
func (f *File) StatFS() (FSStat, error) {
	st, err := f.f.StatFS()
	if err != nil {
		return FSStat{}, wireError(err)
	}
	return FSStat{BlockSize: st.BlockSize, Blocks: st.Blocks, Files: st.Files, NameLength: st.NameLength}, nil
}

// Close clunks the fid.
func (f *File) Close() error { return wireError(f.f.Close()) }

func qid(q p9.QID) QID { return QID{Type: uint8(q.Type), Version: q.Version, Path: q.Path} }

func attr(a p9.Attr) Attr {
	return Attr{
		Perm:      uint32(a.Mode.Permissions()),
		UID:       uint32(a.UID),
		GID:       uint32(a.GID),
		NLink:     uint64(a.NLink),
		Size:      a.Size,
		BlockSize: a.BlockSize,
		Blocks:    a.Blocks,
		Atime:     time.Unix(int64(a.ATimeSeconds), int64(a.ATimeNanoSeconds)),
		Mtime:     time.Unix(int64(a.MTimeSeconds), int64(a.MTimeNanoSeconds)),
		Ctime:     time.Unix(int64(a.CTimeSeconds), int64(a.CTimeNanoSeconds)),
	}
}
