package srv9p

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// The tests of the patches in ../../PATCHES, each speaking to a Server
// over a net.Pipe, one Fcall at a time.

// testFS is a root directory holding one file, "f" ("hello\n"), and one
// file, "block", whose reads signal started, wait until their context
// is done and then send its error on released (each if not nil).
func testFS() *Server { return blockFS(nil, nil) }

func blockFS(started chan<- struct{}, released chan<- error) *Server {
	return &Server{
		Attach: func(ctx context.Context, fid, afid *Fid, user, aname string) (plan9.Qid, error) {
			fid.SetAux("/")
			return plan9.Qid{Type: plan9.QTDIR}, nil
		},
		Walk: func(ctx context.Context, fid, newfid *Fid, names []string) ([]plan9.Qid, error) {
			return Walk(fid, newfid, names,
				func(old, nw *Fid) error { nw.SetAux(old.Aux()); return nil },
				func(f *Fid, name string) (plan9.Qid, error) {
					switch name {
					case "f":
						f.SetAux("f")
						return plan9.Qid{Path: 1}, nil
					case "block":
						f.SetAux("block")
						return plan9.Qid{Path: 2}, nil
					}
					return plan9.Qid{}, errors.New("file does not exist")
				})
		},
		Open: func(ctx context.Context, fid *Fid, mode uint8) error {
			if fid.Aux() == nil {
				return errors.New("fid has no state")
			}
			return nil
		},
		Read: func(ctx context.Context, fid *Fid, data []byte, off int64) (int, error) {
			switch fid.Aux() {
			case "f":
				return fid.ReadString(data, off, "hello\n")
			case "block":
				if err := Blocking(ctx); err != nil {
					return 0, err
				}
				if started != nil {
					started <- struct{}{}
				}
				<-ctx.Done()
				if released != nil {
					released <- ctx.Err()
				}
				return 0, errors.New("interrupted")
			}
			return 0, errors.New("fid has no state")
		},
		Stat: func(ctx context.Context, fid *Fid) (*plan9.Dir, error) {
			return &plan9.Dir{Name: "x", Qid: fid.Qid()}, nil
		},
	}
}

// session serves srv on one end of a pipe and returns the other, with a
// deadline of 10 s for every exchange, after a Tversion and a Tattach of
// fid 0. done is closed when Serve returns.
func session(t *testing.T, srv *Server) (cli net.Conn, done chan struct{}) {
	t.Helper()
	s, cli := net.Pipe()
	done = make(chan struct{})
	go func() { defer close(done); srv.Serve(s, s) }()
	t.Cleanup(func() { cli.Close(); <-done })
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"}, plan9.Rversion)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "u"}, plan9.Rattach)
	return cli, done
}

func send(t *testing.T, c net.Conn, fs ...*plan9.Fcall) {
	t.Helper()
	var b []byte
	for _, f := range fs {
		m, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, m...)
	}
	go c.Write(b) // a pipe has no buffer: the server reads as it answers
}

func recv(t *testing.T, c net.Conn) *plan9.Fcall {
	t.Helper()
	f, err := plan9.ReadFcall(c)
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	return f
}

func rpc(t *testing.T, c net.Conn, f *plan9.Fcall, want uint8) *plan9.Fcall {
	t.Helper()
	send(t, c, f)
	r := recv(t, c)
	if r.Type != want || r.Tag != f.Tag {
		t.Fatalf("%v: got %v", f, r)
	}
	return r
}

