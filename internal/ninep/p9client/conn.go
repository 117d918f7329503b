package p9client

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/9harness/9harness/internal/ninep/proto"
)

const (
	firstMax   = 8192    // a Tversion or a Tattach is a few short strings
	maxMessage = 4 << 20 // the largest msize any 9P2000.L server grants here
)

// plainConn is the connection of the second attempt, against a server that
// refused the Google version string. Its first two outgoing messages are
// rewritten; everything else passes through untouched:
//
//   - the Tversion's version string becomes "9P2000.L" (and the size field
//     is recomputed). hugelgupf/p9's NewClient always starts at
//     "9P2000.L.Google.7" and lowers the version only when the server
//     answers EAGAIN, a gVisor convention; a server that refuses a version
//     it does not know (diod: Rlerror EIO) ends the negotiation, and the
//     library has no option to ask for its version 0, which it spells
//     "9P2000.L". The server's Rversion then says "9P2000.L", and the
//     library records version 0 and uses no Google extension.
//   - the Tattach's n_uname, which the library always leaves at "none"
//     (~0, with an empty uname: gVisor's servers take the caller from
//     elsewhere), becomes this process's effective uid, as the Linux
//     kernel's client sends it: a 9P2000.L server such as diod takes the
//     attaching user from n_uname and refuses an attach that names none.
//     (9harnessd judges the peer by its socket credentials and ignores it.)
//
// The library writes a message as its header and its body in separate
// writes on a conn it cannot write vectors to, so each of the two is
// gathered whole before it is rewritten and sent in one write.
type plainConn struct {
	net.Conn
	passing atomic.Bool // both messages have gone out
	seen    int         // messages sent so far, at most 2
	buf     []byte
}

func (c *plainConn) Write(p []byte) (int, error) {
	if c.passing.Load() {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	var out []byte
	for c.seen < 2 && len(c.buf) >= 4 {
		size := int(proto.Uint32(c.buf))
		if size < proto.HeaderSize || size > firstMax {
			return 0, fmt.Errorf("9P client: message %d of %d bytes is not a Tversion or Tattach", c.seen+1, size)
		}
		if len(c.buf) < size {
			break
		}
		msg := c.buf[:size]
		switch {
		case c.seen == 0 && msg[4] == proto.Tversion:
			v, err := proto.ParseVersion(msg, proto.Tversion)
			if err != nil {
				return 0, fmt.Errorf("9P client: the library's Tversion: %w", err)
			}
			msg = plainTversion(v)
		case c.seen == 1 && msg[4] == proto.Tattach:
			msg = attachAsEUID(msg)
		default:
			return 0, fmt.Errorf("9P client: message %d is of type %d, not the Tversion and Tattach a session begins with", c.seen+1, msg[4])
		}
		out = append(out, msg...)
		c.buf = c.buf[size:]
		c.seen++
	}
	if c.seen == 2 {
		out = append(out, c.buf...)
		c.buf = nil
		c.passing.Store(true)
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// plainTversion is the Tversion v with the version string "9P2000.L": the
// same tag and msize.
func plainTversion(v proto.Version) []byte {
	v.Version = proto.Version2000L
	return proto.AppendVersion(nil, proto.Tversion, v)
}

// attachAsEUID is a copy of the Tattach msg (size[4] type[1] tag[2] fid[4]
// afid[4] uname[s] aname[s] n_uname[4]) whose n_uname, if it names no one,
// is the effective uid.
func attachAsEUID(msg []byte) []byte {
	out := append([]byte(nil), msg...)
	if len(out) >= 4 && proto.Uint32(out[len(out)-4:]) == proto.NoUID {
		proto.PutUint32(out[len(out)-4:], uint32(os.Geteuid()))
	}
	return out
}

// msizeConn is every session's connection. It does two things the
// library's own use of a net.Conn cannot:
//
//   - It notes the msize of the server's first message, its Rversion: the
//     library asks for Msize but ignores the msize granted, and would send
//     reads and readdirs of up to 1 MiB to a server that granted less (diod
//     grants 64 KiB and fails larger counts with EIO), so the Client keeps
//     its requests within the grant itself.
//   - It sends each request with one write. The library writes a message
//     as net.Buffers (header, body, payload), which reaches a wrapper as one
//     Write per piece: two or three syscalls per request, and a server that
//     wakes for a lone 7-byte header. Write gathers the pieces of a message
//     and hands the whole to the connection underneath as one net.Buffers,
//     which a socket writes with one writev and without copying the payload.
type msizeConn struct {
	net.Conn
	done  atomic.Bool // the Rversion's msize has been read (or cannot be)
	head  []byte
	msize uint32 // 0: not known

	out  []byte      // the pieces of the message being written, but its last
	pair [2][]byte   // backing array of vec
	vec  net.Buffers // what WriteTo consumes
}

// Write gathers p9's pieces of one message until the piece that completes
// it, then writes the message in one call. The library writes under its
// send lock, so Writes never overlap.
func (c *msizeConn) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if len(c.out) < 4 {
			k := min(4-len(c.out), len(p))
			c.out, p = append(c.out, p[:k]...), p[k:]
			if len(c.out) == 4 {
				if size := proto.Uint32(c.out); size < proto.HeaderSize || size > maxMessage {
					c.out = c.out[:0]
					return total - len(p), fmt.Errorf("9P client: writing a message of %d bytes", size)
				}
			}
			continue
		}
		need := int(proto.Uint32(c.out)) - len(c.out)
		if len(p) < need {
			c.out = append(c.out, p...)
			break
		}
		c.pair = [2][]byte{c.out, p[:need]}
		c.vec = c.pair[:]
		_, err := c.vec.WriteTo(c.Conn)
		c.pair, c.vec = [2][]byte{}, nil // keep no reference to the payload
		c.out, p = c.out[:0], p[need:]
		if err != nil {
			return total - len(p), err
		}
	}
	return total, nil
}

func (c *msizeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.done.Load() {
		c.head = append(c.head, p[:n]...)
		if len(c.head) >= proto.HeaderSize+4 { // size[4] type[1] tag[2] msize[4]
			if c.head[4] == proto.Rversion {
				c.msize = proto.Uint32(c.head[proto.HeaderSize:])
			}
			c.head = nil
			c.done.Store(true)
		}
	}
	return n, err
}

// granted is the msize the server granted, or Msize if it is unknown or
// larger (the library holds to Msize).
func (c *msizeConn) granted() uint32 {
	if !c.done.Load() || c.msize == 0 || c.msize > Msize {
		return Msize
	}
	return c.msize
}
