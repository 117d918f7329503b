package ninep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/tree"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// The gate hands srv9p at most the bound of requests; the next frame
// stays unread until a reply is written.
func TestGate9RequestBound(t *testing.T) {
	var in []byte
	for tag := range uint16(3) {
		in = append(in, frame(proto.Tstat, tag, u32(uint32(tag)))...)
	}
	g := newGate9(t.Context(), io.NopCloser(bytes.NewReader(in)), nopWriteCloser{io.Discard}, 8192, newBounds9(2, 1))
	handed := make(chan []byte, 3)
	go func() {
		for {
			f, err := proto.ReadFrame(g, 8192)
			if err != nil {
				return
			}
			handed <- f
		}
	}()
	for i := range 2 {
		select {
		case <-handed:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d not handed within 10 s", i)
		}
	}
	select {
	case f := <-handed:
		t.Fatalf("a third request was handed with two unanswered: %x", f)
	case <-time.After(200 * time.Millisecond):
	}
	g.Write(frame(proto.Rstat, 0, str("")))
	select {
	case <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("the third request was not handed after a reply")
	}
}

// Blocked reads hold no request slot: with two request slots and three
// reads waiting, the connection still answers; a fourth blocking read is
// refused at once, and a Tflush still releases one of them, in order.
func TestPlan9BlockedReadsBound(t *testing.T) {
	h := newBlockHandle()
	h.started, h.released = make(chan struct{}, 8), make(chan error, 8)
	srv, cli := connPair(t)
	cfg := Conn{Root: blockDir{h}, Owner: "u", MaxMsize: 8192}
	first := frame(proto.Tversion, proto.NoTag, u32(8192), str(proto.Version2000))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		serve2000Bounded(t.Context(), srv, first, cfg, newBounds9(2, 3))
	}()
	defer func() {
		cli.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the connection did not end within 10 s of the hang-up")
		}
	}()
	cli.SetDeadline(time.Now().Add(10 * time.Second))

	cli.Write(frame(proto.Tattach, 1, u32(0), u32(proto.NoFid), str("u"), str("")))
	for fid := uint32(1); fid <= 4; fid++ {
		cli.Write(frame(proto.Twalk, uint16(fid*10), u32(0), u32(fid), u16(1), str("block")))
		cli.Write(frame(proto.Topen, uint16(fid*10+1), u32(fid), []byte{0}))
	}
	for range 10 { // Rversion, Rattach, 4 Rwalk, 4 Ropen
		if r := readReply(t, cli); r.typ == proto.Rerror {
			t.Fatalf("setup: %+v", r)
		}
	}
	for fid := uint32(1); fid <= 3; fid++ {
		cli.Write(frame(proto.Tread, uint16(100+fid), u32(fid), u64(0), u32(100)))
	}
	for range 3 {
		select {
		case <-h.started:
		case <-time.After(10 * time.Second):
			t.Fatal("three reads not blocked within 10 s")
		}
	}
	cli.Write(concat(frame(proto.Tstat, 200, u32(0)), frame(proto.Tstat, 201, u32(0)), frame(proto.Tstat, 202, u32(0))))
	for range 3 {
		if r := readReply(t, cli); r.typ != proto.Rstat {
			t.Fatalf("a Tstat beside three blocked reads: %+v", r)
		}
	}
	// A request reusing a tag in flight is the gate's to refuse: srv9p's
	// own refusal would pass, to the gate, for the first request's reply.
	cli.Write(frame(proto.Tstat, 101, u32(0)))
	if r := readReply(t, cli); r.tag != 101 || r.typ != proto.Rerror || r.body[2:] != errDupTag {
		t.Fatalf("a Tstat of a blocked read's tag: %+v, want Rerror %q", r, errDupTag)
	}
	cli.Write(frame(proto.Tread, 104, u32(4), u64(0), u32(100)))
	if r := readReply(t, cli); r.tag != 104 || r.typ != proto.Rerror || r.body[2:] != errString[errs.Busy] {
		t.Fatalf("a fourth blocking read: %+v, want Rerror %q", r, errString[errs.Busy])
	}
	cli.Write(frame(proto.Tflush, 300, u16(101)))
	if r := readReply(t, cli); r.tag != 101 || r.typ != proto.Rerror {
		t.Fatalf("first reply after the Tflush: %+v, want tag 101's Rerror", r)
	}
	if r := readReply(t, cli); r.tag != 300 || r.typ != proto.Rflush {
		t.Fatalf("second reply after the Tflush: %+v, want the Rflush", r)
	}
	// The flushed read's blocking slot is free again.
	cli.Write(frame(proto.Tread, 105, u32(4), u64(0), u32(100)))
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("a read after the flush did not block within 10 s")
	}
}

