package p9

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// WithReadTimeout bounds how long the rest of a frame may take once its
// first byte has arrived: a client that sends part of a frame and stalls
// is disconnected. Waiting for a frame to begin is not bounded by it (see
// WithIdleTimeout). Needs a reader with SetReadDeadline (a net.Conn).
func WithReadTimeout(d time.Duration) ServerOpt {
	return func(s *Server) {
		s.readTimeout = d
	}
}

// WithWriteTimeout bounds each reply's write: a client that stops reading
// its replies is disconnected once its socket buffer has been full for d.
// Why: the writing handler holds the send lock, so every other reply of
// the connection, and every request in flight, waits behind it for as
// long as the client likes. Needs a writer with SetWriteDeadline.
func WithWriteTimeout(d time.Duration) ServerOpt {
	return func(s *Server) {
		s.writeTimeout = d
	}
}

// WithIdleTimeout closes a connection that has had no request in flight,
// and no frame or reply go by, for d. Why: a connection costs a slot of
// whatever bounds the server's connections; a server may want clients it
// trusts less to give theirs back when unused. Needs a reader with
// SetReadDeadline.
func WithIdleTimeout(d time.Duration) ServerOpt {
	return func(s *Server) {
		s.idleTimeout = d
	}
}

// errIdle ends a connection idle for longer than its idle timeout.
var errIdle = errors.New("connection idle for longer than the idle timeout")

// errStalled ends a connection whose client stopped in the middle of a
// frame.
var errStalled = errors.New("client stalled in the middle of a frame")

type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

// frameReader is the connection's reader as recv sees it: between frames
// it waits for the next one under the idle bound only, and once a frame's
// first byte has arrived, the rest is read under the read bound.
type frameReader struct {
	cs    *connState
	r     io.Reader
	d     readDeadliner // nil: no bounds
	rto   time.Duration
	idle  time.Duration
	first bool // the next Read is the first of a frame
	armed bool // a deadline is set on d
}

// frameConn is a frameReader over a syscall.Conn, which recv reads with
// readv (vecnet); deadlines apply to those reads too.
type frameConn struct {
	*frameReader
	sc syscall.Conn
}

func (f frameConn) SyscallConn() (syscall.RawConn, error) { return f.sc.SyscallConn() }

// newFrameReader returns what recv should read cs.t through.
func newFrameReader(cs *connState) io.Reader {
	s := cs.server
	d, ok := cs.t.(readDeadliner)
	if !ok || (s.readTimeout <= 0 && s.idleTimeout <= 0) {
		return cs.t
	}
	f := &frameReader{cs: cs, r: cs.t, d: d, rto: s.readTimeout, idle: s.idleTimeout}
	if sc, ok := cs.t.(syscall.Conn); ok {
		return frameConn{f, sc}
	}
	return f
}

// startFrame is called before each frame is read.
func startFrame(r io.Reader) {
	switch f := r.(type) {
	case *frameReader:
		f.first = true
	case frameConn:
		f.first = true
	}
}

func (f *frameReader) Read(p []byte) (int, error) {
	if !f.first {
		n, err := f.r.Read(p)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = errStalled
		}
		return n, err
	}
	for {
		switch {
		case f.idle > 0:
			f.d.SetReadDeadline(f.cs.lastActive().Add(f.idle))
			f.armed = true
		case f.armed:
			f.d.SetReadDeadline(time.Time{})
			f.armed = false
		}
		n, err := f.r.Read(p)
		if n > 0 {
			f.first = false
			f.cs.active()
			if f.rto > 0 {
				f.d.SetReadDeadline(time.Now().Add(f.rto))
				f.armed = true
			} else if f.armed {
				f.d.SetReadDeadline(time.Time{})
				f.armed = false
			}
			return n, err
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || f.idle <= 0 {
			return n, err
		}
		if !f.cs.busy() && time.Since(f.cs.lastActive()) >= f.idle {
			return 0, errIdle
		}
		// A request in flight, or a reply written since: not idle.
		if f.cs.busy() {
			f.cs.active()
		}
	}
}

// active records that a frame or a reply went by.
func (cs *connState) active() {
	atomic.StoreInt64(&cs.activeAt, time.Now().UnixNano())
}

// lastActive is when a frame or a reply last went by.
func (cs *connState) lastActive() time.Time {
	return time.Unix(0, atomic.LoadInt64(&cs.activeAt))
}

// busy reports whether a request of the connection is in flight.
func (cs *connState) busy() bool {
	cs.tagMu.Lock()
	defer cs.tagMu.Unlock()
	return len(cs.tags) > 0
}

// writeDeadline bounds the reply about to be written. Called under sendMu.
func (cs *connState) writeDeadline() {
	if d, ok := cs.r.(writeDeadliner); ok && cs.server.writeTimeout > 0 {
		d.SetWriteDeadline(time.Now().Add(cs.server.writeTimeout))
	}
}

// fail ends the connection after a reply could not be written: the client
// is gone or does not read, and nothing more can be said to it. Closing
// the reader ends handleRequests, which cancels the requests in flight.
func (cs *connState) fail() {
	cs.closeOnce.Do(func() {
		cs.t.Close()
	})
}
