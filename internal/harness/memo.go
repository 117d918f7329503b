package harness

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/9harness/9harness/internal/freelist"
	"github.com/9harness/9harness/internal/saferoot"
)

// Memo shares, across the agents of one listing (a read of /active/table),
// what the harness files say about a directory many agents share: the
// transcripts of a Claude project dir with their mtimes, the session ids
// the registry records claim, the old-style sub-agent files. Without it
// every agent of a directory lists that directory and reads every other
// agent's registry record, so a listing of N agents in one working
// directory costs N² reads; with it, N.
//
// A Memo lives for one request and is then dropped: its facts are as old
// as that request, never older. A nil *Memo memoizes nothing (every call
// reads the disk), which is what a single agent's files use. It is safe
// for concurrent use.
type Memo struct {
	mu      sync.Mutex
	entries map[memoKey]any
	// stats are Stat's results, the most numerous entries: each an index
	// into statv, since a map stores a value as large as a statRes
	// (over 128 bytes) in an allocation of its own.
	stats map[memoKey]int
	statv []statRes
	files *FileCache // nil: nothing is kept past the request
	// zw is what the request may still decode of compressed logs, all
	// its agents together (zMaxRequestWork).
	zw *zwork
}

// decodeWork is the request's bound on decoding, shared by the resolves
// it makes; nil for a nil memo (a single agent's files: its resolve's own
// bound is the request's).
func (m *Memo) decodeWork() *zwork {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.zw == nil {
		m.zw = &zwork{left: zMaxRequestWork}
	}
	return m.zw
}

type statRes struct {
	info saferoot.Info
	err  error
}

type memoKey struct {
	root *saferoot.Root
	kind string
	rel  string
}

// NewMemo returns an empty memo for one request.
func NewMemo() *Memo { return &Memo{entries: map[memoKey]any{}, stats: map[memoKey]int{}} }

// Release says the request that made m (NewMemoCache) is done with it,
// and so is everything it handed m to: m is emptied and kept by its file
// cache for the next request, its maps' room with it. A table read of
// hundreds of agents fills thousands of entries, and growing the maps
// again on every read allocated most of what the memo cost. A nil memo,
// or one without a file cache, is left to the collector.
func (m *Memo) Release() {
	if m == nil || m.files == nil {
		return
	}
	c := m.files
	m.mu.Lock()
	n := len(m.entries) + len(m.stats)
	clear(m.entries)
	clear(m.stats)
	clear(m.statv) // no error kept alive
	m.statv = m.statv[:0]
	m.files = nil
	m.zw = nil // the next request's decoding is its own
	m.mu.Unlock()
	if n > memoKeptMax {
		return // a one-off's room is not worth keeping
	}
	c.memos.Put(m)
}

// memosKept is how many released memos a file cache keeps: one per
// request running at once is enough, and table reads rarely overlap.
// memoKeptMax is the most entries a kept memo may have held (about 2 MB
// of maps): the room of a table of some thousand agents is kept, that of
// a one-off hundred thousand is not.
const (
	memosKept   = 2
	memoKeptMax = 16384
)

// get returns the memoized value of (r, kind, rel), computing it with f
// the first time. On a nil memo it always calls f. A call that comes
// while another computes the same value waits for it instead of
// computing it again: a table read's workers start together, and each
// would otherwise read a shared project directory's every record and
// transcript itself. (f may ask the memo for other values, never for its
// own: the kinds depend on one another without a cycle.)
func memoGet[T any](m *Memo, r *saferoot.Root, kind, rel string, f func() T) T {
	if m == nil {
		return f()
	}
	k := memoKey{r, kind, rel}
	m.mu.Lock()
	v, ok := m.entries[k]
	if !ok {
		c := &memoCall{done: make(chan struct{})}
		m.entries[k] = c
		m.mu.Unlock()
		t := func() T {
			defer close(c.done) // even if f panics: no waiter is left behind
			t := f()
			c.val, c.ok = t, true
			return t
		}()
		m.mu.Lock()
		m.entries[k] = t
		m.mu.Unlock()
		return t
	}
	m.mu.Unlock()
	if c, ok := v.(*memoCall); ok {
		if <-c.done; !c.ok {
			return f() // the first call panicked
		}
		return c.val.(T)
	}
	return v.(T)
}

