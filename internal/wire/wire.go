// Package wire sits between a client connection and a hugelgupf/p9 (v0.4.1)
// Server. The server is handed a *Conn instead of the raw net.Conn
// (srv.Handle(wc, wc)), and the Conn fixes on the wire what the library gets
// wrong or cannot do:
//
//   - Tauth is answered here with Rlerror(ENOENT). p9 hard-codes ENOSYS, and
//     diod's libnpclient (diodls, diodcat, ...) treats only success or ENOENT
//     as "no authentication required", so every diod tool fails against stock
//     p9.
//   - Tversion msize is capped at Options.MaxMsize, and p9 itself is told at
//     most P9Msize (the Rversion to the client is rewritten back to the
//     grant). p9 has no msize knob: it grants up to 4 MiB and allocates
//     msize-sized buffers per connection and per in-flight Tread.
//   - Tread count is clamped to p9's msize-11 (the Rread header). p9 slices
//     its msize buffer with the count, so a larger count panics inside the
//     handler and comes back as EFAULT; and a count of exactly msize gives an
//     Rread larger than msize.
//   - At most MaxReads Treads of a connection are in p9 at once; the next is
//     left on the socket until a reply goes out.
//   - Rflush is held until the reply to its oldtag has been written. p9 clears
//     a tag before it sends the tag's reply and Tflush waits only for the
//     clear, so the two race for the send lock and Rflush can go out first.
//     The client may reuse oldtag as soon as it reads Rflush, and then takes
//     the late old reply for the answer to its new request.
//   - End of input cancels Context, so File methods that wait (and select on
//     it) return when the client hangs up. Otherwise p9's Handle waits for
//     such a handler forever and the connection's goroutines and fids leak.
//   - A malformed frame ends that one connection.
//   - A stalled peer is dropped: once the first byte of a frame has arrived,
//     the rest of it must follow within Options.ReadTimeout, and every reply
//     must be taken by the peer within Options.WriteTimeout. A connection
//     idle between frames is never timed out here. Each Conn has its own
//     locks and deadlines, so one stalled peer holds back only itself.
//   - Tread and Treaddir on a fid that p9 has opened are answered here,
//     without p9 (fast.go): the bulk of the bytes a client asks for never
//     pays p9's per-request goroutine hand-off, buffer zeroing and
//     directory encoding.
//
// Outbound, p9 writes each message as several Writes (header, fixed part,
// payload). Conn reassembles them and sends each message with one writev,
// without copying the payload.
package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// 9P2000.L message types and sizes used here.
const (
	hdrLen = 7 // size[4] type[1] tag[2]
	noTag  = 0xFFFF

	msgRlerror  = 7
	msgTversion = 100
	msgRversion = 101
	msgTauth    = 102
	msgTflush   = 108
	msgRflush   = 109
	msgTread    = 116
	msgTlopen   = 12

	rreadHdr = hdrLen + 4 // Rread: header plus count[4]
	enoent   = 2

	defaultMaxMsize = 1 << 20
	defaultMinMsize = 4096

	// DefaultReadTimeout and DefaultWriteTimeout are the stall bounds used
	// when Options leaves them 0.
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second

	// readBuf is the inbound buffer. Every frame up to this size is read
	// whole before p9 sees its first byte. Larger frames (only big Twrites,
	// in practice) are streamed to p9 without another copy. The four types
	// Conn parses must fit. 8 KiB holds any request but a large Twrite (a
	// Twalk of 16 names of 255 bytes is 4 KiB), and the buffer is held for
	// the connection's life, so a larger one is memory never filled.
	readBuf = 8 << 10

	// P9Msize is the largest msize p9 itself is told, whatever the client
	// is granted. p9 sizes its buffers by msize: one for the zeros it
	// copies over every Rread, held for the connection's life, and one per
	// Tread in progress. A client granted more (up to MaxMsize) gets Rreads
	// of at most P9Msize-11 bytes, which 9P allows (a short read is not
	// EOF), and Rreaddirs and Twrites up to its own msize (p9 refuses a
	// frame above its msize: only a Twrite could be, and the one write
	// this tree takes is a session name). Why 1 MiB: reads are no faster
	// with larger messages, and it makes a 4 MiB connection cost what a
	// 1 MiB one does, so the bound on memory does not grow with the msize
	// a client asks for (BENCHMARKS.md, Memory).
	P9Msize = 1 << 20

	// MaxReads is how many Treads of one connection p9 may hold at once.
	// p9 takes an msize-sized buffer per Tread in progress (and zeroes it
	// after the reply), so without a cap a client that pipelines Treads
	// makes the daemon hold msize bytes for each: 256 tags at 1 MiB are a
	// quarter of a GiB. The Tread past the cap is not read off the socket
	// until a reply to one of the others has been written: back-pressure,
	// not an error. Two keeps a sequential reader's next request queued
	// while the current one is served.
	MaxReads = 2
)

