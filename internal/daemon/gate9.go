package daemon

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
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
// The internal/wire wrapper does the same for 9P2000.L (p9's Tlopen race);
// the two sides do not share it because srv9p reads and writes the
// connection itself, through this reader and writer.
type gate9 struct {
	in   io.ReadCloser
	out  io.WriteCloser
	ctx  context.Context
	max  uint32
	cur  []byte // the rest of the frame being handed to srv9p
	hdr  [4]byte
	mu   sync.Mutex
	busy map[uint32]chan struct{} // fid -> closed when its setup's reply is written
	tags map[uint16]setup         // setup request's tag -> what it sets up
}

// setup is a request that sets a fid up, until its reply is written.
type setup struct {
	fid  uint32
	done chan struct{}
}

// The 9P2000 request types the gate reads.
const (
	t9version = 100
	t9auth    = 102
	t9attach  = 104
	t9flush   = 108
	t9walk    = 110
	t9open    = 112
	t9create  = 114
)

func newGate9(ctx context.Context, in io.ReadCloser, out io.WriteCloser, max uint32) *gate9 {
	return &gate9{in: in, out: out, ctx: ctx, max: max, busy: map[uint32]chan struct{}{}, tags: map[uint16]setup{}}
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
	if _, err := io.ReadFull(g.in, g.hdr[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(g.hdr[:])
	if size < 7 || size > g.max {
		return fmt.Errorf("9P2000 frame of %d bytes", size)
	}
	f := make([]byte, size)
	copy(f, g.hdr[:])
	if _, err := io.ReadFull(g.in, f[4:]); err != nil {
		return err
	}
	typ, tag := f[4], binary.LittleEndian.Uint16(f[5:])
	if typ != t9version && typ != t9auth && typ != t9flush && size >= 11 {
		if err := g.wait(binary.LittleEndian.Uint32(f[7:])); err != nil {
			return err
		}
		fid, ok := binary.LittleEndian.Uint32(f[7:]), typ == t9attach || typ == t9open || typ == t9create
		if typ == t9walk && size >= 15 {
			fid, ok = binary.LittleEndian.Uint32(f[11:]), true
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
// lock) and releases the fid its request was setting up.
func (g *gate9) Write(p []byte) (int, error) {
	n, err := g.out.Write(p)
	if len(p) >= 7 {
		tag := binary.LittleEndian.Uint16(p[5:])
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

// Close closes the connection (through the replay, which also cancels
// the gate's context); srv9p may call it as reader and as writer.
func (g *gate9) Close() error { return g.in.Close() }
