// Package fusefs mounts the daemon's tree through FUSE, over the project's
// 9P client: every lookup, listing, read and write is one or more 9P
// requests to the daemon, and nothing is cached beyond one-second entry and
// attribute lifetimes. Files are opened FOPEN_DIRECT_IO, so a transcript
// that grows is longer on the next read (tail -f works).
//
// The tree is read-only but for one kind of file: an agent's zmx or tmux,
// writable (mode 0644) only under 9harnessd --allow-move. Those accept a
// write-only open, a shell's truncation (as a no-op) and one write at offset
// 0, which is the daemon's move; its errno is the write's. Everything else
// that would change the tree is refused with EROFS.
package fusefs

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/9harness/9harness/internal/client"
)

// TTL is how long the kernel may trust an entry or an attribute.
const TTL = time.Second

// Options tune a mount.
type Options struct {
	// Socket names the daemon in the mount table: the source is
	// "9harness:" + Socket.
	Socket string
	// OnLost, if set, is called once, from its own goroutine, when the
	// connection to the daemon fails (the daemon exited or was
	// restarted). Every request then answers EIO; the mount is useless
	// and the caller should unmount it.
	OnLost func(error)
	// Debug logs every FUSE request on the standard logger.
	Debug bool
}

// walkRoot walks a fid to the root of c's tree, and gives it with its
// qid; the caller closes it.
func walkRoot(c *client.Client) (*client.File, client.QID, error) {
	f, err := c.Walk("/")
	if err != nil {
		return nil, client.QID{}, err
	}
	q, _, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, client.QID{}, err
	}
	return f, q, nil
}

// Mount mounts the tree c is attached to on dir and serves it until
// unmounted (the caller waits with the server's Wait, and unmounts with
// its Unmount). As root the mount is made with mount(2); otherwise by
// fusermount3 (or fusermount), which must be installed setuid and able to
// open /dev/fuse. The mount is the caller's alone: no allow_other.
func Mount(dir string, c *client.Client, opts Options) (*fuse.Server, error) {
	rootFid, q, err := walkRoot(c)
	if err != nil {
		return nil, err
	}
	m := &mount{onLost: opts.OnLost}
	root := &node{m: m, f: rootFid}
	rootID := fs.StableAttr{Ino: q.Path, Mode: syscall.S_IFDIR}
	if rootID.Reserved() {
		rootID.Ino = 1
	}
	fo := mountOptions(opts.Socket, opts.Debug)
	fo.RootStableAttr = &rootID
	srv, err := fs.Mount(dir, root, fo)
	if err != nil {
		rootFid.Close()
		return nil, err
	}
	return srv, nil
}

// mountOptions are the options of every 9harness mount, one daemon's or
// a fleet's: source names what is mounted (its FsName is 9harness:source).
func mountOptions(source string, debug bool) *fs.Options {
	ttl := TTL
	var neg time.Duration // a name that appears is visible at once
	return &fs.Options{
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &neg,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName:      "9harness:" + source,
			Name:        "9harness",
			Options:     []string{"nosuid", "nodev"},
			DirectMount: os.Geteuid() == 0,
			// One lookup per name is what ls -l costs anyway; a plain
			// listing of 10,000 names should not cost 10,000 walks.
			DisableReadDirPlus: true,
			DisableXAttrs:      true,
			Debug:              debug,
		},
	}
}

// mount is what the nodes of one mount share.
type mount struct {
	onLost   func(error)
	lostOnce sync.Once
	// inos, if set, renumbers the daemon's qid paths: in a fleet mount
	// two daemons' paths would otherwise name one inode.
	inos *inoMap
}

// ino is the inode number of the daemon's qid path p.
func (m *mount) ino(p uint64) uint64 {
	if m.inos == nil {
		return p
	}
	return m.inos.get(p)
}

// errno turns a 9P error into the errno the kernel answers with. An error
// that is not the daemon's Rlerror is the connection failing.
func (m *mount) errno(err error) syscall.Errno {
	if e, ok := client.Errno(err); ok {
		return e
	}
	m.lostOnce.Do(func() {
		if m.onLost != nil {
			go m.onLost(err)
		}
	})
	return syscall.EIO
}