// Options configures a Conn.
type Options struct {
	// MaxMsize caps the msize a client may negotiate: a larger Tversion
	// msize is rewritten before p9 sees it. 0 means 1 MiB.
	MaxMsize uint32
	// MinMsize is the smallest msize accepted; a Tversion asking for less
	// closes the connection. 0 means 4096.
	MinMsize uint32
	// ReadTimeout bounds how long the rest of a frame may take once its
	// first byte has arrived (a peer that sends half a frame and stalls is
	// dropped). Waiting for a frame to begin is never bounded. 0 means
	// DefaultReadTimeout; a negative value means no bound.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a reply: a peer that stops reading
	// is dropped once its socket buffer is full for this long. 0 means
	// DefaultWriteTimeout; a negative value means no bound.
	WriteTimeout time.Duration
	// Logf, if not nil, receives the reason a connection was ended.
	Logf func(format string, args ...any)
}

// Stats counts what the Conn did on top of p9.
type Stats struct {
	AuthAnswered uint64 // Tauth answered with Rlerror(ENOENT)
	FlushHeld    uint64 // Rflush frames held back until the oldtag's reply
	ReadClamped  uint64 // Tread (and fast-path Treaddir) counts lowered to msize-11
	Fast         uint64 // Treads and Treaddirs answered by the fast path (fast.go)
}

// Conn is the io.ReadCloser and io.WriteCloser given to p9.Server.Handle.
// p9 calls Read from one goroutine at a time and Write from one goroutine at a
// time (under its send lock); Conn's own replies come from the Read side, so
// writes to the network are serialised by a mutex of its own.
type Conn struct {
	c      net.Conn
	br     *bufio.Reader
	max    uint32
	min    uint32
	logf   func(string, ...any)
	rto    time.Duration // 0: none
	wto    time.Duration // 0: none
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Read side.
	cur   []byte // rest of a rewritten frame (already discarded from br)
	left  int    // bytes of the current frame still to be served from br
	rerr  error  // sticky
	armed bool   // a read deadline is set on c

	msize atomic.Uint32 // granted to the client by the last Rversion; 0 before
	inner atomic.Uint32 // the msize p9 itself runs with (at most P9Msize); 0 before
	grant atomic.Uint32 // what the last Tversion is to be granted

	mu       sync.Mutex
	version  string
	inflight map[uint16]bool          // tags handed to p9 whose reply is not yet written (true: a Tread holding a slot of reads)
	flushOf  map[uint16]uint16        // Tflush tag -> oldtag, if oldtag was in flight
	held     map[uint16][][]byte      // oldtag -> Rflush frames waiting for its reply
	opening  map[uint32]chan struct{} // fid -> closed when its Tlopen's reply is written (len is nOpening)
	openTag  map[uint16]openReq       // Tlopen tag -> its fid and token
	closed   bool

	// The fast path (fast.go): fids bound to what p9 opened for them, and
	// the tokens of the Tlopens in flight.
	fast    map[uint32]any
	pending [nTokens]any // token -> what File.Open reported for it
	toks    [nTokens / 64]uint64

	wmu  sync.Mutex  // serialises writes to c
	out  []byte      // header and fixed part of the reply being reassembled
	vecs [][]byte    // backing array of vec, reused
	vec  net.Buffers // the reply being written (WriteTo consumes it)

	reads chan struct{} // one token per Tread in flight, MaxReads at most

	// nOpening is len(opening), read without the lock: only the reading
	// goroutine adds to opening, so a zero it reads is true, and the
	// common frame (no open in flight) costs no lock and no peek.
	nOpening atomic.Int32
	nFast    atomic.Int32 // len(fast), read without the lock

	fhdr [rreadHdr]byte // header of a fast reply, under wmu

	closeOnce sync.Once
	closeErr  error

	nAuth, nHeld, nClamp, nFastServed atomic.Uint64
}

