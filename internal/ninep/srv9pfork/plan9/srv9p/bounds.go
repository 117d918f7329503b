package srv9p

import (
	"context"
	"errors"
)

// The bounds of one connection's requests in flight (Server.MaxRequests,
// Server.MaxBlockingReads). Every request read holds a slot from before
// its goroutine starts until its reply is written, so a client that
// pipelines requests and never reads the replies holds at most
// MaxRequests goroutines and their buffers. A handler that is about to
// wait for something only the outside world brings (an event) calls
// Blocking, which trades its slot for one of the blocking slots while it
// waits: waiting readers never keep a connection from its other requests,
// or from the Tflush that would release them.

// ErrBlockedReads refuses a call to Blocking beyond MaxBlockingReads.
var ErrBlockedReads = errors.New("too many blocked reads on this connection")

type requestKey struct{}

func newSlots(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

// takeSlot waits for a request slot for r, or for the connection's end.
func (c *conn) takeSlot(r *request) error {
	if c.slots == nil {
		return nil
	}
	select {
	case c.slots <- struct{}{}:
		r.slot.Store(true)
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// giveSlot returns r's slot, a request slot or a blocking one.
func (c *conn) giveSlot(r *request) {
	if r.slot.Swap(false) {
		<-c.slots
	}
	if r.blocked.Swap(false) {
		<-c.blocks
	}
}

// Blocking tells the server that the handler whose request's context is
// ctx is about to wait for as long as it takes: its request slot is
// released for other requests, and a blocking slot held instead until
// its reply is written. (Taking a request slot back when the wait ends
// could deadlock: a Tflush of the request holds one until the request
// is answered.) With MaxBlockingReads blocking already, it returns
// ErrBlockedReads and the handler should not wait. A ctx that is not a
// request's, or a Server without the bound, bounds nothing.
func Blocking(ctx context.Context) error {
	r, _ := ctx.Value(requestKey{}).(*request)
	if r == nil || r.conn.blocks == nil || r.blocked.Load() {
		return nil
	}
	c := r.conn
	select {
	case c.blocks <- struct{}{}:
	default:
		return ErrBlockedReads
	}
	r.blocked.Store(true)
	if r.slot.Swap(false) {
		<-c.slots
	}
	return nil
}
