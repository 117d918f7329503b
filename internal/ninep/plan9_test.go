package ninep

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/srv9p"

	"github.com/9harness/9harness/internal/tree"
)

// A request on a fid whose walk has not completed (srv9p runs a
// connection's requests concurrently) is refused, never a panic: FuzzConn
// found the panic, which killed the daemon.
func TestPlan9FidNotReady(t *testing.T) {
	srv := NewPlan9(tree.New(tree.Config{PID: 1, Start: time.Now()}), "u", 8192, tree.Writer{}, nil)
	ctx := context.Background()
	fid := &srv9p.Fid{} // no state yet
	if _, err := srv.Stat(ctx, fid); !errors.Is(err, errNotReady) {
		t.Errorf("Stat: %v, want errNotReady", err)
	}
	if err := srv.Open(ctx, fid, plan9.OREAD); !errors.Is(err, errNotReady) {
		t.Errorf("Open: %v, want errNotReady", err)
	}
	if _, err := srv.Read(ctx, fid, make([]byte, 64), 0); !errors.Is(err, errNotReady) {
		t.Errorf("Read: %v, want errNotReady", err)
	}
	if _, err := srv.Write(ctx, fid, []byte("x"), 0); !errors.Is(err, errNotReady) {
		t.Errorf("Write: %v, want errNotReady", err)
	}
	srv.Clunk(fid)
}

// Any handler panic becomes an error reply.
func TestPlan9Recovers(t *testing.T) {
	boom := func() { panic("boom") }
	s := recovering(&srv9p.Server{
		Attach: func(context.Context, *srv9p.Fid, *srv9p.Fid, string, string) (plan9.Qid, error) {
			boom()
			return plan9.Qid{}, nil
		},
		Walk:  func(context.Context, *srv9p.Fid, *srv9p.Fid, []string) ([]plan9.Qid, error) { boom(); return nil, nil },
		Open:  func(context.Context, *srv9p.Fid, uint8) error { boom(); return nil },
		Read:  func(context.Context, *srv9p.Fid, []byte, int64) (int, error) { boom(); return 0, nil },
		Stat:  func(context.Context, *srv9p.Fid) (*plan9.Dir, error) { boom(); return nil, nil },
		Write: func(context.Context, *srv9p.Fid, []byte, int64) (int, error) { boom(); return 0, nil },
		Clunk: func(*srv9p.Fid) { boom() },
	})
	ctx, fid := context.Background(), &srv9p.Fid{}
	var errs []error
	_, err := s.Attach(ctx, fid, nil, "u", "")
	errs = append(errs, err)
	_, err = s.Walk(ctx, fid, fid, nil)
	errs = append(errs, err)
	errs = append(errs, s.Open(ctx, fid, 0))
	_, err = s.Read(ctx, fid, nil, 0)
	errs = append(errs, err)
	_, err = s.Stat(ctx, fid)
	errs = append(errs, err)
	_, err = s.Write(ctx, fid, nil, 0)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "internal error: boom") {
			t.Errorf("handler %d: %v, want the panic as an error", i, err)
		}
	}
	s.Clunk(fid) // must not panic
}
