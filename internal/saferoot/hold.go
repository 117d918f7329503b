package saferoot

import (
	"strings"
	"sync"
	"sync/atomic"
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
	// directory and every transcript of a shared project directory. dmu
	// guards the map only: each directory is settled under its own lock,
	// so the workers of one table read, each settling its own agent's
	// project directory by a system call, do not wait for one another.
	dmu  sync.Mutex
	dirs map[string]*heldDir

	keep *keptDirs // the root's, shared by its views; nil: none kept
	gen  uint64    // this view's number, for the keeper's eviction
}

// heldDir is one directory of a held view: its fd and mount, or the error
// its open gave; seen counts the Stats that met it before it was opened.
// A directory the view took from the root's kept directories (kept) was
// proved to be the one its path names now by a stat from its parent in
// this view, whose answer (info) also answers a Stat of the directory
// itself in this view; its fd is the kept one, closed by the keeper.
type heldDir struct {
	mu      sync.Mutex  // guards seen and the settling
	settled atomic.Bool // fd, mnt, err, kept and info are final

	fd   int
	mnt  mountKey
	err  error
	seen int

	kept *keptDir
	info Info
}

// heldDirsMax bounds the directories one view holds open.
const heldDirsMax = 1024

// Hold returns a view of r whose operations share one open of the root,
// made now, until Release: a request that reads many files beneath one
// root (a read of /active/table) opens the root once, not once per file.
// Everything beneath the root is resolved exactly as r resolves it (no
// symlink followed, no mount crossed, the same credential table, slug
// directories and copy stores); only the root's own lookup is shared, so the view answers
// for the root as it was at Hold: a root replaced while the view is held
// is seen by the next Hold. After Release the view opens the root afresh
// by each operation, as r does. The view is for the request that made
// it, never kept; the directories beneath the root that it opens may be
// (keptDirs), each used by a later view only once a stat from its parent
// in that view proves the path still names it.
func (r *Root) Hold() *Root {
	v := &Root{path: r.path, noOat2: r.noOat2, xdev: r.xdev, anchor: r.anchor, name: r.name,
		mnt: r.mnt, dead: r.dead, store: r.store}
	v.slugs.Store(r.slugs.Load())
	v.copies.Store(r.copies.Load())
	fd, err := r.openRoot()
	v.held = &heldRoot{fd: fd, err: err, keep: r.keep, gen: r.keep.view()}
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
			switch {
			case d.kept != nil:
				h.keep.unref(d.kept)
			case d.fd >= 0:
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
	if info, ok := h.proved(rel); ok {
		return info, nil, true
	}
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	d := h.dir(r, dir)
	if d == nil || d.err != nil || d.mnt.id == 0 {
		return Info{}, nil, false
	}
	return r.statAt(op, rel, d, name)
}

// statAt is statHeld's one statx: name in the held directory d.
func (r *Root) statAt(op, rel string, d *heldDir, name string) (info Info, err error, ok bool) {
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

// dir is the held directory dir ("" for the root); nil while it is not
// held. A directory the root keeps is taken at the first Stat that meets
// it, once a stat from its parent proves the path still names it; one it
// does not keep is opened then if the keeper takes it, and otherwise at
// the second Stat that meets it (a directory met once is not worth an
// open of its own). The caller read-holds h.mu.
func (h *heldRoot) dir(r *Root, dir string) *heldDir {
	h.dmu.Lock()
	if h.dirs == nil {
		h.dirs = map[string]*heldDir{}
	}
	d := h.dirs[dir]
	if d == nil {
		if len(h.dirs) >= heldDirsMax {
			h.dmu.Unlock()
			return nil
		}
		d = &heldDir{fd: -1}
		h.dirs[dir] = d
	}
	h.dmu.Unlock()
	if d.settled.Load() {
		return d
	}
	return h.settle(r, dir, d)
}

// settle is dir for a directory not yet settled in this view. It holds
// d's lock (and, through adopt, its parent's: always child before parent,
// so no two settles wait for each other in a cycle).
func (h *heldRoot) settle(r *Root, dir string, d *heldDir) *heldDir {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled.Load() {
		return d
	}
	if dir != "" && d.seen == 0 {
		d.seen = 1
		if h.adopt(r, dir, d) {
			d.settled.Store(true)
			return d
		}
		if !h.keep.room(h.gen) {
			return nil
		}
	} else if d.seen++; d.seen < 2 && dir != "" {
		return nil
	}
	// Opened (or failed): settled for the view.
	defer d.settled.Store(true)
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
	if d.err == nil && dir != "" && d.mnt.id != 0 {
		var st unix.Stat_t
		if fstat(d.fd, &st) == nil {
			d.kept = h.keep.put(dir, d.fd, d.mnt, st.Ino, h.gen)
		}
	}
	return d
}

// adopt takes dir from the keeper into d when a statx of dir's last
// component from its parent, held in this view, finds the very directory
// kept: same device and inode (the kept fd pins the inode, so its number
// cannot have been reused), same mount, not a link (the stat does not
// follow one). Otherwise the kept fd is dropped and false returned.
func (h *heldRoot) adopt(r *Root, dir string, d *heldDir) bool {
	k := h.keep.get(dir, h.gen)
	if k == nil {
		return false
	}
	parent, name := "", dir
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		parent, name = dir[:i], dir[i+1:]
	}
	pd := h.dir(r, parent)
	if pd != nil && pd.err == nil && pd.mnt.id != 0 {
		info, err, ok := r.statAt("saferoot.Stat", dir, pd, name)
		if ok && err == nil && info.Dir && info.Dev == k.mnt.dev && info.Ino == k.ino {
			d.fd, d.mnt, d.kept, d.info = k.fd, k.mnt, k, info
			return true
		}
	}
	h.keep.drop(dir, k)
	return false
}

// proved answers a Stat of a directory that this view took from the
// keeper: the stat that proved it, made by this request.
func (h *heldRoot) proved(rel string) (Info, bool) {
	h.dmu.Lock()
	d := h.dirs[rel]
	h.dmu.Unlock()
	if d != nil && d.settled.Load() && d.kept != nil && d.info.Dir {
		return d.info, true
	}
	return Info{}, false
}

// keptDirs are the directories beneath a root that its held views opened,
// kept open from one view to the next: a read of /active/table stats one
// transcript in each agent's project directory, and with the directory
// kept that is one statx from it (after the statx of the directory from
// its parent that proves it, which also answers the directory's own Stat)
// instead of an openat2, an fstat and a close from the root.
//
// A kept fd is only ever used through a view that has just proved it
// (adopt); the root itself is never kept, so a root replaced between
// requests is met afresh, and so is everything beneath it.
type keptDirs struct {
	mu    sync.Mutex
	dirs  map[string]*keptDir
	views uint64
	max   int
}

// keptDir is one kept directory; refs counts the views using its fd, and
// stale says it left the map, to be closed when the last view lets go.
type keptDir struct {
	fd    int
	mnt   mountKey
	ino   uint64
	refs  int
	used  uint64 // the number of the last view that took it
	stale bool
}

// keptMax bounds the directories a root keeps open (and a sixteenth of
// the open-file limit, if that is less): a table read keeps one project
// directory per agent's working directory.
const keptMax = 1024

func newKeptDirs() *keptDirs {
	max := keptMax
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		// Eight roots, and the process table's held files, share the
		// open-file limit with the connections.
		max = int(min(uint64(keptMax), rl.Cur/16))
	}
	return &keptDirs{dirs: map[string]*keptDir{}, max: max}
}

