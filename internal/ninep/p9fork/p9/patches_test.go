package p9_test

// Tests of the patches listed in ../PATCHES, driven byte by byte: each
// sends the frames a client (or an attacker) sends, and checks the replies
// in the order they reach the socket.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// Message types used here (9P2000.L).
const (
	tRlerror      = 7
	tTlopen       = 12
	tRlopen       = 13
	tTgetattr     = 24
	tRgetattr     = 25
	tTxattrwalk   = 30
	tTxattrcreate = 32
	tTreaddir     = 40
	tTversion     = 100
	tRversion     = 101
	tTauth        = 102
	tTattach      = 104
	tRattach      = 105
	tTflush       = 108
	tRflush       = 109
	tTwalk        = 110
	tRwalk        = 111
	tTread        = 116
	tRread        = 117
	tTclunk       = 120
	tRclunk       = 121
	noFID         = ^uint32(0)
)

// testFS is a root directory holding "file" (its content), "slow", whose
// reads block until the request is cancelled or release is closed, and
// "wait", whose reads ignore the request's context and wait for release.
type testFS struct {
	content []byte
	release chan struct{}
	step    chan struct{} // each token ends one waiting read
	// blocked counts reads of slow in progress; entered is signalled by
	// each one as it starts.
	mu      sync.Mutex
	blocked int
	entered chan struct{}
}

func newTestFS() *testFS {
	return &testFS{content: []byte("hello, world"), release: make(chan struct{}), step: make(chan struct{}), entered: make(chan struct{}, 1024)}
}

func (fs *testFS) Attach() (p9.File, error) { return &node{fs: fs, name: "/"}, nil }

type node struct {
	templatefs.NoopFile
	fs   *testFS
	name string
}

func (n *node) qid() p9.QID {
	switch n.name {
	case "/":
		return p9.QID{Type: p9.TypeDir, Path: 1}
	case "file":
		return p9.QID{Type: p9.TypeRegular, Path: 2}
	case "wait":
		return p9.QID{Type: p9.TypeRegular, Path: 4}
	}
	return p9.QID{Type: p9.TypeRegular, Path: 3}
}

func (n *node) Walk(names []string) ([]p9.QID, p9.File, error) {
	if len(names) == 0 {
		return nil, &node{fs: n.fs, name: n.name}, nil
	}
	if n.name != "/" || len(names) != 1 || (names[0] != "file" && names[0] != "slow" && names[0] != "wait") {
		return nil, nil, linux.ENOENT
	}
	c := &node{fs: n.fs, name: names[0]}
	return []p9.QID{c.qid()}, c, nil
}

func (n *node) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	mode := p9.ModeRegular | 0o444
	if n.name == "/" {
		mode = p9.ModeDirectory | 0o555
	}
	return n.qid(), p9.AttrMask{Mode: true, Size: true}, p9.Attr{Mode: mode, Size: uint64(len(n.fs.content))}, nil
}

func (n *node) Open(p9.OpenFlags) (p9.QID, uint32, error) { return n.qid(), 0, nil }

func (n *node) ReadAt(p []byte, off int64) (int, error) {
	if n.name == "slow" || n.name == "wait" {
		// Without a context the read waits for the event.
		return n.block(context.Background(), p)
	}
	if off >= int64(len(n.fs.content)) {
		return 0, io.EOF
	}
	return copy(p, n.fs.content[off:]), nil
}

// ReadAtContext is the blocking read of slow; file reads through ReadAt.
func (n *node) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if n.name != "slow" {
		return n.ReadAt(p, off)
	}
	return n.block(ctx, p)
}

// block waits for ctx or for fs.release.
func (n *node) block(ctx context.Context, p []byte) (int, error) {
	n.fs.mu.Lock()
	n.fs.blocked++
	n.fs.mu.Unlock()
	defer func() {
		n.fs.mu.Lock()
		n.fs.blocked--
		n.fs.mu.Unlock()
	}()
	n.fs.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return 0, linux.EINTR
	case <-n.fs.release:
		return copy(p, "event"), nil
	case <-n.fs.step:
		return copy(p, "event"), nil
	}
}

// Blocking reports that reads of slow wait for an event.
func (n *node) Blocking() bool { return n.name == "slow" }

