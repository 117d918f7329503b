package ninep

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/tree"
)

// blockDir is a root holding one file, "block", whose reads wait until
// their context is cancelled: the shape of the events file.
type blockDir struct{ h *blockHandle }

func (blockDir) Attr() (tree.Attr, error) { return tree.Attr{Dir: true, Mode: 0o555, Path: 1}, nil }
func (d blockDir) Lookup(name string) (tree.Node, error) {
	if name != "block" {
		return nil, errs.E("lookup", errs.NotExist, name, nil)
	}
	return blockFile(d), nil
}
func (blockDir) List() ([]tree.Entry, error) { return []tree.Entry{{Name: "block", Path: 2}}, nil }

type blockFile blockDir

func (blockFile) Attr() (tree.Attr, error)     { return tree.Attr{Mode: 0o444, Path: 2}, nil }
func (f blockFile) Open() (tree.Handle, error) { return f.h, nil }
func (*blockHandle) Close() error              { return nil }
func (*blockHandle) ReadAt([]byte, int64) (int, error) {
	return 0, errors.New("ReadAt of a blocking file")
}

type blockHandle struct {
	started  chan struct{} // a read is blocked
	released chan error    // a read returned, with its context's error
}

func (h *blockHandle) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	h.started <- struct{}{}
	<-ctx.Done()
	h.released <- ctx.Err()
	return 0, ctx.Err()
}

func newBlockHandle() *blockHandle {
	return &blockHandle{started: make(chan struct{}, 1), released: make(chan error, 1)}
}

// blockedRead opens a 9P2000 session on a root whose "block" file's
// reads wait, and leaves a Tread of it (tag 4, fid 1) blocked.
func blockedRead(t *testing.T, h *blockHandle) (cli net.Conn, done chan struct{}) {
	t.Helper()
	srv, cli := connPair(t)
	done = make(chan struct{})
	go func() { defer close(done); serveConn(t, Conn{Root: blockDir{h}, Owner: "u", MaxMsize: 8192}, srv) }()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	cli.Write(concat(
		frame(proto.Tversion, proto.NoTag, u32(8192), str(proto.Version2000)),
		frame(proto.Tattach, 1, u32(0), u32(proto.NoFid), str("u"), str("")),
		frame(proto.Twalk, 2, u32(0), u32(1), u16(1), str("block")),
		frame(proto.Topen, 3, u32(1), []byte{0}),
		frame(proto.Tread, 4, u32(1), u64(0), u32(100)),
	))
	// srv9p answers pipelined requests in any order (the gate orders
	// only the walk and the open after what sets their fids up).
	for range 4 {
		if r := readReply(t, cli); r.tag == 4 || r.typ == proto.Rerror {
			t.Fatalf("setup reply: %+v", r)
		}
	}
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the read did not reach ReadAtContext within 10 s")
	}
	return cli, done
}

type reply struct {
	typ  uint8
	tag  uint16
	body string
}

func readReply(t *testing.T, c net.Conn) reply {
	t.Helper()
	f, err := proto.ReadFrame(c, 8192)
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	_, typ, tag := proto.Header(f)
	return reply{typ, tag, string(f[proto.HeaderSize:])}
}

// A Tflush releases a read that blocks until its context is cancelled;
// the flushed read is answered first ("interrupted"), then the Rflush.
// While the read blocks, other requests on the same fid are answered.
// Each wait fails after 10 s.
func TestPlan9FlushReleasesBlockedRead(t *testing.T) {
	h := newBlockHandle()
	cli, done := blockedRead(t, h)
	defer func() { cli.Close(); <-done }()

	cli.Write(frame(proto.Tstat, 5, u32(1)))
	if r := readReply(t, cli); r.tag != 5 || r.typ != proto.Rstat {
		t.Fatalf("Tstat of the fid while its read blocks: %+v", r)
	}
	cli.Write(frame(proto.Tflush, 6, u16(4)))
	select {
	case err := <-h.released:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read released with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Tflush did not cancel the blocked read within 10 s")
	}
	if r := readReply(t, cli); r.tag != 4 || r.typ != proto.Rerror || r.body[2:] != errString[errs.Interrupted] {
		t.Fatalf("first reply after the Tflush: %+v, want tag 4's Rerror %q", r, errString[errs.Interrupted])
	}
	if r := readReply(t, cli); r.tag != 6 || r.typ != proto.Rflush {
		t.Fatalf("second reply after the Tflush: %+v, want the Rflush", r)
	}
}

// A client that hangs up releases its blocked read: srv9p's request
// contexts outlive the connection, so the adapter also hands the read the
// connection's.
func TestPlan9HangupReleasesBlockedRead(t *testing.T) {
	h := newBlockHandle()
	cli, done := blockedRead(t, h)
	cli.Close()
	select {
	case <-h.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the hang-up did not cancel the blocked read within 10 s")
	}
	<-done
}
