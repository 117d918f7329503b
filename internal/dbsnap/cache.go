package dbsnap

import (
	"database/sql"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// Cache shares the snapshots of each database among the requests that want
// them, so that the work is done once however many requests arrive, and
// none gets a snapshot older than itself (the tree's freshness contract):
//
//   - A request shares the current snapshot when a Stat of the database and
//     its -wal, made after the request arrived, shows them as they were
//     while the snapshot was taken (equal Versions mean equal snapshots).
//   - Otherwise it shares the snapshot being taken, if that began after
//     the request arrived. One that began before is waited for and then
//     re-validated by a new Stat: if the files changed meanwhile, one new
//     snapshot is taken, shared by every request waiting.
//   - At most one snapshot per database is being taken, and at most two
//     exist (the current one and one its readers still use): a request
//     that would need a third waits for a reader's release, at most
//     maxWait, and is then refused (Busy).
//
// A snapshot's bytes (the whole database image, up to MaxBytes) are
// charged to Budget while it exists. One that does not fit, once the idle
// snapshots of other databases are dropped and a replaced one of the same
// database released, is refused with an error of kind errs.NoMem: the
// facts read from that database are then absent, as those of an absent
// file are. Reading a database too large for the budget page by page from
// its descriptor instead is not done: a reader of a live WAL database keeps
// its view only through the read marks of the -shm, which the daemon may
// not write, so pages read one by one while a checkpoint runs would mix
// two versions of the database, and a retry until nothing changed never
// ends against a busy writer.
//
// A snapshot nobody uses is closed after idleKeep, so the budget is not
// held by a cache between reads.
//
// It is safe for concurrent use. A nil *Cache caches nothing: Open is the
// package's Open, and release closes the snapshot.
type Cache struct {
	// Budget, if not nil, is the pool every snapshot is charged to (the
	// daemon's: a snapshot is shared work, charged once).
	Budget *budget.Pool

	mu      sync.Mutex
	m       map[cacheKey]*entry
	clock   uint64        // orders arrivals and the start of snapshots
	changed chan struct{} // closed (and replaced) when a snapshot is closed or taken

	// open takes a snapshot; Open unless a test counts them.
	open func(root *saferoot.Root, rel string, opts ...Option) (*sql.DB, error)
}

// maxWait bounds how long a request waits for the readers of a replaced
// snapshot to release it, before it is refused: as long as a query runs
// at most (the harnesses give theirs 5 s).
const maxWait = 5 * time.Second

// returnAfter is the size of a snapshot whose memory is given back to the
// system as soon as it is closed. The collector would free it only once
// the heap had grown by as much again, and the next snapshot of the same
// database is that much: a daemon holding one 180 MiB snapshot at a time
// reached twice that, and more, before a collection. A collection of a
// heap whose bulk is byte slices is cheap next to reading the database.
const returnAfter = 16 << 20

// idleKeep is how long a snapshot nobody uses is kept for the next read:
// enough for the reads of one listing or one client's burst.
const idleKeep = 10 * time.Second

type cacheKey struct {
	root *saferoot.Root
	rel  string
}

// entry is what the cache holds of one database.
type entry struct {
	cur    *snap   // the newest snapshot, nil when none is kept
	old    *snap   // a replaced snapshot that readers still use
	flight *flight // the snapshot being taken
}

// snap is one snapshot and its users.
type snap struct {
	e     *entry
	v     Version
	known bool  // v is the snapshot's: the files did not change while it was taken
	size  int64 // the files' size when it was taken
	db    *sql.DB
	refs  int
	idle  *time.Timer
}

// flight is a snapshot being taken, and who shares it.
type flight struct {
	start  uint64
	done   chan struct{}
	shares int // requests given the result besides the one taking it
	s      *snap
	err    error
}

// Open returns a snapshot of the database at rel under root, no older than
// the call, and the function to call when done with it (instead of Close).
func (c *Cache) Open(root *saferoot.Root, rel string, opts ...Option) (*sql.DB, func(), error) {
	const op = "dbsnap.Cache.Open"
	if c == nil {
		db, err := Open(root, rel, opts...)
		if err != nil {
			return nil, nil, err
		}
		return db, func() { db.Close() }, nil
	}
	k := cacheKey{root, rel}
	c.mu.Lock()
	c.clock++
	arrival := c.clock
	c.mu.Unlock()
	deadline := time.Now().Add(maxWait)
	for {
		v, err := Stat(root, rel)
		if err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		e := c.entry(k)
		if s := e.cur; s != nil && s.known && s.v == v {
			s.refs++
			if s.idle != nil {
				s.idle.Stop()
				s.idle = nil
			}
			c.mu.Unlock()
			return s.db, c.release(s), nil
		}
		if f := e.flight; f != nil {
			shared := f.start > arrival
			if shared {
				f.shares++
			}
			c.mu.Unlock()
			<-f.done
			if !shared {
				continue // begun before this request: see whether it is fresh
			}
			if f.err != nil {
				return nil, nil, f.err
			}
			return f.s.db, c.release(f.s), nil
		}
		// This request takes the snapshot. The current one is stale (its
		// Version is not the files'): closed now if nobody uses it.
		if s := e.cur; s != nil && s.refs == 0 {
			c.closeLocked(s)
		}
		if e.cur != nil && e.old != nil {
			ch := c.changed
			c.mu.Unlock()
			if !wait(ch, deadline) {
				return nil, nil, errs.E(op, errs.Busy, rel, errors.New("two snapshots of the database are in use"))
			}
			continue
		}
		c.clock++
		f := &flight{start: c.clock, done: make(chan struct{})}
		e.flight = f
		c.mu.Unlock()

		s, err := c.take(e, root, rel, opts, deadline)
		c.land(e, f, s, err)
		if err != nil {
			return nil, nil, err
		}
		return s.db, c.release(s), nil
	}
}

// land ends e's flight f with its outcome: snapshot s, now e's current one
// and used by the request that took it and every one that shares f, or
// err for all of them.
func (c *Cache) land(e *entry, f *flight, s *snap, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.flight = nil
	if err == nil {
		s.refs = 1 + f.shares
		if old := e.cur; old != nil {
			if old.refs == 0 {
				c.closeLocked(old)
			} else {
				e.old = old // nil until now: a flight begins only then
			}
		}
		e.cur = s
	}
	f.s, f.err = s, err
	close(f.done)
	c.signalLocked()
}

// take takes a snapshot for e, charged to the budget. What does not fit
// waits for the idle snapshots of other databases to be dropped and for a
// replaced snapshot of this one to be released, until deadline.
func (c *Cache) take(e *entry, root *saferoot.Root, rel string, opts []Option, deadline time.Time) (*snap, error) {
	open := c.open
	if open == nil {
		open = Open
	}
	if c.Budget != nil {
		opts = append(opts[:len(opts):len(opts)], WithBudget(c.Budget))
	}
	for {
		before, err := Stat(root, rel)
		if err != nil {
			return nil, err
		}
		db, err := open(root, rel, opts...)
		if err == nil {
			after, err := Stat(root, rel)
			return &snap{e: e, v: before, known: err == nil && after == before, db: db,
				size: before.DB.Size + before.WAL.Size}, nil
		}
		if !errs.Is(err, errs.NoMem) {
			return nil, err
		}
		c.mu.Lock()
		dropped := c.dropIdleLocked()
		inUse := e.cur != nil || e.old != nil
		ch := c.changed
		c.mu.Unlock()
		if dropped {
			continue
		}
		if !inUse || !wait(ch, deadline) {
			return nil, err
		}
	}
}

// entry returns k's entry, made if need be. c.mu is held.
func (c *Cache) entry(k cacheKey) *entry {
	if c.m == nil {
		c.m = map[cacheKey]*entry{}
		c.changed = make(chan struct{})
	}
	e := c.m[k]
	if e == nil {
		e = &entry{}
		c.m[k] = e
	}
	return e
}

// release returns the function that gives s back once.
func (c *Cache) release(s *snap) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			s.refs--
			if s.refs > 0 {
				return
			}
			switch s {
			case s.e.cur:
				// A request waiting for room may drop it now.
				c.signalLocked()
				s.idle = time.AfterFunc(idleKeep, func() {
					c.mu.Lock()
					defer c.mu.Unlock()
					if s.e.cur == s && s.refs == 0 {
						c.closeLocked(s)
					}
				})
			default:
				c.closeLocked(s)
			}
		})
	}
}

// closeLocked closes s and forgets it. c.mu is held.
func (c *Cache) closeLocked(s *snap) {
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	switch s {
	case s.e.cur:
		s.e.cur = nil
	case s.e.old:
		s.e.old = nil
	}
	s.db.Close()
	if s.size >= returnAfter {
		// Before the requests waiting for room are woken.
		debug.FreeOSMemory()
	}
	c.signalLocked()
}

// dropIdleLocked closes every snapshot nobody uses, and says whether there
// was one. c.mu is held.
func (c *Cache) dropIdleLocked() bool {
	dropped := false
	for _, e := range c.m {
		if s := e.cur; s != nil && s.refs == 0 {
			c.closeLocked(s)
			dropped = true
		}
	}
	return dropped
}

// signalLocked wakes every request waiting for a snapshot to be closed or
// taken. c.mu is held.
func (c *Cache) signalLocked() {
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}

// wait waits for ch to be closed until deadline, and says whether it was.
func wait(ch <-chan struct{}, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Close closes the snapshots nobody uses now; one in use is closed when
// its last user releases it. The cache stays usable.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropIdleLocked()
	for _, e := range c.m {
		e.cur = nil // in use: closed by its last release
	}
}