func (n *node) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	return nil, io.EOF
}

// rawConn is a client that speaks 9P as bytes.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	done chan struct{} // closed when the server's Handle returned
}

// socketPair returns both ends of a unix stream socket pair.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// serve starts a server for fs on one end of a socket pair and returns a
// client on the other.
func serve(t *testing.T, fs p9.Attacher, opts ...p9.ServerOpt) *rawConn {
	t.Helper()
	sc, cc := socketPair(t)
	r := &rawConn{t: t, c: cc, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		p9.NewServer(fs, opts...).Handle(sc, sc)
	}()
	t.Cleanup(func() {
		cc.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Errorf("server did not return after the client hung up")
		}
	})
	return r
}

// frame builds a message of type typ and tag from fields: uint8, uint16,
// uint32, uint64, string ([s]) and []byte (raw).
func frame(typ uint8, tag uint16, fields ...any) []byte {
	b := []byte{0, 0, 0, 0, typ, byte(tag), byte(tag >> 8)}
	for _, f := range fields {
		switch v := f.(type) {
		case uint8:
			b = append(b, v)
		case uint16:
			b = binary.LittleEndian.AppendUint16(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case int:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case string:
			b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("frame: %T", f))
		}
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	r.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) send(typ uint8, tag uint16, fields ...any) {
	r.t.Helper()
	r.write(frame(typ, tag, fields...))
}

type reply struct {
	typ  uint8
	tag  uint16
	body []byte
}

func (m reply) errno() uint32 {
	if m.typ != tRlerror || len(m.body) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(m.body)
}

func (m reply) String() string {
	if m.typ == tRlerror {
		return fmt.Sprintf("Rlerror(tag %d, errno %d)", m.tag, m.errno())
	}
	return fmt.Sprintf("R%d(tag %d, %d bytes)", m.typ, m.tag, len(m.body))
}

// recvErr reads one reply, waiting at most d.
func (r *rawConn) recvErr(d time.Duration) (reply, error) {
	r.c.SetReadDeadline(time.Now().Add(d))
	var h [7]byte
	if _, err := io.ReadFull(r.c, h[:]); err != nil {
		return reply{}, err
	}
	size := binary.LittleEndian.Uint32(h[:])
	if size < 7 || size > 8<<20 {
		return reply{}, fmt.Errorf("reply size %d", size)
	}
	body := make([]byte, size-7)
	if _, err := io.ReadFull(r.c, body); err != nil {
		return reply{}, err
	}
	return reply{typ: h[4], tag: binary.LittleEndian.Uint16(h[5:]), body: body}, nil
}

func (r *rawConn) recv() reply {
	r.t.Helper()
	m, err := r.recvErr(10 * time.Second)
	if err != nil {
		r.t.Fatalf("recv: %v", err)
	}
	return m
}

// expect reads one reply and checks its type and tag.
func (r *rawConn) expect(typ uint8, tag uint16) reply {
	r.t.Helper()
	m := r.recv()
	if m.typ != typ || m.tag != tag {
		r.t.Fatalf("got %v, want R%d(tag %d)", m, typ, tag)
	}
	return m
}

// expectErr reads one reply and checks it is Rlerror(errno) for tag.
func (r *rawConn) expectErr(tag uint16, errno linux.Errno) {
	r.t.Helper()
	m := r.recv()
	if m.typ != tRlerror || m.tag != tag || m.errno() != uint32(errno) {
		r.t.Fatalf("got %v, want Rlerror(tag %d, errno %d)", m, tag, errno)
	}
}

// expectClosed checks that the server ends the connection within d.
func (r *rawConn) expectClosed(d time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		m, err := r.recvErr(time.Until(deadline))
		if err == nil {
			continue // replies to what came before are fine
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			r.t.Fatalf("connection still open after %v", d)
		}
		_ = m
		return
	}
}

// version negotiates msize and returns the granted one.
func (r *rawConn) version(msize uint32) uint32 {
	r.t.Helper()
	r.send(tTversion, 0xFFFF, msize, "9P2000.L")
	m := r.expect(tRversion, 0xFFFF)
	return binary.LittleEndian.Uint32(m.body)
}

