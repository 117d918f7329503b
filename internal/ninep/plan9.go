package ninep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/srv9p"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/tree"
)

// errString is the 9P2000 twin of errnoOf: plain 9P2000 carries error
// strings, and Linux v9fs and plan9port turn them back into errno by table,
// so each kind gets the spelling those tables know.
var errString = [...]string{
	errs.Other:       "i/o error",
	errs.NotExist:    "file does not exist",
	errs.Private:     "file does not exist",
	errs.Invalid:     "invalid argument",
	errs.Permission:  "permission denied",
	errs.ReadOnly:    "read only file system",
	errs.NotDir:      "not a directory",
	errs.IsDir:       "is a directory",
	errs.Exist:       "file already exists",
	errs.Busy:        "device or resource busy",
	errs.IO:          "i/o error",
	errs.Interrupted: "interrupted",
	errs.NoMem:       "cannot allocate memory",
}

// plan9Err translates err for the 9P2000 wire.
func plan9Err(err error) error {
	k := errs.KindOf(err)
	if int(k) < len(errString) {
		return errors.New(errString[k])
	}
	return errors.New("i/o error")
}

var errRO = errors.New(errString[errs.ReadOnly])

// errBlockedReads refuses a blocking read beyond maxBlockingReads, in the
// spelling v9fs maps to EAGAIN, the 9P2000.L side's errno for it.
var errBlockedReads = errors.New("resource temporarily unavailable")

// p9state is the per-fid state of the 9P2000 adapter. A walk with
// fid == newfid mutates it while other requests may read it, hence the lock.
type p9state struct {
	mu   sync.Mutex
	name string
	node tree.Node
	up   *ancestor
	here int64 // as file.here
	// charged is what the fid holds, charged to the connection:
	// fileCost, its chain of nodes, and its open handle.
	charged int64
	h       tree.Handle
	snap    []tree.Entry
	// reason, once a write on this fid has failed, is what a read of the
	// fid returns instead of the file (reason.go).
	reason []byte
}

// st is the fid's state. srv9p serves a connection's requests
// concurrently, so a pipelined request can name a newfid whose Twalk has
// not set it yet: such a request is refused, because a nil interface
// conversion in srv9p's handler goroutine, where no recover stands, would
// take the whole daemon down.
func st(f *srv9p.Fid) (*p9state, error) {
	s, ok := f.Aux().(*p9state)
	if !ok {
		return nil, errNotReady
	}
	return s, nil
}

// errNotReady answers a request on a fid whose walk is still in flight.
var errNotReady = errors.New("fid not ready: its walk has not completed")

// NewPlan9 returns a plain-9P2000 server over the same tree the 9P2000.L
// adapter serves, with the same names, modes, sizes, mtimes, qids and
// refusals. It uses srv9p with Tree == nil: srv9p's Tree stores stats and
// cannot drop entries, which a live tree needs. One server per connection.
func NewPlan9(root tree.Dir, owner string, msize uint32, writer tree.Writer, wctx context.Context) *srv9p.Server {
	return newPlan9(newCharger(nil, nil), root, owner, msize, writer, wctx)
}

// errNoFid refuses a fid the connection's budget has no room for, in
// the spelling clients map to EMFILE.
var errNoFid = srv9p.ErrTooManyFids

// rechargeLocked charges or releases what s holds now beyond what it has
// charged: its fid, its chain of nodes, its handle. Called with s.mu held.
func (s *p9state) rechargeLocked(bytes *charger, hcost int64) error {
	want := fileCost + s.here + s.up.chain() + hcost
	if d := want - s.charged; d > 0 {
		if err := bytes.charge(d, "a fid"); err != nil {
			return err
		}
	} else {
		bytes.release(-d)
	}
	s.charged = want
	return nil
}

// newPlan9 is NewPlan9 charging bytes. The bounds are the caller's to set
// (serve2000). Each request's context is cancelled by a Tflush naming it
// and, under ServeContext, by the connection's end.
func newPlan9(bytes *charger, root tree.Dir, owner string, msize uint32, writer tree.Writer, wctx context.Context) *srv9p.Server {
	a := &plan9Adapter{bytes: bytes, root: root, owner: owner, writer: writer, wctx: wctx}
	return recovering(&srv9p.Server{
		Msize:  msize,
		Attach: a.attach,
		Walk:   a.walk,
		Open:   a.open,
		Read:   a.read,
		Stat:   a.stat,
		Write:  a.write,
		Wstat:  func(context.Context, *srv9p.Fid, *plan9.Dir) error { return errRO },
		Clunk:  a.clunk,
	})
}

// plan9Adapter is one connection's 9P2000 handlers over the tree: one
// method per request srv9p hands it.
type plan9Adapter struct {
	bytes  *charger
	root   tree.Dir
	owner  string
	writer tree.Writer
	wctx   context.Context
}

