package saferoot

import (
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// heldRoot is the one open of the root that a held view's operations
// share (Hold).
type heldRoot struct {
	mu     sync.RWMutex // read-held by each operation using fd; Release takes it
	fd     int
	err    error
	closed bool

	// dirs are the directories beneath the root that the view's Stats
	// met more than once, each opened once (O_PATH, no link followed, no
	// mount crossed, as every lookup) and then named from for a stat of
	// one component: a table read stats every registry record of one
	// directory and every transcript of a shared project directory.
	dmu  sync.Mutex
	dirs map[string]*heldDir
}

// heldDir is one directory of a held view: its fd and mount, or the error
// its open gave; seen counts the Stats that met it before it was opened.
type heldDir struct {
	fd   int
	mnt  mountKey
	err  error
	seen int
}

// heldDirsMax bounds the directories one view holds open.
const heldDirsMax = 1024

// Hold returns a view of r whose operations share one open of the root,
// made now, until Release: a request that reads many files beneath one
// root (a read of /active/table) opens the root once, not once per file.
// Everything beneath the root is resolved exactly as r resolves it (no
// symlink followed, no mount crossed, the same credential table and slug
// directories); only the root's own lookup is shared, so the view answers
// for the root as it was at Hold: a root replaced while the view is held
// is seen by the next Hold. After Release the view opens the root afresh
// by each operation, as r does. The view is for the request that made
// it, never kept.
func (r *Root) Hold() *Root {
	v := &Root{path: r.path, noOat2: r.noOat2, xdev: r.xdev, anchor: r.anchor, name: r.name,
		mnt: r.mnt, dead: r.dead, store: r.store}
	v.slugs.Store(r.slugs.Load())
	fd, err := r.openRoot()
	v.held = &heldRoot{fd: fd, err: err}
	return v
}

// Release closes the view's open of the root (Hold), once every operation
// using it has returned. It is a no-op on a root that is not a held view,
// and on one already released.
func (r *Root) Release() {
	if r == nil || r.held == nil {
		return
	}
	h := r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed && h.err == nil {
		unix.Close(h.fd)
	}
	if !h.closed {
		for _, d := range h.dirs {
			if d.fd >= 0 {
				unix.Close(d.fd)
			}
		}
	}
	h.closed = true
}

// acquire returns an fd of the root for one operation and what to call
// when the operation is done with it: the held fd (Hold), which stays
// open until Release and cannot be closed under the operation, or a fresh
// open, closed by done.
func (r *Root) acquire() (fd int, done func(), err error) {
	if h := r.held; h != nil {
		h.mu.RLock()
		if !h.closed {
			if h.err != nil {
				h.mu.RUnlock()
				return -1, nil, h.err
			}
			return h.fd, h.mu.RUnlock, nil
		}
		h.mu.RUnlock()
	}
	fd, err = r.openRoot()
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// statHeld is Stat of rel (valid, non-empty) on a held view, by one statx
// of its last component from the held fd of its directory, when the view
// holds that directory (the root itself, or one met by an earlier Stat).
// The component is not followed if it is a link (which is refused, as
// Stat refuses it), and a component on another mount than its directory
// (a mount point, a bind) is NotExist, as RESOLVE_NO_XDEV makes it; a
// kernel that reports no mount id gives ok false, and Stat resolves rel
// from the root instead. ok is false when the view cannot answer.
func (r *Root) statHeld(op, rel string) (info Info, err error, ok bool) {
	h := r.held
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed || h.err != nil {
		return Info{}, nil, false
	}
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	d := h.dir(r, dir)
	if d == nil || d.err != nil || d.mnt.id == 0 {
		return Info{}, nil, false
	}
	var stx unix.Statx_t
	const mask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID_UNIQUE | unix.STATX_MNT_ID
	for {
		err = unix.Statx(d.fd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, mask, &stx)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return Info{}, errs.E(op, kindOf(err), rel, err), true
	}
	if stx.Mask&(unix.STATX_MNT_ID_UNIQUE|unix.STATX_MNT_ID) == 0 || stx.Mask&unix.STATX_BASIC_STATS != unix.STATX_BASIC_STATS {
		return Info{}, nil, false
	}
	mk := mountKey{id: stx.Mnt_id, dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor)}
	if mk != d.mnt && !r.xdev {
		return Info{}, errs.E(op, errs.NotExist, rel, unix.EXDEV), true
	}
	t := uint32(stx.Mode) & unix.S_IFMT
	if t != unix.S_IFREG && t != unix.S_IFDIR {
		return Info{}, errs.E(op, errs.NotExist, rel, nil), true
	}
	ts := func(t unix.StatxTimestamp) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }
	return Info{
		Dir:   t == unix.S_IFDIR,
		Size:  int64(stx.Size),
		Mode:  uint32(stx.Mode),
		Dev:   mk.dev,
		Ino:   stx.Ino,
		Nlink: uint64(stx.Nlink),
		Atime: ts(stx.Atime),
		Mtime: ts(stx.Mtime),
		Ctime: ts(stx.Ctime),
	}, nil, true
}

// dir is the held directory dir ("" for the root), opened at the second
// Stat that meets it (a directory met once is not worth an open of its
// own); nil while it is not held. The caller read-holds h.mu.
func (h *heldRoot) dir(r *Root, dir string) *heldDir {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	if h.dirs == nil {
		h.dirs = map[string]*heldDir{}
	}
	d := h.dirs[dir]
	switch {
	case d != nil && d.seen < 0:
		return d
	case d == nil && len(h.dirs) >= heldDirsMax:
		return nil
	case d == nil:
		d = &heldDir{fd: -1}
		h.dirs[dir] = d
	}
	if d.seen++; d.seen < 2 && dir != "" {
		return nil
	}
	d.seen = -1 // opened (or failed): settled for the view
	if dir == "" {
		d.fd, d.err = unix.Dup(h.fd)
	} else {
		d.fd, d.err = r.resolve(h.fd, dir, pathFlags|unix.O_DIRECTORY)
	}
	if d.err == nil {
		if d.mnt, d.err = mountOf(d.fd); d.err != nil {
			unix.Close(d.fd)
			d.fd = -1
		}
	}
	return d
}
