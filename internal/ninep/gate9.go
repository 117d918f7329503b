package ninep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep/proto"
)

// gate9 stands between a 9P2000 connection and srv9p. srv9p serves each
// request in a goroutine of its own, and its Walk writes the new fid's qid
// with a plain store (newfid.qid = fid.qid) while a concurrent Topen of
// that fid reads it atomically: a client that pipelines Twalk and Topen of
// one fid races them. The same pipelining would let a Tstat see a fid
// with no state (the adapter refuses that too). gate9 hands srv9p a request naming a fid that an
// earlier request is still setting up (Tattach's fid, Twalk's newfid,
// Topen's and Tcreate's fid) only once that request's reply is written.
// Requests on other fids, and Tversion and Tflush, are never held.
//
// The p9 fork does the same for 9P2000.L (p9fork/p9/opening.go); the two
// sides do not share it because srv9p reads and writes the connection
// itself, through this reader and writer.
//
// The gate also bounds the requests srv9p handles at once (bounds9),
// which srv9p itself does not: it starts a goroutine per request read.
type gate9 struct {
	in     io.ReadCloser
	out    io.WriteCloser
	ctx    context.Context
	max    uint32
	bounds *bounds9
	// writeTimeout bounds each reply's write when out has a write
	// deadline; 0 bounds nothing.
	writeTimeout time.Duration
	// idle, if positive, ends the connection once no request has been in
	// flight and no frame has arrived for that long (Conn.IdleTimeout),
	// through a read deadline on conn.
	idle time.Duration
	conn interface{ SetReadDeadline(time.Time) error }
	cur  []byte // the rest of the frame being handed to srv9p
	mu   sync.Mutex
	busy map[uint32]chan struct{} // fid -> closed when its setup's reply is written
	tags map[uint16]setup         // setup request's tag -> what it sets up
	// The fid bound (fids9.go): every request handed to srv9p and not
	// yet answered, the fids that exist, and how many are being made.
	inflight map[uint16]fidOp
	fids     map[uint32]struct{}
	creating int
	maxFids  int
	wmu      sync.Mutex // one reply written at a time: srv9p's and the gate's own
	// The session reset (version9.go): whether a Tversion has begun the
	// session, the frames the gate sends srv9p in the client's stead
	// before a later one, the replies it keeps from the client, and the
	// Tversion held until srv9p has answered them all.
	versioned bool
	queue     [][]byte
	swallow   map[uint16]bool
	held      []byte
	wake      chan struct{} // a kept reply came: the reset may go on
}

// The 9P2000 side's bounds per connection (rule 10).
const (
	// gateRequests bounds the requests srv9p handles at once; the next
	// frame stays on the socket until one is answered. Each holds a
	// goroutine and, for a Tread, a reply buffer of up to msize that
	// srv9p allocates before the read: 16 at the 1 MiB msize is 16 MiB
	// for a client that pipelines reads and never takes the replies.
	// Clients keep far fewer in flight (plan9port's 9pfuse one per FUSE
	// thread, Plan 9's devmnt one per process).
	gateRequests = 16
	// gateBlockingReads bounds the reads of one connection waiting in a
	// ContextReader (the events file). They do not hold request slots
	// while they wait, so that waiting readers never keep a connection
	// from its other requests, or from the Tflush that releases them; a
	// blocking read beyond the bound is refused at once (busy), because
	// waiting for a slot would hold a request slot meanwhile. A client
	// waits on events with one or two readers, but a machine's many
	// watchers (status lines, notifiers) share the daemon's connection
	// cap: 16 lets 1,000 readers wait at once across DefaultMaxConns
	// (64 × 16 = 1,024), and bounds their buffers to 16
	// msize, the same worst case as gateRequests.
	gateBlockingReads = 16
	// gateWriteTimeout bounds each reply's write: a client that stops
	// reading holds its replies' goroutines and request slots only this
	// long before its connection is closed. srv9p's writes have no bound
	// of their own. The same as the 9P2000.L side's.
	gateWriteTimeout = 30 * time.Second
)

// bounds9 are the slots of one connection's bounds: a request holds one
// of requests from when the gate hands it to srv9p to when its reply is
// written, except while it waits in a blocking read, when it holds one of
// blocking instead.
type bounds9 struct {
	requests chan struct{}
	blocking chan struct{}
}

func newBounds9(requests, blocking int) *bounds9 {
	return &bounds9{requests: make(chan struct{}, requests), blocking: make(chan struct{}, blocking)}
}

