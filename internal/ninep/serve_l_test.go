package ninep

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/ninep/proto"
)

// The 9P2000.L side as the daemon serves it (Serve -> serveL -> the p9
// fork with this package's bounds), driven byte by byte. The fork's own
// tests (p9fork/p9/patches_test.go) cover each patch in isolation; these
// check that serveL turns each on, where the old internal/wire tests
// checked the wrapper. Every wait fails after 10 s.

// lSession serves cfg on a socket pair, negotiates 9P2000.L at msize and
// attaches fid 0. It returns the client end and a channel closed when the
// server has finished with the connection.
func lSession(t *testing.T, cfg Conn, msize uint32) (net.Conn, chan struct{}) {
	t.Helper()
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, cfg, srv) }()
	t.Cleanup(func() {
		cli.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not finish 10 s after the client hung up")
		}
	})
	cli.SetDeadline(time.Now().Add(30 * time.Second))
	cli.Write(frame(proto.Tversion, proto.NoTag, u32(msize), str("9P2000.L")))
	lExpect(t, cli, proto.Rversion, proto.NoTag)
	cli.Write(frame(proto.Tattach, 1, u32(0), u32(proto.NoFid), str("u"), str(""), u32(0)))
	lExpect(t, cli, proto.Rattach, 1)
	return cli, done
}

// lExpect reads one reply and checks its type and tag.
func lExpect(t *testing.T, c net.Conn, typ uint8, tag uint16) reply {
	t.Helper()
	r := readReply(t, c)
	if r.typ != typ || r.tag != tag {
		t.Fatalf("got type %d tag %d (%q), want type %d tag %d", r.typ, r.tag, r.body, typ, tag)
	}
	return r
}

// lExpectErr reads one reply and checks it is Rlerror(errno) for tag.
func lExpectErr(t *testing.T, c net.Conn, tag uint16, errno linux.Errno) {
	t.Helper()
	r := lExpect(t, c, proto.Rlerror, tag)
	if got := binary.LittleEndian.Uint32([]byte(r.body)); got != uint32(errno) {
		t.Fatalf("tag %d: errno %d, want %d", tag, got, errno)
	}
}

// diod's clients take only success or ENOENT from Tauth as "no auth".
func TestServeLAuthENOENT(t *testing.T) {
	srv, cli := connPair(t)
	go serveConn(t, testConn(t), srv)
	defer cli.Close()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	cli.Write(frame(proto.Tversion, proto.NoTag, u32(8192), str("9P2000.L")))
	lExpect(t, cli, proto.Rversion, proto.NoTag)
	cli.Write(frame(proto.Tauth, 1, u32(1), str("u"), str(""), u32(0)))
	lExpectErr(t, cli, 1, linux.ENOENT)
}

// The msize granted is capped at Conn.MaxMsize.
func TestServeLMsize(t *testing.T) {
	for _, max := range []uint32{64 << 10, 1 << 20} {
		cfg := testConn(t)
		cfg.MaxMsize = max
		srv, cli := connPair(t)
		go serveConn(t, cfg, srv)
		cli.SetDeadline(time.Now().Add(10 * time.Second))
		cli.Write(frame(proto.Tversion, proto.NoTag, u32(16<<20), str("9P2000.L")))
		r := lExpect(t, cli, proto.Rversion, proto.NoTag)
		if got := binary.LittleEndian.Uint32([]byte(r.body)); got != max {
			t.Errorf("MaxMsize %d: granted %d", max, got)
		}
		cli.Close()
	}
}