// session negotiates, attaches fid 0 to the root and returns the msize.
func (r *rawConn) session(msize uint32) uint32 {
	r.t.Helper()
	got := r.version(msize)
	r.send(tTattach, 1, uint32(0), noFID, "u", "", uint32(0))
	r.expect(tRattach, 1)
	return got
}

// walkOpen walks fid 0 to name as fid and opens it read-only.
func (r *rawConn) walkOpen(fid uint32, name string) {
	r.t.Helper()
	r.send(tTwalk, 2, uint32(0), fid, uint16(1), name)
	r.expect(tRwalk, 2)
	r.send(tTlopen, 3, fid, uint32(0))
	r.expect(tRlopen, 3)
}

func TestAuthError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []p9.ServerOpt
		errno linux.Errno
	}{
		{"stock", nil, linux.ENOSYS},
		{"ENOENT", []p9.ServerOpt{p9.WithAuthError(linux.ENOENT)}, linux.ENOENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := serve(t, newTestFS(), tc.opts...)
			r.version(8192)
			r.send(tTauth, 5, uint32(1), "u", "", uint32(0))
			r.expectErr(5, tc.errno)
			// The session goes on.
			r.send(tTattach, 6, uint32(0), noFID, "u", "", uint32(0))
			r.expect(tRattach, 6)
		})
	}
}

// bigFS serves a "file" of size bytes.
func bigFS(size int) *testFS {
	fs := newTestFS()
	fs.content = make([]byte, size)
	for i := range fs.content {
		fs.content[i] = byte(i)
	}
	return fs
}

func TestMaxMessageSize(t *testing.T) {
	for _, tc := range []struct {
		max, ask, want uint32
	}{
		{0, 16 << 20, 4 << 20}, // the library's own ceiling
		{64 << 10, 16 << 20, 64 << 10},
		{64 << 10, 8192, 8192},
	} {
		r := serve(t, newTestFS(), p9.WithMaxMessageSize(tc.max))
		if got := r.version(tc.ask); got != tc.want {
			t.Errorf("max %d, asked %d: granted %d, want %d", tc.max, tc.ask, got, tc.want)
		}
	}
}

// A Tread count above msize-11 is clamped: no panic (EFAULT), no Rread
// larger than msize.
func TestReadClamped(t *testing.T) {
	const msize = 8192
	r := serve(t, bigFS(64<<10))
	if got := r.session(msize); got != msize {
		t.Fatalf("msize %d", got)
	}
	r.walkOpen(5, "file")
	for _, count := range []uint32{msize - 11, msize, 65536, 1 << 22, 1<<22 + 1, 1 << 31} {
		r.send(tTread, 9, uint32(5), uint64(0), count)
		m := r.expect(tRread, 9)
		if n := binary.LittleEndian.Uint32(m.body); n != msize-11 || len(m.body)+7 != msize {
			t.Fatalf("count %d: Rread of %d data bytes, frame %d bytes; want %d, %d", count, n, len(m.body)+7, msize-11, msize)
		}
	}
}

// xattrFS is a testFS whose files accept any xattr (as a File that
// implements them would), so that only the server's refusal stops a
// client from making it buffer a value.
type xattrFS struct{ *testFS }

func (fs xattrFS) Attach() (p9.File, error) { return &xattrNode{node{fs: fs.testFS, name: "/"}}, nil }

type xattrNode struct{ node }

func (n *xattrNode) Walk(names []string) ([]p9.QID, p9.File, error) {
	q, f, err := n.node.Walk(names)
	if err != nil {
		return nil, nil, err
	}
	return q, &xattrNode{*f.(*node)}, nil
}
func (n *xattrNode) SetXattr(string, []byte, p9.XattrFlags) error { return nil }
func (n *xattrNode) GetXattr(string) ([]byte, error)              { return []byte("v"), nil }
func (n *xattrNode) ListXattrs() ([]string, error)                { return []string{"user.a"}, nil }