// memoCall is a value being computed: done is closed once it is over, and
// ok says whether val holds its result.
type memoCall struct {
	done chan struct{}
	val  any
	ok   bool
}

// readDir is r.ReadDir(rel), once per memo. With a file cache the listing
// is also kept across requests while the directory is as it was
// (cached), so it is shared: callers read it and never modify it.
func (m *Memo) readDir(r *saferoot.Root, rel string) ([]saferoot.Entry, error) {
	type res struct {
		ents []saferoot.Entry
		err  error
	}
	v := memoGet(m, r, "readdir", rel, func() res {
		var err error
		// A name added, removed or renamed changes a directory's mtime,
		// so a listing kept under the directory's key is as fresh as a
		// new one, for one statx from a held parent instead of an open,
		// a stat, two getdents and a close. What a listing holds also
		// depends on the root's rules for rel (credential names, slug
		// directories), hence the root and rel in the kind.
		ents := cached(m, r, "readdir\x00"+r.Path()+"\x00"+rel, rel, true, func() ([]saferoot.Entry, bool) {
			var ents []saferoot.Entry
			ents, err = r.ReadDir(rel)
			return ents, err == nil
		})
		return res{ents, err}
	})
	return v.ents, v.err
}

// Stat is r.Stat(rel), once per memo: a file several facts come from (a
// transcript: its title, its tail, its tokens, its presence in a listing)
// is stat'ed once per request. A nil memo always stats.
func (m *Memo) Stat(r *saferoot.Root, rel string) (saferoot.Info, error) {
	if m == nil {
		return r.Stat(rel)
	}
	k := memoKey{r, "stat", rel}
	m.mu.Lock()
	if i, ok := m.stats[k]; ok {
		v := m.statv[i]
		m.mu.Unlock()
		return v.info, v.err
	}
	m.mu.Unlock()
	info, err := r.Stat(rel)
	m.mu.Lock()
	m.stats[k] = len(m.statv)
	m.statv = append(m.statv, statRes{info, err})
	m.mu.Unlock()
	return info, err
}

// mayHaveDir reports whether dir may hold a subdirectory name: false only
// when dir's listing (once per memo) shows no such directory. Without a
// memo, or when the listing fails, it may. One set per listing, so asking
// for each agent of a shared directory costs no more per agent.
func (m *Memo) mayHaveDir(r *saferoot.Root, dir, name string) bool {
	if m == nil {
		return true
	}
	dirs := memoGet(m, r, "subdirs", dir, func() map[string]bool {
		ents, err := m.readDir(r, dir)
		if err != nil {
			return nil
		}
		set := map[string]bool{}
		for _, e := range ents {
			if e.Dir {
				set[e.Name] = true
			}
		}
		return set
	})
	return dirs == nil || dirs[name]
}

// FileCache keeps what was derived from a file while the file is
// unchanged: each entry is keyed by the file's device, inode, size and
// mtime, and every use stats the file first, so a fact is never older than
// the file it comes from. It lives as long as its owner (the tree's
// /active), is bounded in entries and in bytes (when full it starts again
// empty), and is safe for concurrent use. A nil *FileCache keeps nothing.
type FileCache struct {
	mu    sync.Mutex
	m     map[fileKey]any
	bytes int64 // what the entries hold, about (keptSize)

	memos freelist.List[*Memo] // released memos (Release), for NewMemoCache

	// seen is the files (kind, device, inode) something was derived from
	// in any version: a file seen before is one whose agent the reads
	// already show, not a new one (Defer spends only on new ones).
	seen map[seenKey]struct{}
}

type seenKey struct {
	kind     string
	dev, ino uint64
}

type fileKey struct {
	kind     string
	dev, ino uint64
	size     int64
	mtime    int64
}

// fileCacheStill is how long a file must have been unmodified before what
// was derived from it is kept: a rewrite of the same size within the file
// system's timestamp granularity (a registry record's "busy" becoming
// "idle") leaves the mtime as it was, so a recent mtime proves nothing.
const fileCacheStill = time.Second

// fileCacheMax bounds a FileCache's entries, and fileCacheMaxBytes what
// they hold: an agent can make the directories the harnesses keep state in
// as big as it likes, and a listing kept for each of thousands of them
// would hold gigabytes (rule 10).
const (
	fileCacheMax      = 8192
	fileCacheMaxBytes = 32 << 20
)

