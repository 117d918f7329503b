package ninep

import (
	"sort"
	"unsafe"

	"sync/atomic"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/tree"
)

// The bytes a peer makes the daemon hold through the adapters (rule 10)
// are charged to its connection's pool (Conn.Budget), which charges its
// uid's and the daemon's: listings (listing.go), walk state, open
// handles and the buffers of reads in progress. Both dialects share these
// costs and this charger; each spells a refusal for its wire: a fid that
// does not fit is EMFILE ("too many open files"), any other charge ENOMEM
// ("cannot allocate memory").
const (
	// fileCost is what one walked name costs beside its bytes: on the
	// 9P2000.L side p9's fidRef and its place in the path tree, the
	// adapter's file, the tree node and its link in the ancestor chain;
	// on the 9P2000 side srv9p's Fid and the adapter's state, which hold
	// less. Measured (heap growth per fid, client included): about 580
	// bytes per name of a 16-name walk of mirrored directories beside
	// the names, about 330 bytes for a fid cloned with no name. Charged
	// at 1 KiB, so that an estimate never lets a ceiling be passed.
	fileCost = 1 << 10
	// handleCost is an open handle beside what tree.Held reports: a
	// host file's *os.File and its descriptor's kernel side are not
	// the daemon's heap, but are held as long.
	handleCost = 512
	// DefaultConnBytes is the pool of a connection Serve is handed
	// without one (a test, a caller other than the daemon): every
	// connection is bounded, whoever serves it.
	DefaultConnBytes = 64 << 20
)

// charger charges one connection's pool, and logs the first charge it
// refuses (one line per connection, not one per request: a peer that
// runs into its ceiling keeps asking).
type charger struct {
	pool   *budget.Pool
	logf   func(format string, args ...any)
	logged atomic.Bool
}

func newCharger(pool *budget.Pool, logf func(string, ...any)) *charger {
	if pool == nil {
		pool = budget.New("connection", DefaultConnBytes)
	}
	return &charger{pool: pool, logf: logf}
}

// charge takes n bytes for what, or returns an error of kind errs.NoMem.
func (c *charger) charge(n int64, what string) error {
	if c == nil {
		return nil
	}
	err := c.pool.Charge(n)
	if err != nil && c.logf != nil && c.logged.CompareAndSwap(false, true) {
		c.logf("refused %s to %s (logged once per connection): %v", what, c.pool.Name(), err)
	}
	return err
}

func (c *charger) release(n int64) {
	if c != nil {
		c.pool.Release(n)
	}
}

// walkCost is what a file walked from another by names holds beyond it.
func walkCost(names []string) int64 {
	n := int64(fileCost)
	for _, name := range names {
		if name != ".." {
			n += int64(len(name))
		}
	}
	return n
}

// openCost is what an open handle h holds.
func openCost(h tree.Handle) int64 {
	if h == nil {
		return 0
	}
	return handleCost + tree.Held(h)
}

// ancestor is one link of a fid's chain of ancestors, nearest first. Files
// walked from one another share their chains: a step adds one link, and
// no fid copies the chain it was walked from.
type ancestor struct {
	node tree.Node
	here int64 // what node holds (walkCost of its name); 0 for the root
	up   *ancestor
	// total is here plus the links above: what the chain through this
	// link holds, charged by a 9P2000 fid that keeps it.
	total int64
}

func (a *ancestor) chain() int64 {
	if a == nil {
		return 0
	}
	return a.total
}

// listCost is what a 9P2000 fid's listing snapshot holds: its entries
// and their names.
func listCost(ents []tree.Entry) int64 {
	n := int64(cap(ents)) * int64(unsafe.Sizeof(tree.Entry{}))
	for _, e := range ents {
		n += int64(len(e.Name))
	}
	return n
}

// listCharged is d's entries, sorted by name as tree.Dir.List returns
// them, charged to bytes as they are read (listCost's measure) and
// refused (ENOMEM) once they do not fit, before the whole directory is
// held: a mirrored directory is read batch by batch. The caller releases
// the charge, which is listCost of the result.
func listCharged(d tree.Dir, bytes *charger) ([]tree.Entry, error) {
	b, ok, err := tree.OpenBatches(d)
	if !ok {
		ents, err := d.List()
		if err != nil {
			return nil, err
		}
		if err := bytes.charge(listCost(ents), "a directory listing"); err != nil {
			return nil, err
		}
		return ents, nil
	}
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var (
		ents    []tree.Entry
		charged int64 // what the entries and the slice's capacity cost
		werr    error
	)
	entry := int64(unsafe.Sizeof(tree.Entry{}))
	for {
		more, err := b.Next(func(name []byte, dir bool, path uint64) {
			if werr != nil {
				return
			}
			// The name, and the slice's growth before it is made.
			need := int64(len(name))
			if len(ents) == cap(ents) {
				need += entry * int64(2*max(cap(ents), 64)-cap(ents))
			}
			if werr = bytes.charge(need, "a directory listing"); werr != nil {
				return
			}
			charged += need
			if len(ents) == cap(ents) {
				grown := make([]tree.Entry, len(ents), 2*max(cap(ents), 64))
				copy(grown, ents)
				ents = grown
			}
			ents = append(ents, tree.Entry{Name: string(name), Dir: dir, Path: path})
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			bytes.release(charged)
			return nil, err
		}
		if !more {
			break
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	// charged is listCost(ents), which the caller releases.
	return ents, nil
}
