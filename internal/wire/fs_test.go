package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// ---- a tiny file tree: /fast, /slow, /big -------------------------------------

var (
	fastContent  = []byte("fast-content\n")
	slowContent  = []byte("SLOW-CONTENT\n")
	gatedContent = []byte("gated-content\n")
)

const bigSize = 1 << 20

// testFS is one connection's view: ctx is the wrapper's Context (or a
// test-scoped one for a raw connection).
type testFS struct {
	ctx      context.Context
	entered  chan struct{} // a slow ReadAt started (non-blocking send)
	release  chan struct{} // each token lets one slow ReadAt return
	returned chan error    // a slow ReadAt returned (non-blocking send)

	// The fast path (fast_test.go): reg, if set, is told of every open.
	reg      interface{ Opened(flags uint32, f any) }
	gate     chan struct{} // each token lets one Open of /gated return
	mu       sync.Mutex
	lastOpen uint32 // flags of the last Open
}

// opened records an Open's flags and reports f to the Conn's fast path.
func (fs *testFS) opened(flags p9.OpenFlags, f any) {
	fs.mu.Lock()
	fs.lastOpen = uint32(flags)
	fs.mu.Unlock()
	if fs.reg != nil {
		fs.reg.Opened(uint32(flags), f)
	}
}

func newTestFS(ctx context.Context) *testFS {
	return &testFS{
		ctx:      ctx,
		entered:  make(chan struct{}, 64),
		gate:     make(chan struct{}, 1024),
		release:  make(chan struct{}, 64),
		returned: make(chan error, 64),
	}
}

type attacher struct{ fs *testFS }

func (a attacher) Attach() (p9.File, error) { return &dir{fs: a.fs}, nil }

type statfs struct{}

func (statfs) StatFS() (p9.FSStat, error) { return p9.FSStat{BlockSize: 4096, NameLength: 255}, nil }

type dir struct {
	statfs
	p9.DefaultWalkGetAttr
	templatefs.ReadOnlyDir
	templatefs.NilCloser
	fs *testFS
}

var dirQID = p9.QID{Type: p9.TypeDir, Path: 1}

func (d *dir) Walk(names []string) ([]p9.QID, p9.File, error) {
	switch {
	case len(names) == 0:
		return nil, &dir{fs: d.fs}, nil
	case len(names) == 1:
		for i, n := range []string{"fast", "slow", "big", "gated", "eio"} {
			if names[0] == n {
				f := &file{fs: d.fs, name: n, qid: p9.QID{Type: p9.TypeRegular, Path: uint64(2 + i)}}
				return []p9.QID{f.qid}, f, nil
			}
		}
	}
	return nil, nil, linux.ENOENT
}

func (d *dir) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	return dirQID, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeDirectory | 0o555}, nil
}

func (d *dir) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	d.fs.opened(mode, d)
	return dirQID, 0, nil
}

func (d *dir) Readdir(uint64, uint32) (p9.Dirents, error) { return nil, nil }

type file struct {
	statfs
	p9.DefaultWalkGetAttr
	templatefs.ReadOnlyFile
	templatefs.NilCloser
	fs   *testFS
	name string
	qid  p9.QID
}

func (f *file) Walk(names []string) ([]p9.QID, p9.File, error) {
	if len(names) != 0 {
		return nil, nil, linux.ENOTDIR
	}
	g := *f
	return nil, &g, nil
}

func (f *file) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	return f.qid, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeRegular | 0o444}, nil
}

func (f *file) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	if f.name == "gated" {
		<-f.fs.gate
	}
	f.fs.opened(mode, f)
	return f.qid, 0, nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	switch f.name {
	case "eio":
		return 0, linux.EIO
	case "gated":
		return copyAt(p, gatedContent, off), nil
	case "fast":
		return copyAt(p, fastContent, off), nil
	case "big":
		n := 0
		for ; n < len(p) && off+int64(n) < bigSize; n++ {
			p[n] = byte(off + int64(n))
		}
		return n, nil
	}
	select {
	case f.fs.entered <- struct{}{}:
	default:
	}
	var err error
	n := 0
	select {
	case <-f.fs.release:
		n = copyAt(p, slowContent, off)
	case <-f.fs.ctx.Done():
		err = linux.EINTR
	}
	select {
	case f.fs.returned <- err:
	default:
	}
	return n, err
}

