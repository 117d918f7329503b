package ninep

import (
	"github.com/9harness/9harness/internal/ninep/proto"
)

// A Tversion after the first resets the session: version(5) says it
// aborts all outstanding I/O and frees every fid. srv9p answers it without
// doing either, so the old fids (and their places under gateFids) would
// outlive the session, and a request still in flight would be answered
// into the new one. The gate does the reset in the client's stead: it
// hands srv9p a Tflush for every request in flight and a Tclunk for every
// fid, keeps their replies (and the flushed requests' own) from the
// client, and hands over the Tversion only when srv9p has answered them
// all, so the client's first request of the new session can reuse any fid
// and tag.

// reset queues the reset for the Tversion f and hands srv9p its first
// frame (or, with nothing to undo, f itself).
func (g *gate9) reset(f []byte) error {
	g.mu.Lock()
	var tags []uint16
	for tag := range g.inflight {
		if !g.swallow[tag] {
			tags = append(tags, tag)
		}
	}
	for _, old := range tags {
		g.swallow[old] = true
		g.inject(proto.Tflush, fidOp{}, proto.AppendUint16(nil, old))
	}
	for fid := range g.fids {
		g.clunk(fid)
	}
	g.held = f
	g.mu.Unlock()
	f, _, err := g.resetting()
	if err != nil {
		return err
	}
	if err := g.bounds.take(g.ctx); err != nil {
		return err
	}
	g.cur = f
	return nil
}

// inject queues a frame of the gate's own, under a tag no request in
// flight holds, and keeps its reply from the client. Called with g.mu
// held.
func (g *gate9) inject(typ uint8, op fidOp, body []byte) {
	t := uint16(proto.NoTag - 1)
	for {
		if _, used := g.inflight[t]; !used && !g.swallow[t] {
			break
		}
		t--
	}
	g.swallow[t] = true
	g.inflight[t] = op
	g.queue = append(g.queue, append(proto.AppendHeader(nil, uint32(proto.HeaderSize+len(body)), typ, t), body...))
}

// clunk queues a Tclunk of fid. Called with g.mu held.
func (g *gate9) clunk(fid uint32) {
	g.inject(proto.Tclunk, fidOp{fid: fid, drop: true}, proto.AppendUint32(nil, fid))
}

// resetting returns the next frame of a reset under way, if any: a queued
// frame, or the held Tversion once every kept reply has come.
func (g *gate9) resetting() ([]byte, bool, error) {
	for {
		g.mu.Lock()
		if len(g.queue) > 0 {
			f := g.queue[0]
			g.queue = g.queue[1:]
			g.mu.Unlock()
			return f, true, nil
		}
		f := g.held
		if f != nil && len(g.swallow) == 0 {
			g.held = nil
		}
		waiting := f != nil && g.held != nil
		g.mu.Unlock()
		if !waiting {
			return f, f != nil, nil
		}
		select {
		case <-g.wake:
		case <-g.ctx.Done():
			return nil, false, g.ctx.Err()
		}
	}
}

// kept says whether the reply r is one the gate keeps from the client (a
// reply to its own reset frames, or to a request the reset flushed), and
// forgets it. A flushed request that made a fid anyway (srv9p may finish
// it before the flush) has that fid clunked too. Called with g.mu held,
// after answered.
func (g *gate9) kept(r []byte) bool {
	_, typ, tag := proto.Header(r)
	if !g.swallow[tag] {
		return false
	}
	if g.held != nil && (typ == proto.Rattach || typ == proto.Rwalk) {
		// answered has added the fid the flushed request made, if any;
		// the reset clunks every fid left when the Tversion goes.
		for fid := range g.fids {
			if !g.clunking(fid) {
				g.clunk(fid)
			}
		}
	}
	delete(g.swallow, tag)
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return true
}

// clunking says whether a Tclunk of fid is queued or in flight. Called
// with g.mu held.
func (g *gate9) clunking(fid uint32) bool {
	for t, op := range g.inflight {
		if op.drop && op.fid == fid && g.swallow[t] {
			return true
		}
	}
	return false
}
