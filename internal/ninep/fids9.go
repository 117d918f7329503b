package ninep

import (
	"time"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// gateFids bounds the fids of one 9P2000 connection; a Tattach or Twalk
// that would make one more is answered "too many open files" by the gate
// and never reaches srv9p, which has no bound of its own (200,000 Twalks
// took the daemon past 1.6 GB). plan9port's 9pfuse holds a fid per file
// the kernel has looked up until it forgets it, so a whole listing of the
// largest mirrored directory (10,000 transcripts in the bench) must fit;
// a fid costs srv9p's Fid, the adapter's state and the gate's entry, a
// few hundred bytes, so the cap holds a few MiB.
const gateFids = 16384

// The gate's own refusals, in the spellings clients map to an errno.
const (
	errTooManyFids = "too many open files"
	errDupTag      = "duplicate tag"
)

// fidOp is what the gate remembers of a request in flight: the fid it
// creates (a Tattach's fid, a Twalk's newfid) or drops (Tclunk, Tremove),
// so that the fid set follows the replies.
type fidOp struct {
	fid    uint32
	create bool
	drop   bool
	nwname uint16 // a Twalk's: the newfid exists only if every name walked
}

// admit decides on the request f before srv9p sees it. It returns the
// error to answer it with instead, if any, and otherwise records it as in
// flight. Called with g.mu held.
func (g *gate9) admit(f []byte) (refuse string) {
	size, typ, tag := proto.Header(f)
	if _, dup := g.inflight[tag]; dup {
		// srv9p answers a duplicate tag itself, but its reply would
		// read as the first request's to the accounting below.
		return errDupTag
	}
	var op fidOp
	switch {
	case typ == proto.Tattach && size >= 11:
		op = fidOp{fid: proto.Uint32(f[7:]), create: true}
	case typ == proto.Twalk && size >= 17:
		if fid, newfid := proto.Uint32(f[7:]), proto.Uint32(f[11:]); newfid != fid {
			op = fidOp{fid: newfid, create: true, nwname: proto.Uint16(f[15:])}
		}
	case (typ == proto.Tclunk || typ == proto.Tremove) && size >= 11:
		op = fidOp{fid: proto.Uint32(f[7:]), drop: true}
	}
	if op.create {
		if _, live := g.fids[op.fid]; live {
			op.create = false // srv9p refuses a fid in use
		} else if len(g.fids)+g.creating >= g.maxFids {
			return errTooManyFids
		} else {
			g.creating++
		}
	}
	g.inflight[tag] = op
	g.idleCheck()
	return ""
}

// answered accounts for the reply r, written by srv9p. Called with g.mu
// held.
func (g *gate9) answered(r []byte) {
	_, typ, tag := proto.Header(r)
	op, ok := g.inflight[tag]
	if !ok {
		return
	}
	delete(g.inflight, tag)
	g.idleCheck()
	switch {
	case op.create:
		g.creating--
		if typ == proto.Rattach || (typ == proto.Rwalk && len(r) >= 9 && proto.Uint16(r[7:]) == op.nwname) {
			g.fids[op.fid] = struct{}{}
		}
	case op.drop:
		// srv9p drops the fid whatever the reply says.
		delete(g.fids, op.fid)
	}
}

// idleCheck arms the idle timeout when nothing is in flight, and disarms
// it while something is. Called with g.mu held, whenever inflight changes,
// so that the deadline always follows the last change.
func (g *gate9) idleCheck() {
	if g.idle <= 0 || g.conn == nil {
		return
	}
	if len(g.inflight) == 0 {
		g.conn.SetReadDeadline(time.Now().Add(g.idle))
	} else {
		g.conn.SetReadDeadline(time.Time{})
	}
}

// rerror is an Rerror frame answering tag with msg.
func rerror(tag uint16, msg string) []byte {
	return proto.AppendString(proto.AppendHeader(nil, uint32(proto.HeaderSize+2+len(msg)), proto.Rerror, tag), msg)
}
