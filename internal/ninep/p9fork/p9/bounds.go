package p9

import "github.com/hugelgupf/p9/linux"

// Blocker is implemented by a File whose reads wait for something to
// happen (an event file): with WithMaxBlockingReads, its Treads are counted
// against their own bound instead of the connection's general one, so that
// readers waiting for events never take the slots the connection's other
// requests need.
type Blocker interface {
	Blocking() bool
}

// WithMaxRequests bounds how many requests of one connection are handled
// at once. The next frame is not read off the socket until one of them has
// been answered: back-pressure, not an error. Why: every request in flight
// holds a goroutine, its message and its reply until the reply is written,
// and a client that pipelines requests without reading the replies made a
// server hold gigabytes per connection.
func WithMaxRequests(n int) ServerOpt {
	return func(s *Server) {
		s.maxRequests = n
	}
}

// WithMaxBlockingReads bounds how many Treads of a Blocker file one
// connection may have waiting at once; they do not count against
// WithMaxRequests. A blocking read beyond the bound is answered EAGAIN at
// once: were it to wait for a slot, it would hold one of the general slots
// meanwhile, and enough of them would leave the connection unable to read
// even the Tflush that could free one.
func WithMaxBlockingReads(n int) ServerOpt {
	return func(s *Server) {
		s.maxBlocking = n
	}
}

// newSlots returns a semaphore of n slots, or nil (no bound) for n <= 0.
func newSlots(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

// acquire takes a slot of sem, waiting for one; a nil sem has no bound.
func acquire(sem chan struct{}) {
	if sem != nil {
		sem <- struct{}{}
	}
}

// release gives back a slot of sem taken by acquire.
func release(sem chan struct{}) {
	if sem != nil {
		<-sem
	}
}

// blockingRead reports whether m is a Tread of a file that says its reads
// block.
func (cs *connState) blockingRead(m message) bool {
	t, ok := m.(*tread)
	if !ok || cs.blocking == nil {
		return false
	}
	ref, ok := cs.LookupFID(t.fid)
	if !ok {
		return false
	}
	defer ref.DecRef()
	b, ok := ref.file.(Blocker)
	return ok && b.Blocking()
}

// slotFor moves a request just read from the general slot it was read
// under to the slot it is to hold while it is handled, and returns that
// slot's semaphore; errno is EAGAIN for a blocking read over its bound
// (answered at once, holding no slot).
func (cs *connState) slotFor(m message) (sem chan struct{}, errno error) {
	if !cs.blockingRead(m) {
		return cs.slots, nil
	}
	release(cs.slots)
	select {
	case cs.blocking <- struct{}{}:
		return cs.blocking, nil
	default:
		return nil, linux.EAGAIN
	}
}