// Close closes the directories the root keeps (those a view still uses
// when it lets go of them). The root keeps others again when next held;
// a root made by New keeps none.
func (r *Root) Close() {
	k := r.keep
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for dir, d := range k.dirs {
		delete(k.dirs, dir)
		d.stale = true
		if d.refs == 0 {
			unix.Close(d.fd)
		}
	}
}

// view numbers a new view.
func (k *keptDirs) view() uint64 {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.views++
	return k.views
}

// get is dir's kept directory, referenced for view gen, or nil.
func (k *keptDirs) get(dir string, gen uint64) *keptDir {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.dirs[dir]
	if d != nil {
		d.refs++
		d.used = gen
	}
	return d
}

// room says whether put would keep one more directory now.
func (k *keptDirs) room(gen uint64) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.evictLocked(gen)
}

// evictLocked makes room for one more, closing the directories no view
// uses and none of the last two views took; false when there is none.
func (k *keptDirs) evictLocked(gen uint64) bool {
	if len(k.dirs) < k.max {
		return true
	}
	for dir, d := range k.dirs {
		if d.refs == 0 && d.used+1 < gen {
			delete(k.dirs, dir)
			unix.Close(d.fd)
		}
	}
	return len(k.dirs) < k.max
}

// put keeps fd, just opened by view gen as dir, and returns it referenced
// for that view; nil when it is not kept (the view closes fd itself).
func (k *keptDirs) put(dir string, fd int, mnt mountKey, ino uint64, gen uint64) *keptDir {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dirs[dir] != nil || !k.evictLocked(gen) {
		return nil
	}
	d := &keptDir{fd: fd, mnt: mnt, ino: ino, refs: 1, used: gen}
	k.dirs[dir] = d
	return d
}

// drop lets go of d, which its path no longer names: it leaves the map,
// and is closed once no view uses it.
func (k *keptDirs) drop(dir string, d *keptDir) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dirs[dir] == d {
		delete(k.dirs, dir)
	}
	d.stale = true
	k.unrefLocked(d)
}

// unref is a view's Release of d.
func (k *keptDirs) unref(d *keptDir) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unrefLocked(d)
}

func (k *keptDirs) unrefLocked(d *keptDir) {
	if d.refs--; d.refs == 0 && d.stale {
		unix.Close(d.fd)
	}
}
