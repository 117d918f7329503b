package ninep

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// The 9P2000.L side as the daemon serves it (Serve -> serveL -> the p9
// fork with this package's bounds), driven byte by byte. The fork's own
// tests (p9fork/p9/patches_test.go) cover each patch in isolation; these
// check that serveL turns each on, where the old internal/wire tests
// checked the wrapper. The behaviours both dialects share are the
// scenarios of scenario_test.go. Every wait fails after 10 s.

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

// A client that stops reading its replies is dropped within the write
// bound; the connection is finished (lSession's cleanup checks it).
// writeTimeout is 30 s, so this runs only without -short.
func TestServeLNonReader(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for writeTimeout (30 s)")
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
	case <-time.After(writeTimeout + 20*time.Second):
		t.Fatal("a client that never reads was not dropped")
	}
}