func TestWithoutXattrs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []p9.ServerOpt
		refuse bool
	}{
		{"stock", nil, false},
		{"refused", []p9.ServerOpt{p9.WithoutXattrs()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := serve(t, xattrFS{newTestFS()}, tc.opts...)
			r.session(8192)
			// Txattrcreate of 2^50 bytes on a clone of the root.
			r.send(tTwalk, 2, uint32(0), uint32(7), uint16(0))
			r.expect(tRwalk, 2)
			r.send(tTxattrcreate, 4, uint32(7), "user.big", uint64(1)<<50, uint32(0))
			if m := r.recv(); tc.refuse != (m.typ == tRlerror) || (tc.refuse && m.errno() != uint32(linux.EOPNOTSUPP)) {
				t.Fatalf("Txattrcreate: %v (refuse %v)", m, tc.refuse)
			}
			r.send(tTxattrwalk, 5, uint32(0), uint32(8), "user.a")
			if m := r.recv(); tc.refuse != (m.typ == tRlerror) || (tc.refuse && m.errno() != uint32(linux.EOPNOTSUPP)) {
				t.Fatalf("Txattrwalk: %v (refuse %v)", m, tc.refuse)
			}
		})
	}
}

func TestMaxFIDs(t *testing.T) {
	const max = 10
	r := serve(t, newTestFS(), p9.WithMaxFIDs(max))
	r.session(8192) // fid 0
	for fid := uint32(1); fid < max; fid++ {
		r.send(tTwalk, 2, uint32(0), fid, uint16(1), "file")
		r.expect(tRwalk, 2)
	}
	r.send(tTwalk, 2, uint32(0), uint32(max), uint16(1), "file")
	r.expectErr(2, linux.EMFILE)
	r.send(tTattach, 2, uint32(max), noFID, "u", "", uint32(0))
	r.expectErr(2, linux.EMFILE)
	// Walking onto a fid it holds replaces it: allowed at the bound.
	r.send(tTwalk, 2, uint32(0), uint32(3), uint16(0))
	r.expect(tRwalk, 2)
	// A clunk makes room.
	r.send(tTclunk, 2, uint32(5))
	r.expect(tRclunk, 2)
	r.send(tTwalk, 2, uint32(0), uint32(max), uint16(1), "file")
	r.expect(tRwalk, 2)
}

// A Tversion in mid-session aborts the reads in flight, and their replies
// never reach the new session: the Rversion is the next reply, and the
// one after it is the new session's first.
func TestVersionAbortsReads(t *testing.T) {
	fs := newTestFS()
	r := serve(t, fs)
	r.session(8192)
	r.walkOpen(5, "slow")
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	r.send(tTversion, 0xFFFF, uint32(8192), "9P2000.L")
	r.expect(tRversion, 0xFFFF)
	r.send(tTattach, 10, uint32(0), noFID, "u", "", uint32(0))
	r.expect(tRattach, 10)
}

// A Tversion in mid-session starts a new session: the old fids are gone.
func TestVersionResetsSession(t *testing.T) {
	r := serve(t, newTestFS(), p9.WithMaxFIDs(4))
	r.session(8192)
	r.walkOpen(5, "file")
	r.version(8192)
	r.send(tTread, 9, uint32(5), uint64(0), uint32(64))
	r.expectErr(9, linux.EBADF)
	r.send(tTgetattr, 9, uint32(0), uint64(0x7ff))
	r.expectErr(9, linux.EBADF)
	// And their slots are free again.
	for fid := uint32(10); fid < 14; fid++ {
		r.send(tTattach, 1, fid, noFID, "u", "", uint32(0))
		r.expect(tRattach, 1)
	}
}

// waitEntered waits until n reads of slow have started.
func (fs *testFS) waitEntered(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-fs.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a read of slow never started")
		}
	}
}

// expectNothing checks that no reply arrives within d.
func (r *rawConn) expectNothing(d time.Duration) {
	r.t.Helper()
	if m, err := r.recvErr(d); err == nil {
		r.t.Fatalf("unexpected %v", m)
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatalf("recv: %v", err)
	}
}

// Rflush follows the reply to the request it flushes; a Tflush of an idle
// tag or of its own tag is answered at once.
func TestFlushOrder(t *testing.T) {
	fs := newTestFS()
	r := serve(t, fs)
	r.session(8192)
	r.walkOpen(5, "wait")
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	r.send(tTflush, 11, uint16(10))
	r.send(tTflush, 12, uint16(99)) // idle tag
	r.expect(tRflush, 12)
	r.send(tTflush, 13, uint16(13)) // itself
	r.expect(tRflush, 13)
	r.expectNothing(100 * time.Millisecond)
	close(fs.release)
	r.expect(tRread, 10)
	r.expect(tRflush, 11)
}

