package ninep

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/ninep/ninetest"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

var (
	frame  = ninetest.Frame
	u16    = ninetest.U16
	u32    = ninetest.U32
	u64    = ninetest.U64
	str    = ninetest.Str
	concat = ninetest.Concat
	seeds  = ninetest.Seeds()
)

// testConn is a connection's configuration over a home holding dsh/f
// ("hello\n") and the directory dsh/d.
func testConn(t testing.TB) Conn {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".dsh", "d"), 0o755)
	os.WriteFile(filepath.Join(home, ".dsh", "f"), []byte("hello\n"), 0o644)
	roots := map[string]*saferoot.Root{"dsh": saferoot.New(filepath.Join(home, ".dsh"))}
	return Conn{
		Root: tree.New(tree.Config{Roots: roots, PID: 1, Start: time.Now()}),
		UID:  uint32(os.Getuid()), GID: uint32(os.Getgid()), Owner: "u",
		MaxMsize: 1 << 20,
	}
}

// serveConn serves c as the daemon does, and closes it.
func serveConn(t testing.TB, cfg Conn, c net.Conn) {
	defer c.Close()
	Serve(t.Context(), c, cfg)
}

// connPair returns the two ends of a connected unix stream pair: the
// server's and the client's.
func connPair(t testing.TB) (srv, cli net.Conn) {
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

// serveBytes feeds in to one connection, as a client that then shuts its
// sending side, and returns what the server replied. The server must
// finish the connection within a bound: no input may wedge it.
func serveBytes(t testing.TB, cfg Conn, in []byte) []byte {
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveConn(t, cfg, srv)
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

// FuzzConn feeds arbitrary byte streams to a live connection: framing,
// sizes, tags, fids, message types, Tversion games and msize abuse. A
// malformed stream may only end its own connection, promptly, without a
// panic or a stuck goroutine.
func FuzzConn(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	cfg := testConn(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		serveBytes(t, cfg, in)
	})
}

// TestSeedsAnswer checks the seed streams do what they were written to do,
// so the fuzz corpus starts from meaningful conversations.
func TestSeedsAnswer(t *testing.T) {
	s := testConn(t)
	// The server handles pipelined requests concurrently, so a walk and
	// the open of its fid may race: play the first seed as a conversation.
	if out := converse(t, s, seeds[0]); !containsRead(out, "hello\n") {
		t.Fatalf("9P2000.L seed did not read the file: %q", out)
	}
	// Pipelined, the replies come in any order (p9 handles requests
	// concurrently), but an Rversion is among them.
	out := serveBytes(t, s, seeds[0])
	if !hasType(out, proto.Rversion) {
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
	if len(out) < 19 || string(out[13:19]) != "9P2000" || !endsWithType(out, proto.Rread) {
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
	for len(b) >= proto.HeaderSize {
		n := int(proto.Uint32(b))
		if n < proto.HeaderSize || n > len(b) {
			break
		}
		tag, m := proto.Uint16(b[5:]), b[:n]
		switch {
		case m[4] == proto.Rread && n >= proto.RreadHeaderSize:
			out[tag] = fmt.Sprintf("Rread %q", m[proto.RreadHeaderSize:])
		case m[4] == proto.Rlerror && n >= 11:
			out[tag] = fmt.Sprintf("Rlerror %d", proto.Uint32(m[7:]))
		case m[4] == proto.Rreaddir:
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
func converse(t testing.TB, s Conn, in []byte) []byte {
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, s, srv) }()
	defer func() { cli.Close(); <-done }()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	for len(in) >= 4 {
		n := int(proto.Uint32(in))
		cli.Write(in[:n])
		in = in[n:]
		m, err := proto.ReadFrame(cli, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// frames splits a stream of whole messages; it stops at the first that
// is not whole.
func frames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= proto.HeaderSize {
		n := int(proto.Uint32(b))
		if n < proto.HeaderSize || n > len(b) {
			break
		}
		out, b = append(out, b[:n]), b[n:]
	}
	return out
}

func hasType(b []byte, typ byte) bool {
	for _, m := range frames(b) {
		if m[4] == typ {
			return true
		}
	}
	return false
}

func endsWithType(b []byte, typ byte) bool {
	fs := frames(b)
	return len(fs) > 0 && fs[len(fs)-1][4] == typ
}

func containsRead(b []byte, s string) bool {
	for _, m := range frames(b) {
		if m[4] == proto.Rread && len(m) >= proto.RreadHeaderSize && string(m[proto.RreadHeaderSize:]) == s {
			return true
		}
	}
	return false
}
