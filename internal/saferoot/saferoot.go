// Package saferoot confines every stat, open and listing of a host path to a
// directory tree, so that no byte from outside the tree and no
// credential-shaped name inside it is ever answered, whatever races the
// filesystem runs against the caller.
//
// Why not filepath.Join(root, rel) and os.Open: the kernel follows a symlink
// at every component of a composed path, so a link anywhere in rel (or one
// swapped in after any Lstat check, the plain TOCTOU) redirects the open
// outside the root. Instead a rel path is resolved from an fd of the root by
// openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS: one
// kernel lookup that refuses any symlink at any position and any escape, with
// no window between check and use. Where openat2 is missing (ENOSYS, kernels
// before 5.6) the same guarantee comes from a walk of one openat per
// component with O_NOFOLLOW, intermediates opened O_PATH|O_DIRECTORY, so a
// component swapped for a link fails instead of redirecting the walk.
//
// Only regular files and directories are ever answered. Stat opens with
// O_PATH and Open checks the type through an O_PATH fd before it opens for
// reading, with O_NONBLOCK, and checks again after, so a fifo, socket or
// device is never read and can never block the caller.
//
// No mount is crossed beneath a root either (RESOLVE_NO_XDEV; the walk
// compares each component's device with the root's), unless the root was
// made with CrossMounts: a bind of /proc or of another home put beneath a
// root is NotExist.
//
// The root itself is looked up anew by each operation, so a root that is
// deleted and recreated, or that appears after start-up, keeps working (a
// held fd of the root would serve a deleted directory forever). The
// daemon's roots are anchored (pin.go): the directory holding each root is
// opened once at start (an Anchor: $HOME for the default roots) and the
// root is its entry there, opened by name with no symlink followed and no
// mount crossed, so a root replaced by a link while the daemon runs is
// NotExist, never followed; a root that is a link or a mount point at
// start is resolved once, then (Pinner.Pin). New makes an unanchored root,
// whose path is opened, following links, by every operation: for tests and
// tools that have no start to pin at.
package saferoot

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// Root is a directory named by configuration. Everything beneath it is
// resolved with no symlink ever followed and no mount crossed. The root
// itself is never held open past a request: it is either anchored (anchor
// set: its entry name in a directory held open from start, opened from
// there by each operation with no link followed) or, made by New, its path
// opened normally by each operation; a view made by Hold shares one such
// open among the operations of one request, until Release.
type Root struct {
	path   string
	noOat2 bool
	xdev   bool // CrossMounts: mounts beneath the root are served

	anchor *Anchor  // nil: unanchored (New)
	name   string   // the root's entry in anchor
	mnt    mountKey // nonzero: the root was a mount point at start; that mount is served
	dead   bool     // Pin could not resolve it: never exists

	slugs  slugDirs   // see SetSlugDirs (credentials.go)
	copies copyStores // see SetCopyStores (store.go)
	store  bool       // a Store view (store.go): its stores open too

	held *heldRoot // nil: the root is opened by each operation (see Hold)
	keep *keptDirs // directories beneath the root its views keep open (hold.go)
}

// Option configures a Root.
type Option func(*Root)

// WithoutOpenat2 forces the per-component O_NOFOLLOW walk instead of openat2
// (for tests, and to exercise the path old kernels take).
func WithoutOpenat2() Option { return func(r *Root) { r.noOat2 = true } }

