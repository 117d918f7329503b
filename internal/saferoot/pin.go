package saferoot

import (
	"fmt"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// Anchor is a directory opened once, by path, at start, and held while the
// roots beneath it are served: $HOME for the default roots, the resolved
// parent of a root given by --root or found to be a symlink. Its path is
// configuration and is resolved normally, once; from then on a root is
// opened from the anchor's fd by one name, with no symlink followed and no
// mount crossed, so no rename, link or mount made later (by any process of
// the owner: an agent installing a harness replaces ~/.dsh routinely) can
// redirect a root outside itself. A root that is deleted and recreated, or
// that appears after start, is served, because it is looked up by name in
// the anchor on every operation; a held fd of the root itself would serve
// a deleted directory forever.
type Anchor struct {
	// mu keeps fd open while a root opens from it: closed under a
	// lookup, its number could name another file by the time of the
	// openat.
	mu   sync.RWMutex
	fd   int
	path string
	mnt  mountKey
}

// OpenAnchor opens the directory at path (following links) and keeps it.
func OpenAnchor(path string) (*Anchor, error) {
	const op = "saferoot.OpenAnchor"
	fd, err := openat(unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, errs.E(op, kindOf(err), path, err)
	}
	mk, err := mountOf(fd)
	if err != nil {
		unix.Close(fd)
		return nil, errs.E(op, errs.IO, path, err)
	}
	return &Anchor{fd: fd, path: path, mnt: mk}, nil
}

// Path is the anchor's path as it was opened.
func (a *Anchor) Path() string { return a.path }

// Close releases the anchor; its roots answer NotExist after.
func (a *Anchor) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fd < 0 {
		return nil
	}
	err := unix.Close(a.fd)
	a.fd = -1
	return err
}

// Root returns the root named name (one component) in the anchor. Each
// operation opens it from the anchor's fd with RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV (or, without openat2, one openat with
// O_NOFOLLOW and a check that the device is the anchor's): a symlink or a
// mount in its place is NotExist, never followed.
func (a *Anchor) Root(name string, opts ...Option) *Root {
	r := &Root{path: filepath.Join(a.path, name), anchor: a, name: name, keep: newKeptDirs()}
	for _, o := range opts {
		o(r)
	}
	if ValidName(name) != nil || name == "." || name == ".." {
		r.dead = true
	}
	return r
}

// CrossMounts serves mounts beneath the root (--root NAME=PATH,xdev). By
// default a lookup beneath a root never crosses a mount point: a bind of
// /proc, or of another user's home, put under a root is NotExist.
func CrossMounts() Option { return func(r *Root) { r.xdev = true } }

// Resolution says how Pin resolved a root at start.
type Resolution struct {
	Configured string // the path as given
	Served     string // the directory served: Configured with its links resolved
	Link       bool   // the root itself was a symlink, resolved once
	Mount      bool   // the root was a mount point: the mount there now is served
	Absent     bool   // nothing is there yet; a directory created there later is served
}

func (r Resolution) String() string {
	s := r.Configured
	switch {
	case r.Link:
		s += " is a symlink: serving " + r.Served + ", resolved once now (a later change of the link is not followed)"
	case r.Served != r.Configured:
		s += ": serving " + r.Served + " (its parent resolved once now)"
	default:
		s += ": pinned now (a link or mount put in its place later is not followed)"
	}
	if r.Mount {
		s += "; it is a mount point: the filesystem mounted there now is served, and the root is absent if it is replaced"
	}
	if r.Absent {
		s += "; it does not exist yet: a directory made there later is served"
	}
	return s
}

// Pinner resolves roots once, at start, sharing one Anchor per directory.
type Pinner struct {
	anchors map[string]*Anchor
}

// Close closes every anchor; the roots anchored in them answer NotExist
// after.
func (p *Pinner) Close() {
	for _, a := range p.anchors {
		a.Close()
	}
	p.anchors = nil
}