// take waits for a request slot, or for ctx. A nil b bounds nothing,
// here and in the methods below.
func (b *bounds9) take(ctx context.Context) error {
	if b == nil {
		return nil
	}
	select {
	case b.requests <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give returns a request slot. A reply with no slot to give back (after
// the connection's end, see block) gives nothing.
func (b *bounds9) give() {
	if b == nil {
		return
	}
	select {
	case <-b.requests:
	default:
	}
}

// errBlockedReads refuses a blocking read beyond gateBlockingReads.
var errBlockedReads = errs.E("read", errs.Busy, "", errors.New("too many blocked reads on this connection"))

// block moves the calling request from its request slot to a blocking
// one, for as long as its read waits; done moves it back (waiting, as a
// new request would, unless conn ends first).
func (b *bounds9) block(conn context.Context) (done func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	select {
	case b.blocking <- struct{}{}:
	default:
		return nil, errBlockedReads
	}
	b.give()
	if conn == nil {
		conn = context.Background()
	}
	return func() {
		<-b.blocking
		b.take(conn)
	}, nil
}

// setup is a request that sets a fid up, until its reply is written.
type setup struct {
	fid  uint32
	done chan struct{}
}

func newGate9(ctx context.Context, in io.ReadCloser, out io.WriteCloser, max uint32, b *bounds9) *gate9 {
	return &gate9{in: in, out: out, ctx: ctx, max: max, bounds: b, busy: map[uint32]chan struct{}{}, tags: map[uint16]setup{},
		inflight: map[uint16]fidOp{}, fids: map[uint32]struct{}{}, maxFids: gateFids, swallow: map[uint16]bool{}, wake: make(chan struct{}, 1)}
}

// Read hands srv9p the current frame, reading (and holding, if need be)
// the next one when it is used up.
func (g *gate9) Read(p []byte) (int, error) {
	if len(g.cur) == 0 {
		if err := g.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, g.cur)
	g.cur = g.cur[n:]
	return n, nil
}

func (g *gate9) next() error {
	if f, ok, err := g.resetting(); ok || err != nil {
		if err != nil {
			return err
		}
		if err := g.bounds.take(g.ctx); err != nil {
			return err
		}
		g.cur = f
		return nil
	}
	f, err := proto.ReadFrame(g.in, g.max)
	if err == nil {
		if _, typ, _ := proto.Header(f); typ == proto.Tversion {
			g.mu.Lock()
			again := g.versioned
			g.versioned = true
			g.mu.Unlock()
			if again {
				return g.reset(f)
			}
		}
	}
	for err == nil {
		g.mu.Lock()
		refuse := g.admit(f)
		g.mu.Unlock()
		if refuse == "" {
			break
		}
		_, _, tag := proto.Header(f)
		if _, err := g.write(rerror(tag, refuse)); err != nil {
			return err
		}
		f, err = proto.ReadFrame(g.in, g.max)
	}
	if err != nil {
		return err
	}
	size, typ, tag := proto.Header(f)
	if typ != proto.Tversion && typ != proto.Tauth && typ != proto.Tflush && size >= 11 {
		if err := g.wait(proto.Uint32(f[7:])); err != nil {
			return err
		}
		fid, ok := proto.Uint32(f[7:]), typ == proto.Tattach || typ == proto.Topen || typ == proto.Tcreate
		if typ == proto.Twalk && size >= 15 {
			fid, ok = proto.Uint32(f[11:]), true
			if err := g.wait(fid); err != nil {
				return err
			}
		}
		if ok {
			g.mu.Lock()
			if _, dup := g.tags[tag]; !dup {
				done := make(chan struct{})
				g.busy[fid] = done
				g.tags[tag] = setup{fid, done}
			}
			g.mu.Unlock()
		}
	}
	if err := g.bounds.take(g.ctx); err != nil {
		return err
	}
	g.cur = f
	return nil
}

func (g *gate9) wait(fid uint32) error {
	g.mu.Lock()
	ch := g.busy[fid]
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-g.ctx.Done():
		return g.ctx.Err()
	}
}

// Write takes one reply from srv9p (it writes each whole, under its own
// lock; every request it was handed gets exactly one) and releases the
// request's slot and the fid it was setting up.
func (g *gate9) Write(p []byte) (int, error) {
	kept := false
	if len(p) >= proto.HeaderSize {
		// Before the write: the client may send its next request (a
		// fid in the place of one just clunked) as soon as it has this.
		g.mu.Lock()
		g.answered(p)
		kept = g.kept(p)
		g.mu.Unlock()
	}
	n, err := len(p), error(nil)
	if !kept {
		n, err = g.write(p)
	}
	g.bounds.give()
	if len(p) >= proto.HeaderSize {
		_, _, tag := proto.Header(p)
		g.mu.Lock()
		if s, ok := g.tags[tag]; ok {
			close(s.done)
			delete(g.tags, tag)
			if g.busy[s.fid] == s.done {
				delete(g.busy, s.fid)
			}
		}
		g.mu.Unlock()
	}
	return n, err
}

// write writes one reply, srv9p's or the gate's own, within writeTimeout.
func (g *gate9) write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if d, ok := g.out.(interface{ SetWriteDeadline(time.Time) error }); ok && g.writeTimeout > 0 {
		d.SetWriteDeadline(time.Now().Add(g.writeTimeout))
	}
	n, err := g.out.Write(p)
	if err != nil {
		// A reply lost ends the session: the client's replies would no
		// longer match its requests. Closing ends srv9p's read loop.
		g.Close()
	}
	return n, err
}

// Close closes the connection (through the replay, which also cancels
// the gate's context); srv9p may call it as reader and as writer.
func (g *gate9) Close() error { return g.in.Close() }

// replay is the connection's inbound side with the first message put back.
// At EOF it cancels the connection's context, so no handler outlives it.
type replay struct {
	io.Reader
	c      net.Conn
	cancel context.CancelFunc
}

func newReplay(first []byte, c net.Conn, cancel context.CancelFunc) *replay {
	return &replay{Reader: io.MultiReader(bytes.NewReader(first), c), c: c, cancel: cancel}
}

func (r *replay) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err != nil {
		r.cancel()
	}
	return n, err
}

func (r *replay) Close() error { r.cancel(); return r.c.Close() }