// 01-fid-setup-order: Twalk, Topen and Tread of each new fid pipelined,
// 200 times: every read returns the file.
func TestFidSetupOrder(t *testing.T) {
	cli, _ := session(t, testFS())
	const rounds = 200
	var fs []*plan9.Fcall
	for i := range rounds {
		fid, tag := uint32(10+i), uint16(2+3*i)
		fs = append(fs,
			&plan9.Fcall{Type: plan9.Twalk, Tag: tag, Fid: 0, Newfid: fid, Wname: []string{"f"}},
			&plan9.Fcall{Type: plan9.Topen, Tag: tag + 1, Fid: fid, Mode: plan9.OREAD},
			&plan9.Fcall{Type: plan9.Tread, Tag: tag + 2, Fid: fid, Count: 100})
	}
	send(t, cli, fs...)
	reads := 0
	for range 3 * rounds {
		switch r := recv(t, cli); r.Type {
		case plan9.Rerror:
			t.Errorf("tag %d: %s", r.Tag, r.Ename)
		case plan9.Rread:
			if string(r.Data) != "hello\n" {
				t.Errorf("read %q", r.Data)
			}
			reads++
		}
	}
	if reads != rounds {
		t.Errorf("%d reads answered with the file, want %d", reads, rounds)
	}
}

// 02-conn-context: a read waiting for its context is released when the
// client hangs up.
func TestHangupCancelsRequests(t *testing.T) {
	started, released := make(chan struct{}, 1), make(chan error, 1)
	cli, _ := session(t, blockFS(started, released))
	openBlock(t, cli, 1)
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 4, Fid: 1, Count: 10})
	<-started
	cli.Close()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read outlived the connection by 10 s")
	}
}

// openBlock walks fid to "block" and opens it.
func openBlock(t *testing.T, cli net.Conn, fid uint32) {
	t.Helper()
	rpc(t, cli, &plan9.Fcall{Type: plan9.Twalk, Tag: 2, Fid: 0, Newfid: fid, Wname: []string{"block"}}, plan9.Rwalk)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Topen, Tag: 3, Fid: fid, Mode: plan9.OREAD}, plan9.Ropen)
}

// 04-max-fids: with MaxFids 3, the fourth fid is refused and a clunk
// makes room for it; a walk onto a held fid (newfid == fid) costs none.
func TestMaxFids(t *testing.T) {
	srv := testFS()
	srv.MaxFids = 3
	cli, _ := session(t, srv) // fid 0
	walk := func(tag uint16, fid, newfid uint32, want uint8) *plan9.Fcall {
		return rpc(t, cli, &plan9.Fcall{Type: plan9.Twalk, Tag: tag, Fid: fid, Newfid: newfid}, want)
	}
	walk(2, 0, 1, plan9.Rwalk)
	walk(3, 0, 2, plan9.Rwalk)
	if r := walk(4, 0, 3, plan9.Rerror); r.Ename != ErrTooManyFids.Error() {
		t.Errorf("fourth fid: %q", r.Ename)
	}
	walk(5, 2, 2, plan9.Rwalk)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tclunk, Tag: 6, Fid: 2}, plan9.Rclunk)
	walk(7, 0, 3, plan9.Rwalk)
}

// 05-inflight-bounds: with MaxRequests 2, no more than two handlers run
// at once, however many requests are pipelined.
func TestMaxRequests(t *testing.T) {
	srv := testFS()
	srv.MaxRequests = 2
	var now, most atomic.Int32
	stat := srv.Stat
	srv.Stat = func(ctx context.Context, fid *Fid) (*plan9.Dir, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		return stat(ctx, fid)
	}
	cli, _ := session(t, srv)
	var fs []*plan9.Fcall
	for i := range 20 {
		fs = append(fs, &plan9.Fcall{Type: plan9.Tstat, Tag: uint16(10 + i), Fid: 0})
	}
	send(t, cli, fs...)
	for range fs {
		if r := recv(t, cli); r.Type != plan9.Rstat {
			t.Fatalf("%v", r)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d handlers ran at once, want at most 2", m)
	}
}

// 05-inflight-bounds: with MaxRequests 1 and MaxBlockingReads 2, two
// reads waiting in Blocking leave the request slot to a Tstat; a third
// is refused ErrBlockedReads; a Tflush (holding the request slot) releases
// one, and a fourth read may wait in its place.
func TestMaxBlockingReads(t *testing.T) {
	started := make(chan struct{}, 4)
	srv := blockFS(started, make(chan error, 4))
	srv.MaxRequests, srv.MaxBlockingReads = 1, 2
	cli, _ := session(t, srv)
	openBlock(t, cli, 1)
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 10, Fid: 1, Count: 10})
	<-started
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 11, Fid: 1, Count: 10})
	<-started
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tstat, Tag: 12, Fid: 1}, plan9.Rstat)
	if r := rpc(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 13, Fid: 1, Count: 10}, plan9.Rerror); r.Ename != ErrBlockedReads.Error() {
		t.Errorf("third blocking read: %q", r.Ename)
	}
	send(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: 14, Oldtag: 10})
	if r := recv(t, cli); r.Tag != 10 {
		t.Fatalf("first reply after the Tflush: %v, want the flushed read's", r)
	}
	if r := recv(t, cli); r.Type != plan9.Rflush {
		t.Fatalf("%v, want the Rflush", r)
	}
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 15, Fid: 1, Count: 10})
	<-started
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tstat, Tag: 16, Fid: 1}, plan9.Rstat)
}