func copyAt(p, content []byte, off int64) int {
	if off >= int64(len(content)) {
		return 0
	}
	return copy(p, content[off:])
}

// ---- hand-built frames ---------------------------------------------------------

const (
	msgTattach = 104
	msgRattach = 105
	msgTwalk   = 110
	msgRwalk   = 111
	noFID      = ^uint32(0)
)

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func str(s string) []byte { return append(u16(uint16(len(s))), s...) }

func frame(typ uint8, tag uint16, parts ...[]byte) []byte {
	b := make([]byte, hdrLen)
	b[4] = typ
	binary.LittleEndian.PutUint16(b[5:], tag)
	for _, p := range parts {
		b = append(b, p...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func tversion(msize uint32, version string) []byte {
	return frame(msgTversion, noTag, u32(msize), str(version))
}

func tauth(tag uint16, afid uint32) []byte {
	return frame(msgTauth, tag, u32(afid), str("user"), str("/"), u32(0))
}

func tattach(tag uint16, fid uint32) []byte {
	return frame(msgTattach, tag, u32(fid), u32(noFID), str(""), str(""), u32(0))
}

func twalk(tag uint16, fid, newfid uint32, names ...string) []byte {
	parts := [][]byte{u32(fid), u32(newfid), u16(uint16(len(names)))}
	for _, n := range names {
		parts = append(parts, str(n))
	}
	return frame(msgTwalk, tag, parts...)
}

func tlopen(tag uint16, fid uint32) []byte { return frame(msgTlopen, tag, u32(fid), u32(0)) }

func tlopenFlags(tag uint16, fid, flags uint32) []byte {
	return frame(msgTlopen, tag, u32(fid), u32(flags))
}

func tclunk(tag uint16, fid uint32) []byte { return frame(120, tag, u32(fid)) }

func treaddir(tag uint16, fid uint32, off uint64, count uint32) []byte {
	return frame(msgTreaddir, tag, u32(fid), u64(off), u32(count))
}

func tread(tag uint16, fid uint32, off uint64, count uint32) []byte {
	return frame(msgTread, tag, u32(fid), u64(off), u32(count))
}

func tflush(tag, oldtag uint16) []byte { return frame(msgTflush, tag, u16(oldtag)) }

type rmsg struct {
	typ  uint8
	tag  uint16
	body []byte
}

func (m rmsg) String() string {
	switch m.typ {
	case msgRlerror:
		return fmt.Sprintf("Rlerror(tag %d, errno %d)", m.tag, m.errno())
	case msgRread:
		return fmt.Sprintf("Rread(tag %d, %q)", m.tag, m.data())
	}
	return fmt.Sprintf("R%d(tag %d, %d bytes)", m.typ, m.tag, len(m.body))
}

func (m rmsg) errno() uint32 {
	if m.typ != msgRlerror || len(m.body) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(m.body)
}

func (m rmsg) data() []byte {
	if m.typ != msgRread || len(m.body) < 4 {
		return nil
	}
	return m.body[4:]
}

// ---- client side ---------------------------------------------------------------

type client struct {
	t   testing.TB
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

func (cl *client) send(frames ...[]byte) {
	cl.t.Helper()
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	if _, err := cl.c.Write(bytes.Join(frames, nil)); err != nil {
		cl.t.Fatalf("send: %v", err)
	}
}

// read returns the next reply, or an error (io.EOF when the server closed).
func (cl *client) read(timeout time.Duration) (rmsg, error) {
	cl.c.SetReadDeadline(time.Now().Add(timeout))
	var h [hdrLen]byte
	if _, err := io.ReadFull(cl.br, h[:]); err != nil {
		return rmsg{}, err
	}
	m := rmsg{typ: h[4], tag: binary.LittleEndian.Uint16(h[5:])}
	m.body = make([]byte, binary.LittleEndian.Uint32(h[:])-hdrLen)
	if _, err := io.ReadFull(cl.br, m.body); err != nil {
		return rmsg{}, err
	}
	return m, nil
}

func (cl *client) recv() rmsg {
	cl.t.Helper()
	m, err := cl.read(10 * time.Second)
	if err != nil {
		cl.t.Fatalf("recv: %v", err)
	}
	return m
}

// rpc sends one request and expects a reply of type want with the same tag.
func (cl *client) rpc(f []byte, want uint8) rmsg {
	cl.t.Helper()
	cl.send(f)
	m := cl.recv()
	if tag := binary.LittleEndian.Uint16(f[5:]); m.tag != tag || m.typ != want {
		cl.t.Fatalf("request type %d tag %d: got %v, want type %d", f[4], tag, m, want)
	}
	return m
}

// wantClosed reads until the server closes the connection. Replies already
// on their way (an Rlerror for the bad frame, say) are allowed.
func (cl *client) wantClosed() {
	cl.t.Helper()
	for i := 0; ; i++ {
		m, err := cl.read(5 * time.Second)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				cl.t.Fatalf("want connection closed, got %v", err)
			}
			return
		}
		if i > 10 {
			cl.t.Fatalf("want connection closed, still getting %v", m)
		}
	}
}

// Fids after setup: 0 root, 1 /slow, 2 /fast, 3 /big, all opened for reading.
func (cl *client) setup(msize uint32) uint32 {
	cl.t.Helper()
	m := cl.rpc(tversion(msize, "9P2000.L"), msgRversion)
	got := binary.LittleEndian.Uint32(m.body)
	cl.rpc(tattach(1, 0), msgRattach)
	for i, name := range []string{"slow", "fast", "big"} {
		fid := uint32(i + 1)
		cl.rpc(twalk(1, 0, fid, name), msgRwalk)
		cl.rpc(tlopen(1, fid), msgRlopen)
	}
	return got
}

// ---- harness: one p9 server over a unix socketpair ------------------------------

type harness struct {
	fs   *testFS
	wc   *Conn // nil for a raw (unwrapped) connection
	cl   *client
	done chan struct{} // closed when srv.Handle returns
}

func socketpair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
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

// start serves one connection. With wrap, p9 gets a *Conn; otherwise the raw
// conn, and the slow file watches a context cancelled at cleanup.
func start(t testing.TB, wrap bool, o Options) *harness { return startWith(t, wrap, false, o) }

// startFast is start with the Conn's fast path told of every open.
func startFast(t testing.TB, o Options) *harness { return startWith(t, true, true, o) }

func startWith(t testing.TB, wrap, fast bool, o Options) *harness {
	t.Helper()
	cc, sc := socketpair(t)
	h := &harness{done: make(chan struct{}), cl: &client{t: t, c: cc, br: bufio.NewReader(cc)}}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	var rw interface {
		io.ReadCloser
		io.WriteCloser
	} = sc
	ctx, cancel := context.WithCancel(context.Background())
	if wrap {
		h.wc = New(sc, sc, o)
		rw = h.wc
		ctx = h.wc.Context()
	}
	h.fs = newTestFS(ctx)
	if fast {
		h.fs.reg = h.wc
	}
	srv := p9.NewServer(attacher{h.fs})
	go func() {
		srv.Handle(rw, rw)
		close(h.done)
	}()
	t.Cleanup(func() {
		cc.Close()
		cancel()
		h.waitDone(t)
	})
	return h
}

func (h *harness) stats() Stats {
	if h.wc == nil {
		return Stats{}
	}
	return h.wc.Stats()
}

func (h *harness) waitDone(t testing.TB) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("srv.Handle did not return")
	}
}