// keptSize is about what a kept result holds: a listing its names, any
// other result (a few facts of a file) a small fixed amount.
func keptSize(v any) int64 {
	const entry = 64 // an Entry's fields and string header, and the map's share
	if ents, ok := v.([]saferoot.Entry); ok {
		n := int64(0)
		for _, e := range ents {
			n += entry + int64(len(e.Name))
		}
		return n
	}
	return 512
}

// NewFileCache returns an empty cache.
func NewFileCache() *FileCache {
	return &FileCache{m: map[fileKey]any{}, memos: freelist.List[*Memo]{Max: memosKept}}
}

// NewMemoCache is NewMemo whose per-file facts are also kept in c across
// requests, re-validated on each use.
func NewMemoCache(c *FileCache) *Memo {
	if c == nil {
		return NewMemo()
	}
	m, ok := c.memos.Get()
	if !ok {
		m = NewMemo()
	}
	m.files = c
	return m
}

func keyOf(kind string, info saferoot.Info) fileKey {
	return fileKey{kind: kind, dev: info.Dev, ino: info.Ino, size: info.Size, mtime: info.Mtime.UnixNano()}
}

// fileCached returns f's result for the file rel, from the memo's file
// cache when the file is as it was when that result was derived. A result
// is kept only when the file did not change while f read it.
func fileCached[T any](m *Memo, r *saferoot.Root, kind, rel string, f func() T) T {
	return cached(m, r, kind, rel, false, func() (T, bool) { return f(), true })
}

// cached is fileCached for a file (dir false) or a directory (dir true):
// f's result is kept only when f says it may be (ok), and only when rel is
// of the kind asked and was the same before and after f, and still for
// fileCacheStill.
func cached[T any](m *Memo, r *saferoot.Root, kind, rel string, dir bool, f func() (T, bool)) T {
	if m == nil || m.files == nil {
		t, _ := f()
		return t
	}
	before, err := m.Stat(r, rel)
	if err != nil || before.Dir != dir {
		t, _ := f()
		return t
	}
	k := keyOf(kind, before)
	c := m.files
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v.(T)
	}
	t, keep := f()
	c.mu.Lock()
	if c.seen == nil || len(c.seen) >= fileCacheMax {
		c.seen = map[seenKey]struct{}{}
	}
	c.seen[seenKey{kind, before.Dev, before.Ino}] = struct{}{}
	c.mu.Unlock()
	if !keep {
		return t
	}
	if after, err := r.Stat(rel); err == nil && keyOf(kind, after) == k && time.Since(after.Mtime) >= fileCacheStill {
		size := keptSize(t)
		c.mu.Lock()
		if size <= fileCacheMaxBytes/4 {
			if len(c.m) >= fileCacheMax || c.bytes+size > fileCacheMaxBytes {
				clear(c.m)
				c.bytes = 0
			}
			if old, ok := c.m[k]; ok {
				c.bytes -= keptSize(old)
			}
			c.m[k] = t
			c.bytes += size
		}
		c.mu.Unlock()
	}
	return t
}

// Defer is one read's budget of window bytes (Env.Defer). It is safe for
// concurrent use.
type Defer struct{ left atomic.Int64 }

// NewDefer is a budget of n bytes.
func NewDefer(n int64) *Defer {
	d := &Defer{}
	d.left.Store(n)
	return d
}

// spend takes n bytes from the budget and says whether they were there.
func (d *Defer) spend(n int64) bool {
	if d == nil {
		return true
	}
	if d.left.Add(-n) >= 0 {
		return true
	}
	d.left.Add(n)
	return false
}

// derivedBefore reports whether the file cache holds kind's result for
// rel as the file is now (by the memo's stat), or has derived it from an
// earlier version of the same file.
func derivedBefore(m *Memo, r *saferoot.Root, kind, rel string) bool {
	if m == nil || m.files == nil {
		return false
	}
	info, err := m.Stat(r, rel)
	if err != nil || info.Dir {
		return false
	}
	c := m.files
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[keyOf(kind, info)]; ok {
		return true
	}
	_, ok := c.seen[seenKey{kind, info.Dev, info.Ino}]
	return ok
}