// 06-stall-bounds: a client that sends half a message is dropped after
// ReadTimeout; one that never takes a reply, after WriteTimeout; one with
// nothing in flight and nothing to say, after IdleTimeout, but not while
// a request of its is in flight.
func TestStallBounds(t *testing.T) {
	const d = 50 * time.Millisecond
	ended := func(t *testing.T, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection outlived its bound by 10 s")
		}
	}
	t.Run("read", func(t *testing.T) {
		srv := testFS()
		srv.ReadTimeout = d
		cli, done := session(t, srv)
		go cli.Write([]byte{20, 0, 0})
		ended(t, done)
	})
	t.Run("write", func(t *testing.T) {
		srv := testFS()
		srv.WriteTimeout = d
		cli, done := session(t, srv)
		send(t, cli, &plan9.Fcall{Type: plan9.Tstat, Tag: 2, Fid: 0})
		ended(t, done)
	})
	t.Run("idle", func(t *testing.T) {
		started := make(chan struct{}, 1)
		srv := blockFS(started, make(chan error, 1))
		srv.IdleTimeout = d
		cli, done := session(t, srv)
		openBlock(t, cli, 1)
		send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 4, Fid: 1, Count: 10})
		<-started
		time.Sleep(4 * d)
		rpc(t, cli, &plan9.Fcall{Type: plan9.Tstat, Tag: 5, Fid: 1}, plan9.Rstat)
		send(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: 6, Oldtag: 4})
		recv(t, cli) // the read's
		if r := recv(t, cli); r.Type != plan9.Rflush {
			t.Fatalf("%v, want the Rflush", r)
		}
		ended(t, done)
	})
}

// 07-read-buffers: a Tread's buffer is charged before the read and
// released after its reply, also when it waited and was flushed; a
// refused charge answers the Tread with the charge's error.
func TestReadBuffersCharged(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := blockFS(started, make(chan error, 1))
	var held atomic.Int64
	srv.ChargeRead = func(n int64) error {
		if n > 1000 {
			return errors.New("cannot allocate memory")
		}
		held.Add(n)
		return nil
	}
	srv.ReleaseRead = func(n int64) { held.Add(-n) }
	cli, _ := session(t, srv)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Twalk, Tag: 2, Fid: 0, Newfid: 2, Wname: []string{"f"}}, plan9.Rwalk)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Topen, Tag: 3, Fid: 2, Mode: plan9.OREAD}, plan9.Ropen)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 4, Fid: 2, Count: 100}, plan9.Rread)
	if r := rpc(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 4, Fid: 2, Count: 2000}, plan9.Rerror); r.Ename != "cannot allocate memory" {
		t.Errorf("refused charge: %q", r.Ename)
	}
	openBlock(t, cli, 1)
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 5, Fid: 1, Count: 300})
	<-started
	if n := held.Load(); n != 300 {
		t.Errorf("%d bytes held while a read waits, want 300", n)
	}
	send(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: 6, Oldtag: 5})
	recv(t, cli)
	recv(t, cli)
	if n := held.Load(); n != 0 {
		t.Errorf("%d bytes held after every reply, want 0", n)
	}
}

