package budget

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/9harness/9harness/internal/errs"
)

func TestChargeAllOrNothing(t *testing.T) {
	daemon := New("daemon", 100)
	uid := daemon.Child("uid 1000", 60)
	a, b := uid.Child("conn a", 0), uid.Child("conn b", 50)

	if err := a.Charge(40); err != nil {
		t.Fatal(err)
	}
	// b's own ceiling holds 50, but the uid's 60 has 20 left.
	err := b.Charge(30)
	var ex *Exceeded
	if !errs.Is(err, errs.NoMem) || !errors.As(err, &ex) || ex.Pool != "uid 1000" {
		t.Fatalf("charge over the uid's ceiling: %v, want NoMem naming uid 1000", err)
	}
	if b.Used() != 0 || uid.Used() != 40 || daemon.Used() != 40 {
		t.Fatalf("a refused charge left bytes: b %d uid %d daemon %d", b.Used(), uid.Used(), daemon.Used())
	}
	if uid.Refused() != 1 || b.Refused() != 0 {
		t.Fatalf("refusals counted on uid %d, b %d; want 1, 0", uid.Refused(), b.Refused())
	}
	if err := b.Charge(20); err != nil {
		t.Fatal(err)
	}
	a.Release(40)
	b.Release(20)
	if daemon.Used() != 0 || daemon.Peak() != 60 {
		t.Fatalf("daemon used %d peak %d, want 0 and 60", daemon.Used(), daemon.Peak())
	}
}

func TestNilPool(t *testing.T) {
	var p *Pool
	if err := p.Charge(1 << 40); err != nil {
		t.Fatal(err)
	}
	p.Release(1 << 40)
	if p.Child("x", 1) != nil || FromContext(context.Background()) != nil {
		t.Fatal("a nil pool has children or a context has a pool it was not given")
	}
}

// TestConcurrentNeverOver: many chargers racing never see a ceiling passed.
func TestConcurrentNeverOver(t *testing.T) {
	daemon := New("daemon", 1000)
	var wg sync.WaitGroup
	for i := range 16 {
		c := daemon.Child("conn", 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				n := int64(i%7 + 1)
				if c.Charge(n) == nil {
					if u := daemon.Used(); u > 1000 {
						t.Errorf("daemon pool at %d, over its 1000", u)
					}
					c.Release(n)
				}
			}
		}()
	}
	wg.Wait()
	if daemon.Used() != 0 || daemon.Peak() > 1000 {
		t.Fatalf("used %d peak %d", daemon.Used(), daemon.Peak())
	}
}

// TestHold: a piece of work's charges, taken as it grows, refused past the
// ceiling without holding more, given back in part and then whole.
func TestHold(t *testing.T) {
	p := New("pool", 100)
	h := NewHold(p)
	if err := h.Take(60); err != nil {
		t.Fatal(err)
	}
	if err := h.Take(50); !errs.Is(err, errs.NoMem) || h.Held() != 60 || p.Used() != 60 {
		t.Fatalf("a take past the ceiling: %v, held %d, pool %d", err, h.Held(), p.Used())
	}
	h.Give(20)
	h.Release()
	if h.Held() != 0 || p.Used() != 0 {
		t.Fatalf("after Release: held %d, pool %d", h.Held(), p.Used())
	}
	var none *Hold
	none.Release()
	free := &Hold{}
	if err := free.Take(1 << 40); err != nil || free.Held() != 1<<40 {
		t.Fatalf("a Hold of no pool: %v, %d", err, free.Held())
	}
}
