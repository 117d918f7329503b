// Package budget charges the bytes a peer makes the daemon hold against
// fixed ceilings (rule 10 of the design): listing snapshots, walk state,
// read buffers, database images, decompressed data, queued event lines.
//
// Pools form a tree: the daemon's pool at the root, below it one pool per
// uid (and, for every uid but the owner's, a shared pool that leaves the
// owner a reserve), below each uid one pool per connection. A charge is
// taken from a pool and every pool above it, all or nothing, and released
// the same way, so no ceiling on the path is ever exceeded, however many
// connections charge at once. What does not fit is refused with an error
// of kind errs.NoMem (ENOMEM on the wire), never taken and never an OOM.
//
// Work that many peers share (a database snapshot, a decoded tail) is
// charged to the daemon's pool, once, by whoever does it.
package budget

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/9harness/9harness/internal/errs"
)

// Pool is a ceiling of bytes and what is charged against it. A nil *Pool
// charges nothing and refuses nothing: code that runs outside the daemon
// (tests, the client) need not make one.
type Pool struct {
	name   string
	limit  int64
	parent *Pool
	used   atomic.Int64
	peak   atomic.Int64
	// refused counts the charges this pool refused, so that a caller can
	// log the first refusal of a peer once.
	refused atomic.Int64
}

// New returns a root pool of limit bytes.
func New(name string, limit int64) *Pool { return &Pool{name: name, limit: limit} }

// Child returns a pool of limit bytes below p: a charge to it is a charge
// to p too. A limit of 0 or less is no ceiling of its own (only p's).
func (p *Pool) Child(name string, limit int64) *Pool {
	if p == nil {
		return nil
	}
	return &Pool{name: name, limit: limit, parent: p}
}

// Charge takes n bytes from p and every pool above it, or none and an
// error of kind errs.NoMem naming the pool whose ceiling would be passed.
func (p *Pool) Charge(n int64) error {
	if p == nil || n <= 0 {
		return nil
	}
	for q := p; q != nil; q = q.parent {
		u := q.used.Add(n)
		if q.limit > 0 && u > q.limit {
			q.used.Add(-n)
			for r := p; r != q; r = r.parent {
				r.used.Add(-n)
			}
			q.refused.Add(1)
			return errs.E("budget.Charge", errs.NoMem, "", &Exceeded{Pool: q.name, Want: n, Used: u - n, Limit: q.limit})
		}
		for {
			pk := q.peak.Load()
			if u <= pk || q.peak.CompareAndSwap(pk, u) {
				break
			}
		}
	}
	return nil
}

// Release gives back n bytes charged to p.
func (p *Pool) Release(n int64) {
	if p == nil || n <= 0 {
		return
	}
	for q := p; q != nil; q = q.parent {
		if q.used.Add(-n) < 0 {
			panic(fmt.Sprintf("budget: %s released more than was charged", q.name))
		}
	}
}

// Used is what is charged to p now.
func (p *Pool) Used() int64 {
	if p == nil {
		return 0
	}
	return p.used.Load()
}

// Peak is the most that was ever charged to p at once.
func (p *Pool) Peak() int64 {
	if p == nil {
		return 0
	}
	return p.peak.Load()
}

// Limit is p's own ceiling (0: none of its own).
func (p *Pool) Limit() int64 {
	if p == nil {
		return 0
	}
	return p.limit
}

// Refused is the number of charges p refused for its own ceiling.
func (p *Pool) Refused() int64 {
	if p == nil {
		return 0
	}
	return p.refused.Load()
}

// Name names the pool in errors and logs.
func (p *Pool) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// Exceeded says which ceiling a refused charge would have passed.
type Exceeded struct {
	Pool  string
	Want  int64
	Used  int64
	Limit int64
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("%s: %d bytes more would pass its ceiling of %d (%d in use)", e.Pool, e.Want, e.Limit, e.Used)
}

type ctxKey struct{}

// NewContext returns ctx carrying p: the pool a request's work is charged to.
func NewContext(ctx context.Context, p *Pool) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the pool ctx carries, or nil.
func FromContext(ctx context.Context) *Pool {
	if ctx == nil {
		return nil
	}
	p, _ := ctx.Value(ctxKey{}).(*Pool)
	return p
}

// Hold is what one piece of work has taken from a pool: charged as it
// grows, given back piece by piece or all at once when the work is done.
// The zero Hold of a nil pool charges nothing. It is not safe for
// concurrent use.
type Hold struct {
	pool *Pool
	n    int64
}

// NewHold returns a Hold on p.
func NewHold(p *Pool) *Hold { return &Hold{pool: p} }

// Take charges n more bytes to the pool, or returns the pool's refusal
// and holds nothing more.
func (h *Hold) Take(n int64) error {
	if err := h.pool.Charge(n); err != nil {
		return err
	}
	h.n += n
	return nil
}

// Give gives n of the held bytes back.
func (h *Hold) Give(n int64) {
	h.pool.Release(n)
	h.n -= n
}

// Held is what h holds now.
func (h *Hold) Held() int64 {
	if h == nil {
		return 0
	}
	return h.n
}

// Release gives back everything h holds. A nil Hold holds nothing.
func (h *Hold) Release() {
	if h != nil && h.n > 0 {
		h.Give(h.n)
	}
}