// 08-flush-order-test: the reply to a flushed request precedes the
// Rflush, for each of 50 flushed reads; a Tflush of an idle tag is
// answered at once.
func TestFlushOrder(t *testing.T) {
	started := make(chan struct{}, 1)
	cli, _ := session(t, blockFS(started, nil))
	openBlock(t, cli, 1)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: 9, Oldtag: 77}, plan9.Rflush)
	for i := range 50 {
		tag := uint16(10 + 2*i)
		send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: tag, Fid: 1, Count: 10})
		<-started
		send(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: tag + 1, Oldtag: tag})
		if r := recv(t, cli); r.Tag != tag {
			t.Fatalf("round %d: first reply %v, want the read's", i, r)
		}
		if r := recv(t, cli); r.Type != plan9.Rflush || r.Tag != tag+1 {
			t.Fatalf("round %d: second reply %v, want the Rflush", i, r)
		}
	}
}

// 10-small-msize: after a Tversion granting an msize of 23, less than a
// reply's header, a Tread asking for 1 GiB gets no buffer of that size.
func TestSmallMsize(t *testing.T) {
	srv := testFS()
	asked := make(chan int64, 1)
	srv.ChargeRead = func(n int64) error { asked <- n; return nil }
	srv.ReleaseRead = func(int64) {}
	cli, _ := session(t, srv)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 23, Version: "9P2000"}, plan9.Rversion)
	rpc(t, cli, &plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "u"}, plan9.Rattach)
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 2, Fid: 0, Count: 1 << 30})
	select {
	case n := <-asked:
		if n != 0 {
			t.Errorf("a Tread at msize 23 asked for a %d-byte buffer, want 0", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Tread was not charged within 10 s")
	}
}

// 11-request-context-ends: a request's context is done once its reply is
// written, while the connection lives on. Before, each stayed a child of
// the connection's context until the connection ended: memory per
// request ever answered, and a cancel of each one at the end.
func TestRequestContextEnds(t *testing.T) {
	srv := testFS()
	ctxs := make(chan context.Context, 1)
	stat := srv.Stat
	srv.Stat = func(ctx context.Context, fid *Fid) (*plan9.Dir, error) {
		ctxs <- ctx
		return stat(ctx, fid)
	}
	cli, _ := session(t, srv)
	for i := range 100 {
		rpc(t, cli, &plan9.Fcall{Type: plan9.Tstat, Tag: uint16(2 + i), Fid: 0}, plan9.Rstat)
		ctx := <-ctxs
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("Tstat %d: its context is not done 5 s after its reply", i)
		}
	}
}

// 12-slot-before-rflush: a flushed blocking read's slot is free once the
// client has the Rflush: with one blocking slot, a read sent right after
// each Rflush always waits, 300 times in a row, never refused.
func TestSlotFreeBeforeRflush(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := blockFS(started, nil)
	srv.MaxBlockingReads = 1
	cli, _ := session(t, srv)
	openBlock(t, cli, 1)
	send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: 10, Fid: 1, Count: 10})
	<-started
	for i := range 300 {
		cli.SetDeadline(time.Now().Add(10 * time.Second))
		old, tag := uint16(10+i%2), uint16(11-i%2)
		send(t, cli, &plan9.Fcall{Type: plan9.Tflush, Tag: 100, Oldtag: old})
		if r := recv(t, cli); r.Tag != old {
			t.Fatalf("round %d: %v, want the flushed read's reply", i, r)
		}
		if r := recv(t, cli); r.Type != plan9.Rflush {
			t.Fatalf("round %d: %v, want the Rflush", i, r)
		}
		send(t, cli, &plan9.Fcall{Type: plan9.Tread, Tag: tag, Fid: 1, Count: 10})
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			cli.SetDeadline(time.Now().Add(time.Second))
			r := recv(t, cli)
			t.Fatalf("round %d: the read after the Rflush did not wait: %v", i, r)
		}
	}
}