// New wraps c. Inbound bytes come from r: normally c itself, or
// io.MultiReader(bytes.NewReader(first), c) when a front door has already
// consumed the first message.
func New(c net.Conn, r io.Reader, o Options) *Conn {
	if o.MaxMsize == 0 {
		o.MaxMsize = defaultMaxMsize
	}
	if o.MinMsize == 0 {
		o.MinMsize = defaultMinMsize
	}
	bound := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Conn{
		c:        c,
		br:       bufio.NewReaderSize(r, readBuf),
		max:      o.MaxMsize,
		min:      o.MinMsize,
		logf:     o.Logf,
		rto:      bound(o.ReadTimeout, DefaultReadTimeout),
		wto:      bound(o.WriteTimeout, DefaultWriteTimeout),
		ctx:      ctx,
		cancel:   cancel,
		inflight: make(map[uint16]bool),
		opening:  make(map[uint32]chan struct{}),
		openTag:  make(map[uint16]openReq),
		fast:     make(map[uint32]any),
		reads:    make(chan struct{}, MaxReads),
		flushOf:  make(map[uint16]uint16),
		held:     make(map[uint16][][]byte),
	}
}

// Context is cancelled when the inbound side reaches EOF or fails, or when
// the Conn is closed. File methods that can wait must select on it: p9's
// Handle does not return until every handler has, so a handler that ignores a
// hung-up client pins its goroutine and the connection's fids for good.
// context.Cause tells why it ended.
func (c *Conn) Context() context.Context { return c.ctx }

// Stats returns the counters.
func (c *Conn) Stats() Stats {
	return Stats{AuthAnswered: c.nAuth.Load(), FlushHeld: c.nHeld.Load(), ReadClamped: c.nClamp.Load(), Fast: c.nFastServed.Load()}
}

// Version is the version string of the last Tversion ("" before one).
func (c *Conn) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Msize is the msize granted to the client in the last Rversion (0 before
// one). p9 itself runs with at most P9Msize.
func (c *Conn) Msize() uint32 { return c.msize.Load() }

// innerLimit is the msize p9 runs with, or what it will run with before
// negotiation.
func (c *Conn) innerLimit() uint32 {
	if m := c.inner.Load(); m != 0 {
		return m
	}
	return min(c.limit(), P9Msize)
}

// readLimit is the largest count an Rread (or Rreaddir) of p9's msize
// can carry.
func (c *Conn) readLimit() uint32 {
	if l := c.innerLimit(); l > rreadHdr {
		return l - rreadHdr
	}
	return 0
}

// limit is the largest frame accepted in either direction: the negotiated
// msize, or MaxMsize before negotiation.
func (c *Conn) limit() uint32 {
	if m := c.msize.Load(); m != 0 {
		return m
	}
	return c.max
}

// Read serves p9 the current inbound frame, loading the next one when the
// current one is used up. It never returns bytes of two frames in one call.
func (c *Conn) Read(p []byte) (int, error) {
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(c.cur) == 0 && c.left == 0 {
		if err := c.next(); err != nil {
			err = c.readFailed(err)
			c.rerr = err
			c.cancel(err)
			return 0, err
		}
	}
	if len(c.cur) > 0 {
		n := copy(p, c.cur)
		c.cur = c.cur[n:]
		return n, nil
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= n
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // EOF inside a frame
		}
		err = c.readFailed(err)
		c.rerr = err
		c.cancel(err)
	}
	return n, err
}

// readFailed turns the read deadline's expiry into the reason the
// connection ends, and ends it.
func (c *Conn) readFailed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("wire: peer stalled inside a frame for %v", c.rto)
		c.shutdown(err)
	}
	return err
}

