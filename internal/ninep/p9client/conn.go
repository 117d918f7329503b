package p9client

import (
	"fmt"
	"net"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// maxMessage is the largest msize any 9P2000.L server grants here.
const maxMessage = 4 << 20

// wholeConn is every session's connection. It sends each request with
// one write: the library writes a message as net.Buffers (header, body,
// payload), which reaches a wrapper as one Write per piece: two or three
// syscalls per request, and a server that wakes for a lone 7-byte header.
// Write gathers the pieces of a message and hands the whole to the
// connection underneath as one net.Buffers, which a socket writes with one
// writev and without copying the payload.
type wholeConn struct {
	net.Conn
	out  []byte      // the pieces of the message being written, but its last
	pair [2][]byte   // backing array of vec
	vec  net.Buffers // what WriteTo consumes
}

// Write gathers p9's pieces of one message until the piece that completes
// it, then writes the message in one call. The library writes under its
// send lock, so Writes never overlap.
func (c *wholeConn) Write(p []byte) (int, error) {
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