func (a *plan9Adapter) attach(ctx context.Context, fid, afid *srv9p.Fid, user, aname string) (plan9.Qid, error) {
	if aname != "" && aname != "/" {
		return plan9.Qid{}, srv9p.Ebadattach
	}
	attr, err := a.root.Attr()
	if err != nil {
		return plan9.Qid{}, plan9Err(err)
	}
	if err := a.bytes.charge(fileCost, "a fid"); err != nil {
		return plan9.Qid{}, errNoFid
	}
	fid.SetAux(&p9state{name: "/", node: a.root, charged: fileCost})
	return qid9(attr), nil
}

func (a *plan9Adapter) walk(ctx context.Context, fid, newfid *srv9p.Fid, names []string) ([]plan9.Qid, error) {
	return srv9p.Walk(fid, newfid, names, a.clone, a.step)
}

// clone makes nw's state a copy of old's, charged as a fid of its own.
func (a *plan9Adapter) clone(old, nw *srv9p.Fid) error {
	s, err := st(old)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := &p9state{name: s.name, node: s.node, up: s.up, here: s.here}
	if err := ns.rechargeLocked(a.bytes, 0); err != nil {
		return errNoFid
	}
	nw.SetAux(ns)
	return nil
}

// step walks f one name, charging the link it adds to its chain.
func (a *plan9Adapter) step(f *srv9p.Fid, name string) (plan9.Qid, error) {
	s, err := st(f)
	if err != nil {
		return plan9.Qid{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := file{node: s.node, up: s.up, here: s.here}
	attr, err := w.step(name)
	if err != nil {
		return plan9.Qid{}, plan9Err(err)
	}
	node, up, here := s.node, s.up, s.here
	s.node, s.up, s.here = w.node, w.up, w.here
	if err := s.rechargeLocked(a.bytes, openCost(s.h)); err != nil {
		s.node, s.up, s.here = node, up, here
		return plan9.Qid{}, errNoFid
	}
	if name != ".." {
		s.name = name
	} else if s.up == nil {
		s.name = "/"
	}
	return qid9(attr), nil
}

func (a *plan9Adapter) open(ctx context.Context, fid *srv9p.Fid, mode uint8) error {
	s, err := st(fid)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A writable node may be opened write-only, or read-write so
	// that a read after a failed write returns the reason
	// (reason.go); nothing is removed on clunk, nor executed.
	write := mode&3 != plan9.OREAD || mode&plan9.OTRUNC != 0
	if mode&plan9.ORCLOSE != 0 || (write && mode&3 != plan9.OWRITE && mode&3 != plan9.ORDWR) {
		return errRO
	}
	h, err := openNode(s.node, write, mode&3 != plan9.OWRITE)
	if err != nil {
		return plan9Err(err)
	}
	if err := s.rechargeLocked(a.bytes, openCost(h)); err != nil {
		h.Close()
		return plan9Err(err)
	}
	s.h = h
	return nil
}

func (a *plan9Adapter) read(ctx context.Context, fid *srv9p.Fid, data []byte, off int64) (int, error) {
	s, err := st(fid)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if d, ok := s.node.(tree.Dir); ok {
		defer s.mu.Unlock()
		return a.readDir(fid, s, d, data, off)
	}
	// The handle is read without the fid's lock: a read that
	// blocks (the events file) must not hold up a Tstat of the
	// fid, and srv9p clunks (closes the handle) only after every
	// request on the fid is answered.
	h, reason := s.h, s.reason
	s.mu.Unlock()
	if reason != nil {
		if off >= int64(len(reason)) {
			return 0, nil
		}
		return copy(data, reason[off:]), nil
	}
	if h == nil {
		return 0, errors.New("not open for read")
	}
	if _, ok := h.(ContextReader); ok {
		// It waits for an event: it holds a blocking slot
		// instead of a request slot (srv9pfork patch 05).
		if err := srv9p.Blocking(ctx); err != nil {
			return 0, errBlockedReads
		}
	}
	n, err := readHandle(ctx, nil, h, data, off)
	if n > 0 || err == nil || errors.Is(err, io.EOF) {
		return n, nil
	}
	if errs.KindOf(err) != errs.Interrupted {
		err = errs.E("read", errs.IO, "", err)
	}
	return n, plan9Err(err)
}

// readDir reads the directory d of fid as 9P2000 stat entries. The
// listing is snapshotted at offset 0 and served from the snapshot after,
// as on the 9P2000.L side. Called with s.mu held.
func (a *plan9Adapter) readDir(fid *srv9p.Fid, s *p9state, d tree.Dir, data []byte, off int64) (int, error) {
	if off == 0 || s.snap == nil {
		// The snapshot is charged as it is read, and then with the
		// fid (at listCost); it is replaced, or dropped at clunk,
		// with its charge.
		snap, err := listCharged(d, a.bytes)
		if err != nil {
			return 0, plan9Err(err)
		}
		// Now the fid's: its charge counts the new snapshot, and
		// lets go of the one it replaces.
		s.charged += listCost(snap)
		s.rechargeLocked(a.bytes, openCost(s.h)+listCost(snap))
		s.snap = snap
	}
	return fid.ReadDir(data, off, func(i int, dir *plan9.Dir) bool {
		if i >= len(s.snap) {
			return false
		}
		e := s.snap[i]
		n, err := d.Lookup(e.Name)
		var attr tree.Attr
		if err == nil {
			attr, err = n.Attr()
		}
		if err != nil {
			// Gone since the snapshot: serve what the listing
			// knew rather than end the read early.
			attr = tree.Attr{Dir: e.Dir, Path: e.Path, Mode: 0o444}
			if e.Dir {
				attr.Mode = 0o555
			}
		}
		*dir = dir9(e.Name, attr, a.owner)
		return true
	})
}

func (a *plan9Adapter) stat(ctx context.Context, fid *srv9p.Fid) (*plan9.Dir, error) {
	s, err := st(fid)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	node, name := s.node, s.name
	s.mu.Unlock()
	attr, err := node.Attr()
	if err != nil {
		return nil, plan9Err(err)
	}
	d := dir9(name, attr, a.owner)
	return &d, nil
}

func (a *plan9Adapter) write(ctx context.Context, fid *srv9p.Fid, data []byte, off int64) (int, error) {
	s, err := st(fid)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	node := s.node
	s.mu.Unlock()
	var reason []byte
	err = writeNode(a.wctx, node, a.writer, data, off, func(r []byte) {
		reason = r
		s.mu.Lock()
		s.reason = r
		s.mu.Unlock()
	})
	if reason != nil {
		// Rerror carries the reason after the spelling that
		// clients map to an errno: plan9port's 9pfuse matches it
		// as a substring, Plan 9 shows the whole string.
		return 0, errors.New(plan9Err(err).Error() + ": " + strings.TrimSuffix(string(reason), "\n"))
	}
	if err != nil {
		return 0, plan9Err(err)
	}
	return len(data), nil
}

func (a *plan9Adapter) clunk(fid *srv9p.Fid) {
	s, ok := fid.Aux().(*p9state)
	if !ok {
		return
	}
	s.mu.Lock()
	h := s.h
	s.h, s.snap = nil, nil
	a.bytes.release(s.charged)
	s.charged = 0
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// recovering makes every handler of s answer a panic with an error instead
// of dying with it. srv9p runs each request in a goroutine of its own with
// no recover, so one handler bug would take down the daemon and every
// other client's connection; p9 (the 9P2000.L side) recovers its handlers
// the same way (with EFAULT).
func recovering(s *srv9p.Server) *srv9p.Server {
	caught := func(err *error) {
		if r := recover(); r != nil {
			*err = fmt.Errorf("internal error: %v", r)
		}
	}
	attach, walk, open, read, stat, write := s.Attach, s.Walk, s.Open, s.Read, s.Stat, s.Write
	clunk := s.Clunk
	s.Attach = func(ctx context.Context, fid, afid *srv9p.Fid, user, aname string) (q plan9.Qid, err error) {
		defer caught(&err)
		return attach(ctx, fid, afid, user, aname)
	}
	s.Walk = func(ctx context.Context, fid, newfid *srv9p.Fid, names []string) (q []plan9.Qid, err error) {
		defer caught(&err)
		return walk(ctx, fid, newfid, names)
	}
	s.Open = func(ctx context.Context, fid *srv9p.Fid, mode uint8) (err error) {
		defer caught(&err)
		return open(ctx, fid, mode)
	}
	s.Read = func(ctx context.Context, fid *srv9p.Fid, data []byte, off int64) (n int, err error) {
		defer caught(&err)
		return read(ctx, fid, data, off)
	}
	s.Stat = func(ctx context.Context, fid *srv9p.Fid) (d *plan9.Dir, err error) {
		defer caught(&err)
		return stat(ctx, fid)
	}
	s.Write = func(ctx context.Context, fid *srv9p.Fid, data []byte, off int64) (n int, err error) {
		defer caught(&err)
		return write(ctx, fid, data, off)
	}
	s.Clunk = func(fid *srv9p.Fid) {
		defer func() { recover() }()
		clunk(fid)
	}
	return s
}

func qid9(a tree.Attr) plan9.Qid {
	q := plan9.Qid{Path: a.Path, Vers: a.Version, Type: plan9.QTFILE}
	if a.Dir {
		q.Type = plan9.QTDIR
	}
	return q
}

func dir9(name string, a tree.Attr, owner string) plan9.Dir {
	mode := plan9.Perm(a.Mode)
	if a.Dir {
		mode |= plan9.DMDIR
	}
	return plan9.Dir{
		Qid:    qid9(a),
		Mode:   mode,
		Atime:  uint32(a.Atime.Unix()),
		Mtime:  uint32(a.Mtime.Unix()),
		Length: uint64(a.Size),
		Name:   name,
		Uid:    owner,
		Gid:    owner,
		Muid:   owner,
	}
}
