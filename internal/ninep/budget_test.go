package ninep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	plan9client "9fans.net/go/plan9/client"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// The byte budget (budget.go): each kind of charge is taken when the
// bytes are, refused with its errno when the pool has no room, and given
// back when they are freed, down to 0 when the connection ends.

// budgetTree is a dsh root holding big/, n files with names of 200
// bytes, and the tree over it.
func budgetTree(t *testing.T, n int) tree.Dir {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "big")
	os.Mkdir(dir, 0o755)
	pad := strings.Repeat("n", 190)
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%06d", pad, i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
}

func budgetAttacher(root tree.Dir, pool *budget.Pool) *Attacher {
	return &Attacher{Root: root, listers: make(chan struct{}, lListers), bytes: newCharger(pool, nil)}
}

// listWhole opens dsh/big from root, lists it to its end and returns the
// fid, or the error of the walk, the open or the listing.
func listWhole(root p9.File) (p9.File, error) {
	_, d, err := root.Walk([]string{"dsh", "big"})
	if err != nil {
		return nil, err
	}
	if _, _, err := d.Open(p9.ReadOnly); err != nil {
		d.Close()
		return nil, err
	}
	for off := uint64(0); ; {
		b, err := d.(*file).ReaddirWire(off, 1<<16)
		if err != nil {
			return d, err
		}
		if len(b) == 0 {
			return d, nil
		}
		off += uint64(len(decodeDirents(b)))
	}
}

// A pool that holds 100 listings of a directory refuses the 101st
// (ENOMEM, its fid still walked), a clunk gives one back, and clunking
// every fid leaves the pool at 0. The directory is read in batches, in
// the background once it passes one read: the charge follows it as it
// grows.
func TestBudgetListings(t *testing.T) {
	for _, n := range []int{100, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			root := budgetTree(t, n)
			// What one listing costs, with its fid.
			probe := budget.New("probe", 1<<30)
			pa := budgetAttacher(root, probe)
			pr, _ := pa.Attach()
			d, err := listWhole(pr)
			if err != nil {
				t.Fatal(err)
			}
			one := probe.Used() - fileCost
			if min := int64(n) * (direntSize + 196); one < min {
				t.Fatalf("a listing of %d names charged %d bytes, less than its %d bytes of entries", n, one, min)
			}
			d.Close()
			pr.Close()
			eventually(t, "the probe's pool back to 0", func() bool { return probe.Used() == 0 })

			pool := budget.New("test connection", fileCost+100*one+one/2)
			a := budgetAttacher(root, pool)
			r, err := a.Attach()
			if err != nil {
				t.Fatal(err)
			}
			var fids []p9.File
			for i := range 100 {
				d, err := listWhole(r)
				if err != nil {
					t.Fatalf("listing %d: %v", i+1, err)
				}
				fids = append(fids, d)
			}
			d, err = listWhole(r)
			if Errno(err) != linux.ENOMEM {
				t.Fatalf("the 101st listing: %v, want ENOMEM", err)
			}
			fids[0].Close()
			if err := relist(d); err != nil {
				t.Fatalf("a listing after a clunk: %v", err)
			}
			fids[0] = d
			for _, d := range fids {
				d.Close()
			}
			r.Close()
			eventually(t, "the pool back to 0", func() bool { return pool.Used() == 0 })
		})
	}
}

// relist lists an open fid again from offset 0 to its end.
func relist(d p9.File) error {
	for off := uint64(0); ; {
		b, err := d.(*file).ReaddirWire(off, 1<<16)
		if err != nil || len(b) == 0 {
			return err
		}
		off += uint64(len(decodeDirents(b)))
	}
}

