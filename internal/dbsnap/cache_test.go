package dbsnap

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// A Cache shares one snapshot while the files are unchanged, takes a new
// one at the first Open after a commit, and closes the old one only when
// its last user releases it.
func TestCache(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 3, 10)
	root := saferoot.New(dir)
	var c Cache

	a, relA, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two Opens of an unchanged database took two snapshots")
	}
	relB()

	insertTx(t, w, 2, 4, 10) // a commit: the -wal grows
	n, relN, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if n == a {
		t.Fatal("Open after a commit returned the old snapshot")
	}
	if got := count(t, n); got != 7 {
		t.Errorf("new snapshot: %d rows, want 7", got)
	}
	// The replaced snapshot still serves its user, as of its Version.
	if got := count(t, a); got != 3 {
		t.Errorf("old snapshot while held: %d rows, want 3", got)
	}
	relA()
	relA() // a second release is harmless
	if err := a.Ping(); err == nil {
		t.Error("the replaced snapshot is still open after its last release")
	}
	relN()
	if err := n.Ping(); err != nil {
		t.Errorf("the current snapshot was closed on release: %v", err)
	}

	// A nil Cache caches nothing; its release closes the snapshot.
	var nc *Cache
	d, relD, err := nc.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, d); got != 7 {
		t.Errorf("nil cache: %d rows, want 7", got)
	}
	relD()
	if err := d.Ping(); err == nil {
		t.Error("a nil Cache's release left the snapshot open")
	}
	if _, _, err := c.Open(root, "absent.db"); err == nil {
		t.Error("an absent database opened")
	}
}

// counting makes c count the snapshots it takes, and hold each one until
// gate (if not nil) is closed.
func counting(c *Cache, n *atomic.Int64, inFlight *atomic.Int64, maxInFlight *atomic.Int64, gate chan struct{}) {
	c.open = func(root *saferoot.Root, rel string, opts ...Option) (*sql.DB, error) {
		k := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if k <= m || maxInFlight.CompareAndSwap(m, k) {
				break
			}
		}
		if n.Add(1) == 1 && gate != nil {
			<-gate
		}
		return Open(root, rel, opts...)
	}
}

// held is how many snapshots of rel exist or are being taken.
func (c *Cache) held(root *saferoot.Root, rel string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[cacheKey{root, rel}]
	if e == nil {
		return 0
	}
	n := 0
	for _, x := range []bool{e.cur != nil, e.old != nil, e.flight != nil} {
		if x {
			n++
		}
	}
	return n
}

func (c *Cache) now() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock
}

// Requests that arrive while a snapshot is being taken, after the database
// changed, do not get that snapshot (it began before them): they wait for
// it, and then share one new snapshot, taken once for all of them. Each
// gets the rows committed before it arrived.
func TestCacheSharesOneFlight(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 3, 10)
	root := saferoot.New(dir)
	var c Cache
	var taken, inFlight, maxInFlight atomic.Int64
	gate := make(chan struct{})
	counting(&c, &taken, &inFlight, &maxInFlight, gate)

	type got struct {
		rows, want int
		err        error
	}
	results := make(chan got, 64)
	ask := func(want int) {
		db, rel, err := c.Open(root, "c.db")
		if err != nil {
			results <- got{err: err}
			return
		}
		defer rel()
		results <- got{rows: count(t, db), want: want}
	}
	go ask(3)
	waitFor(t, func() bool { return c.now() == 2 }) // arrived, and its snapshot began (held at the gate)

	insertTx(t, w, 2, 4, 10) // 7 rows
	const n = 40
	for i := 0; i < n; i++ {
		go ask(7)
	}
	waitFor(t, func() bool { return c.now() == 2+n }) // every one arrived
	if h := c.held(root, "c.db"); h > 2 {
		t.Errorf("%d snapshots held or being taken, want at most 2", h)
	}
	close(gate)
	for i := 0; i < n+1; i++ {
		g := <-results
		if g.err != nil {
			t.Fatal(g.err)
		}
		if g.rows < g.want {
			t.Errorf("a request got %d rows, fewer than the %d committed before it arrived", g.rows, g.want)
		}
	}
	if got := taken.Load(); got != 2 {
		t.Errorf("%d snapshots taken for 41 requests in two generations, want 2", got)
	}
	if m := maxInFlight.Load(); m > 1 {
		t.Errorf("%d snapshots of one database taken at once, want 1", m)
	}
}