// node is one inode: a 9P fid walked to it, clunked when the kernel
// forgets the inode.
type node struct {
	fs.Inode
	m *mount
	f *client.File
}

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeReaddirer   = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeAccesser    = (*node)(nil)
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeOnForgetter = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeMknoder     = (*node)(nil)
	_ fs.NodeSymlinker   = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
)

func fileType(q client.QID) uint32 {
	if q.IsDir() {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

func (m *mount) fill(out *fuse.Attr, q client.QID, a client.Attr) {
	out.Ino = m.ino(q.Path)
	out.Mode = fileType(q) | a.Perm
	out.Size = a.Size
	out.Blocks = a.Blocks
	out.Blksize = uint32(a.BlockSize)
	out.Nlink = uint32(a.NLink)
	out.Uid = a.UID
	out.Gid = a.GID
	out.Atime, out.Atimensec = uint64(a.Atime.Unix()), uint32(a.Atime.Nanosecond())
	out.Mtime, out.Mtimensec = uint64(a.Mtime.Unix()), uint32(a.Mtime.Nanosecond())
	out.Ctime, out.Ctimensec = uint64(a.Ctime.Unix()), uint32(a.Ctime.Nanosecond())
}

// Lookup walks one name from this node's fid.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	nf, q, a, err := n.f.WalkStat(name)
	if err != nil {
		return nil, n.m.errno(err)
	}
	n.m.fill(&out.Attr, q, a)
	id := fs.StableAttr{Mode: fileType(q), Ino: n.m.ino(q.Path)}
	// The kernel looks a name up again every TTL: the same file keeps
	// its inode (and its fid); the new fid is not needed.
	if ch := n.GetChild(name); ch != nil && ch.StableAttr() == id {
		nf.Close()
		return ch, 0
	}
	return n.NewInode(ctx, &node{m: n.m, f: nf}, id), 0
}

// OnForget clunks the fid of an inode the kernel no longer knows.
func (n *node) OnForget() { n.f.Close() }

func (n *node) attr() (client.QID, client.Attr, syscall.Errno) {
	q, a, err := n.f.Stat()
	if err != nil {
		return q, a, n.m.errno(err)
	}
	return q, a, 0
}

// Getattr asks the daemon: sizes and mtimes are live.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	q, a, errno := n.attr()
	if errno != 0 {
		return errno
	}
	n.m.fill(&out.Attr, q, a)
	return 0
}

// writable reports whether the daemon offers this file for writing: the
// owner-write bit, set only on an agent's zmx and tmux under --allow-move.
func writable(q client.QID, a client.Attr) bool {
	return !q.IsDir() && a.Perm&0o200 != 0
}

// Setattr accepts only what a shell does before it writes a session name:
// truncation to size 0 of a writable file, which changes nothing.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	q, a, errno := n.attr()
	if errno != 0 {
		return errno
	}
	sz, ok := in.GetSize()
	if !ok || sz != 0 || !writable(q, a) || in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		return syscall.EROFS
	}
	n.m.fill(&out.Attr, q, a)
	return 0
}

// Access answers access(2) from the modes the daemon gives: a write is
// possible only where the owner-write bit is set.
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	q, a, errno := n.attr()
	if errno != 0 {
		return errno
	}
	perm := a.Perm
	if mask&2 != 0 && !writable(q, a) {
		return syscall.EROFS
	}
	if mask&1 != 0 && perm&0o111 == 0 {
		return syscall.EACCES
	}
	return 0
}

// Statfs reports a read-only file system's sizes: nothing free.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.f.StatFS()
	if err != nil {
		return n.m.errno(err)
	}
	out.Bsize = st.BlockSize
	out.Frsize = st.BlockSize
	out.NameLen = st.NameLength
	out.Blocks = st.Blocks
	out.Files = st.Files
	return 0
}