// A listing dropped while it is still being read in the background gives
// back its charge once the reader has stopped.
func TestBudgetListingClunkedEarly(t *testing.T) {
	root := budgetTree(t, 5000)
	pool := budget.New("test connection", 1<<30)
	a := budgetAttacher(root, pool)
	r, _ := a.Attach()
	for range 20 {
		_, d, err := r.Walk([]string{"dsh", "big"})
		if err != nil {
			t.Fatal(err)
		}
		d.Open(p9.ReadOnly)
		if _, err := d.(*file).ReaddirWire(0, 8192); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	r.Close()
	eventually(t, "the pool back to 0", func() bool { return pool.Used() == 0 })
}

// Walked names are charged per fid and refused EMFILE beyond the pool;
// an open generated file is charged its snapshot.
func TestBudgetFidsAndHandles(t *testing.T) {
	root := budgetTree(t, 1)
	pool := budget.New("test connection", 1<<20)
	a := budgetAttacher(root, pool)
	r, _ := a.Attach()
	_, f, err := r.Walk([]string{"pid"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pool.Used(), int64(2*fileCost+len("pid")); got != want {
		t.Fatalf("a root and a fid walked to pid: %d bytes charged, want %d", got, want)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	h := f.(*file).h
	if got, want := pool.Used(), int64(2*fileCost+len("pid"))+handleCost+tree.Held(h); got != want || tree.Held(h) == 0 {
		t.Fatalf("pid opened: %d bytes charged, want %d (its snapshot %d)", got, want, tree.Held(h))
	}
	before := pool.Used()
	buf := make([]byte, 100)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if pool.Used() != before {
		t.Fatalf("a read left %d bytes charged", pool.Used()-before)
	}
	f.Close()
	// Clones until the pool is full: the next is EMFILE.
	var fids []p9.File
	for {
		_, c, err := r.Walk(nil)
		if err != nil {
			if err != linux.EMFILE {
				t.Fatalf("a walk beyond the pool: %v, want EMFILE", err)
			}
			break
		}
		fids = append(fids, c)
	}
	if want := (1<<20)/fileCost - 1; len(fids) != want {
		t.Fatalf("%d fids fit, want %d", len(fids), want)
	}
	for _, c := range fids {
		c.Close()
	}
	r.Close()
	if pool.Used() != 0 {
		t.Fatalf("%d bytes left charged", pool.Used())
	}
}

// Over the wire, on both dialects: a connection's listings are refused
// ENOMEM ("cannot allocate memory" on 9P2000) when its pool is full, and
// its end gives back every byte.
func TestBudgetWire(t *testing.T) {
	root := budgetTree(t, 100)
	probe := budget.New("probe", 1<<30)
	pa := budgetAttacher(root, probe)
	pr, _ := pa.Attach()
	d, err := listWhole(pr)
	if err != nil {
		t.Fatal(err)
	}
	one := probe.Used() - fileCost
	d.Close()
	pr.Close()

	t.Run("9P2000.L", func(t *testing.T) {
		pool := budget.New("test connection", fileCost+3*one+one/2)
		cfg := testConn(t)
		cfg.Root, cfg.Budget = root, pool
		cli, done := lSession(t, cfg, 1<<16)
		for fid := uint32(1); fid <= 4; fid++ {
			cli.Write(frame(proto.Twalk, 1, u32(0), u32(fid), u16(2), str("dsh"), str("big")))
			lExpect(t, cli, proto.Rwalk, 1)
			cli.Write(frame(proto.Tlopen, 2, u32(fid), u32(0)))
			lExpect(t, cli, proto.Rlopen, 2)
			cli.Write(frame(proto.Treaddir, 3, u32(fid), u64(0), u32(8000)))
			if fid < 4 {
				lExpect(t, cli, proto.Rreaddir, 3)
			} else {
				lExpectErr(t, cli, 3, linux.ENOMEM)
			}
		}
		cli.Write(frame(proto.Tclunk, 4, u32(2)))
		lExpect(t, cli, proto.Rclunk, 4)
		cli.Write(frame(proto.Treaddir, 5, u32(4), u64(0), u32(8000)))
		lExpect(t, cli, proto.Rreaddir, 5)
		cli.Close()
		<-done
		eventually(t, "the pool back to 0", func() bool { return pool.Used() == 0 })
	})

	t.Run("9P2000", func(t *testing.T) {
		// A 9P2000 listing is held as tree.Entry values, not wire
		// dirents: its cost is its own.
		ents, err := mustDir(t, root, "dsh", "big").List()
		if err != nil {
			t.Fatal(err)
		}
		one := 2*fileCost + int64(len("dsh")+len("big")) + listCost(ents)
		// And the buffer of the one Tread in flight (Dirread asks
		// STATMAX), charged from before the read to its reply.
		pool := budget.New("test connection", fileCost+3*one+one/2+plan9.STATMAX)
		cfg := testConn(t)
		cfg.Root, cfg.Budget = root, pool
		srv, cli := connPair(t)
		done := make(chan struct{})
		go func() { defer close(done); serveConn(t, cfg, srv) }()
		conn, err := plan9client.NewConn(cli)
		if err != nil {
			t.Fatal(err)
		}
		fsys, err := conn.Attach(nil, "u", "")
		if err != nil {
			t.Fatal(err)
		}
		var fids []*plan9client.Fid
		for i := range 4 {
			f, err := fsys.Open("dsh/big", 0)
			if err != nil {
				t.Fatalf("open %d: %v", i+1, err)
			}
			_, err = f.Dirread()
			if i < 3 && err != nil {
				t.Fatalf("listing %d: %v", i+1, err)
			}
			// The read's buffer is released just after its reply is
			// written, which the client may read first.
			// (The buffer, STATMAX, is more than half a listing.)
			eventually(t, "the read buffer released", func() bool { return pool.Used() < fileCost+int64(i+1)*one+one/2 })
			if i == 3 && (err == nil || !strings.Contains(err.Error(), errString[errs.NoMem])) {
				t.Fatalf("the 4th listing: %v, want %q", err, errString[errs.NoMem])
			}
			fids = append(fids, f)
		}
		fids[0].Close()
		if _, err := fids[3].Dirread(); err != nil {
			t.Fatalf("a listing after a clunk: %v", err)
		}
		// A walk beyond the pool is refused as a fid.
		var more []*plan9client.Fid
		for {
			// A directory's open holds no handle: only the fid.
			f, err := fsys.Open("dsh", 0)
			if err != nil {
				if !strings.Contains(err.Error(), errNoFid.Error()) {
					t.Fatalf("a fid beyond the pool: %v, want %q", err, errNoFid.Error())
				}
				break
			}
			more = append(more, f)
		}
		if len(more) == 0 {
			t.Fatal("no fid fit in what 3 listings leave")
		}
		conn.Close()
		cli.Close()
		<-done
		eventually(t, "the pool back to 0", func() bool { return pool.Used() == 0 })
	})
}

func mustDir(t *testing.T, root tree.Dir, names ...string) tree.Dir {
	t.Helper()
	var n tree.Node = root
	for _, name := range names {
		var err error
		if n, err = n.(tree.Dir).Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	return n.(tree.Dir)
}

// A 9P2000 listing is charged as it is read: exactly listCost of what it
// keeps, the same entries List returns, and nothing once it is refused.
func TestListCharged(t *testing.T) {
	root := budgetTree(t, 3000)
	d := mustDir(t, root, "dsh", "big")
	pool := budget.New("test connection", 1<<30)
	ents, err := listCharged(d, newCharger(pool, nil))
	if err != nil {
		t.Fatal(err)
	}
	if pool.Used() != listCost(ents) {
		t.Fatalf("charged %d, listCost %d", pool.Used(), listCost(ents))
	}
	want, _ := d.List()
	if len(want) != len(ents) {
		t.Fatalf("%d entries, List has %d", len(ents), len(want))
	}
	for i := range want {
		if want[i] != ents[i] {
			t.Fatalf("entry %d: %+v, List has %+v", i, ents[i], want[i])
		}
	}
	small := budget.New("small", listCost(ents)/2)
	if _, err := listCharged(d, newCharger(small, nil)); !errs.Is(err, errs.NoMem) || small.Used() != 0 {
		t.Fatalf("a listing twice the pool: %v, %d bytes left charged", err, small.Used())
	}
}

// A Tread's buffer is charged from before the read until its reply is
// written: one that does not fit is ENOMEM, one that does leaves nothing
// charged once answered.
func TestBudgetReadBufferWire(t *testing.T) {
	const limit = 60 << 10 // below what msize allows a Tread
	pool := budget.New("test connection", limit)
	cfg := testConn(t)
	cfg.Budget = pool
	cli, done := lSession(t, cfg, 1<<16)
	cli.Write(frame(proto.Twalk, 1, u32(0), u32(1), u16(1), str("pid")))
	lExpect(t, cli, proto.Rwalk, 1)
	cli.Write(frame(proto.Tlopen, 2, u32(1), u32(0)))
	lExpect(t, cli, proto.Rlopen, 2)
	before := pool.Used()
	room := uint32(limit - before)
	cli.Write(frame(proto.Tread, 3, u32(1), u64(0), u32(room+1)))
	lExpectErr(t, cli, 3, linux.ENOMEM)
	cli.Write(frame(proto.Tread, 4, u32(1), u64(0), u32(room)))
	lExpect(t, cli, proto.Rread, 4)
	eventually(t, "the read's buffer given back", func() bool { return pool.Used() == before })
	cli.Close()
	<-done
	eventually(t, "the pool back to 0", func() bool { return pool.Used() == 0 })
}