// runFlushRounds pipelines, rounds times, a Tread of file and a Tflush of
// it, then reuses the read's tag at once, and counts the rounds where
// Rflush came before the read's reply or the reused tag got the old reply.
func runFlushRounds(t *testing.T, r *rawConn, rounds int) (flushFirst, stale int) {
	t.Helper()
	for i := 0; i < rounds; i++ {
		r.write(append(frame(tTread, 10, uint32(5), uint64(0), uint32(64)), frame(tTflush, 11, uint16(10))...))
		var order []uint8
		for len(order) < 2 {
			m := r.recv()
			order = append(order, m.typ)
		}
		if order[0] == tRflush {
			flushFirst++
			if order[1] == tRread {
				// The Rread already arrived after the Rflush: had the client reused tag 10, it would have taken this reply.
				stale++
			}
		}
		r.send(tTgetattr, 10, uint32(5), uint64(0x7ff))
		if m := r.recv(); m.typ != tRgetattr || m.tag != 10 {
			stale++
			t.Logf("reused tag got %v", m)
		}
	}
	return flushFirst, stale
}

func TestFlushRounds(t *testing.T) {
	r := serve(t, newTestFS())
	r.session(8192)
	r.walkOpen(5, "file")
	if first, stale := runFlushRounds(t, r, 500); first != 0 || stale != 0 {
		t.Fatalf("500 rounds: Rflush before the reply %d times, stale reply %d times", first, stale)
	}
}

// A Tflush cancels the read it names: the read returns EINTR at once, and
// the Rflush follows its reply. A second read on the same connection stays
// blocked: the cancel is per request.
func TestFlushCancels(t *testing.T) {
	fs := newTestFS()
	r := serve(t, fs)
	r.session(8192)
	r.walkOpen(5, "slow")
	r.send(tTwalk, 2, uint32(0), uint32(6), uint16(1), "slow")
	r.expect(tRwalk, 2)
	r.send(tTlopen, 3, uint32(6), uint32(0))
	r.expect(tRlopen, 3)
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	r.send(tTread, 20, uint32(6), uint64(0), uint32(64))
	fs.waitEntered(t, 2)
	r.send(tTflush, 11, uint16(10))
	r.expectErr(10, linux.EINTR)
	r.expect(tRflush, 11)
	r.expectNothing(50 * time.Millisecond)
	close(fs.release)
	if m := r.expect(tRread, 20); string(m.body[4:]) != "event" {
		t.Fatalf("Rread %q", m.body[4:])
	}
}

// The client hanging up cancels its blocked reads, so Handle returns (the
// serve cleanup checks it).
func TestEOFCancels(t *testing.T) {
	fs := newTestFS()
	r := serve(t, fs)
	r.session(8192)
	r.walkOpen(5, "slow")
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	r.c.Close()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Handle did not return after the client hung up")
	}
}

// Cancelling the server's context (WithContext) ends blocked reads.
func TestServerContextCancels(t *testing.T) {
	fs := newTestFS()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := serve(t, fs, p9.WithContext(ctx))
	r.session(8192)
	r.walkOpen(5, "slow")
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	cancel()
	r.expectErr(10, linux.EINTR)
}

// noneEntered checks that no read of slow or wait starts within d.
func (fs *testFS) noneEntered(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-fs.entered:
		t.Fatal("a read started beyond the bound")
	case <-time.After(d):
	}
}

// At most WithMaxRequests requests of a connection are handled at once;
// the rest stay on the socket and are served, in full, as replies go out.
func TestMaxRequests(t *testing.T) {
	const max, n = 3, 8
	fs := newTestFS()
	r := serve(t, fs, p9.WithMaxRequests(max))
	r.session(8192)
	r.walkOpen(5, "wait")
	for i := 0; i < n; i++ {
		r.send(tTread, uint16(10+i), uint32(5), uint64(0), uint32(64))
	}
	fs.waitEntered(t, max)
	fs.noneEntered(t, 100*time.Millisecond)
	for got := 0; got < n; got++ {
		fs.step <- struct{}{}
		if m := r.recv(); m.typ != tRread || string(m.body[4:]) != "event" {
			t.Fatalf("reply %d: %v", got, m)
		}
		if left := n - got - 1; left >= max {
			fs.waitEntered(t, 1)
		}
	}
}