// Readdir lists the directory completely: a 9P listing comes in pieces of
// at most one message each, resumed from the last entry's offset.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	d, err := n.f.Walk(nil)
	if err != nil {
		return nil, n.m.errno(err)
	}
	defer d.Close()
	if err := d.Open(client.ReadOnly); err != nil {
		return nil, n.m.errno(err)
	}
	self := n.StableAttr().Ino
	parent := self
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	out := []fuse.DirEntry{
		{Name: ".", Ino: self, Mode: syscall.S_IFDIR},
		{Name: "..", Ino: parent, Mode: syscall.S_IFDIR},
	}
	var off uint64
	for {
		ents, err := d.Readdir(off, client.Msize-64)
		if err != nil {
			return nil, n.m.errno(err)
		}
		if len(ents) == 0 {
			return fs.NewListDirStream(out), 0
		}
		for _, e := range ents {
			out = append(out, fuse.DirEntry{Name: e.Name, Ino: n.m.ino(e.QID.Path), Mode: fileType(e.QID)})
		}
		off = ents[len(ents)-1].Offset
	}
}

// Open opens a fid of its own for the handle. Reading is allowed
// everywhere; writing (O_WRONLY, O_RDWR, or O_TRUNC) only on a writable
// file, and the daemon decides again. After a refused write on an O_RDWR
// handle, a read of that handle at offset 0 (pread) returns the daemon's
// reason (package ninep, reason.go).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	acc := flags & syscall.O_ACCMODE
	mode := client.ReadOnly
	if acc != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		q, a, errno := n.attr()
		if errno != 0 {
			return nil, 0, errno
		}
		if !writable(q, a) {
			return nil, 0, syscall.EROFS
		}
		switch acc {
		case syscall.O_WRONLY:
			mode = client.WriteOnly
		case syscall.O_RDWR:
			mode = client.ReadWrite
		}
	}
	f, err := n.f.Walk(nil)
	if err != nil {
		return nil, 0, n.m.errno(err)
	}
	if err := f.Open(mode); err != nil {
		f.Close()
		return nil, 0, n.m.errno(err)
	}
	return &handle{m: n.m, f: f}, fuse.FOPEN_DIRECT_IO, 0
}

// handle is one open file: a fid opened for reading or for writing.
type handle struct {
	m *mount
	f *client.File
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	got := 0
	for got < len(dest) {
		k, err := h.readAt(ctx, dest[got:], off+int64(got))
		if errors.Is(err, syscall.EINTR) && got == 0 {
			return nil, syscall.EINTR
		}
		got += k
		// A short read is all there is for now: asking again would wait
		// on a stream (/active/events) for a line already to be shown.
		if errors.Is(err, io.EOF) || (err == nil && k < len(dest[got-k:])) {
			break
		}
		if err != nil {
			if got > 0 {
				break
			}
			return nil, h.m.errno(err)
		}
	}
	return fuse.ReadResultData(dest[:got]), 0
}

// readAt is one read of the file that an interrupt (the reader's signal,
// FUSE_INTERRUPT) ends at once with EINTR: a read of /active/events waits
// for the next change, and the 9P client has no flush to send. The read
// goes on aside into a buffer of its own (dest is go-fuse's, reused), and
// ends with the next line, or when the mount's connection does.
func (h *handle) readAt(ctx context.Context, dest []byte, off int64) (int, error) {
	type result struct {
		n   int
		err error
	}
	buf := make([]byte, len(dest))
	done := make(chan result, 1)
	go func() {
		n, err := h.f.ReadAt(buf, off)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return copy(dest, buf[:r.n]), r.err
	case <-ctx.Done():
		return 0, syscall.EINTR
	}
}

// Write hands the bytes to the daemon as they come: the one write a
// writable file takes is a session name at offset 0, and the write returns
// when the move it asks for has been done or refused.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.f.WriteAt(data, off)
	if err != nil {
		return 0, h.m.errno(err)
	}
	return uint32(n), 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.f.Close()
	return 0
}

// Everything that would change the tree's shape is refused.

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
