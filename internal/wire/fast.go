package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/bits"
	"sync"

	"github.com/hugelgupf/p9/linux"
)

// The fast path: Tread and Treaddir on a fid that p9 has opened are
// answered here, in the goroutine that reads the connection, without
// handing the request to p9.
//
// Why: these are the requests that carry bulk data, and p9 v0.4.1 makes
// each one cost more than the data does. Every request hands the receive
// role to another goroutine and back; every Tread takes an msize buffer
// from a pool and copies zeros over it after the reply; every Rreaddir is
// encoded by appending entry after entry into a fresh buffer that grows as
// it goes, which is most of what a large listing allocates. Here a
// Tread is one pread into a pooled buffer and one writev, and a Treaddir is
// one writev of a slice of the listing the directory's File encoded once,
// when the listing began.
//
// How the Conn knows which File a fid has open: p9 owns the fid table and
// exposes nothing of it, and File.Open is not told its fid. So each Tlopen
// carries a token to its File: the Conn writes a small number into the high
// bits of the Tlopen's flags (bits 24-30, with bit 31 marking it), which no
// 9P2000.L open flag uses (P9_DOTL_CLOEXEC, the highest, is bit 19) and
// which p9 passes to File.Open untouched. The File reports what it opened
// with Opened(flags, f); when the Rlopen for that Tlopen is written, the
// Conn binds f to the Tlopen's fid. Bits 24-31 of a client's own Tlopen are
// cleared, so a client cannot forge a token. Two other designs were
// weighed: serialising a connection's Tlopens (one open at a time, so the
// File being opened is unambiguous) costs every client that opens in
// parallel, a kernel mount with several readers; and a fork of p9 to add
// the hooks is a copy of ten thousand lines to carry.
//
// The binding is a cache that is only ever safe to drop: a request on an
// unbound fid goes to p9, which has the truth. So every request that may
// release or rebind a fid drops the binding first (forget), whatever p9
// then makes of it, and a request the Conn is unsure of drops it too.
//
// A fast request is served before the next frame is read, so requests on
// the connection behind it wait for its pread. That is the price of
// answering in order without a goroutine per request, and it is why only
// reads of open files take this path: this tree's are preads of local
// files and copies of snapshots taken at open, and none of them waits.
// The pooled buffers are not zeroed between uses (p9 zeroes its own):
// only the n bytes ReadAt wrote are ever sent.

// FileReader answers a Tread of an open file. ReadAt follows p9.File's
// conventions: io.EOF (or 0, nil) at the end, and any other error carries
// its errno as linux.ExtractErrno finds it.
type FileReader interface {
	ReadAt(p []byte, off int64) (int, error)
}

// DirReader answers a Treaddir of an open directory: the entries from
// offset, already in wire form (qid[13] offset[8] type[1] name[s] each), as
// many whole entries as fit in count bytes. The Conn writes the slice
// before the next request on the connection is read, and does not keep it.
type DirReader interface {
	ReaddirWire(offset uint64, count uint32) ([]byte, error)
}

const (
	msgRlopen   = 13
	msgTreaddir = 40
	msgRreaddir = 41
	msgRread    = 117

	tokMark  = 1 << 31
	tokShift = 24
	tokBits  = 0xff << tokShift // cleared from every client's Tlopen flags
	nTokens  = 128
)

// openReq is a Tlopen in flight: its fid, and the token its flags carry
// (-1: none).
type openReq struct {
	fid   uint32
	tok   int
	stale bool // a later request rebound fid: do not bind it
}