// A client that stops taking replies has its connection closed once a
// reply's write has waited writeTimeout: the gate's context is cancelled
// and the socket closed, which ends srv9p's read loop.
func TestGate9WriteStall(t *testing.T) {
	srv, cli := connPair(t)
	defer cli.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g := newGate9(ctx, newReplay(nil, srv, cancel), srv, 1<<20, newBounds9(2, 1))
	g.writeTimeout = 100 * time.Millisecond
	reply := frame(proto.Rread, 1, u32(64<<10), make([]byte, 64<<10))
	wrote := make(chan error, 1)
	go func() {
		for {
			if _, err := g.Write(reply); err != nil {
				wrote <- err
				return
			}
		}
	}()
	select {
	case err := <-wrote:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the stalled write failed with %v, want a deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a client that reads nothing did not fail within 10 s")
	}
	if ctx.Err() == nil {
		t.Error("the gate's context is not cancelled")
	}
	if _, err := g.Read(make([]byte, 1)); err == nil {
		t.Error("the gate still reads after the stall")
	}
}

// A connection's fids are bounded: a walk to one fid more is refused with
// "too many open files" and never reaches srv9p; a clunk frees a place;
// a walk that fails makes no fid and uses none.
func TestGate9FidBound(t *testing.T) {
	srv, cli := connPair(t)
	cfg := testConn(t)
	first := frame(proto.Tversion, proto.NoTag, u32(8192), str(proto.Version2000))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		rctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		g := newGate9(rctx, newReplay(first, srv, cancel), srv, 8192, newBounds9(4, 1))
		g.maxFids = 3
		newPlan9(rctx, g.bounds, nil, cfg.Root, "u", 8192, tree.Writer{}, nil).Serve(g, g)
	}()
	defer func() { cli.Close(); <-done }()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	if r := readReply(t, cli); r.typ != proto.Rversion {
		t.Fatalf("Tversion: %+v", r)
	}
	rpc := func(f []byte) reply {
		t.Helper()
		cli.Write(f)
		return readReply(t, cli)
	}
	walk := func(tag uint16, newfid uint32, name string) reply {
		t.Helper()
		return rpc(frame(proto.Twalk, tag, u32(0), u32(newfid), u16(1), str(name)))
	}
	ok := func(r reply, typ uint8) {
		t.Helper()
		if r.typ != typ {
			t.Fatalf("%+v, want type %d", r, typ)
		}
	}
	refused := func(r reply, msg string) {
		t.Helper()
		if r.typ != proto.Rerror || r.body[2:] != msg {
			t.Fatalf("%+v, want Rerror %q", r, msg)
		}
	}
	ok(rpc(frame(proto.Tattach, 1, u32(0), u32(proto.NoFid), str("u"), str(""))), proto.Rattach)
	ok(walk(2, 1, "dsh"), proto.Rwalk)
	ok(walk(3, 2, "dsh"), proto.Rwalk)
	refused(walk(4, 3, "dsh"), errTooManyFids)
	ok(rpc(frame(proto.Tclunk, 5, u32(1))), proto.Rclunk)
	ok(walk(6, 3, "dsh"), proto.Rwalk)
	ok(rpc(frame(proto.Tclunk, 7, u32(3))), proto.Rclunk)
	if r := walk(8, 4, "nope"); r.typ != proto.Rerror {
		t.Fatalf("a walk to nothing: %+v", r)
	}
	ok(walk(9, 5, "dsh"), proto.Rwalk) // the failed walk took no place
	refused(walk(10, 6, "dsh"), errTooManyFids)
}

// Conn.IdleTimeout ends a 9P2000 connection that has nothing in flight
// for that long, but not one whose read is blocked (in flight) meanwhile.
func TestPlan9IdleTimeout(t *testing.T) {
	h := newBlockHandle()
	h.started, h.released = make(chan struct{}, 8), make(chan error, 8)
	srv, cli := connPair(t)
	cfg := Conn{Root: blockDir{h}, Owner: "u", MaxMsize: 8192, IdleTimeout: 200 * time.Millisecond}
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, cfg, srv) }()
	defer func() { cli.Close(); <-done }()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	cli.Write(concat(
		frame(proto.Tversion, proto.NoTag, u32(8192), str(proto.Version2000)),
		frame(proto.Tattach, 1, u32(0), u32(proto.NoFid), str("u"), str("")),
		frame(proto.Twalk, 2, u32(0), u32(1), u16(1), str("block")),
		frame(proto.Topen, 3, u32(1), []byte{0}),
		frame(proto.Tread, 4, u32(1), u64(0), u32(100)),
	))
	for range 4 {
		if r := readReply(t, cli); r.typ == proto.Rerror {
			t.Fatalf("setup: %+v", r)
		}
	}
	<-h.started
	time.Sleep(600 * time.Millisecond) // three idle timeouts, with a read in flight
	cli.Write(frame(proto.Tstat, 5, u32(0)))
	if r := readReply(t, cli); r.typ != proto.Rstat {
		t.Fatalf("a Tstat after a blocked read outlived the idle timeout: %+v", r)
	}
	cli.Write(frame(proto.Tflush, 6, u16(4)))
	readReply(t, cli)
	readReply(t, cli)
	// Nothing in flight now: the connection ends by itself.
	if _, err := proto.ReadFrame(cli, 8192); !errors.Is(err, io.EOF) {
		t.Fatalf("after the idle timeout the client reads %v, want EOF", err)
	}
}
