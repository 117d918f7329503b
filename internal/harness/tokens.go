package harness

import (
	"bufio"
	"bytes"
	"container/list"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// Tokens is a session's token usage as the harness records it. Each count
// is nil where the harness does not say (or where it cannot be counted
// without a guess), and the tree then leaves its line out.
//
// Input is the uncached input; CacheRead and CacheWrite are the cached
// input read and written, so the three add up to what was sent. Output
// includes reasoning where the harness counts it apart. Context is the
// size of the newest model call's prompt (input and cache together): what
// a statusline shows as the context in use.
type Tokens struct {
	Context, Input, Output, CacheRead, CacheWrite *int64
}

// String is the tokens file: one "NAME N" line per known count, in a fixed
// order; "" when nothing is known.
func (t Tokens) String() string {
	var b strings.Builder
	for _, f := range []struct {
		name string
		v    *int64
	}{{"context", t.Context}, {"input", t.Input}, {"output", t.Output}, {"cache_read", t.CacheRead}, {"cache_write", t.CacheWrite}} {
		if f.v != nil {
			b.WriteString(f.name + " " + strconv.FormatInt(*f.v, 10) + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Known reports whether any count is known.
func (t Tokens) Known() bool { return t.String() != "" }

func i64(v int64) *int64 { return &v }

// Summed reports whether a harness's sums need a whole-file scan (Count):
// Resolve gives only their context, from the tail it reads anyway, so a
// listing never pays for reading every transcript whole.
func Summed(harness string) bool {
	s, _ := SpecOf(harness)
	return s.Summed
}

// Count is a's tokens, every count the harness records: for the harnesses
// Summed names, the whole transcript's (a file over scanMax gives the
// context alone, from its tail); for the others what Resolve found.
//
// With env.Counts, an unchanged file is not read again, and a file that
// only grew (the harnesses append) is read from where the last count
// stopped, its running totals kept; see Counts for what is checked.
func Count(env Env, a Agent) Tokens {
	t, _ := count(env, a, true)
	return t
}

// CountNow is Count without a long scan, for a read of many agents at
// once (the table): it gives the count Count would when env.Counts holds
// one for the file as it is now, or one it can bring up to date by
// reading at most growNow bytes the file grew by. Otherwise complete is
// false and the tokens are what Resolve found in the tail (the context
// alone): the sums are not derived yet, never taken from an older count
// that was not re-validated. Counts.Later can derive them for a later read.
// Without env.Counts it counts as Count does.
func CountNow(env Env, a Agent) (t Tokens, complete bool) {
	return count(env, a, false)
}

// growNow is the most a file may have grown by for CountNow to count it
// (an agent at work appends a few lines between two reads).
const growNow = 1 << 20

// count is Count (whole) or CountNow (not whole).
func count(env Env, a Agent, whole bool) (Tokens, bool) {
	sp, _ := SpecOf(a.Harness)
	if !sp.Summed || a.Transcript == "" || env.Root == nil ||
		sp.Summable != nil && !sp.Summable(a.Transcript) {
		return a.Tokens, true
	}
	if t, ok := countedAlready(env, a, whole); ok {
		return t, true
	}
	// Without env.Counts nothing is kept for a later read: CountNow
	// counts now, as Count.
	whole = whole || env.Counts == nil
	if !whole && countingElsewhere(env, a) {
		return a.Tokens, false
	}
	f, err := env.Root.Open(a.Transcript)
	if err != nil {
		return a.Tokens, true
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return a.Tokens, true
	}
	size := st.Size()
	if size > scanMax {
		c := newCounter(a.Harness)
		tail := readTail(f, size, stateTail)
		for i := len(tail) - 1; i >= 0 && !c.tokens(false).Known(); i-- {
			c.line(tail[i])
		}
		return c.tokens(false), true
	}
	key, keyed := countKeyOf(a.Harness, st)
	e, cached, got := env.Counts.take(key, keyed, whole)
	if !got {
		return a.Tokens, false // another count of the file is running
	}
	defer env.Counts.done(key, keyed)
	if cached && e.size == size && e.mtime.Equal(st.ModTime()) {
		env.Counts.put(key, e)
		return e.t.clone(), true
	}
	c, from := newCounter(a.Harness), int64(0)
	grew := cached && e.c != nil && size > e.size && e.end <= size && bytes.Equal(fingerprint(f, e.end), e.fp)
	if grew {
		c, from = e.c, e.end // it grew: read on from there
	}
	if !whole && (!grew || size-from > growNow) {
		if cached {
			env.Counts.put(key, e) // for the count that reads on from it
		}
		return a.Tokens, false
	}
	line := c.line
	if env.yield != nil {
		n := 0
		line = func(b []byte) {
			if n += len(b); n >= countYieldBytes {
				n = 0
				env.yield()
			}
			c.line(b)
		}
	}
	end := scanLines(f, from, size, line)
	t := c.tokens(true)
	if keyed {
		env.Counts.put(key, countEntry{size: size, mtime: st.ModTime(), t: t.clone(), end: end, fp: fingerprint(f, end), c: c})
	}
	return t, true
}

// countedAlready is the count env.Counts holds for a's transcript when the
// file is as it was counted, by the stat env.Memo shares with the other
// facts of the same read (a table read): then the file is not opened.
// Unless wait, a count of the file running elsewhere is not waited for.
func countedAlready(env Env, a Agent, wait bool) (Tokens, bool) {
	if env.Memo == nil || env.Counts == nil {
		return Tokens{}, false
	}
	info, err := env.Memo.Stat(env.Root, a.Transcript)
	if err != nil || info.Dir || info.Size > scanMax {
		return Tokens{}, false
	}
	key := countKey{info.Dev, info.Ino, a.Harness}
	if t, ok := env.Counts.unchanged(key, info.Size, info.Mtime); ok {
		return t, true
	}
	e, ok, got := env.Counts.take(key, true, wait)
	if !got {
		return Tokens{}, false
	}
	defer env.Counts.done(key, true)
	if !ok {
		return Tokens{}, false
	}
	env.Counts.put(key, e)
	if e.size != info.Size || !e.mtime.Equal(info.Mtime) {
		return Tokens{}, false
	}
	return e.t.clone(), true
}

// countingElsewhere reports, for CountNow in a read that shares its
// stats (env.Memo), that the count it would make is pending whatever it
// reads: the Counts hold nothing for a's transcript to read on from, or
// another count of it is running. Then the file is not opened: CountNow
// would open it only to find as much.
func countingElsewhere(env Env, a Agent) bool {
	if env.Memo == nil {
		return false
	}
	info, err := env.Memo.Stat(env.Root, a.Transcript)
	if err != nil || info.Dir || info.Size > scanMax {
		return false
	}
	return env.Counts.nothingToGrow(countKey{info.Dev, info.Ino, a.Harness})
}

// counter is a harness's running count of a transcript's lines.
type counter interface {
	line([]byte)
	tokens(whole bool) Tokens
}

func newCounter(harness string) counter {
	if s, ok := SpecOf(harness); ok && s.Counter != nil {
		return s.Counter()
	}
	return &piTokens{}
}

// fingerprint is the 4 KiB just before off (the last lines counted): a
// file that only grew has them unchanged.
func fingerprint(f *os.File, off int64) []byte {
	n := min(off, 4<<10)
	b := make([]byte, n)
	if m, _ := f.ReadAt(b, off-n); int64(m) != n {
		return nil
	}
	return b
}

// Counts keeps the counts Count made, per transcript (device and inode),
// with the file's size and mtime and the running totals. An unchanged
// file (the same size and mtime, read from the open file on every call)
// gives its count again; a file that grew, whose bytes before the last
// counted line's end are unchanged (a fingerprint), is read on from
// there; anything else is counted afresh. So a count is never older than
// its file. It is safe for concurrent use and bounded; a nil *Counts
// keeps nothing.
//
// The counts of one file are made one at a time: a Count that finds
// another counting the same file waits for it (a scan is bounded by
// scanMax), then goes on from its result as from any earlier one, so
// concurrent requests share the work instead of each scanning the file.
//
// Later queues derivations for a worker of its own, one agent at a time.
//
// What it holds is bounded in bytes as well as in entries (rule 10): with
// a Budget, every count kept is charged while kept (its running state:
// the ids a count reads on with, and the fingerprint), every derivation
// Later queues while queued, and the derivation the worker runs while it
// runs. A count whose state does not fit is kept without it (its totals
// alone: an unchanged file still gives its count, a grown one is counted
// afresh); a derivation that does not fit is dropped (its facts stay
// pending; a later read queues it again), and named in Logf, once until
// the queue next empties.
type Counts struct {
	// Budget, if not nil, is the pool charged with what Counts holds: a
	// ceiling of its own below the work shared by all peers.
	Budget *budget.Pool
	// Logf, if not nil, names work dropped for Budget.
	Logf func(format string, args ...any)

	mu sync.Mutex
	m  map[countKey]countEntry
	// order is m's keys, least recently put first, and at their place
	// in it: a table read puts back every agent's count, so moving one
	// to the end costs no walk of the others.
	order *list.List
	at    map[countKey]*list.Element
	busy  map[countKey]chan struct{} // closed when that file's count is done

	later   []laterCount    // the derivations Later queued, oldest first
	sums    []laterCount    // those whose facts are derived, their sums not yet
	queued  map[string]bool // the harness and transcript of both
	working bool            // the worker runs
	idle    chan struct{}   // closed when the queue empties, for Settled

	// readers counts the reads of many agents in progress (Reading);
	// resume is closed when the last ends. The worker waits meanwhile.
	readers atomic.Int32
	resume  chan struct{} // under mu
	ended   atomic.Int64  // when the last read ended (unix nanoseconds)

	logged bool // a drop was logged since the queue last emptied; under mu
}

// The bytes Counts charges beside those it measures: entryCost for one
// count kept (its key, totals and map slot) or queued derivation (the
// agent it copies, the Env, its place in the queue), and workCost for
// the derivation the worker runs (the scan's buffer, a long line being
// joined, the running count's ids at their bound).
const (
	entryCost = 512
	workCost  = 64<<10 + scanLine + maxOpenIDBytes + maxOpenIDs*idCost
)

// countYieldBytes is how much a derivation of the Later worker counts
// between two checks for reads in progress (about a millisecond of
// work), and yieldMax the longest it waits at one check: reads that never
// stop delay the derivations, never starve them.
const countYieldBytes = 256 << 10

var yieldMax = 250 * time.Millisecond

// readQuiet is how long after a read of many agents ends the worker
// still waits: such reads come in runs (a watch, a script, a user's
// second look), and the next one's client is starting meanwhile.
var readQuiet = 50 * time.Millisecond

// Reading notes a read of many agents (the table) in progress until done
// is called. The worker that derives what such reads leave pending (Later)
// waits while any runs, so it never competes with a reader for the CPUs:
// the read is what a user waits for, the derivation is for a later one.
func (c *Counts) Reading() (done func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	if c.readers.Add(1) == 1 {
		c.resume = make(chan struct{})
	}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.readers.Add(-1) == 0 {
				c.ended.Store(time.Now().UnixNano())
				close(c.resume)
			}
			c.mu.Unlock()
		})
	}
}

// yield waits while a read is in progress (Reading), and until readQuiet
// after the last one ended, for at most yieldMax in all.
func (c *Counts) yield() {
	var t *time.Timer
	for {
		quiet := time.Until(time.Unix(0, c.ended.Load()).Add(readQuiet))
		if c.readers.Load() == 0 && quiet <= 0 {
			return
		}
		if t == nil {
			t = time.NewTimer(yieldMax)
			defer t.Stop()
		}
		c.mu.Lock()
		ch := c.resume
		if c.readers.Load() == 0 {
			ch = nil // none running: wait out the quiet
		}
		c.mu.Unlock()
		var q <-chan time.Time
		if ch == nil {
			quiet = time.Until(time.Unix(0, c.ended.Load()).Add(readQuiet))
			if quiet <= 0 {
				return
			}
			q = time.After(quiet)
		}
		select {
		case <-ch:
		case <-q:
		case <-t.C:
			return
		}
	}
}

// laterCount is one derivation Later queued: the Env to derive against
// (the daemon's, never a read's), the file cache to keep the facts in, and
// the agent as the read resolved it.
type laterCount struct {
	env   Env
	files *FileCache
	p     proc.Proc
	a     Agent
	key   string // in queued: the harness and transcript Later was given
	cost  int64  // charged to Budget while queued
}

// laterCost is what l holds: the agent's strings (its argv is the
// agent's to make long) beside entryCost.
func laterCost(l laterCount) int64 {
	n := int64(entryCost + 2*(len(l.a.Harness)+len(l.a.Transcript)) + len(l.p.Comm))
	for _, a := range l.p.Argv {
		n += int64(len(a)) + 16
	}
	for _, f := range l.a.Pending {
		n += int64(len(f)) + 16
	}
	return n
}

// dropped names in the log work that did not fit Budget, once until the
// queue next empties (a peer that keeps causing it is named once, not
// once per read); under mu.
func (c *Counts) dropped(what string, err error) {
	if c.logged || c.Logf == nil {
		return
	}
	c.logged = true
	c.Logf("token counts: %s (logged once until the queue of derivations empties): %v", what, err)
}

// Later derives in the background what a read of many agents left
// pending for a: the facts it names (a is resolved again, without a
// Defer, and what it derives kept in files) and the tokens' sums (Count),
// so that a later read finds them. A derivation already queued for the
// same transcript is not queued twice. One worker runs the queue, one
// agent after another (one CPU at most); it holds at most maxCounts
// agents, and Later drops what does not fit (a later read queues it
// again). env must not be a read's: its Memo and a held Root are let go
// when the read ends.
func (c *Counts) Later(env Env, files *FileCache, p proc.Proc, a Agent) {
	if c == nil || a.Transcript == "" {
		return
	}
	env.Memo, env.Defer = nil, nil
	k := a.Harness + "\x00" + a.Transcript
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued[k] || len(c.later)+len(c.sums) >= maxCounts {
		return
	}
	// Only what Count reads of the agent is kept.
	l := laterCount{env: env, files: files, p: p,
		a: Agent{Harness: a.Harness, Transcript: a.Transcript, Tokens: a.Tokens.clone(), Pending: a.Pending}, key: k}
	l.cost = laterCost(l)
	need := l.cost
	if !c.working {
		need += workCost // the worker's, charged until it ends
	}
	if err := c.Budget.Charge(need); err != nil {
		c.dropped("dropped the derivation of "+a.Harness+" transcript "+strconv.Quote(a.Transcript)+" queued for later", err)
		return
	}
	if c.queued == nil {
		c.queued = map[string]bool{}
	}
	c.queued[k] = true
	c.later = append(c.later, l)
	if !c.working {
		c.working = true
		c.idle = make(chan struct{})
		go c.work()
	}
}

// work derives the queued agents' facts until none is left, one at a
// time (one of the runtime's CPUs at most), pausing while reads run
// (Reading). It runs at the daemon's own priority: a thread the kernel
// runs less often still holds one of the runtime's CPUs while it waits
// to run, so on a busy machine the reads would wait for it (for that
// CPU, and for every stop of the world the collector makes).
//
// The facts a few windows give (title, model) are derived for every
// queued agent before any token sums (a whole transcript each): a read
// shows them all soon, and leaves them to the worker (claudeFactsNow)
// instead of reading their windows itself.
func (c *Counts) work() {
	for {
		c.mu.Lock()
		if len(c.later) > 0 {
			l := c.later[0]
			c.later = c.later[1:]
			c.mu.Unlock()
			l.a = c.facts(l)
			c.mu.Lock()
			c.sums = append(c.sums, l)
			c.mu.Unlock()
			continue
		}
		if len(c.sums) == 0 {
			c.working = false
			c.later, c.sums = nil, nil
			c.logged = false
			c.Budget.Release(workCost)
			close(c.idle)
			c.mu.Unlock()
			return
		}
		l := c.sums[0]
		c.sums = c.sums[1:]
		c.mu.Unlock()
		l.env.yield = c.yield
		c.yield()
		Count(l.env, l.a)
		c.mu.Lock()
		delete(c.queued, l.key)
		c.Budget.Release(l.cost)
		c.mu.Unlock()
	}
}

// facts is the worker's derivation of the facts l names but the tokens'
// sums, waiting while reads are in progress (Reading): l's agent as
// resolved again, for its sums.
func (c *Counts) facts(l laterCount) Agent {
	a := l.a
	if !slices.ContainsFunc(a.Pending, func(f string) bool { return f != "tokens" }) || l.files == nil {
		return a
	}
	c.yield()
	env := l.env
	env.Memo = NewMemoCache(l.files)
	r := ByName(l.a.Harness).Resolve(env, l.p)
	env.Memo.Release()
	// Only what Count reads of the agent is kept.
	return Agent{Harness: r.Harness, Transcript: r.Transcript, Tokens: r.Tokens}
}

// Settled is closed once no derivation Later queued is waiting or running.
func (c *Counts) Settled() <-chan struct{} {
	done := make(chan struct{})
	if c == nil {
		close(done)
		return done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.working {
		close(done)
		return done
	}
	return c.idle
}

type countKey struct {
	dev, ino uint64
	harness  string // the parsers differ
}

type countEntry struct {
	size  int64
	mtime time.Time
	t     Tokens
	end   int64   // the offset just after the last line counted
	fp    []byte  // fingerprint(end) when counted
	c     counter // nil: kept without its running state (Budget)
	cost  int64   // charged to Budget while kept
}

// maxCounts bounds the cache: more transcripts than live agents. A
// running count holds one entry per Claude message id (some bytes each).
const maxCounts = 1024

func countKeyOf(harness string, st os.FileInfo) (countKey, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return countKey{}, false
	}
	return countKey{uint64(sys.Dev), sys.Ino, harness}, true
}

// take removes k's entry and returns it (hit): the running count is the
// caller's until it puts it back, or says it is done (done). A concurrent
// take of the same file waits until then, if wait; else it gets nothing
// (got false) and need not call done.
func (c *Counts) take(k countKey, ok, wait bool) (e countEntry, hit, got bool) {
	if c == nil || !ok {
		return countEntry{}, false, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		ch, running := c.busy[k]
		if !running {
			break
		}
		if !wait {
			return countEntry{}, false, false
		}
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	if c.busy == nil {
		c.busy = map[countKey]chan struct{}{}
	}
	c.busy[k] = make(chan struct{})
	e, hit = c.m[k]
	if hit {
		delete(c.m, k)
		c.Budget.Release(e.cost)
		e.cost = 0
	}
	return e, hit, true
}

// unchanged is the count kept for k when it is of the file as it is now
// (size and mtime), and no count of it is running: what take, then put,
// would give, with one hold of the lock instead of three (a table read
// asks this for every agent at once).
func (c *Counts) unchanged(k countKey, size int64, mtime time.Time) (Tokens, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, running := c.busy[k]; running {
		return Tokens{}, false
	}
	e, ok := c.m[k]
	if !ok || e.size != size || !e.mtime.Equal(mtime) {
		return Tokens{}, false
	}
	if el, ok := c.at[k]; ok {
		c.order.MoveToBack(el)
	}
	return e.t.clone(), true
}

// nothingToGrow reports that a count of k is running, or that no count
// of k with its running state is kept (a grown file would be counted
// afresh).
func (c *Counts) nothingToGrow(k countKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, running := c.busy[k]; running {
		return true
	}
	e, ok := c.m[k]
	return !ok || e.c == nil
}

// queuedLater reports whether a derivation of harness's transcript tr is
// queued (Later) and not yet done.
func (c *Counts) queuedLater(harness, tr string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued[harness+"\x00"+tr]
}

// done ends the caller's count of k (after put, if it keeps one).
func (c *Counts) done(k countKey, ok bool) {
	if c == nil || !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, running := c.busy[k]; running {
		close(ch)
		delete(c.busy, k)
	}
}

func (c *Counts) put(k countKey, e countEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[countKey]countEntry{}
		c.order, c.at = list.New(), map[countKey]*list.Element{}
	}
	if old, ok := c.m[k]; ok {
		c.Budget.Release(old.cost)
	}
	if el, ok := c.at[k]; ok {
		c.order.Remove(el)
		delete(c.at, k)
	}
	// Kept whole if it fits; else its totals alone, which are what an
	// unchanged file gives; else not at all.
	e.cost = 0
	if e.c != nil {
		e.cost = counterHeld(e.c) + int64(len(e.fp))
	}
	if e.cost == 0 || c.Budget.Charge(e.cost) != nil {
		e.c, e.fp, e.cost = nil, nil, entryCost
		if err := c.Budget.Charge(e.cost); err != nil {
			delete(c.m, k)
			c.dropped("kept no count of a transcript", err)
			return
		}
	}
	c.at[k] = c.order.PushBack(k)
	c.m[k] = e
	for c.order.Len() > maxCounts {
		old := c.order.Remove(c.order.Front()).(countKey)
		c.Budget.Release(c.m[old].cost)
		delete(c.m, old)
		delete(c.at, old)
	}
}

// clone copies t's counts, so a cached value is never shared.
func (t Tokens) clone() Tokens {
	cp := func(v *int64) *int64 {
		if v == nil {
			return nil
		}
		return i64(*v)
	}
	return Tokens{cp(t.Context), cp(t.Input), cp(t.Output), cp(t.CacheRead), cp(t.CacheWrite)}
}

// Bounds of the whole-file scan the sums need. A transcript past
// scanMax gives no sums (its context still comes from the tail); a line
// past scanLine (an inlined image) is skipped unread.
const (
	scanMax   = 64 << 20
	scanLine  = 1 << 20
	stateTail = 256 << 10 // the end of a transcript the turn state is read from
)

// scanned is the tail of a transcript, read for its state.
type scanned struct {
	tail  [][]byte  // the lines of the last stateTail bytes, in file order
	mtime time.Time // the file's modification time, zero if unread
}

// scanFile reads the lines of rel's last stateTail bytes (the first, cut,
// line dropped). A torn last line is kept as it is: the caller's JSON
// decoding refuses it.
func scanFile(r *saferoot.Root, rel string) scanned {
	f, err := r.Open(rel)
	if err != nil {
		return scanned{}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return scanned{}
	}
	return scanned{tail: readTail(f, st.Size(), stateTail), mtime: st.ModTime()}
}

// readTail is the lines of the last window bytes of f, which is size
// bytes long; when the window begins after the file's start, its first
// line, cut, is dropped.
func readTail(f *os.File, size, window int64) [][]byte {
	off := max(size-window, 0)
	b := make([]byte, size-off)
	n, _ := f.ReadAt(b, off)
	b = b[:n]
	if off > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return lines(b)
}

// scanLines passes fn every complete line of f from offset from up to
// size, and returns the offset just after the last: a line still being
// written (no newline yet) is left for the next scan. A line longer than
// scanLine (an inlined image) is skipped unread.
func scanLines(f *os.File, from, size int64, fn func([]byte)) int64 {
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, size-from), 64<<10)
	end := from
	var long []byte
	spoilt := false
	for {
		ln, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if !spoilt && len(long)+len(ln) <= scanLine {
				long = append(long, ln...)
			} else {
				spoilt, long = true, long[:0]
			}
			end += int64(len(ln))
			continue
		}
		if err != nil {
			return end // the rest, if any, is an unterminated line
		}
		end += int64(len(ln))
		if long != nil {
			spoilt = spoilt || len(long)+len(ln) > scanLine
			ln = append(long, ln...)
		}
		if t := bytes.TrimSpace(ln); len(t) > 0 && !spoilt {
			fn(t)
		}
		long, spoilt = nil, false
	}
}