// Reads of a Blocker file hold slots of their own: with every blocking slot
// taken, the connection still answers its other requests, and one more
// blocking read is refused with EAGAIN at once.
func TestMaxBlockingReads(t *testing.T) {
	const maxReq, maxBlock = 2, 3
	fs := newTestFS()
	r := serve(t, fs, p9.WithMaxRequests(maxReq), p9.WithMaxBlockingReads(maxBlock))
	r.session(8192)
	r.walkOpen(5, "slow")
	for i := 0; i < maxBlock; i++ {
		r.send(tTread, uint16(10+i), uint32(5), uint64(0), uint32(64))
	}
	fs.waitEntered(t, maxBlock)
	for i := 0; i < 4*maxReq; i++ {
		r.send(tTgetattr, 30, uint32(0), uint64(0x7ff))
		r.expect(tRgetattr, 30)
	}
	r.send(tTread, 40, uint32(5), uint64(0), uint32(64))
	r.expectErr(40, linux.EAGAIN)
	// A flush frees a blocking slot.
	r.send(tTflush, 41, uint16(10))
	r.expectErr(10, linux.EINTR)
	r.expect(tRflush, 41)
	r.send(tTread, 42, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	close(fs.release)
	for i := 0; i < maxBlock; i++ {
		if m := r.recv(); m.typ != tRread {
			t.Fatalf("got %v", m)
		}
	}
}

// A client that stops in the middle of a frame is disconnected after the
// read timeout; one idle between frames is not.
func TestHalfFrameStall(t *testing.T) {
	const rto = 200 * time.Millisecond
	for _, cut := range []int{1, 7, 12} { // in the header, after it, in the body
		r := serve(t, newTestFS(), p9.WithReadTimeout(rto))
		r.session(8192)
		// Idle between frames for longer than the bound: still served.
		time.Sleep(2 * rto)
		r.send(tTgetattr, 3, uint32(0), uint64(0x7ff))
		r.expect(tRgetattr, 3)
		f := frame(tTgetattr, 4, uint32(0), uint64(0x7ff))
		r.write(f[:cut])
		start := time.Now()
		r.expectClosed(10 * time.Second)
		if d := time.Since(start); d < rto/2 {
			t.Fatalf("cut %d: closed after %v, before the bound", cut, d)
		}
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("cut %d: Handle did not return", cut)
		}
	}
}

// A client that stops reading replies is disconnected once a reply could
// not be written for the write timeout.
func TestNonReader(t *testing.T) {
	fs := bigFS(1 << 20)
	r := serve(t, fs, p9.WithWriteTimeout(200*time.Millisecond), p9.WithMaxRequests(4))
	r.session(1 << 20)
	r.walkOpen(5, "file")
	// Far more reply bytes than the socket buffers hold, never read.
	go func() {
		for i := 0; i < 64; i++ {
			if _, err := r.c.Write(frame(tTread, uint16(10+i), uint32(5), uint64(0), uint32(1<<20))); err != nil {
				return
			}
		}
	}()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server never gave up on a client that does not read")
	}
}

// WithIdleTimeout closes a connection with nothing in flight, and none
// with a request in flight.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	fs := newTestFS()
	r := serve(t, fs, p9.WithIdleTimeout(idle))
	r.session(8192)
	r.walkOpen(5, "slow")
	r.send(tTread, 10, uint32(5), uint64(0), uint32(64))
	fs.waitEntered(t, 1)
	time.Sleep(3 * idle) // a blocked read is in flight: not idle
	close(fs.release)
	r.expect(tRread, 10)
	start := time.Now()
	r.expectClosed(10 * time.Second)
	if d := time.Since(start); d < idle/2 {
		t.Fatalf("closed %v after the last reply", d)
	}
}