// blockedReadL leaves a Tread (tag 4, fid 1) of the blocking file pending
// on a 9P2000.L session.
func blockedReadL(t *testing.T, h *blockHandle) (net.Conn, chan struct{}) {
	t.Helper()
	cli, done := lSession(t, Conn{Root: blockDir{h}, MaxMsize: 8192}, 8192)
	cli.Write(frame(proto.Twalk, 2, u32(0), u32(1), u16(1), str("block")))
	lExpect(t, cli, proto.Rwalk, 2)
	cli.Write(frame(proto.Tlopen, 3, u32(1), u32(0)))
	lExpect(t, cli, proto.Rlopen, 3)
	cli.Write(frame(proto.Tread, 4, u32(1), u64(0), u32(100)))
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the read did not reach ReadAtContext within 10 s")
	}
	return cli, done
}

// A Tflush releases a read that waits for its context: the read is
// answered EINTR first, then the Rflush; meanwhile the fid answers other
// requests.
func TestServeLFlushReleasesBlockedRead(t *testing.T) {
	h := newBlockHandle()
	cli, _ := blockedReadL(t, h)
	cli.Write(frame(proto.Tgetattr, 5, u32(1), u64(0x7ff)))
	lExpect(t, cli, proto.Rgetattr, 5)
	cli.Write(frame(proto.Tflush, 6, u16(4)))
	select {
	case err := <-h.released:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read released with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Tflush did not cancel the blocked read within 10 s")
	}
	lExpectErr(t, cli, 4, linux.EINTR)
	lExpect(t, cli, proto.Rflush, 6)
}

// A client that hangs up releases its blocked read, and the server
// finishes the connection (lSession's cleanup checks it).
func TestServeLHangupReleasesBlockedRead(t *testing.T) {
	h := newBlockHandle()
	cli, done := blockedReadL(t, h)
	cli.Close()
	select {
	case <-h.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the hang-up did not cancel the blocked read within 10 s")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not finished within 10 s")
	}
}

// Reads of the blocking file beyond lBlockingReads are refused at once,
// and the connection's other requests are answered while they wait.
func TestServeLBlockingReadsBound(t *testing.T) {
	h := newBlockHandle()
	h.started = make(chan struct{}, lBlockingReads+1)
	h.released = make(chan error, lBlockingReads+1)
	cli, _ := lSession(t, Conn{Root: blockDir{h}, MaxMsize: 8192}, 8192)
	cli.Write(frame(proto.Twalk, 2, u32(0), u32(1), u16(1), str("block")))
	lExpect(t, cli, proto.Rwalk, 2)
	cli.Write(frame(proto.Tlopen, 3, u32(1), u32(0)))
	lExpect(t, cli, proto.Rlopen, 3)
	for i := range lBlockingReads {
		cli.Write(frame(proto.Tread, uint16(100+i), u32(1), u64(0), u32(100)))
	}
	for range lBlockingReads {
		select {
		case <-h.started:
		case <-time.After(10 * time.Second):
			t.Fatal("a read did not reach ReadAtContext within 10 s")
		}
	}
	for range 2 * lRequests {
		cli.Write(frame(proto.Tgetattr, 5, u32(0), u64(0x7ff)))
		lExpect(t, cli, proto.Rgetattr, 5)
	}
	cli.Write(frame(proto.Tread, 6, u32(1), u64(0), u32(100)))
	lExpectErr(t, cli, 6, linux.EAGAIN)
}

// Txattrcreate and Txattrwalk are refused at once: nothing is buffered.
func TestServeLXattrRefused(t *testing.T) {
	cli, _ := lSession(t, testConn(t), 8192)
	cli.Write(frame(proto.Twalk, 2, u32(0), u32(1), u16(0)))
	lExpect(t, cli, proto.Rwalk, 2)
	cli.Write(frame(proto.Txattrcreate, 3, u32(1), str("user.x"), u64(1<<50), u32(0)))
	lExpectErr(t, cli, 3, linux.EOPNOTSUPP)
	cli.Write(frame(proto.Txattrwalk, 4, u32(0), u32(2), str("")))
	lExpectErr(t, cli, 4, linux.EOPNOTSUPP)
}

