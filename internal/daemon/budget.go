package daemon

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/9harness/9harness/internal/budget"
)

// The byte budget (rule 10): every byte a peer makes the daemon hold is
// charged to its connection's pool, which is charged to its subject's
// pool and, for every subject but the owner, to the pool all of them
// share, and then to the daemon's:
//
//	daemon (--max-bytes)
//	├── owner (the daemon's uid, unsandboxed): no ceiling of its own
//	│   └── connection (--max-bytes-per-uid each), ...
//	└── all but the owner's reserve (DefaultOwnerBytes) of the daemon's
//	    ├── work shared by all peers (database snapshots, decoded tails)
//	    │   └── token counts and derivations queued for later (DefaultCountsBytes)
//	    └── other uids
//	        ├── uid N, or uid N sandboxed (--max-bytes-per-uid each)
//	        │   └── connection, ...
//	        └── ...
//
// so no other uid, nor all of them together, nor the shared work any peer
// can cause, can take the bytes the owner needs, as with connection slots;
// and no one connection of the owner's (a runaway script) can take what
// its other connections need.
const (
	// DefaultMaxBytes is the daemon's ceiling: half the unit's
	// MemoryMax= (512M), which leaves the rest to what is not charged
	// (goroutine stacks, the runtime, the garbage collector's slack,
	// buffers of replies being written) and to work shared by all peers
	// (database snapshots, decoded tails).
	DefaultMaxBytes = 256 << 20
	// DefaultMaxBytesPerUID is each other subject's ceiling (a granted
	// uid, or the owner's uid inside a sandbox). A grantee's client lists
	// a few directories and reads a few files at once: 64 MiB holds
	// listings of several 100,000-name directories.
	DefaultMaxBytesPerUID = 64 << 20
	// DefaultOwnerBytes is what other subjects together may never take
	// of the daemon's ceiling (at most half of it).
	DefaultOwnerBytes = 64 << 20
	// DefaultCountsBytes is the ceiling of the token counts kept and of
	// the derivations queued for later (harness.Counts), within the work
	// shared by all peers. A count of a long session keeps about 200 KiB
	// to read on from (its last 1,024 message ids, a fingerprint), so
	// this keeps about 150 of them whole; the counts past it keep their
	// totals alone (half a KiB each), and a file of theirs that grows is
	// counted afresh.
	DefaultCountsBytes = 32 << 20
)

// subjectKey names a subject's pool: its uid, and whether it is the
// owner (the owner's uid inside a sandbox is another subject).
type subjectKey struct {
	uid   uint32
	owner bool
}

type subjectPool struct {
	pool  *budget.Pool
	conns int
}

// pools are the daemon's pools of bytes: one per subject with a
// connection open, shared by its connections and dropped with its last.
type pools struct {
	mu       sync.Mutex
	daemon   *budget.Pool
	shared   *budget.Pool
	others   *budget.Pool
	perUID   int64
	ownerUID uint32
	subjects map[subjectKey]*subjectPool
}

func (s *Server) budgets() *pools {
	s.poolsOnce.Do(func() {
		if s.pools == nil {
			s.pools = newPools(s.Budget, s.MaxBytesPerUID, s.UID)
		}
	})
	return s.pools
}

// newPools builds the tree of pools below d (nil: one of DefaultMaxBytes)
// for the owner ownerUID, each other subject at most per (0:
// DefaultMaxBytesPerUID).
func newPools(d *budget.Pool, per int64, ownerUID uint32) *pools {
	if d == nil {
		d = budget.New("the daemon", DefaultMaxBytes)
	}
	reserve := min(int64(DefaultOwnerBytes), d.Limit()/2)
	if per <= 0 {
		per = DefaultMaxBytesPerUID
	}
	common := d.Child("all but the owner's reserve", d.Limit()-reserve)
	return &pools{daemon: d, shared: common.Child("work shared by all peers", 0),
		others: common.Child("other uids", 0), perUID: per,
		ownerUID: ownerUID, subjects: map[subjectKey]*subjectPool{}}
}

// connPool returns the pool of a connection of the subject (uid, owner),
// and the function that drops it when the connection ends.
func (p *pools) connPool(uid uint32, owner bool, logf Logf) (*budget.Pool, func()) {
	k := subjectKey{uid, owner}
	p.mu.Lock()
	sp := p.subjects[k]
	if sp == nil {
		if owner {
			sp = &subjectPool{pool: p.daemon.Child(fmt.Sprintf("uid %d (the owner)", uid), 0)}
		} else {
			name := fmt.Sprintf("uid %d", uid)
			if uid == p.ownerUID {
				name += " (sandboxed)"
			}
			sp = &subjectPool{pool: p.others.Child(name, p.perUID)}
		}
		p.subjects[k] = sp
	}
	sp.conns++
	p.mu.Unlock()
	c := sp.pool.Child(fmt.Sprintf("a connection of %s", sp.pool.Name()), p.perUID)
	return c, func() {
		if u := c.Used(); u > 0 && logf != nil {
			// Not released by force: whatever still holds it (a
			// listing read in the background) gives it back when done.
			logf("a connection of %s ended holding %d bytes", sp.pool.Name(), u)
		}
		p.mu.Lock()
		if sp.conns--; sp.conns == 0 {
			delete(p.subjects, k)
		}
		p.mu.Unlock()
	}
}

// Pool is the daemon-wide pool of bytes, to which every connection's
// charges go.
func (s *Server) Pool() *budget.Pool { return s.budgets().daemon }

// SharedPool is the pool of work shared by all peers (database snapshots,
// decoded tails), below the daemon's and outside the owner's reserve.
func (s *Server) SharedPool() *budget.Pool { return s.budgets().shared }

// memorySlack is what the runtime may take beyond the charged ceiling
// before its collector works harder: what is not charged (stacks, the
// runtime, replies being written) and the garbage of freed listings.
const memorySlack = 96 << 20

// setMemoryLimit sets the runtime's soft memory limit to the byte
// ceiling plus memorySlack, unless GOMEMLIMIT says otherwise. Why: with
// the default GOGC the heap may grow to twice what is live before a
// collection, so a daemon holding its whole ceiling would pass the unit's
// MemoryMax= (twice the ceiling) on garbage alone; with the limit the
// collector runs as the heap nears it instead.
func setMemoryLimit(maxBytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(maxBytes + memorySlack)
}