// A Tread pipelined right behind the Tlopen of its fid is served as a read
// of the open file, never refused as if the fid were not open.
func TestPipelinedOpenRead(t *testing.T) {
	r := serve(t, newTestFS())
	r.session(8192)
	for i := 0; i < 200; i++ {
		fid := uint32(100 + i)
		r.write(append(append(
			frame(tTwalk, 2, uint32(0), fid, uint16(1), "file"),
			frame(tTlopen, 3, fid, uint32(0))...),
			frame(tTread, 4, fid, uint64(0), uint32(64))...))
		got := map[uint16]reply{}
		for len(got) < 3 {
			m := r.recv()
			got[m.tag] = m
		}
		if m := got[4]; m.typ != tRread || string(m.body[4:]) != "hello, world" {
			t.Fatalf("round %d: Tread behind Tlopen got %v", i, m)
		}
		if got[2].typ != tRwalk || got[3].typ != tRlopen {
			t.Fatalf("round %d: %v %v", i, got[2], got[3])
		}
		r.send(tTclunk, 5, fid)
		r.expect(tRclunk, 5)
	}
}

// A malformed frame ends that connection, and only that one.
func TestMalformed(t *testing.T) {
	const msize = 8192
	good := serve(t, newTestFS(), p9.WithMaxMessageSize(1<<20))
	good.session(msize)
	good.walkOpen(5, "file")
	check := func() {
		t.Helper()
		good.send(tTread, 9, uint32(5), uint64(0), uint32(64))
		if m := good.expect(tRread, 9); string(m.body[4:]) != "hello, world" {
			t.Fatalf("good connection: %v", m)
		}
	}
	huge := frame(tTread, 2, uint32(5), uint64(0), uint32(64))
	binary.LittleEndian.PutUint32(huge, msize+1)
	cases := []struct {
		name    string
		version bool // negotiate first
		bytes   []byte
	}{
		{"size<7", true, []byte{3, 0, 0, 0, 0, 0, 0, 0}},
		{"size0 before version", false, make([]byte, 16)},
		{"size>msize", true, append(huge, make([]byte, msize)...)},
		{"size>max before version", false, frame(tTversion, 0xFFFF, uint32(8192), "9P2000.L")},
		{"garbage", true, []byte("\xde\xad\xbe\xef garbage garbage garbage")},
		{"garbage before version", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"short Tflush", true, frame(tTflush, 1, uint8(1))},
		{"short Tread", true, frame(tTread, 1, uint32(2))},
		{"short Tversion", false, frame(tTversion, 0xFFFF, uint32(8192))},
		{"Tversion string overrun", false, frame(tTversion, 0xFFFF, uint32(8192), uint16(50), []byte("9P2000.L"))},
		{"undecodable Twalk", true, frame(tTwalk, 1, uint32(0), uint32(5), uint16(3))},
		{"truncated frame", true, frame(tTread, 2, uint32(5), uint64(0), uint32(64))[:12]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := serve(t, newTestFS(), p9.WithMaxMessageSize(1<<20))
			if c.name == "size>max before version" {
				binary.LittleEndian.PutUint32(c.bytes, 2<<20)
			}
			if c.version {
				bad.session(msize)
			}
			bad.write(c.bytes)
			if c.name == "truncated frame" {
				bad.c.(interface{ CloseWrite() error }).CloseWrite()
			}
			check()
			bad.expectClosed(10 * time.Second)
			select {
			case <-bad.done:
			case <-time.After(10 * time.Second):
				t.Fatal("Handle did not return")
			}
			check()
		})
	}
}

// Flushes of a flush and of an idle tag: Rflush of the idle tag at once;
// the Rflushes of the read and of its flush only after the read's reply,
// in that order.
func TestFlushOfFlush(t *testing.T) {
	fs := newTestFS()
	r := serve(t, fs)
	r.session(8192)
	r.walkOpen(5, "wait") // its reads ignore the flush
	r.write(append(append(append(
		frame(tTread, 5, uint32(5), uint64(0), uint32(64)),
		frame(tTflush, 6, uint16(5))...),
		frame(tTflush, 7, uint16(6))...),
		frame(tTflush, 8, uint16(99))...))
	fs.waitEntered(t, 1)
	r.expect(tRflush, 8)
	r.expectNothing(50 * time.Millisecond)
	close(fs.release)
	r.expect(tRread, 5)
	r.expect(tRflush, 6)
	r.expect(tRflush, 7)
}