// Opened tells the Conn that the Tlopen whose flags are flags opened f, a
// FileReader or a DirReader. The File's Open calls it before it returns;
// flags without a token (every Tlopen when the tokens are used up, and any
// File not opened through a Conn) are ignored.
func (c *Conn) Opened(flags uint32, f any) {
	if flags&tokMark == 0 {
		return
	}
	tok := int(flags>>tokShift) & (nTokens - 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.toks[tok/64]&(1<<(tok%64)) != 0 {
		c.pending[tok] = f
	}
}

// token marks the Tlopen frame f (tag, in flight, already registered by
// afterOpen) with a free token, and clears any bits of the client's in the
// token's place. It returns the frame to hand to p9.
func (c *Conn) token(f []byte, tag uint16) []byte {
	flags := binary.LittleEndian.Uint32(f[11:])
	c.mu.Lock()
	tok := -1
	if req, ok := c.openTag[tag]; ok && !c.closed {
		for i, w := range c.toks {
			if w != math.MaxUint64 {
				tok = i*64 + bits.TrailingZeros64(^w)
				c.toks[i] |= 1 << (tok % 64)
				break
			}
		}
		req.tok = tok
		c.openTag[tag] = req
	}
	c.mu.Unlock()
	if tok < 0 && flags&tokBits == 0 {
		return f
	}
	f = c.rewrite(f)
	flags &^= tokBits
	if tok >= 0 {
		flags |= tokMark | uint32(tok)<<tokShift
	}
	binary.LittleEndian.PutUint32(f[11:], flags)
	return f
}

// opened settles the token of the Tlopen tag when its reply, of type typ,
// is written: on Rlopen the File reported becomes the fid's. Called with mu
// held.
func (c *Conn) opened(typ uint8, req openReq) {
	if req.tok < 0 {
		return
	}
	f := c.pending[req.tok]
	c.pending[req.tok] = nil
	c.toks[req.tok/64] &^= 1 << (req.tok % 64)
	if typ == msgRlopen && f != nil && !req.stale {
		c.fast[req.fid] = f
		c.nFast.Store(int32(len(c.fast)))
	}
}

// forget drops the binding of every fid the request may release or
// rebind, before p9 sees it. Requests that only use a fid keep it; for any
// other type both fid fields a request can have (offsets 7 and 11) are
// dropped, so a type added later errs on the safe side.
func (c *Conn) forget(typ uint8, size uint32) error {
	var at []int
	switch typ {
	case msgTread, msgTreaddir, msgTflush, msgTauth, msgTlopen,
		24,  // Tgetattr
		8,   // Tstatfs
		22,  // Treadlink
		50,  // Tfsync
		118, // Twrite
		52,  // Tlock
		54:  // Tgetlock
		return nil
	case msgTversion:
		c.mu.Lock()
		clear(c.fast)
		c.nFast.Store(0)
		c.mu.Unlock()
		return nil
	case 110, 30: // Twalk, Txattrwalk: fid[4] newfid[4]; only newfid is (re)bound
		at = []int{11}
	default:
		at = []int{7, 11}
	}
	h, err := c.br.Peek(min(int(size), hdrLen+8))
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, o := range at {
		if o+4 > len(h) {
			continue
		}
		fid := binary.LittleEndian.Uint32(h[o:])
		delete(c.fast, fid)
		for tag, req := range c.openTag {
			if req.fid == fid && !req.stale {
				req.stale = true
				c.openTag[tag] = req
			}
		}
	}
	c.nFast.Store(int32(len(c.fast)))
	c.mu.Unlock()
	return nil
}

// serveFast answers the Tread or Treaddir frame f if its fid is bound. It
// reports whether it did (the frame is then consumed).
func (c *Conn) serveFast(typ uint8, tag uint16, f []byte) (bool, error) {
	if len(f) < hdrLen+16 { // fid[4] offset[8] count[4]: both types
		return false, nil
	}
	fid := binary.LittleEndian.Uint32(f[7:])
	off := binary.LittleEndian.Uint64(f[11:])
	count := binary.LittleEndian.Uint32(f[19:])
	c.mu.Lock()
	x := c.fast[fid]
	_, dup := c.inflight[tag] // p9 drops a duplicate tag: so must we
	c.mu.Unlock()
	if x == nil || dup {
		return false, nil
	}
	r, isFile := x.(FileReader)
	d, isDir := x.(DirReader)
	if (typ == msgTread && !isFile) || (typ == msgTreaddir && !isDir) {
		return false, nil
	}
	if _, err := c.br.Discard(len(f)); err != nil {
		return true, err
	}
	c.nFastServed.Add(1)
	if typ == msgTread {
		return true, c.fastRead(tag, r, off, count)
	}
	return true, c.fastList(tag, d, off, count)
}

// clampCount lowers a Tread's or Treaddir's count to what fits in an
// Rread of p9's msize (counted in Stats.ReadClamped), as next does for the
// Treads it hands to p9.
func (c *Conn) clampCount(count uint32) uint32 {
	if lim := c.readLimit(); count > lim {
		c.nClamp.Add(1)
		return lim
	}
	return count
}

// fastList answers a Treaddir with the DirReader's window, its count
// clamped.
func (c *Conn) fastList(tag uint16, d DirReader, off uint64, count uint32) error {
	ents, err := d.ReaddirWire(off, c.clampCount(count))
	if err != nil && !errors.Is(err, io.EOF) {
		return c.fastErr(tag, err)
	}
	return c.fastReply(msgRreaddir, tag, ents)
}

// fastRead answers a Tread: count is clamped to what p9 would serve
// (msize-11), the data is read into a pooled buffer and written from it.
func (c *Conn) fastRead(tag uint16, r FileReader, off uint64, count uint32) error {
	count = c.clampCount(count)
	if off > math.MaxInt64 {
		return c.fastErr(tag, linux.EINVAL)
	}
	bp := getBuf(int(count))
	defer putBuf(bp)
	n, err := r.ReadAt((*bp)[:count], int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return c.fastErr(tag, err)
	}
	return c.fastReply(msgRread, tag, (*bp)[:n])
}

// fastReply writes an Rread or Rreaddir: the header, count[4], data.
func (c *Conn) fastReply(typ uint8, tag uint16, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	h := c.fhdr[:]
	binary.LittleEndian.PutUint32(h, uint32(rreadHdr+len(data)))
	h[4] = typ
	binary.LittleEndian.PutUint16(h[5:], tag)
	binary.LittleEndian.PutUint32(h[7:], uint32(len(data)))
	bufs := append(c.vecs[:0], h)
	if len(data) > 0 {
		bufs = append(bufs, data)
	}
	return c.writeVec(bufs)
}

// fastErr writes the Rlerror p9 would have written for err.
func (c *Conn) fastErr(tag uint16, err error) error {
	var body [4]byte
	binary.LittleEndian.PutUint32(body[:], uint32(linux.ExtractErrno(err)))
	return c.answer(msgRlerror, tag, body[:])
}

// Read buffers of the fast path, pooled by size class (4 KiB << i, up to
// 4 MiB): only one is in use per connection at a time, for the length of
// one pread and one writev.
var bufPools [11]sync.Pool

func bufClass(n int) int {
	if n <= 4096 {
		return 0
	}
	return min(bits.Len(uint(n-1))-12, len(bufPools)-1)
}

func getBuf(n int) *[]byte {
	k := bufClass(n)
	if b, ok := bufPools[k].Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, max(4096<<k, n))
	return &b
}

func putBuf(b *[]byte) {
	bufPools[bufClass(cap(*b))].Put(b)
}
