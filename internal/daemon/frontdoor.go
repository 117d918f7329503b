package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The front door reads exactly the first message of a connection, after the
// peer gate, and picks the server by the version the client asks for: one
// socket serves 9P2000.L (hugelgupf/p9) and plain 9P2000 (srv9p), so the
// Plan 9 tooling (plan9port's 9p, 9pfuse) and
// the Linux tooling (v9fs, diod's clients) reach the same tree.
const (
	firstTimeout = 5 * time.Second
	firstMax     = 8192 // a Tversion is 13 bytes plus the version string
	minMsize     = 4096 // below this, srv9p's count clamp underflows
	tversion     = 100
	rversion     = 101
)

var errFirst = errors.New("first message is not a well-formed Tversion")

// readFirst reads one whole message within firstTimeout.
func readFirst(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(firstTimeout))
	defer c.SetReadDeadline(time.Time{})
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size < 13 || size > firstMax {
		return nil, fmt.Errorf("%w: size %d", errFirst, size)
	}
	msg := make([]byte, size)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(c, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// parseTversion returns the tag, msize and version of a Tversion.
func parseTversion(m []byte) (tag uint16, msize uint32, version string, err error) {
	if len(m) < 13 || m[4] != tversion {
		return 0, 0, "", errFirst
	}
	tag = binary.LittleEndian.Uint16(m[5:])
	msize = binary.LittleEndian.Uint32(m[7:])
	n := int(binary.LittleEndian.Uint16(m[11:]))
	if 13+n != len(m) {
		return 0, 0, "", errFirst
	}
	return tag, msize, string(m[13:]), nil
}

func rversionMsg(tag uint16, msize uint32, version string) []byte {
	b := make([]byte, 13+len(version))
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	b[4] = rversion
	binary.LittleEndian.PutUint16(b[5:], tag)
	binary.LittleEndian.PutUint32(b[7:], msize)
	binary.LittleEndian.PutUint16(b[11:], uint16(len(version)))
	copy(b[13:], version)
	return b
}

type dialect int

const (
	dialectNone dialect = iota
	dialectL
	dialect2000
)

func pick(version string) dialect {
	switch {
	case strings.HasPrefix(version, "9P2000.L"):
		return dialectL
	case version == "9P2000" || strings.HasPrefix(version, "9P2000.u"):
		return dialect2000
	}
	return dialectNone
}

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
