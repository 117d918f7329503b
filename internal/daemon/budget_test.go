package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep"
	"github.com/9harness/9harness/internal/ninep/p9client"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// The owner's reserve holds for bytes as for slots: with every other
// subject at its ceiling (three other uids and the owner's uid in a
// sandbox, each with two connections), together they hold no more than
// the daemon's ceiling less the reserve, and the owner still lists a
// directory bigger than what is left to them.
func TestOwnerReserveBytes(t *testing.T) {
	const owner = 1000
	s := &Server{UID: owner, Budget: budget.New("the daemon", 64<<20), MaxBytesPerUID: 12 << 20}
	p := s.budgets()
	var drops []func()
	for _, uid := range []uint32{2001, 2002, 2003, owner} {
		for range 2 {
			c, drop := p.connPool(uid, false, nil)
			drops = append(drops, drop)
			for c.Charge(256<<10) == nil {
			}
		}
	}
	if len(p.subjects) != 4 {
		t.Fatalf("%d subject pools, want 4 (a uid's connections share one)", len(p.subjects))
	}
	reserve := int64(DefaultOwnerBytes)
	if reserve > 64<<20/2 {
		reserve = 64 << 20 / 2
	}
	if u := p.others.Used(); u > 64<<20-reserve || u < 64<<20-reserve-256<<10 {
		t.Fatalf("other subjects hold %d bytes, want the %d the reserve leaves them", u, 64<<20-reserve)
	}
	// The pool they share refused them: the next of a fresh uid too.
	c, drop := p.connPool(2004, false, nil)
	if err := c.Charge(1 << 20); !errs.Is(err, errs.NoMem) {
		t.Fatalf("a fifth other subject charged 1 MiB: %v", err)
	}
	drop()

	// The owner lists a directory of 25,000 names of 200 bytes (about
	// 5.6 MiB as a listing) over a real connection.
	home := t.TempDir()
	dir := filepath.Join(home, "big")
	os.Mkdir(dir, 0o755)
	pad := strings.Repeat("o", 190)
	for i := range 25000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%06d", pad, i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
	pool, dropOwner := p.connPool(owner, true, nil)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv, cli := conn(fds[0]), conn(fds[1])
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		ninep.Serve(context.Background(), srv, ninep.Conn{Root: root, MaxMsize: 1 << 20, Budget: pool})
	}()
	sess, err := p9client.New(cli, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := sess.Root().Walk([]string{"dsh", "big"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(p9client.ReadOnly); err != nil {
		t.Fatal(err)
	}
	n := 0
	for off := uint64(0); ; {
		ents, err := d.Readdir(off, 1<<16)
		if err != nil {
			t.Fatalf("the owner's listing, after %d names: %v", n, err)
		}
		if len(ents) == 0 {
			break
		}
		n += len(ents)
		off = ents[len(ents)-1].Offset
	}
	if n != 25000 {
		t.Fatalf("the owner listed %d names, want 25000", n)
	}
	if pool.Peak() < 4<<20 {
		t.Fatalf("the owner's listing was charged %d bytes, want its size", pool.Peak())
	}
	sess.Close()
	<-done
	dropOwner()
	for _, drop := range drops {
		drop()
	}
	if len(p.subjects) != 0 {
		t.Fatalf("%d subject pools left after every connection ended", len(p.subjects))
	}
}

// ServeConn charges a connection's bytes to its subject's pool below the
// daemon's: an owner's listing shows in the daemon's pool while it is
// held, and the pool is empty again, the subject's pool dropped, once the
// connection has ended.
func TestServeConnCharges(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "big"), 0o755)
	for i := range 500 {
		f, err := os.Create(filepath.Join(home, "big", fmt.Sprintf("%s-%04d", strings.Repeat("s", 100), i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
	s := &Server{Root: root, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), ProcRoot: "/proc", Budget: budget.New("the daemon", 64<<20)}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv, cli := conn(fds[0]), conn(fds[1])
	done := make(chan struct{})
	go func() { defer close(done); s.ServeConn(t.Context(), srv) }()
	sess, err := p9client.New(cli, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := sess.Root().Walk([]string{"dsh", "big"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(p9client.ReadOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Readdir(0, 8192); err != nil {
		t.Fatal(err)
	}
	// The listing is read on in the background past the first reply: its
	// charge grows to the whole listing.
	for deadline := time.Now().Add(10 * time.Second); s.Pool().Used() < 500*100; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's pool holds %d bytes 10 s after a listing of 500 names of 105 bytes was opened", s.Pool().Used())
		}
	}
	// Until here: the client clunks a fid it drops when the collector
	// finds it unreachable, and the listing's charge goes with the fid.
	runtime.KeepAlive(d)
	sess.Close()
	<-done
	// A listing still being read in the background gives its bytes back
	// when its reader stops.
	for deadline := time.Now().Add(10 * time.Second); s.Pool().Used() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's pool holds %d bytes 10 s after the connection ended", s.Pool().Used())
		}
	}
	s.pools.mu.Lock()
	n := len(s.pools.subjects)
	s.pools.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d subject pools left after the connection ended", n)
	}
}