// frameStart waits, without a bound, for the first byte of the next frame,
// then arms the read deadline for the rest of it. The deadline is left off
// when the whole frame is already buffered.
func (c *Conn) frameStart() error {
	if c.rto <= 0 {
		return nil
	}
	if c.br.Buffered() == 0 {
		if c.armed {
			c.c.SetReadDeadline(time.Time{})
			c.armed = false
		}
		if _, err := c.br.Peek(1); err != nil {
			return err
		}
	}
	if n := c.br.Buffered(); n >= hdrLen {
		if h, _ := c.br.Peek(hdrLen); int(binary.LittleEndian.Uint32(h)) <= n {
			return nil // whole frame here: no read will block
		}
	}
	c.c.SetReadDeadline(time.Now().Add(c.rto))
	c.armed = true
	return nil
}

// badFrame ends the connection because of what the client sent.
func (c *Conn) badFrame(format string, args ...any) error {
	err := fmt.Errorf("wire: "+format, args...)
	c.shutdown(err)
	return err
}

// next waits for the next frame, checks it, answers or rewrites it if need
// be, and marks its tag in flight before p9 sees a byte of it.
func (c *Conn) next() error {
	c.cur = nil
	for {
		if err := c.frameStart(); err != nil {
			return err
		}
		h, err := c.br.Peek(hdrLen)
		if err != nil {
			if err == io.EOF && len(h) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		size, typ, tag := binary.LittleEndian.Uint32(h), h[4], binary.LittleEndian.Uint16(h[5:])
		if lim := c.limit(); size < hdrLen || size > lim {
			return c.badFrame("frame size %d outside [%d, %d]", size, hdrLen, lim)
		}
		if c.nFast.Load() > 0 || c.nOpening.Load() > 0 {
			if err := c.forget(typ, size); err != nil {
				return err
			}
		}
		if err := c.afterOpen(typ, tag, size); err != nil {
			return err
		}
		parsed := typ == msgTversion || typ == msgTauth || typ == msgTread || typ == msgTflush || typ == msgTlopen
		if size > readBuf {
			if parsed {
				return c.badFrame("type %d frame of %d bytes", typ, size)
			}
			c.track(typ, tag, 0)
			c.left = int(size)
			return nil
		}
		f, err := c.br.Peek(int(size))
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		var oldtag uint16
		switch typ {
		case msgTauth:
			if _, err := c.br.Discard(int(size)); err != nil {
				return err
			}
			if err := c.answerAuth(tag); err != nil {
				return err
			}
			continue
		case msgTversion: // msize[4] version[s]
			if size < hdrLen+6 {
				return c.badFrame("short Tversion")
			}
			msize, n := binary.LittleEndian.Uint32(f[7:]), binary.LittleEndian.Uint16(f[11:])
			if hdrLen+6+uint32(n) > size {
				return c.badFrame("Tversion string overruns the frame")
			}
			c.mu.Lock()
			c.version = string(f[13 : 13+n])
			c.mu.Unlock()
			if msize < c.min {
				return c.badFrame("Tversion msize %d below %d", msize, c.min)
			}
			grant := min(msize, c.max)
			inner := min(grant, P9Msize)
			c.grant.Store(grant)
			if inner != msize {
				f = c.rewrite(f)
				binary.LittleEndian.PutUint32(f[7:], inner)
			}
		case msgTread: // fid[4] offset[8] count[4]
			if size < hdrLen+16 {
				return c.badFrame("short Tread")
			}
			if c.nFast.Load() > 0 {
				if done, err := c.serveFast(typ, tag, f); err != nil {
					return err
				} else if done {
					continue
				}
			}
			lim := c.readLimit()
			if binary.LittleEndian.Uint32(f[19:]) > lim {
				f = c.rewrite(f)
				binary.LittleEndian.PutUint32(f[19:], lim)
				c.nClamp.Add(1)
			}
			if err := c.readSlot(tag); err != nil {
				return err
			}
		case msgTreaddir: // fid[4] offset[8] count[4]
			if c.nFast.Load() > 0 {
				if done, err := c.serveFast(typ, tag, f); err != nil {
					return err
				} else if done {
					continue
				}
			}
		case msgTlopen: // fid[4] flags[4]
			if size >= hdrLen+8 {
				f = c.token(f, tag)
			}
		case msgTflush: // oldtag[2]
			if size < hdrLen+2 {
				return c.badFrame("short Tflush")
			}
			oldtag = binary.LittleEndian.Uint16(f[7:])
			if oldtag == tag {
				// A flush of itself. Stock p9 waits for the old tag,
				// which is this very request, forever: the connection
				// could never be torn down. There is nothing to
				// flush, so answer it here.
				if _, err := c.br.Discard(int(size)); err != nil {
					return err
				}
				if err := c.answerSelfFlush(tag); err != nil {
					return err
				}
				continue
			}
		}
		c.track(typ, tag, oldtag)
		if c.cur == nil {
			c.left = int(size)
		}
		return nil
	}
}

// readSlot waits until the Tread tag may be handed to p9 (see MaxReads).
// A tag already in flight takes no slot: p9 drops such a duplicate without
// a reply, which would never give the slot back.
//
// While it waits nothing is read, so a hang-up is not seen (and Context not
// cancelled) until a reply frees a slot or a write fails. A Tread that waits
// on Context could then wait for the hang-up that is not seen; no read of
// this tree does (a pread, or a snapshot taken at open), and the stall
// bounds still end a peer that stops taking replies.
func (c *Conn) readSlot(tag uint16) error {
	c.mu.Lock()
	_, dup := c.inflight[tag]
	c.mu.Unlock()
	if dup {
		return nil
	}
	select {
	case c.reads <- struct{}{}:
	default:
		select {
		case c.reads <- struct{}{}:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.inflight[tag] = true
	c.mu.Unlock()
	return nil
}

// afterOpen holds a request on a fid whose Tlopen p9 has not answered yet,
// and registers a Tlopen so that the requests after it on its fid wait.
//
// Why: p9 v0.4.1 handles a connection's requests concurrently, and its
// tlopen handler sets the fid's opened flag outside the lock under which
// tread (and the other handlers) read it (p9/handlers.go:339 vs :721). A
// client that pipelines Tlopen and Tread on one fid races them: a data race,
// and a read answered EINVAL
// as if the file were not open. Every request but Tversion, Tauth and
// Tflush names its fid first (offset 7), so only the requests on the
// opening fid wait, and only until that one reply is written; requests on
// other fids and flushes go through.
func (c *Conn) afterOpen(typ uint8, tag uint16, size uint32) error {
	if typ == msgTversion || typ == msgTauth || typ == msgTflush || size < hdrLen+4 ||
		(typ != msgTlopen && c.nOpening.Load() == 0) {
		return nil
	}
	h, err := c.br.Peek(hdrLen + 4)
	if err != nil {
		return err
	}
	fid := binary.LittleEndian.Uint32(h[hdrLen:])
	c.mu.Lock()
	ch := c.opening[fid]
	c.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
	if typ != msgTlopen || size < hdrLen+8 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.inflight[tag]; dup || c.closed {
		return nil // p9 drops a duplicate tag unanswered: no barrier on it
	}
	if c.opening[fid] == nil {
		c.nOpening.Add(1)
	}
	c.opening[fid] = make(chan struct{})
	c.openTag[tag] = openReq{fid: fid, tok: -1}
	return nil
}

// rewrite copies the frame f out of the read buffer so that it can be
// changed, and arranges for Read to serve the copy.
func (c *Conn) rewrite(f []byte) []byte {
	g := append([]byte(nil), f...)
	c.br.Discard(len(f)) // cannot fail: f was peeked
	c.cur = g
	return g
}

// track marks tag in flight. For a Tflush whose oldtag is in flight it also
// remembers the pair, so that Write can hold the Rflush. Tags are marked
// here, before p9 has read the frame: p9's Tflush finds a tag it has not
// started yet idle and answers at once, and that Rflush too must wait.
func (c *Conn) track(typ uint8, tag, oldtag uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if typ == msgTflush {
		if _, ok := c.inflight[oldtag]; ok {
			c.flushOf[tag] = oldtag
		}
	}
	if _, ok := c.inflight[tag]; !ok {
		c.inflight[tag] = false // a Tread's slot was marked by readSlot
	}
}

// answerAuth writes Rlerror(ENOENT) for a Tauth. ENOENT, not p9's ENOSYS:
// diod's libnpclient accepts only success or ENOENT as "auth not required".
func (c *Conn) answerAuth(tag uint16) error {
	var body [4]byte
	binary.LittleEndian.PutUint32(body[:], enoent)
	if err := c.answer(msgRlerror, tag, body[:]); err != nil {
		return err
	}
	c.nAuth.Add(1)
	return nil
}

// answerSelfFlush writes the Rflush of a Tflush that names its own tag.
func (c *Conn) answerSelfFlush(tag uint16) error { return c.answer(msgTflush+1, tag, nil) }

// answer writes a reply the wrapper makes itself. It waits for the write
// lock, so it never interleaves with p9's replies; only a client that stops
// reading its replies can make it wait long, and that stalls only its own
// connection.
func (c *Conn) answer(typ uint8, tag uint16, body []byte) error {
	b := make([]byte, hdrLen, hdrLen+len(body))
	binary.LittleEndian.PutUint32(b[0:], uint32(hdrLen+len(body)))
	b[4] = typ
	binary.LittleEndian.PutUint16(b[5:], tag)
	b = append(b, body...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeVec(append(c.vecs[:0], b))
}

// writeVec writes one or more whole frames with one writev, within the
// write bound, and ends the connection if that fails. bufs is built on
// c.vecs, whose backing array is kept for the next reply: a local
// net.Buffers escapes through the writev path, two allocations per reply.
// Called with wmu held.
func (c *Conn) writeVec(bufs [][]byte) error {
	c.writeDeadline()
	c.vec = bufs
	_, err := c.vec.WriteTo(c.c)
	clear(bufs) // drop the references to the payload
	c.vecs, c.vec = bufs[:0], nil
	if err != nil {
		c.shutdown(c.writeFailed(err))
	}
	return err
}

// writeDeadline bounds the write about to start. Called with wmu held.
func (c *Conn) writeDeadline() {
	if c.wto > 0 {
		c.c.SetWriteDeadline(time.Now().Add(c.wto))
	}
}

// writeFailed names the write deadline's expiry as the reason.
func (c *Conn) writeFailed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("wire: peer did not take a reply for %v", c.wto)
	}
	return err
}

// Write takes p9's output. Parts of a message are copied until the part that
// completes it arrives; the message then goes out in one writev inside that
// Write call, so the completing part (the payload of an Rread) is never
// copied and not kept after Write returns.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	total := len(p)
	for len(p) > 0 {
		if len(c.out) < hdrLen {
			k := min(hdrLen-len(c.out), len(p))
			c.out = append(c.out, p[:k]...)
			p = p[k:]
			if len(c.out) < hdrLen {
				break
			}
			size := binary.LittleEndian.Uint32(c.out)
			if size < hdrLen {
				c.out = c.out[:0]
				return total - len(p), fmt.Errorf("wire: p9 wrote a frame of size %d", size)
			}
			if size == hdrLen { // header-only message (Rflush, Rclunk, ...)
				if err := c.emit(nil); err != nil {
					return total - len(p), err
				}
			}
			continue
		}
		need := int(binary.LittleEndian.Uint32(c.out)) - len(c.out)
		if len(p) < need {
			c.out = append(c.out, p...)
			break
		}
		err := c.emit(p[:need])
		p = p[need:]
		if err != nil {
			return total - len(p), err
		}
	}
	return total, nil
}

// emit sends the message c.out+tail, or holds it if it is an Rflush whose
// oldtag's reply has not been written yet. Called with wmu held.
func (c *Conn) emit(tail []byte) error {
	defer func() { c.out = c.out[:0] }()
	typ, tag := c.out[4], binary.LittleEndian.Uint16(c.out[5:])
	if typ == msgRversion {
		// Whole frame in c.out, so that its msize can be rewritten.
		c.out = append(c.out, tail...)
		tail = nil
		if body := c.out[hdrLen:]; len(body) >= 4 {
			if m := binary.LittleEndian.Uint32(body); m != 0 {
				// p9 granted m of the inner msize it was asked; the
				// client gets the same share of what it asked.
				grant := m
				if g := c.grant.Load(); m == min(g, P9Msize) {
					grant = g
				}
				c.inner.Store(m)
				c.msize.Store(grant)
				binary.LittleEndian.PutUint32(body, grant)
			}
		}
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	if typ == msgRflush {
		if old, ok := c.flushOf[tag]; ok {
			delete(c.flushOf, tag)
			if _, busy := c.inflight[old]; busy {
				// Hold it: once the client reads Rflush it may reuse
				// old, and would take old's late reply for the answer
				// to its new request.
				c.held[old] = append(c.held[old], append(append([]byte(nil), c.out...), tail...))
				c.mu.Unlock()
				c.nHeld.Add(1)
				return nil
			}
		}
	}
	// An Rlerror to NOTAG that no request asked for is p9 refusing a frame
	// it could not decode. That request's tag will never be answered, so
	// end the connection after passing the error on.
	_, notagBusy := c.inflight[noTag]
	undecodable := typ == msgRlerror && tag == noTag && !notagBusy

	// Untrack the tag, and every Rflush held behind it, before writing:
	// the client may reuse a tag as soon as it reads the reply, and a new
	// request tracked under it must not be untracked by this late delete.
	bufs := append(c.vecs[:0], c.out)
	if len(tail) > 0 {
		bufs = append(bufs, tail)
	}
	for queue := []uint16{tag}; len(queue) > 0; queue = queue[1:] {
		t := queue[0]
		if c.inflight[t] {
			<-c.reads // never blocks: the slot was taken for t
		}
		if req, ok := c.openTag[t]; ok {
			// p9 set the fid's opened flag before it wrote this reply.
			close(c.opening[req.fid])
			delete(c.opening, req.fid)
			delete(c.openTag, t)
			c.nOpening.Add(-1)
			if t == tag {
				c.opened(typ, req)
			}
		}
		delete(c.inflight, t)
		for _, f := range c.held[t] {
			bufs = append(bufs, f)
			queue = append(queue, binary.LittleEndian.Uint16(f[5:]))
		}
		delete(c.held, t)
	}
	c.mu.Unlock()

	if err := c.writeVec(bufs); err != nil {
		return err
	}
	if undecodable {
		c.shutdown(errors.New("wire: p9 could not decode a request"))
	}
	return nil
}

// shutdown closes the network connection, cancels Context and drops held
// Rflush frames (there is no one left to send them to). It runs once.
func (c *Conn) shutdown(cause error) {
	c.closeOnce.Do(func() {
		// Log why the connection ended, unless it already had (a write
		// failing after the client hung up is no news).
		if cause != errClosed && c.logf != nil && c.ctx.Err() == nil {
			c.logf("%v", cause)
		}
		c.mu.Lock()
		c.closed = true
		c.held, c.flushOf = nil, nil
		c.mu.Unlock()
		c.cancel(cause) // first, so that the cause is not the read the close fails
		c.closeErr = c.c.Close()
		if c.inner.Load() >= releaseMsize {
			scheduleRelease()
		}
	})
}

// releaseMsize and releaseDelay: after a connection that negotiated at least
// releaseMsize closes, the heap is collected twice and its free pages are
// returned to the kernel (debug.FreeOSMemory), at most once per releaseDelay and
// releaseDelay after the first such close, by when p9 has dropped the
// connection's buffers.
//
// Why: each such connection leaves p9's msize-sized buffers (the zeros it
// copies over each Rread, one read buffer per Tread in flight) as garbage.
// An idle daemon allocates nothing, so no GC runs to free them and Go's
// scavenger never sees them free: measured, the RSS of 64 closed 1 MiB
// connections stayed at 75 MiB. The cost is one collection of a small
// heap, and refaulting pages the next burst reuses, at most once a second;
// small-msize connections (listings at 64 KiB, the getattr loops) never
// trigger it.
const (
	releaseMsize = 256 << 10
	releaseDelay = time.Second
)

var releasing atomic.Bool

func scheduleRelease() {
	if releasing.CompareAndSwap(false, true) {
		time.AfterFunc(releaseDelay, func() {
			releasing.Store(false)
			// Two collections: p9 keeps read buffers in a sync.Pool,
			// whose contents survive the first GC as its victim cache.
			runtime.GC()
			debug.FreeOSMemory()
		})
	}
}

var errClosed = errors.New("wire: connection closed")

// Close closes the connection and cancels Context. p9 calls it twice (as
// reader and as writer); every call returns the first call's result.
func (c *Conn) Close() error {
	c.shutdown(errClosed)
	return c.closeErr
}
