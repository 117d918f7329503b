// Package proto is the 9P wire format both dialects share: message types,
// header layout, little-endian fields, framing, and the Tversion/Rversion
// exchange that opens every session and picks the dialect. The servers
// (internal/ninep) and the client (internal/client) read and build frames
// only through it, so each message type is numbered in one place.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Message types. 9P2000 and 9P2000.L share the numbers from 100 up;
// 9P2000.L adds the ones below 100 and never sends Ropen, Rcreate,
// Rerror or the stat messages.
const (
	Tlerror      = 6 // never sent; its R is how 9P2000.L answers with an errno
	Rlerror      = 7
	Tstatfs      = 8
	Rstatfs      = 9
	Tlopen       = 12
	Rlopen       = 13
	Tlcreate     = 14
	Rlcreate     = 15
	Tsymlink     = 16
	Rsymlink     = 17
	Tmknod       = 18
	Rmknod       = 19
	Trename      = 20
	Rrename      = 21
	Treadlink    = 22
	Rreadlink    = 23
	Tgetattr     = 24
	Rgetattr     = 25
	Tsetattr     = 26
	Rsetattr     = 27
	Txattrwalk   = 30
	Rxattrwalk   = 31
	Txattrcreate = 32
	Rxattrcreate = 33
	Treaddir     = 40
	Rreaddir     = 41
	Tfsync       = 50
	Rfsync       = 51
	Tlock        = 52
	Rlock        = 53
	Tgetlock     = 54
	Rgetlock     = 55
	Tlink        = 70
	Rlink        = 71
	Tmkdir       = 72
	Rmkdir       = 73
	Trenameat    = 74
	Rrenameat    = 75
	Tunlinkat    = 76
	Runlinkat    = 77

	Tversion = 100
	Rversion = 101
	Tauth    = 102
	Rauth    = 103
	Tattach  = 104
	Rattach  = 105
	Terror   = 106 // never sent
	Rerror   = 107
	Tflush   = 108
	Rflush   = 109
	Twalk    = 110
	Rwalk    = 111
	Topen    = 112
	Ropen    = 113
	Tcreate  = 114
	Rcreate  = 115
	Tread    = 116
	Rread    = 117
	Twrite   = 118
	Rwrite   = 119
	Tclunk   = 120
	Rclunk   = 121
	Tremove  = 122
	Rremove  = 123
	Tstat    = 124
	Rstat    = 125
	Twstat   = 126
	Rwstat   = 127
)

// Header layout and the values that mean "none".
const (
	// HeaderSize is size[4] type[1] tag[2], the start of every message.
	HeaderSize = 7
	// RreadHeaderSize is an Rread's header plus its count[4]; the data
	// follows.
	RreadHeaderSize = HeaderSize + 4
	// VersionFixedSize is a Tversion's or Rversion's header, msize[4]
	// and the version string's length[2]; the string follows.
	VersionFixedSize = HeaderSize + 4 + 2
	NoTag            = 0xFFFF
	NoFid            = ^uint32(0)
	// NoUID is 9P2000.L's n_uname of no one.
	NoUID = ^uint32(0)
)

// Version strings.
const (
	Version2000  = "9P2000"
	Version2000L = "9P2000.L"
	// VersionUnknown is the Rversion of a version the server does not
	// speak; 9P says the client then gives up.
	VersionUnknown = "unknown"
)

// Uint16 and the functions beside it read and write 9P's little-endian
// fields, so that no other package spells the byte order.
func Uint16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// Uint32 reads a 4-byte field.
func Uint32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// Uint64 reads an 8-byte field.
func Uint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// PutUint16 writes a 2-byte field.
func PutUint16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

// PutUint32 writes a 4-byte field.
func PutUint32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

// PutUint64 writes an 8-byte field.
func PutUint64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// AppendUint16 appends a 2-byte field.
func AppendUint16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }

// AppendUint32 appends a 4-byte field.
func AppendUint32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// AppendUint64 appends an 8-byte field.
func AppendUint64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// AppendString appends a string field: length[2] then the bytes.
func AppendString(b []byte, s string) []byte {
	return append(AppendUint16(b, uint16(len(s))), s...)
}

// Header is the start of a message. f must hold HeaderSize bytes.
func Header(f []byte) (size uint32, typ uint8, tag uint16) {
	return Uint32(f), f[4], Uint16(f[5:])
}

// AppendHeader appends a header for a message of size bytes in all.
func AppendHeader(b []byte, size uint32, typ uint8, tag uint16) []byte {
	return AppendUint16(append(AppendUint32(b, size), typ), tag)
}

// ErrFrame is a frame whose size field is out of bounds.
var ErrFrame = errors.New("9P frame size out of bounds")

// ReadFrame reads one whole message of at most max bytes. A size below
// HeaderSize or above max is an error wrapping ErrFrame: the stream can
// no longer be framed.
func ReadFrame(r io.Reader, max uint32) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := Uint32(hdr[:])
	if size < HeaderSize || size > max {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrFrame, size, max)
	}
	f := make([]byte, size)
	copy(f, hdr[:])
	if _, err := io.ReadFull(r, f[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return f, nil
}

// Version is the body of a Tversion or an Rversion.
type Version struct {
	Tag     uint16
	Msize   uint32
	Version string
}

// ErrVersion is a message that is not the well-formed version message
// expected.
var ErrVersion = errors.New("not a well-formed version message")

// ParseVersion reads the whole message f, which must be of type typ
// (Tversion or Rversion) and hold exactly one version string.
func ParseVersion(f []byte, typ uint8) (Version, error) {
	if len(f) < VersionFixedSize || f[4] != typ || int(Uint32(f)) != len(f) {
		return Version{}, ErrVersion
	}
	n := int(Uint16(f[11:]))
	if VersionFixedSize+n != len(f) {
		return Version{}, ErrVersion
	}
	return Version{Tag: Uint16(f[5:]), Msize: Uint32(f[7:]), Version: string(f[VersionFixedSize:])}, nil
}

// AppendVersion appends a Tversion or Rversion (typ) carrying v.
func AppendVersion(b []byte, typ uint8, v Version) []byte {
	b = AppendHeader(b, uint32(VersionFixedSize+len(v.Version)), typ, v.Tag)
	return AppendString(AppendUint32(b, v.Msize), v.Version)
}

// Dialect is what a session speaks, chosen by the client's Tversion.
type Dialect int

const (
	DialectNone  Dialect = iota // a version the server does not speak
	Dialect2000L                // 9P2000.L, and its extensions
	Dialect2000                 // plain 9P2000, and 9P2000.u served as it
)

// Pick is the dialect a server speaking both answers a Tversion of
// version with. 9P2000.u is served as plain 9P2000: the Rversion says
// "9P2000" and the client falls back.
func Pick(version string) Dialect {
	switch {
	case strings.HasPrefix(version, Version2000L):
		return Dialect2000L
	case version == Version2000 || strings.HasPrefix(version, "9P2000.u"):
		return Dialect2000
	}
	return DialectNone
}