// New returns the unanchored Root at path. It touches nothing: the path is
// opened, following links, by each operation. The daemon anchors its roots
// instead (Pinner.Pin, Anchor.Root).
func New(path string, opts ...Option) *Root {
	r := &Root{path: path}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Path returns the path of the root: as configured, or, for a root Pin
// found to be a symlink, the directory it resolved to.
func (r *Root) Path() string { return r.path }

// Info is what Stat reports of a regular file or directory.
type Info struct {
	Dir                 bool
	Size                int64
	Mode                uint32 // raw st_mode
	Dev, Ino, Nlink     uint64
	Atime, Mtime, Ctime time.Time // nanosecond precision
}

// Entry is one listed name.
type Entry struct {
	Name string
	Dir  bool
	Ino  uint64
}

// openat2Missing is set once openat2 has answered ENOSYS: the kernel will not
// grow it while we run.
var openat2Missing atomic.Bool

const (
	resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

	pathFlags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// O_NOCTTY and O_LARGEFILE beyond the brief: a device raced in between
	// the type check and the open must not become a controlling tty, and a
	// 32-bit build must open large files.
	readFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_LARGEFILE
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_LARGEFILE
)

// Exists reports whether the root directory itself exists now (fresh each
// call).
func (r *Root) Exists() bool {
	_, done, err := r.acquire()
	if err != nil {
		return false
	}
	done()
	return true
}

// Stat reports on rel, "" for the root itself. Only a regular file or a
// directory is answered; a symlink, fifo, socket or device is NotExist.
func (r *Root) Stat(rel string) (Info, error) {
	const op = "saferoot.Stat"
	if err := r.checkRel(op, rel); err != nil {
		return Info{}, err
	}
	if r.held != nil && rel != "" {
		if info, err, ok := r.statHeld(op, rel); ok {
			return r.slugDirOnly(op, rel)(info, err)
		}
	}
	rootfd, done, err := r.acquire()
	if err != nil {
		return Info{}, errs.E(op, kindOf(err), rel, err)
	}
	defer done()
	if rel == "" {
		return fstatInfo(op, rel, rootfd)
	}
	fd, err := r.resolve(rootfd, rel, pathFlags)
	if err != nil {
		return Info{}, errs.E(op, kindOf(err), rel, err)
	}
	defer unix.Close(fd)
	return r.slugDirOnly(op, rel)(fstatInfo(op, rel, fd))
}

// Open opens a regular file for reading. A directory is IsDir; anything else
// that is not a regular file is NotExist, and is refused by its type before it
// is opened for reading (and again after, in case it was swapped between).
// The file is returned in blocking mode; it is the caller's to close.
func (r *Root) Open(rel string) (*os.File, error) {
	const op = "saferoot.Open"
	if err := r.checkRelFile(op, rel); err != nil {
		return nil, err
	}
	rootfd, done, err := r.acquire()
	if err != nil {
		return nil, errs.E(op, kindOf(err), rel, err)
	}
	defer done()

	// The type check through O_PATH: a fifo is not opened (which would wake
	// a writer blocked in its open) and a device is not opened at all.
	if rel == "" {
		return nil, errs.E(op, errs.IsDir, rel, nil)
	}
	pfd, err := r.resolve(rootfd, rel, pathFlags)
	if err != nil {
		return nil, errs.E(op, kindOf(err), rel, err)
	}
	err = wantRegular(op, rel, pfd)
	unix.Close(pfd)
	if err != nil {
		return nil, err
	}

	fd, err := r.resolve(rootfd, rel, readFlags)
	if err != nil {
		return nil, errs.E(op, kindOf(err), rel, err)
	}
	if err := wantRegular(op, rel, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// O_NONBLOCK only guarded the open; a regular file is read blocking, as
	// os.Open would (some FUSE filesystems honour O_NONBLOCK on files).
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, errs.E(op, errs.IO, rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(r.path, rel)), nil
}

// ReadDir lists the directory rel ("" for the root): regular files and
// directories only, excluded names dropped, sorted by name in byte order.
// Entry types and inode numbers come from getdents64 itself (d_type, d_ino);
// only a DT_UNKNOWN entry costs an fstatat. There is no cap on the size.
func (r *Root) ReadDir(rel string) ([]Entry, error) {
	return ReadDirFunc(r, rel, func(_ uint64, e Entry) Entry { return e })
}

// ReadDirFunc is ReadDir for a caller that wants its own entry type: it
// returns f(dev, e) of every entry e, in ReadDir's order, where dev is the
// device of the listed directory (what Stat(rel).Dev would say, from an
// fstat of the same open). It exists so that a listing costs a fixed number
// of allocations, not one per name: the names of the entries passed to f
// are substrings of one string, and the result is allocated once, at its
// final size.
func ReadDirFunc[T any](r *Root, rel string, f func(dev uint64, e Entry) T) ([]T, error) {
	s, dev, err := r.readDirScratch(rel)
	if err != nil {
		return nil, err
	}
	defer putScratch(s)
	names := string(s.names)
	out := make([]T, 0, len(s.recs))
	s.each(func(e *rec) {
		out = append(out, f(dev, Entry{Name: names[e.off : e.off+uint32(e.n)], Dir: e.dir, Ino: e.ino}))
	})
	return out, nil
}

// readDirScratch lists rel into a scratch (sorted), which the caller puts
// back, and returns the directory's device.
func (r *Root) readDirScratch(rel string) (*scratch, uint64, error) {
	const op = "saferoot.ReadDir"
	fd, st, err := r.openDir(op, rel)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	s := getScratch()
	s.slug, s.hide = r.atSlug(rel), r.copyChildren(rel)
	// Size the scratch from the directory's size, so that a huge listing is
	// not regrown a hundred times.
	if hint := sizeHint(&st); cap(s.recs) < hint {
		s.recs = make([]rec, 0, hint)
		s.names = make([]byte, 0, hint*8)
	}
	if err := s.readDirents(fd); err != nil {
		putScratch(s)
		return nil, 0, errs.E(op, kindOf(err), rel, err)
	}
	s.sort()
	return s, uint64(st.Dev), nil
}

// sizeHint is how many entries a directory of st's size may hold. st_size
// of a directory is a filesystem's own measure (ext4: bytes of 8-byte-header
// records, ~16 per short name; tmpfs: 20 per entry), so this is a hint,
// capped.
func sizeHint(st *unix.Stat_t) int { return min(int(st.Size/16), 1<<17) }

// openDir opens rel as a directory to list, and fstats it.
func (r *Root) openDir(op, rel string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := r.checkRel(op, rel); err != nil {
		return -1, st, err
	}
	rootfd, done, err := r.acquire()
	if err != nil {
		return -1, st, errs.E(op, kindOf(err), rel, err)
	}
	defer done()
	fd, err := r.resolve(rootfd, rel, dirFlags)
	if err == unix.ENOTDIR && rel != "" {
		// ENOTDIR is ambiguous: a file or link in the middle (NotExist), or
		// the final component is not a directory. Only a regular file there
		// is NotDir; a link or fifo is NotExist.
		return -1, st, errs.E(op, r.notDirKind(rootfd, rel), rel, err)
	}
	if err != nil {
		return -1, st, errs.E(op, kindOf(err), rel, err)
	}
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, errs.E(op, kindOf(err), rel, err)
	}
	return fd, st, nil
}

// notDirKind classifies a final ENOTDIR of ReadDir by an O_PATH look at rel.
func (r *Root) notDirKind(rootfd int, rel string) errs.Kind {
	fd, err := r.resolve(rootfd, rel, pathFlags)
	if err != nil {
		return errs.NotExist
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		return errs.NotDir
	}
	return errs.NotExist
}

// openRoot opens the root afresh, on every operation: only the anchor's fd
// is held, never the root's, so a root deleted and made again is served. An
// anchored root is its entry in the anchor, with no link followed and no
// mount crossed (a mount point at start: that same mount); an unanchored
// one is its path, following links.
func (r *Root) openRoot() (int, error) {
	switch {
	case r.dead:
		return -1, unix.ENOENT
	case r.anchor == nil:
		return openat(unix.AT_FDCWD, r.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	}
	r.anchor.mu.RLock()
	defer r.anchor.mu.RUnlock()
	if r.anchor.fd < 0 {
		return -1, unix.ENOENT
	}
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	mounted := r.mnt != (mountKey{})
	fd, err := -1, error(unix.ENOSYS)
	if !r.noOat2 && !openat2Missing.Load() {
		res := uint64(resolveFlags)
		if !mounted {
			res |= unix.RESOLVE_NO_XDEV
		}
		fd, err = openat2(r.anchor.fd, r.name, flags, res)
	}
	if err == unix.ENOSYS {
		// One component, O_NOFOLLOW: a link there is ENOTDIR or ELOOP.
		// The mount is checked below instead of by RESOLVE_NO_XDEV.
		if fd, err = openat(r.anchor.fd, r.name, flags); err == nil && !mounted && !sameMount(fd, r.anchor.mnt) {
			unix.Close(fd)
			return -1, unix.EXDEV
		}
	}
	if err != nil {
		return -1, err
	}
	if mounted && !sameMount(fd, r.mnt) {
		unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

// openat2 is one openat2 call, retried on EINTR and (a few times) on
// EAGAIN; ENOSYS is remembered for the process.
func openat2(dirfd int, rel string, flags int, res uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: res}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		// EAGAIN: the kernel saw a concurrent rename and could not vouch
		// for the lookup; retrying is what the man page asks for.
		if err == unix.EINTR || (err == unix.EAGAIN && tries < 16) {
			continue
		}
		if err == unix.ENOSYS {
			openat2Missing.Store(true)
		}
		return fd, err
	}
}

// resolve opens rel (valid, non-empty, or "" meaning the root itself) beneath
// rootfd with flags, which include O_NOFOLLOW and O_CLOEXEC. It returns the
// raw errno.
func (r *Root) resolve(rootfd int, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	if !r.noOat2 && !openat2Missing.Load() {
		res := uint64(resolveFlags)
		if !r.xdev {
			res |= unix.RESOLVE_NO_XDEV
		}
		if fd, err := openat2(rootfd, rel, flags, res); err != unix.ENOSYS {
			return fd, err
		}
	}
	return walk(rootfd, rel, flags, !r.xdev)
}

// walk is the fallback of resolve: one openat per component from rootfd,
// never following a link. An intermediate is opened O_PATH|O_DIRECTORY|
// O_NOFOLLOW, so a symlink there fails with ENOTDIR instead of being followed;
// the last gets the caller's flags plus O_NOFOLLOW, so a symlink there fails
// with ELOOP, or (O_PATH) is opened as the link itself for the caller's
// fstat to refuse. With sameDev, every component must be on the root's
// device (EXDEV otherwise): the walk's stand-in for RESOLVE_NO_XDEV, which
// a bind of a directory of the same filesystem would pass.
func walk(rootfd int, rel string, flags int, sameDev bool) (int, error) {
	if rel == "." {
		return openat(rootfd, ".", flags|unix.O_NOFOLLOW)
	}
	var dev uint64
	if sameDev {
		var st unix.Stat_t
		if err := fstat(rootfd, &st); err != nil {
			return -1, err
		}
		dev = uint64(st.Dev)
	}
	dirfd := rootfd
	for rest := rel; ; {
		comp, tail, more := strings.Cut(rest, "/")
		if comp == "" || comp == "." || comp == ".." {
			// CheckRel has refused these already; this walk never trusts it.
			if dirfd != rootfd {
				unix.Close(dirfd)
			}
			return -1, unix.EINVAL
		}
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if !more {
			f = flags | unix.O_NOFOLLOW
		}
		fd, err := openat(dirfd, comp, f)
		if dirfd != rootfd {
			unix.Close(dirfd)
		}
		if err == nil && sameDev {
			var st unix.Stat_t
			if err = fstat(fd, &st); err == nil && uint64(st.Dev) != dev {
				err = unix.EXDEV
			}
			if err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
		if err != nil || !more {
			return fd, err
		}
		dirfd, rest = fd, tail
	}
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		err := unix.Fstat(fd, st)
		if err != unix.EINTR {
			return err
		}
	}
}

// wantRegular refuses fd unless it is a regular file.
func wantRegular(op, rel string, fd int) error {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return errs.E(op, kindOf(err), rel, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return errs.E(op, errs.IsDir, rel, nil)
	}
	return errs.E(op, errs.NotExist, rel, nil)
}

// fstatInfo answers Stat for fd, refusing anything but a regular file or a
// directory (O_PATH|O_NOFOLLOW opens a final symlink as itself: refused here).
func fstatInfo(op, rel string, fd int) (Info, error) {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return Info{}, errs.E(op, kindOf(err), rel, err)
	}
	t := st.Mode & unix.S_IFMT
	if t != unix.S_IFREG && t != unix.S_IFDIR {
		return Info{}, errs.E(op, errs.NotExist, rel, nil)
	}
	return Info{
		Dir:   t == unix.S_IFDIR,
		Size:  st.Size,
		Mode:  st.Mode,
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
		Nlink: uint64(st.Nlink),
		Atime: time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec)),
		Mtime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
		Ctime: time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)),
	}, nil
}

// kindOf classifies an errno. Every way a confined lookup can fail because
// of what is on disk (absent, vanished, a link: ELOOP from O_NOFOLLOW or
// RESOLVE_NO_SYMLINKS, an escape: EXDEV, a non-directory in the middle:
// ENOTDIR, a socket: ENXIO) answers NotExist, exactly as absence does.
func kindOf(err error) errs.Kind {
	switch err {
	case unix.ENOENT, unix.ELOOP, unix.EXDEV, unix.ENOTDIR, unix.ENXIO,
		unix.ENODEV, unix.ESTALE:
		return errs.NotExist
	case unix.EISDIR:
		return errs.IsDir
	case unix.ENAMETOOLONG, unix.EINVAL:
		return errs.Invalid
	}
	return errs.IO
}