// lastByID keeps the last value of each of the latest maxOpenIDs ids; the
// value of an older id is final (a harness rewrites a record only while
// writing it: Claude's lines of one message, Gemini's record when its
// tokens arrive, each within a few records), so it is added to done and
// forgotten. So a count holds a bounded state (rule 10), however many
// records a transcript has; an id seen again after maxOpenIDs others would
// count twice.
type lastByID[U any, P interface {
	*U
	add(U)
}] struct {
	m       map[string]U
	order   []string // ids, first seen first
	done    U
	idBytes int // the bytes of the ids in order
}

// maxOpenIDs and maxOpenIDBytes bound the ids kept: a harness's ids are
// a few dozen bytes (Claude's "msg_01…"), so the count bounds them, but an
// id is what a transcript says, up to a line's length, and the bytes
// bound a transcript of long ones. idCost is what one id kept costs
// beside its bytes (its map slot and value, its place in order), an
// estimate on the high side.
const (
	maxOpenIDs     = 1024
	maxOpenIDBytes = 64 << 10
	idCost         = 160
)

func (l *lastByID[U, P]) put(id string, u U) {
	if l.m == nil {
		l.m = map[string]U{}
	}
	if _, ok := l.m[id]; !ok {
		l.order = append(l.order, id)
		l.idBytes += len(id)
	}
	l.m[id] = u
	for len(l.order) > maxOpenIDs || l.idBytes > maxOpenIDBytes && len(l.order) > 1 {
		old := l.order[0]
		P(&l.done).add(l.m[old])
		delete(l.m, old)
		l.order = l.order[1:]
		l.idBytes -= len(old)
	}
}

// held is what l keeps, about.
func (l *lastByID[U, P]) held() int64 {
	return int64(l.idBytes) + int64(len(l.order))*idCost
}

// The counters that keep ids say what they hold (counterHeld).
func (c *claudeTokens) held() int64 { return c.byID.held() }
func (c *geminiTokens) held() int64 { return c.byID.held() }
func (c *qwenTokens) held() int64   { return c.byID.held() }

// counterHeld is what a running count c holds: its ids, or a few numbers.
func counterHeld(c counter) int64 {
	if h, ok := c.(interface{ held() int64 }); ok {
		return h.held() + entryCost
	}
	return entryCost
}

// sum is done plus the value of every id kept.
func (l *lastByID[U, P]) sum() U {
	s := l.done
	for _, u := range l.m {
		P(&s).add(u)
	}
	return s
}
