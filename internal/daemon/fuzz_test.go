package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// frame builds a 9P message: size[4] type[1] tag[2] body.
func frame(typ byte, tag uint16, body ...[]byte) []byte {
	n := 7
	for _, b := range body {
		n += len(b)
	}
	m := make([]byte, 7, n)
	binary.LittleEndian.PutUint32(m, uint32(n))
	m[4] = typ
	binary.LittleEndian.PutUint16(m[5:], tag)
	for _, b := range body {
		m = append(m, b...)
	}
	return m
}

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func str(s string) []byte { return append(u16(uint16(len(s))), s...) }

func concat(ms ...[]byte) []byte {
	var out []byte
	for _, m := range ms {
		out = append(out, m...)
	}
	return out
}

func testServer(t testing.TB) *Server {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".dsh", "d"), 0o755)
	os.WriteFile(filepath.Join(home, ".dsh", "f"), []byte("hello\n"), 0o644)
	roots := map[string]*saferoot.Root{"dsh": saferoot.New(filepath.Join(home, ".dsh"))}
	return &Server{
		Root: tree.New(tree.Config{Roots: roots, PID: 1, Start: time.Now()}),
		UID:  uint32(os.Getuid()), GID: uint32(os.Getgid()),
	}
}

// socketpair returns the two ends of a connected unix stream pair: the
// server's, which the peer gate can identify, and the client's.
func socketpair(t testing.TB) (srv, cli net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// serveBytes feeds in to one connection of s, as a client that then shuts
// its sending side, and returns what the server replied. The server must
// finish the connection within a bound: no input may wedge it.
func serveBytes(t testing.TB, s *Server, in []byte) []byte {
	srv, cli := socketpair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeConn(t.Context(), srv)
	}()
	go func() {
		cli.Write(in)
		cli.(*net.UnixConn).CloseWrite()
	}()
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, _ := io.ReadAll(cli)
	cli.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("connection not finished 10s after the client hung up; input %x", in)
	}
	return out
}

var seeds = [][]byte{
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
	// The wire layer's fast path: a directory and a file opened (the file
	// with client bits in the token's place), read and listed, the open
	// fid walked over and clunked, then read again.
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

// FuzzConn feeds arbitrary byte streams to a live connection: framing,
// sizes, tags, fids, message types, Tversion games and msize abuse. A
// malformed stream may only end its own connection, promptly, without a
// panic or a stuck goroutine.
func FuzzConn(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	s := testServer(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		serveBytes(t, s, in)
	})
}

// TestSeedsAnswer checks the seed streams do what they were written to do,
// so the fuzz corpus starts from meaningful conversations.
func TestSeedsAnswer(t *testing.T) {
	s := testServer(t)
	// The server handles pipelined requests concurrently, so a walk and
	// the open of its fid may race: play the first seed as a conversation.
	if out := converse(t, s, seeds[0]); !containsRead(out, "hello\n") {
		t.Fatalf("9P2000.L seed did not read the file: %q", out)
	}
	// Pipelined, the replies come in any order (p9 handles requests
	// concurrently), but an Rversion is among them.
	out := serveBytes(t, s, seeds[0])
	if !hasType(out, 101) {
		t.Fatalf("no Rversion: %x", out)
	}
	// A Tflush naming its own tag is answered, and the connection ends
	// when the client hangs up (stock p9 waits for itself forever).
	self := concat(frame(100, 0xffff, u32(8192), str("9P2000.L")), frame(108, 3, u16(3)))
	if out := serveBytes(t, s, self); !bytes.Contains(out, frame(109, 3)) {
		t.Fatalf("self-flush not answered: %x", out)
	}
	// srv9p stops writing at EOF (even the Rversion of a client that
	// half-closes at once), so the 9P2000 seed too is played as a
	// conversation: it must end in an Rread of the directory.
	out = converse(t, s, seeds[2])
	if len(out) < 19 || string(out[13:19]) != "9P2000" || !endsWithType(out, 117) {
		t.Fatalf("9P2000 seed: %q", out)
	}
	out = serveBytes(t, s, seeds[6])
	if len(out) == 0 || string(out[13:]) != "unknown" {
		t.Fatalf("bogus version: %q", out)
	}
	for _, i := range []int{4, 7, 8, 9} {
		if out := serveBytes(t, s, seeds[i]); len(out) != 0 {
			t.Errorf("seed %d: got a reply %x, want the connection closed", i, out)
		}
	}
	// The fast-path seed, as a conversation: the open file is read, the
	// directory listed, and after the fid is walked over (p9 replaces it
	// with an unopened file) and the directory clunked, p9's errors.
	byTag := replies(converse(t, s, seeds[len(seeds)-1]))
	for tag, want := range map[uint16]string{
		4:  "Rreaddir",
		8:  "Rread \"ello\"",
		10: "Rlerror 22", // EINVAL: not open
		12: "Rlerror 9",  // EBADF: clunked
	} {
		if got := byTag[tag]; got != want {
			t.Errorf("fast-path seed, tag %d: %s, want %s", tag, got, want)
		}
	}
}

