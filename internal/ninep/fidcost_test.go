package ninep

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/ninep/p9client"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// What a fid charges is at least what it holds: fids walked 16 names
// deep through directories of 250-byte names (each its own walk from the
// root, as an attacker's are) grow the heap by less than the pool was
// charged for them, and a clone (a walk of no name) too. The heap counts
// the in-process client's side as well, so this errs towards failing.
func TestFidCostCharged(t *testing.T) {
	home := t.TempDir()
	names := []string{"dsh", "d"}
	p := filepath.Join(home, ".dsh", "d")
	for i := 0; i < 14; i++ {
		n := strings.Repeat(string(rune('a'+i)), 250)
		names = append(names, n)
		p = filepath.Join(p, n)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	roots := map[string]*saferoot.Root{"dsh": saferoot.New(filepath.Join(home, ".dsh"))}
	pool := budget.New("test connection", 1<<40)
	cfg := Conn{Root: tree.New(tree.Config{Roots: roots, PID: 1, Start: time.Now()}), Owner: "u", MaxMsize: 1 << 20, Budget: pool}
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, cfg, srv) }()
	s, err := p9client.New(cli, "")
	if err != nil {
		t.Fatal(err)
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	for _, walk := range [][]string{names, nil} {
		const n = 500
		h0, c0 := heap(), pool.Used()
		fs := make([]*p9client.File, 0, n)
		for range n {
			f, err := s.Root().Walk(walk)
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, f)
		}
		held, charged := (heap()-h0)/n, (pool.Used()-c0)/n
		t.Logf("a fid walked %d names deep holds %d bytes, is charged %d", len(walk), held, charged)
		if held > charged {
			t.Errorf("a fid walked %d names deep holds %d bytes, more than the %d it is charged", len(walk), held, charged)
		}
		for _, f := range fs {
			f.Close()
		}
	}
	s.Close()
	<-done
	if u := pool.Used(); u != 0 {
		t.Fatalf("%d bytes left charged after the connection ended", u)
	}
}