// At the library's largest msize a file reads whole, in Rreads no larger
// than msize.
func TestReadAtMaxMsize(t *testing.T) {
	const size = 10<<20 + 123
	r := serve(t, bigFS(size))
	msize := r.session(16 << 20)
	if msize != 4<<20 {
		t.Fatalf("msize %d", msize)
	}
	r.walkOpen(5, "file")
	total := 0
	for {
		r.send(tTread, 9, uint32(5), uint64(total), msize)
		m := r.expect(tRread, 9)
		n := int(binary.LittleEndian.Uint32(m.body))
		if n > int(msize)-11 {
			t.Fatalf("Rread of %d bytes at msize %d", n, msize)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != size {
		t.Fatalf("read %d bytes, want %d", total, size)
	}
}

// An idle connection, even one that negotiated the largest msize and read
// a file, holds far less than msize: buffers are taken per request and
// pooled, not per connection. Measured as the growth of the heap and the
// goroutine stacks over n idle connections, per connection.
func TestIdleConnectionCost(t *testing.T) {
	const n = 64
	const limit = 64 << 10
	fs := bigFS(1 << 20)
	inuse := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	// One connection first, so that what every connection shares (pools,
	// the registry, code paths' first allocations) is already there.
	warm := serve(t, fs)
	warm.session(1 << 20)
	warm.walkOpen(5, "file")
	warm.send(tTread, 9, uint32(5), uint64(0), uint32(1<<20))
	warm.expect(tRread, 9)
	before := inuse()
	conns := make([]*rawConn, n)
	for i := range conns {
		r := serve(t, fs)
		r.session(4 << 20)
		r.walkOpen(5, "file")
		r.send(tTread, 9, uint32(5), uint64(0), uint32(1<<20))
		r.expect(tRread, 9)
		conns[i] = r
	}
	after := inuse()
	per := (int64(after) - int64(before)) / n
	t.Logf("%d idle connections (4 MiB msize, one 1 MiB read each): %d bytes each", n, per)
	if per > limit {
		t.Fatalf("an idle connection holds %d bytes, above %d", per, limit)
	}
}

// WithVersion(0) asks for plain "9P2000.L" first, WithAttachUID names the
// uid in the Tattach, and the msize the Rversion grants is the session's
// (MessageSize), against a server that takes only "9P2000.L" (as diod).
func TestClientOptions(t *testing.T) {
	srv, cli := net.Pipe()
	defer srv.Close()
	got := make(chan string, 2)
	go func() {
		read := func() []byte {
			var size [4]byte
			if _, err := io.ReadFull(srv, size[:]); err != nil {
				return nil
			}
			b := make([]byte, binary.LittleEndian.Uint32(size[:]))
			copy(b, size[:])
			if _, err := io.ReadFull(srv, b[4:]); err != nil {
				return nil
			}
			return b
		}
		v := read() // size type tag msize version[s]
		got <- string(v[13:])
		srv.Write(frame(tTversion+1, binary.LittleEndian.Uint16(v[5:]), uint32(65536), "9P2000.L"))
		a := read() // ... n_uname[4] last
		got <- fmt.Sprint(binary.LittleEndian.Uint32(a[len(a)-4:]))
		srv.Write(frame(tTattach+1, binary.LittleEndian.Uint16(a[5:]), uint8(0x80), uint32(0), uint64(1)))
	}()
	c, err := p9.NewClient(cli, p9.WithMessageSize(1<<20), p9.WithVersion(0), p9.WithAttachUID(1234))
	if err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "9P2000.L" {
		t.Errorf("Tversion asked for %q, want 9P2000.L", v)
	}
	if m := c.MessageSize(); m != 65536 {
		t.Errorf("MessageSize() = %d, want the 65536 granted", m)
	}
	if _, err := c.Attach("/"); err != nil {
		t.Fatal(err)
	}
	if u := <-got; u != "1234" {
		t.Errorf("Tattach n_uname %s, want 1234", u)
	}
}