// replies names each reply in b by its tag: "Rread \"data\"", "Rlerror N",
// "Rreaddir", or "type N".
func replies(b []byte) map[uint16]string {
	out := map[uint16]string{}
	for len(b) >= 7 {
		n := int(binary.LittleEndian.Uint32(b))
		if n < 7 || n > len(b) {
			break
		}
		tag, m := binary.LittleEndian.Uint16(b[5:]), b[:n]
		switch {
		case m[4] == 117 && n >= 11:
			out[tag] = fmt.Sprintf("Rread %q", m[11:])
		case m[4] == 7 && n >= 11:
			out[tag] = fmt.Sprintf("Rlerror %d", binary.LittleEndian.Uint32(m[7:]))
		case m[4] == 41:
			out[tag] = "Rreaddir"
		default:
			out[tag] = fmt.Sprintf("type %d", m[4])
		}
		b = b[n:]
	}
	return out
}

// converse sends the frames of in one at a time, each after the previous
// reply, and returns every reply.
func converse(t testing.TB, s *Server, in []byte) []byte {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	srvf, clif := os.NewFile(uintptr(fds[0]), ""), os.NewFile(uintptr(fds[1]), "")
	srv, _ := net.FileConn(srvf)
	cli, _ := net.FileConn(clif)
	srvf.Close()
	clif.Close()
	done := make(chan struct{})
	go func() { defer close(done); s.ServeConn(t.Context(), srv) }()
	defer func() { cli.Close(); <-done }()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	for len(in) >= 4 {
		n := int(binary.LittleEndian.Uint32(in))
		cli.Write(in[:n])
		in = in[n:]
		var hdr [4]byte
		if _, err := io.ReadFull(cli, hdr[:]); err != nil {
			t.Fatal(err)
		}
		m := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
		copy(m, hdr[:])
		if _, err := io.ReadFull(cli, m[4:]); err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

func hasType(b []byte, typ byte) bool {
	for len(b) >= 7 {
		n := int(binary.LittleEndian.Uint32(b))
		if n < 7 || n > len(b) {
			return false
		}
		if b[4] == typ {
			return true
		}
		b = b[n:]
	}
	return false
}

func endsWithType(b []byte, typ byte) bool {
	var last byte
	for len(b) >= 7 {
		n := int(binary.LittleEndian.Uint32(b))
		if n < 7 || n > len(b) {
			return false
		}
		last, b = b[4], b[n:]
	}
	return last == typ
}

func containsRead(b []byte, s string) bool {
	for len(b) >= 7 {
		n := int(binary.LittleEndian.Uint32(b))
		if n < 7 || n > len(b) {
			return false
		}
		if b[4] == 117 && string(b[11:n]) == s {
			return true
		}
		b = b[n:]
	}
	return false
}