// Many requests against a database a writer keeps changing: each gets a
// snapshot holding every row committed before it arrived, at most one is
// taken at a time, at most two exist, and fewer are taken than requested.
func TestCacheUnderWriter(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 100)
	insertTx(t, w, 1, 50, 1000)
	root := saferoot.New(dir)
	pool := budget.New("test", 1<<30)
	c := Cache{Budget: pool}
	var taken, inFlight, maxInFlight atomic.Int64
	counting(&c, &taken, &inFlight, &maxInFlight, nil)

	var committed atomic.Int64
	committed.Store(50)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer: a commit, then its count is public
		defer wg.Done()
		for tx := 2; ; tx++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := insertTxErr(w, tx, 5, 1000); err != nil {
				t.Error(err)
				return
			}
			committed.Add(5)
			time.Sleep(time.Millisecond)
		}
	}()
	var maxHeld atomic.Int64
	wg.Add(1)
	go func() { // the observer of the two-held bound
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if h := int64(c.held(root, "c.db")); h > maxHeld.Load() {
				maxHeld.Store(h)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	const readers, each = 16, 20
	var rg sync.WaitGroup
	var requests atomic.Int64
	for r := 0; r < readers; r++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for i := 0; i < each; i++ {
				want := int(committed.Load())
				db, rel, err := c.Open(root, "c.db")
				if err != nil {
					t.Error(err)
					return
				}
				requests.Add(1)
				if got := count(t, db); got < want {
					t.Errorf("a request got %d rows, fewer than the %d committed before it arrived", got, want)
				}
				rel()
			}
		}()
	}
	rg.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d requests, %d snapshots, budget peak %d", requests.Load(), taken.Load(), pool.Peak())
	if m := maxInFlight.Load(); m > 1 {
		t.Errorf("%d snapshots of one database taken at once, want 1", m)
	}
	if h := maxHeld.Load(); h > 2 {
		t.Errorf("%d snapshots held at once, want at most 2", h)
	}
	if taken.Load() >= requests.Load() {
		t.Errorf("%d snapshots for %d requests: none shared", taken.Load(), requests.Load())
	}
	c.Close()
	if u := pool.Used(); u != 0 {
		t.Errorf("%d bytes still charged after every snapshot was closed", u)
	}
}

// Two snapshots in use, and the database changed again: a third request
// waits for one to be released rather than take a third.
func TestCacheTwoHeld(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 3, 10)
	root := saferoot.New(dir)
	var c Cache
	var taken, inFlight, maxInFlight atomic.Int64
	counting(&c, &taken, &inFlight, &maxInFlight, nil)

	_, relA, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	insertTx(t, w, 2, 4, 10)
	_, relB, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	insertTx(t, w, 3, 5, 10) // 12 rows
	done := make(chan int)
	go func() {
		db, rel, err := c.Open(root, "c.db")
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		defer rel()
		done <- count(t, db)
	}()
	waitFor(t, func() bool { return c.now() >= 4 }) // it arrived
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("a third snapshot was taken while two were in use")
	default:
	}
	if n := taken.Load(); n != 2 {
		t.Fatalf("%d snapshots taken while two were in use, want 2", n)
	}
	relA()
	if got := <-done; got != 12 {
		t.Errorf("the waiting request got %d rows, want 12", got)
	}
	relB()
	if n := taken.Load(); n != 3 {
		t.Errorf("%d snapshots taken, want 3", n)
	}
}

// A snapshot that does not fit the budget is refused (NoMem) and charges
// nothing; one that fits is charged until it is closed.
func TestCacheBudget(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 100, 1000)
	root := saferoot.New(dir)

	tiny := budget.New("tiny", 4<<10)
	c := Cache{Budget: tiny}
	if _, _, err := c.Open(root, "c.db"); !errs.Is(err, errs.NoMem) {
		t.Fatalf("a snapshot past the budget: %v, want NoMem", err)
	}
	if u := tiny.Used(); u != 0 {
		t.Errorf("a refused snapshot left %d bytes charged", u)
	}

	pool := budget.New("pool", 64<<20)
	c = Cache{Budget: pool}
	db, rel, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, db); got != 100 {
		t.Errorf("%d rows, want 100", got)
	}
	if u := pool.Used(); u < 100*1000 {
		t.Errorf("a snapshot of a 100 KB database charged %d bytes", u)
	}
	rel()
	c.Close()
	if u := pool.Used(); u != 0 {
		t.Errorf("%d bytes still charged after the snapshot was closed", u)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// A budget with room for one snapshot: a request after a commit, while the
// old snapshot is in use, waits for its release and then gets the new
// one, rather than being refused.
func TestCacheBudgetWaits(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "c.db"), 0)
	insertTx(t, w, 1, 100, 1000)
	root := saferoot.New(dir)
	probe := budget.New("probe", 1<<30)
	if db, err := Open(root, "c.db", WithBudget(probe)); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	room := probe.Peak() + probe.Peak()/2 // one snapshot, not two
	pool := budget.New("one", room)
	c := Cache{Budget: pool}
	_, rel, err := c.Open(root, "c.db")
	if err != nil {
		t.Fatal(err)
	}
	insertTx(t, w, 2, 1, 1000)
	done := make(chan error, 1)
	go func() {
		db, rel, err := c.Open(root, "c.db")
		if err == nil {
			if n := count(t, db); n != 101 {
				err = fmt.Errorf("%d rows, want 101", n)
			}
			rel()
		}
		done <- err
	}()
	waitFor(t, func() bool { return c.now() >= 3 }) // its snapshot began
	rel()
	if err := <-done; err != nil {
		t.Fatalf("the request waiting for room: %v", err)
	}
	if p := pool.Peak(); p > room {
		t.Errorf("peak %d past the budget", p)
	}
	c.Close()
	if u := pool.Used(); u != 0 {
		t.Errorf("%d bytes still charged", u)
	}
}