func (p *Pinner) anchor(dir string) (*Anchor, error) {
	if a, ok := p.anchors[dir]; ok {
		return a, nil
	}
	a, err := OpenAnchor(dir)
	if err != nil {
		return nil, err
	}
	if p.anchors == nil {
		p.anchors = map[string]*Anchor{}
	}
	p.anchors[dir] = a
	return a, nil
}

// Pin resolves the root at path (absolute) once, now, and returns it with
// how it was resolved. Its parent directory is opened now and held (an
// Anchor); the root is its entry there, looked up on each operation with no
// link followed and no mount crossed. A root that is a symlink now (GNU
// stow, home-manager) is resolved now and the directory it names is served
// from then on, the link never looked at again; a root that is a mount
// point now (impermanence) is served as long as that same mount is there.
// A root whose parent cannot be opened is returned as a root that never
// exists, with the error.
func (p *Pinner) Pin(path string, opts ...Option) (*Root, Resolution, error) {
	const op = "saferoot.Pin"
	abs := filepath.Clean(path)
	res := Resolution{Configured: path, Served: abs}
	dead := &Root{path: abs, dead: true}
	if !filepath.IsAbs(abs) || abs == "/" {
		return dead, res, errs.E(op, errs.Invalid, path, fmt.Errorf("a root must be an absolute path below /"))
	}
	dir, name := filepath.Dir(abs), filepath.Base(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	a, err := p.anchor(dir)
	if err != nil {
		return dead, res, err
	}
	var st unix.Stat_t
	err = fstatat(a.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return dead, res, errs.E(op, errs.NotExist, path, fmt.Errorf("a symlink that resolves to nothing now: %w", err))
		}
		res.Link, res.Served = true, real
		dir, name = filepath.Dir(real), filepath.Base(real)
		if a, err = p.anchor(dir); err != nil {
			return dead, res, err
		}
		err = fstatat(a.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// Changed between the resolution and this look: not served.
			return dead, res, errs.E(op, errs.NotExist, path, fmt.Errorf("%s changed while it was resolved", real))
		}
	} else {
		res.Served = filepath.Join(dir, name)
	}
	r := a.Root(name, opts...)
	r.path = res.Served
	switch {
	case err == unix.ENOENT:
		res.Absent = true
		return r, res, nil
	case err != nil:
		return dead, res, errs.E(op, kindOf(err), path, err)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		// Not a directory now; one made there later is served.
		res.Absent = true
		return r, res, nil
	}
	fd, err := openat(a.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return dead, res, errs.E(op, kindOf(err), path, err)
	}
	defer unix.Close(fd)
	mk, err := mountOf(fd)
	if err != nil {
		return dead, res, errs.E(op, errs.IO, path, err)
	}
	if mk != a.mnt {
		res.Mount = true
		r.mnt = mk
	}
	return r, res, nil
}

// mountKey names the mount a file is on: the statx mount id (the unique
// 64-bit one where the kernel has it, 6.8+: the older id is reused as soon
// as a mount is gone, so a new mount can carry the id of an old one), with
// the device beside it, which alone tells two filesystems apart but not two
// binds of one (kernels before 5.8, which report no id).
type mountKey struct {
	id  uint64
	dev uint64
}

func mountOf(fd int) (mountKey, error) {
	var stx unix.Statx_t
	for {
		err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE|unix.STATX_MNT_ID, &stx)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return mountKey{}, err
		}
		break
	}
	k := mountKey{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor)}
	if stx.Mask&(unix.STATX_MNT_ID_UNIQUE|unix.STATX_MNT_ID) != 0 {
		k.id = stx.Mnt_id
	}
	return k, nil
}

// sameMount tells whether fd is on the mount mk names.
func sameMount(fd int, mk mountKey) bool {
	got, err := mountOf(fd)
	return err == nil && got == mk
}

func fstatat(dirfd int, name string, st *unix.Stat_t, flags int) error {
	for {
		err := unix.Fstatat(dirfd, name, st, flags)
		if err != unix.EINTR {
			return err
		}
	}
}
