package dbsnap

import (
	"database/sql"
	"sync"

	"github.com/9harness/9harness/internal/saferoot"
)

// Cache keeps one snapshot per database open for as long as the database
// and its -wal are unchanged, so that a listing of many agents of one
// harness reads the file once, not once per agent. Every Open re-validates
// with a Stat of both files: what a caller reads is never older than the
// files (equal Versions mean equal snapshots).
//
// It is safe for concurrent use. A nil *Cache caches nothing: Open is the
// package's Open, and release closes the snapshot.
type Cache struct {
	mu sync.Mutex
	m  map[cacheKey]*cached
}

type cacheKey struct {
	root *saferoot.Root
	rel  string
}

// cached is one snapshot and its users; a replaced snapshot is closed
// when its last user releases it.
type cached struct {
	v        Version
	db       *sql.DB
	refs     int
	replaced bool
}

// Open returns a snapshot of the database at rel under root and the
// function to call when done with it (instead of Close). The snapshot is
// shared while the files stay as they are.
func (c *Cache) Open(root *saferoot.Root, rel string, opts ...Option) (*sql.DB, func(), error) {
	if c == nil {
		db, err := Open(root, rel, opts...)
		if err != nil {
			return nil, nil, err
		}
		return db, func() { db.Close() }, nil
	}
	before, err := Stat(root, rel)
	if err != nil {
		return nil, nil, err
	}
	k := cacheKey{root, rel}
	c.mu.Lock()
	if e := c.m[k]; e != nil && e.v == before {
		e.refs++
		c.mu.Unlock()
		return e.db, c.release(e), nil
	}
	c.mu.Unlock()

	db, err := Open(root, rel, opts...)
	if err != nil {
		return nil, nil, err
	}
	// Kept only when nothing changed while the snapshot was taken: then
	// it is the snapshot of Version before.
	if after, err := Stat(root, rel); err != nil || after != before {
		return db, func() { db.Close() }, nil
	}
	e := &cached{v: before, db: db, refs: 1}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[cacheKey]*cached{}
	}
	if old := c.m[k]; old != nil {
		old.replaced = true
		if old.refs == 0 {
			old.db.Close()
		}
	}
	c.m[k] = e
	c.mu.Unlock()
	return db, c.release(e), nil
}

func (c *Cache) release(e *cached) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			e.refs--
			if e.refs == 0 && e.replaced {
				e.db.Close()
			}
		})
	}
}
