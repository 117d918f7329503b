package p9client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// fakeDiod is a 9P2000.L server that refuses a Tversion as diod does (its
// reply to anything but exactly "9P2000.L" is Rlerror EIO, and it keeps the
// connection open), grants msize 65536, and answers a Tattach (recording
// its aname and n_uname) and Tclunks.
type fakeDiod struct {
	mu       sync.Mutex
	versions []string // every Tversion's version string, in order
	anames   []string
	nunames  []uint32
}

func (f *fakeDiod) serve(t *testing.T, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go f.conn(t, c)
	}
}

func readMsg(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := proto.Uint32(hdr[:])
	if size < 7 || size > 1<<20 {
		return nil, fmt.Errorf("size %d", size)
	}
	m := make([]byte, size)
	copy(m, hdr[:])
	_, err := io.ReadFull(r, m[4:])
	return m, err
}

func reply(typ byte, tag []byte, body ...byte) []byte {
	m := make([]byte, 7, 7+len(body))
	proto.PutUint32(m, uint32(7+len(body)))
	m[4] = typ
	copy(m[5:7], tag)
	return append(m, body...)
}

func str(b []byte) (string, []byte) {
	n := int(proto.Uint16(b))
	return string(b[2 : 2+n]), b[2+n:]
}

func (f *fakeDiod) conn(t *testing.T, c net.Conn) {
	defer c.Close()
	for {
		m, err := readMsg(c)
		if err != nil {
			return
		}
		tag := m[5:7]
		var out []byte
		switch m[4] {
		case 100: // Tversion
			v, _ := str(m[11:])
			f.mu.Lock()
			f.versions = append(f.versions, v)
			f.mu.Unlock()
			if v != proto.Version2000L {
				out = reply(7, tag, 5, 0, 0, 0) // Rlerror EIO
				break
			}
			body := proto.AppendUint32(nil, 65536)
			body = proto.AppendUint16(body, uint16(len(v)))
			out = reply(101, tag, append(body, v...)...)
		case 104: // Tattach: fid[4] afid[4] uname[s] aname[s] n_uname[4]
			_, rest := str(m[15:])
			aname, rest := str(rest)
			f.mu.Lock()
			f.anames = append(f.anames, aname)
			f.nunames = append(f.nunames, proto.Uint32(rest))
			f.mu.Unlock()
			qid := make([]byte, 13)
			qid[0] = 0x80 // a directory
			out = reply(105, tag, qid...)
		case 120: // Tclunk
			out = reply(121, tag)
		default:
			out = reply(7, tag, 95, 0, 0, 0) // EOPNOTSUPP
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// TestFallbackToPlain9P2000L: against a server that refuses the Google
// version string as diod does, Dial asks for it first, then redials and
// negotiates plain "9P2000.L", attaches the aname as this process's uid and
// keeps its requests within the msize granted.
func TestFallbackToPlain9P2000L(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := &fakeDiod{}
	go f.serve(t, ln)

	c, err := Dial(func() (net.Conn, error) { return net.Dial("unix", sock) }, "/srv/export")
	if err != nil {
		t.Fatalf("Dial against a server that takes only %q: %v", proto.Version2000L, err)
	}
	if got := c.Msize(); got != 65536 {
		t.Errorf("Msize() = %d, want the 65536 granted", got)
	}
	c.Close()

	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{p9.HighestVersionString(), proto.Version2000L}
	if fmt.Sprint(f.versions) != fmt.Sprint(want) {
		t.Errorf("Tversions sent: %q, want %q (the Google version first, then plain)", f.versions, want)
	}
	if len(f.anames) != 1 || f.anames[0] != "/srv/export" {
		t.Errorf("Tattach anames: %q, want one, %q", f.anames, "/srv/export")
	}
	if len(f.nunames) != 1 || f.nunames[0] != uint32(os.Geteuid()) {
		t.Errorf("Tattach n_uname: %v, want the euid %d", f.nunames, os.Geteuid())
	}
}

// TestNoFallbackOnHangUp: a server that hangs up without answering is a
// refusal of this peer (an *UnansweredError), not a version to retry.
func TestNoFallbackOnHangUp(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hangup.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			c.Close()
		}
	}()
	_, err = Dial(func() (net.Conn, error) { return net.Dial("unix", sock) }, "/")
	if ue := (*UnansweredError)(nil); !errors.As(err, &ue) {
		t.Fatalf("Dial against a hang-up: %v, want an *UnansweredError", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if accepted != 1 {
		t.Errorf("%d connections, want 1", accepted)
	}
}

// recordConn records each Write it is given.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

// wholeConn passes each message on whole, however the library splits it:
// nothing goes out until the piece that completes a message, then exactly
// that message (as header and the completing piece), in order.
func TestWholeConnGathers(t *testing.T) {
	msg := func(typ byte, body string) []byte {
		b := proto.AppendUint32(nil, uint32(7+len(body)))
		b = append(b, typ, 1, 0)
		return append(b, body...)
	}
	m1, m2, m3 := msg(116, "0123456789abcdef"), msg(120, "wxyz"), msg(118, string(make([]byte, 5000)))
	stream := append(append(append([]byte(nil), m1...), m2...), m3...)
	for _, cuts := range [][]int{{7, 23}, {1, 2, 3, 30, 31}, {4, 40}, {len(stream)}, {7, 23, 30, 34, 41}} {
		rc := &recordConn{}
		c := &wholeConn{Conn: rc}
		prev := 0
		for _, cut := range append(cuts, len(stream)) {
			if cut > len(stream) || cut <= prev {
				continue
			}
			if n, err := c.Write(stream[prev:cut]); n != cut-prev || err != nil {
				t.Fatalf("cuts %v: Write = %d, %v", cuts, n, err)
			}
			prev = cut
		}
		var got [][]byte
		var cur []byte
		for _, w := range rc.writes {
			cur = append(cur, w...)
			if len(cur) >= 4 && int(proto.Uint32(cur)) == len(cur) {
				got = append(got, cur)
				cur = nil
			}
		}
		if len(cur) != 0 || len(got) != 3 || !bytes.Equal(got[0], m1) || !bytes.Equal(got[1], m2) || !bytes.Equal(got[2], m3) {
			t.Fatalf("cuts %v: the connection got %d messages and %d stray bytes, want m1 m2 m3", cuts, len(got), len(cur))
		}
		// net.Buffers writes the two pieces of each message in turn to a
		// conn without writev: two writes a message, none a partial one.
		if len(rc.writes) != 6 {
			t.Fatalf("cuts %v: %d writes, want 2 per message", cuts, len(rc.writes))
		}
	}
	c := &wholeConn{Conn: &recordConn{}}
	if _, err := c.Write([]byte{3, 0, 0, 0}); err == nil {
		t.Fatal("a 3-byte message was accepted")
	}
}
