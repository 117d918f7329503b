// Package ninetest builds raw 9P frames for tests, and holds the seed
// conversations of the FuzzConn corpus, which the daemon's leak test
// replays too.
package ninetest

import (
	"github.com/9harness/9harness/internal/ninep/proto"
)

// Frame builds a 9P message: size[4] type[1] tag[2] body.
func Frame(typ byte, tag uint16, body ...[]byte) []byte {
	n := proto.HeaderSize
	for _, b := range body {
		n += len(b)
	}
	m := proto.AppendHeader(make([]byte, 0, n), uint32(n), typ, tag)
	for _, b := range body {
		m = append(m, b...)
	}
	return m
}

// U16 is a 2-byte field.
func U16(v uint16) []byte { return proto.AppendUint16(nil, v) }

// U32 is a 4-byte field.
func U32(v uint32) []byte { return proto.AppendUint32(nil, v) }

// U64 is an 8-byte field.
func U64(v uint64) []byte { return proto.AppendUint64(nil, v) }

// Str is a string field.
func Str(s string) []byte { return proto.AppendString(nil, s) }

// Concat joins messages into one stream.
func Concat(ms ...[]byte) []byte {
	var out []byte
	for _, m := range ms {
		out = append(out, m...)
	}
	return out
}

// Seeds are the FuzzConn seed streams, over a tree holding dsh/f
// ("hello\n") and the directory dsh/d. Tests index them: keep the order.
func Seeds() [][]byte {
	frame, u16, u32, u64, str, concat := Frame, U16, U32, U64, Str, Concat
	return [][]byte{
		// 9P2000.L: version, attach, walk to f, open, read, clunk.
		concat(frame(100, 0xffff, u32(65536), str("9P2000.L")),
			frame(104, 1, u32(0), u32(^uint32(0)), str(""), str(""), u32(0)),
			frame(110, 2, u32(0), u32(1), u16(2), str("dsh"), str("f")),
			frame(12, 3, u32(1), u32(0)),
			frame(116, 4, u32(1), u64(0), u32(1<<30)),
			frame(120, 5, u32(1))),
		// Tauth, Tflush of a tag not in flight, Treaddir.
		concat(frame(100, 0xffff, u32(8192), str("9P2000.L")),
			frame(102, 1, u32(5), str("u"), str(""), u32(0)),
			frame(104, 2, u32(0), u32(^uint32(0)), str(""), str(""), u32(0)),
			frame(108, 3, u16(77)),
			frame(12, 4, u32(0), u32(0)),
			frame(40, 5, u32(0), u64(0), u32(8192))),
		// Plain 9P2000: version, attach, walk "..", stat, open, read.
		concat(frame(100, 0xffff, u32(8192), str("9P2000")),
			frame(104, 1, u32(0), u32(^uint32(0)), str("glenda"), str("")),
			frame(110, 2, u32(0), u32(1), u16(2), str(".."), str("dsh")),
			frame(124, 3, u32(1)),
			frame(112, 4, u32(1), []byte{0}),
			frame(116, 5, u32(1), u64(0), u32(8192))),
		// Version games: a second Tversion, a huge msize, a tiny one.
		concat(frame(100, 0xffff, u32(1<<31), str("9P2000.L")), frame(100, 0xffff, u32(4096), str("9P2000.L"))),
		frame(100, 0xffff, u32(100), str("9P2000")),
		frame(100, 0xffff, u32(8192), str("9P2000.u")),
		frame(100, 0xffff, u32(8192), str("bogus")),
		[]byte("\xff\xff\xff\xff"),
		[]byte{0, 0, 0, 0, 100},
		nil,
		// The p9 fork's read paths: a directory and a file opened (the file
		// with high open-flag bits set, which once carried a token), read and
		// listed, the open fid walked over and clunked, then read again.
		concat(frame(100, 0xffff, u32(65536), str("9P2000.L")),
			frame(104, 1, u32(0), u32(^uint32(0)), str(""), str(""), u32(0)),
			frame(110, 2, u32(0), u32(1), u16(1), str("dsh")),
			frame(12, 3, u32(1), u32(0)),
			frame(40, 4, u32(1), u64(0), u32(8192)),
			frame(40, 5, u32(1), u64(1), u32(30)),
			frame(110, 6, u32(0), u32(2), u16(2), str("dsh"), str("f")),
			frame(12, 7, u32(2), u32(0xff008000)),
			frame(116, 8, u32(2), u64(1), u32(4)),
			frame(110, 9, u32(0), u32(2), u16(1), str("dsh")),
			frame(116, 10, u32(2), u64(0), u32(4)),
			frame(120, 11, u32(1)),
			frame(40, 12, u32(1), u64(0), u32(8192))),
	}
}
