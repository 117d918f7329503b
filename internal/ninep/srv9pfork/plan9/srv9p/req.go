package srv9p

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"9fans.net/go/plan9"
)

// A request represents a pending request on a 9P connection
type request struct {
	// immutable fields
	conn      *conn
	ctx       context.Context
	cancel    func()
	ifcall    *plan9.Fcall
	ofcall    *plan9.Fcall
	duplicate bool
	err       error
	setup     chan struct{} // closed once the reply is written (setup.go)
	setupFid  uint32        // the fid r sets up, when setup is not nil
	counted   bool          // r is one of conn.running (version.go)
	aborted   atomic.Bool   // a Tversion ended r's session: no reply is sent
	slot      atomic.Bool   // r holds one of conn.slots (bounds.go)
	blocked   atomic.Bool   // r holds one of conn.blocks (bounds.go)
	charged   int64         // what ChargeRead took for r's buffer

	// mutable fields
	mu        sync.Mutex
	responded atomic.Bool
	flush     []*request
}

// newReq allocates a new request in the conn c for the 9P request f.
// If there is already a request with that tag, the returned request has
// r.duplicate and r.err set, and the caller is expected to call r.respond rather
// than process it.
func (c *conn) newReq(f *plan9.Fcall) *request {
	ctx, cancel := context.WithCancel(c.ctx)
	r := &request{
		conn:   c,
		cancel: cancel,
		ifcall: f,
		ofcall: new(plan9.Fcall),
	}
	r.ctx = context.WithValue(ctx, requestKey{}, r)
	if !c.reqs.tryInsert(f.Tag, r) {
		r.duplicate = true
		r.err = errors.New("duplicate tag")
		return r
	}
	return r
}

// incRef and decRef are no-ops.
// They are implemented only so that request can be used with refMap.
func (r *request) incRef() {}
func (r *request) decRef() {}