// A connection's fids are bounded by their bytes: once its pool is full
// the next Twalk gets EMFILE, a clunk makes room, and the connection's
// end gives every byte back.
func TestServeLFidBound(t *testing.T) {
	const fids = 1000
	cfg := testConn(t)
	cfg.Budget = budget.New("test connection", fids*fileCost)
	cli, done := lSession(t, cfg, 1<<16)
	// Pipelined in batches: the replies of one batch fit the socket
	// buffers, so neither side waits on the other. The attach holds one.
	const batch = 256
	for next := 1; next < fids; {
		n := min(batch, fids-next)
		var b []byte
		for i := range n {
			b = append(b, frame(proto.Twalk, uint16(i), u32(0), u32(uint32(next+i)), u16(0))...)
		}
		cli.Write(b)
		for range n {
			if r := readReply(t, cli); r.typ != proto.Rwalk {
				t.Fatalf("walk to fid %d: type %d %q", next, r.typ, r.body)
			}
		}
		next += n
	}
	if u := cfg.Budget.Used(); u != fids*fileCost {
		t.Fatalf("%d fids charged %d bytes, want %d", fids, u, fids*fileCost)
	}
	cli.Write(frame(proto.Twalk, 1, u32(0), u32(fids), u16(0)))
	lExpectErr(t, cli, 1, linux.EMFILE)
	cli.Write(frame(proto.Tclunk, 2, u32(7)))
	lExpect(t, cli, proto.Rclunk, 2)
	cli.Write(frame(proto.Twalk, 3, u32(0), u32(fids), u16(0)))
	lExpect(t, cli, proto.Rwalk, 3)
	cli.Close()
	<-done
	if u := cfg.Budget.Used(); u != 0 {
		t.Fatalf("the connection ended holding %d bytes of its pool", u)
	}
}

// A Tversion in mid-session resets it: the old fids are gone.
func TestServeLVersionResets(t *testing.T) {
	cli, _ := lSession(t, testConn(t), 8192)
	cli.Write(frame(proto.Tversion, proto.NoTag, u32(8192), str("9P2000.L")))
	lExpect(t, cli, proto.Rversion, proto.NoTag)
	cli.Write(frame(proto.Tgetattr, 5, u32(0), u64(0x7ff)))
	lExpectErr(t, cli, 5, linux.EBADF)
}

// A client that stops reading its replies is dropped within the write
// bound; the connection is finished (lSession's cleanup checks it).
// lWriteTimeout is 30 s, so this runs only without -short.
func TestServeLNonReader(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for lWriteTimeout (30 s)")
	}
	cli, done := lSession(t, testConn(t), 1<<20)
	cli.SetDeadline(time.Time{})
	go func() {
		for i := 0; ; i++ {
			if _, err := cli.Write(frame(proto.Tgetattr, uint16(i), u32(0), u64(0x7ff))); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(lWriteTimeout + 20*time.Second):
		t.Fatal("a client that never reads was not dropped")
	}
}

// Conn.IdleTimeout closes a connection with nothing in flight, and not one
// whose read waits for an event.
func TestServeLIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := newBlockHandle()
	cli, done := lSession(t, Conn{Root: blockDir{h}, MaxMsize: 8192, IdleTimeout: idle}, 8192)
	cli.Write(frame(proto.Twalk, 2, u32(0), u32(1), u16(1), str("block")))
	lExpect(t, cli, proto.Rwalk, 2)
	cli.Write(frame(proto.Tlopen, 3, u32(1), u32(0)))
	lExpect(t, cli, proto.Rlopen, 3)
	cli.Write(frame(proto.Tread, 4, u32(1), u64(0), u32(100)))
	<-h.started
	time.Sleep(3 * idle)
	select {
	case <-done:
		t.Fatal("closed while a read was in flight")
	default:
	}
	cli.Write(frame(proto.Tflush, 5, u16(4)))
	lExpectErr(t, cli, 4, linux.EINTR)
	lExpect(t, cli, proto.Rflush, 5)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an idle connection was not closed")
	}
}
