package p9_test

// Tests of the read and listing paths of fastpath.go and splice_linux.go:
// a File that is a HostFileReader has its Treads spliced from its host
// file when the transport is a socket, and read with ReadAt otherwise; a
// DirentsReader's encoded entries are the Rreaddir.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// hostFS is a root directory holding "data", a host file, and "dir", a
// directory whose listing is kept encoded.
type hostFS struct {
	path    string // the host file behind "data"
	dirents []p9.Dirent
	overrun bool // ReaddirWire returns more than count bytes

	readAtBytes atomic.Int64 // bytes "data" gave through ReadAt
	hostFiles   atomic.Int64 // times HostFile offered the file
	controls    atomic.Int64 // calls of Control on its RawConn: the server's fstats

	server net.Conn // the server's end of the socket pair (serveHost)
}

func (fs *hostFS) Attach() (p9.File, error) { return &hostNode{fs: fs, name: "/"}, nil }

type hostNode struct {
	templatefs.NoopFile
	fs   *hostFS
	name string
	f    *os.File
}

func (n *hostNode) qid() (p9.QID, p9.FileMode) {
	switch n.name {
	case "data":
		return p9.QID{Type: p9.TypeRegular, Path: 2}, p9.ModeRegular | 0o444
	case "dir":
		return p9.QID{Type: p9.TypeDir, Path: 3}, p9.ModeDirectory | 0o555
	}
	return p9.QID{Type: p9.TypeDir, Path: 1}, p9.ModeDirectory | 0o555
}

func (n *hostNode) Walk(names []string) ([]p9.QID, p9.File, error) {
	if len(names) == 0 {
		return nil, &hostNode{fs: n.fs, name: n.name}, nil
	}
	if len(names) != 1 || n.name != "/" || (names[0] != "data" && names[0] != "dir") {
		return nil, nil, linux.ENOENT
	}
	c := &hostNode{fs: n.fs, name: names[0]}
	q, _ := c.qid()
	return []p9.QID{q}, c, nil
}

func (n *hostNode) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	q, mode := n.qid()
	return q, p9.AttrMask{Mode: true}, p9.Attr{Mode: mode}, nil
}

func (n *hostNode) Open(p9.OpenFlags) (p9.QID, uint32, error) {
	q, _ := n.qid()
	if n.name == "data" {
		f, err := os.Open(n.fs.path)
		if err != nil {
			return p9.QID{}, 0, err
		}
		n.f = f
	}
	return q, 0, nil
}

func (n *hostNode) ReadAt(p []byte, off int64) (int, error) {
	if n.f == nil {
		return 0, linux.EISDIR
	}
	k, err := n.f.ReadAt(p, off)
	n.fs.readAtBytes.Add(int64(k))
	if errors.Is(err, io.EOF) && k > 0 {
		err = nil
	}
	return k, err
}

func (n *hostNode) HostFile() (syscall.Conn, bool) {
	if n.f == nil {
		return nil, false
	}
	n.fs.hostFiles.Add(1)
	return countedFile{n.f, n.fs}, true
}

// countedFile is the host file as HostFile offers it: an *os.File whose
// RawConn counts the server's calls of Control.
type countedFile struct {
	*os.File
	fs *hostFS
}

func (f countedFile) SyscallConn() (syscall.RawConn, error) {
	rc, err := f.File.SyscallConn()
	return countedConn{rc, f.fs}, err
}

type countedConn struct {
	syscall.RawConn
	fs *hostFS
}

func (c countedConn) Control(f func(uintptr)) error {
	c.fs.controls.Add(1)
	return c.RawConn.Control(f)
}

func (n *hostNode) ReaddirWire(offset uint64, count uint32) ([]byte, error) {
	var out []byte
	for i := offset; i < uint64(len(n.fs.dirents)); i++ {
		e := encodeDirent(n.fs.dirents[i])
		if !n.fs.overrun && len(out)+len(e) > int(count) {
			break
		}
		out = append(out, e...)
	}
	return out, nil
}

func (n *hostNode) ReaddirReady(uint64) bool { return true }

func (n *hostNode) Close() error {
	if n.f != nil {
		return n.f.Close()
	}
	return nil
}

// encodeDirent is one Rreaddir entry: qid[13] offset[8] type[1] name[s].
func encodeDirent(d p9.Dirent) []byte {
	b := []byte{byte(d.QID.Type)}
	b = binary.LittleEndian.AppendUint32(b, d.QID.Version)
	b = binary.LittleEndian.AppendUint64(b, d.QID.Path)
	b = binary.LittleEndian.AppendUint64(b, d.Offset)
	b = append(b, byte(d.Type))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(d.Name)))
	return append(b, d.Name...)
}

// writeOnly hides the socket behind a plain io.WriteCloser, as a transport
// that is not a socket would be.
type writeOnly struct{ io.WriteCloser }

// serveHost serves fs on one end of a unix socket pair (through writeOnly
// if wrap) and returns a client of the other end at msize.
func serveHost(t *testing.T, fs *hostFS, msize uint32, wrap bool) p9.File {
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
	sc, cc := conn(fds[0]), conn(fds[1])
	fs.server = sc
	var w io.WriteCloser = sc
	if wrap {
		w = writeOnly{sc}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p9.NewServer(fs).Handle(sc, w)
	}()
	cl, err := p9.NewClient(cc, p9.WithMessageSize(msize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		<-done
	})
	root, err := cl.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func openData(t *testing.T, root p9.File, name string) p9.File {
	t.Helper()
	_, f, err := root.Walk([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	return f
}

// newHostFS writes size random bytes to a host file.
func newHostFS(t *testing.T, size int) (*hostFS, []byte) {
	t.Helper()
	content := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(content)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return &hostFS{path: path}, content
}

// readCases are reads of a file of size bytes at msize 1 MiB: whole
// messages from offset 0, unaligned offsets, counts that fill the pipe and
// more (the tail is copied), a count below spliceMin, the last bytes, and
// reads at and past the end.
func readCases(size int) []struct{ off, n int } {
	return []struct{ off, n int }{
		{0, 1 << 20},
		{4095, 300 << 10},
		{1, 1<<20 - 64},
		{8192, 1<<20 - 24},
		{12345, 100},
		{size - 70000, 70000},
		{size - 10, 1 << 20},
		{size, 1 << 16},
		{size + 4096, 1 << 16},
	}
}

func checkReads(t *testing.T, f p9.File, content []byte) {
	t.Helper()
	buf := make([]byte, 4<<20)
	for _, c := range readCases(len(content)) {
		n, err := f.ReadAt(buf[:c.n], int64(c.off))
		want := content[min(c.off, len(content)):min(c.off+c.n, len(content))]
		if len(want) == 0 {
			if !errors.Is(err, io.EOF) {
				t.Errorf("read %d at %d: err %v, want EOF", c.n, c.off, err)
			}
		} else if err != nil {
			t.Errorf("read %d at %d: %v", c.n, c.off, err)
		}
		if !bytes.Equal(buf[:n], want) {
			t.Errorf("read %d at %d: %d bytes, not the file's %d", c.n, c.off, n, len(want))
		}
	}
	// The whole file, in the client's msize chunks: the client stops at
	// the first short reply, so every reply must be whole.
	n, err := f.ReadAt(buf[:len(content)], 0)
	if err != nil || !bytes.Equal(buf[:n], content) {
		t.Errorf("whole file: %d bytes, %v; not the file", n, err)
	}
}

func TestSpliceRead(t *testing.T) {
	const size = 3<<20 + 1234
	fs, content := newHostFS(t, size)
	f := openData(t, serveHost(t, fs, 1<<20, false), "data")
	checkReads(t, f, content)
	// Splice carried the bulk: ReadAt gave only tails the pipe could not
	// hold and the reads below spliceMin.
	if fs.hostFiles.Load() == 0 {
		t.Fatal("HostFile never asked: nothing was spliced")
	}
	if r := fs.readAtBytes.Load(); r > size/8 {
		t.Errorf("ReadAt gave %d bytes of the %d+ read: splice did not carry the reads", r, 2*size)
	}
}

func TestReadWithoutSocket(t *testing.T) {
	const size = 3<<20 + 1234
	fs, content := newHostFS(t, size)
	f := openData(t, serveHost(t, fs, 1<<20, true), "data")
	checkReads(t, f, content)
	if r := fs.readAtBytes.Load(); r < size {
		t.Errorf("ReadAt gave %d bytes, want every byte read (no socket to splice to)", r)
	}
}

// Concurrent Treads on one connection outnumber its pipes: those without
// one are read and copied, and every reply is whole and in its place.
func TestSpliceConcurrent(t *testing.T) {
	const size = 4 << 20
	fs, content := newHostFS(t, size)
	f := openData(t, serveHost(t, fs, 256<<10, false), "data")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		g := g
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for i := 0; i < 3; i++ {
				off := (g*7919 + i*104729) % (size / 2)
				n, err := f.ReadAt(buf[:size-off], int64(off))
				if err != nil || !bytes.Equal(buf[:n], content[off:]) {
					t.Errorf("goroutine %d read at %d: %d bytes, %v; not the file", g, off, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if fs.hostFiles.Load() == 0 {
		t.Error("nothing was spliced")
	}
}

func TestReaddirWire(t *testing.T) {
	fs := &hostFS{}
	for i := 0; i < 500; i++ {
		fs.dirents = append(fs.dirents, p9.Dirent{
			QID:    p9.QID{Type: p9.TypeRegular, Path: uint64(100 + i)},
			Offset: uint64(i + 1),
			Type:   8,
			Name:   string(rune('a'+i%26)) + "-entry-" + string(rune('0'+i%10)),
		})
	}
	d := openData(t, serveHost(t, fs, 8192, false), "dir")
	var got []p9.Dirent
	for off := uint64(0); ; {
		ents, err := d.Readdir(off, 1<<20) // clamped to msize-11
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == 0 {
			break
		}
		got = append(got, ents...)
		off = ents[len(ents)-1].Offset
	}
	if len(got) != len(fs.dirents) {
		t.Fatalf("listed %d entries, want %d", len(got), len(fs.dirents))
	}
	for i := range got {
		if got[i] != fs.dirents[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], fs.dirents[i])
		}
	}
}

// A DirentsReader that returns more than count bytes gets EIO, never an
// Rreaddir longer than msize.
func TestReaddirWireOverrun(t *testing.T) {
	fs := &hostFS{overrun: true}
	for i := 0; i < 1000; i++ {
		fs.dirents = append(fs.dirents, p9.Dirent{QID: p9.QID{Path: uint64(i)}, Offset: uint64(i + 1), Name: "name"})
	}
	d := openData(t, serveHost(t, fs, 8192, false), "dir")
	if _, err := d.Readdir(0, 8192); !errors.Is(err, linux.EIO) {
		t.Fatalf("Readdir of an overrunning File: %v, want EIO", err)
	}
}

// BenchmarkSequentialRead reads a page-cached file from start to end at
// msize 1 MiB, one Tread of msize-24 bytes at a time (as diodcat asks),
// with a raw client on a unix socket pair: "splice" through the server with
// the socket as its writer, "copy" with the socket hidden (pread and
// writev), and "sendfile", the transport alone fed by sendfile(2): the
// ceiling the other two are measured against.
func BenchmarkSequentialRead(b *testing.B) {
	const size = 64 << 20
	content := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(content)
	path := filepath.Join(b.TempDir(), "data")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		b.Fatal(err)
	}
	pair := func() (net.Conn, net.Conn) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		var cs [2]net.Conn
		for i, fd := range fds {
			f := os.NewFile(uintptr(fd), "socketpair")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = c
		}
		return cs[0], cs[1]
	}
	b.Run("sendfile", func(b *testing.B) {
		b.SetBytes(size)
		s, c := pair()
		defer c.Close()
		go func() {
			defer s.Close()
			f, err := os.Open(path)
			if err != nil {
				return
			}
			defer f.Close()
			for {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return
				}
				if _, err := io.Copy(s, f); err != nil { // sendfile(2)
					return
				}
			}
		}()
		buf := make([]byte, 1<<20)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(c, buf[:0]); err != nil {
				b.Fatal(err)
			}
			for n := 0; n < size; {
				k, err := c.Read(buf[:min(len(buf), size-n)])
				if err != nil {
					b.Fatal(err)
				}
				n += k
			}
		}
	})
	for _, wrap := range []bool{false, true} {
		name := "splice"
		if wrap {
			name = "copy"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			s, c := pair()
			var w io.WriteCloser = s
			if wrap {
				w = writeOnly{s}
			}
			go p9.NewServer(&hostFS{path: path}).Handle(s, w)
			defer c.Close()
			const msize = 1 << 20
			rc := &benchConn{c: c, buf: make([]byte, msize)}
			rc.rpc(b, tTversion, append(binary.LittleEndian.AppendUint32(nil, msize), str9("9P2000.L")...))
			attach := binary.LittleEndian.AppendUint32(nil, 0)
			attach = binary.LittleEndian.AppendUint32(attach, noFID)
			attach = append(append(attach, str9("")...), str9("")...)
			rc.rpc(b, tTattach, binary.LittleEndian.AppendUint32(attach, 0))
			walk := binary.LittleEndian.AppendUint32(nil, 0)
			walk = binary.LittleEndian.AppendUint32(walk, 1)
			walk = binary.LittleEndian.AppendUint16(walk, 1)
			rc.rpc(b, tTwalk, append(walk, str9("data")...))
			rc.rpc(b, tTlopen, binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 0))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for off := uint64(0); off < size; {
					req := binary.LittleEndian.AppendUint32(nil, 1)
					req = binary.LittleEndian.AppendUint64(req, off)
					body := rc.rpc(b, tTread, binary.LittleEndian.AppendUint32(req, msize-24))
					n := binary.LittleEndian.Uint32(body)
					if n == 0 {
						b.Fatalf("EOF at %d", off)
					}
					off += uint64(n)
				}
			}
		})
	}
}

// benchConn is a minimal 9P2000.L client: one request at a time, tag 1.
type benchConn struct {
	c   net.Conn
	buf []byte
}

func str9(s string) []byte {
	return append(binary.LittleEndian.AppendUint16(nil, uint16(len(s))), s...)
}

// rpc sends one request and returns the body of its reply, failing on any
// reply but the type after typ.
func (r *benchConn) rpc(b testing.TB, typ uint8, body []byte) []byte {
	tag := uint16(1)
	if typ == tTversion {
		tag = 0xffff
	}
	req := binary.LittleEndian.AppendUint32(nil, uint32(7+len(body)))
	req = append(req, typ)
	req = binary.LittleEndian.AppendUint16(req, tag)
	if _, err := r.c.Write(append(req, body...)); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(r.c, r.buf[:7]); err != nil {
		b.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(r.buf)
	if n < 7 || int(n) > len(r.buf) {
		b.Fatalf("reply size %d", n)
	}
	if _, err := io.ReadFull(r.c, r.buf[7:n]); err != nil {
		b.Fatal(err)
	}
	if r.buf[4] != typ+1 {
		b.Fatalf("reply type %d to %d", r.buf[4], typ)
	}
	return r.buf[7:n]
}

// The pipes a connection splices through are closed with it: after many
// spliced reads, concurrent ones included, and the hang-up, the process
// holds the descriptors it held before.
func TestSplicePipesClosed(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			// Under CI the machine is Linux: a missing /proc is a failure.
			if os.Getenv("CI") == "true" {
				t.Fatalf("no /proc/self/fd: %v", err)
			}
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	fs, content := newHostFS(t, 2<<20)
	before := fds()
	t.Run("reads", func(t *testing.T) {
		f := openData(t, serveHost(t, fs, 256<<10, false), "data")
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, len(content))
				if n, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf[:n], content) {
					t.Errorf("read: %d bytes, %v; not the file", n, err)
				}
			}()
		}
		wg.Wait()
		if fs.hostFiles.Load() == 0 {
			t.Error("nothing was spliced")
		}
	})
	if after := fds(); after != before {
		t.Errorf("%d descriptors open after the connection ended, %d before", after, before)
	}
}

// A client that asks for spliced reads and never takes the replies is
// dropped by the write timeout, as it is on the copying path: the splice
// into the socket waits on the same deadline. Without it the server would
// wait on the full socket for ever and Handle would not return.
func TestSpliceWriteTimeout(t *testing.T) {
	fs, _ := newHostFS(t, 8<<20)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	s, c := conns[0], conns[1]
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p9.NewServer(fs, p9.WithWriteTimeout(200*time.Millisecond)).Handle(s, s)
	}()
	const msize = 1 << 20
	rc := &benchConn{c: c, buf: make([]byte, msize)}
	rc.rpc(t, tTversion, append(binary.LittleEndian.AppendUint32(nil, msize), str9("9P2000.L")...))
	attach := binary.LittleEndian.AppendUint32(nil, 0)
	attach = binary.LittleEndian.AppendUint32(attach, noFID)
	attach = append(append(attach, str9("")...), str9("")...)
	rc.rpc(t, tTattach, binary.LittleEndian.AppendUint32(attach, 0))
	walk := binary.LittleEndian.AppendUint32(nil, 0)
	walk = binary.LittleEndian.AppendUint32(walk, 1)
	walk = binary.LittleEndian.AppendUint16(walk, 1)
	rc.rpc(t, tTwalk, append(walk, str9("data")...))
	rc.rpc(t, tTlopen, binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 0))
	// Eight 1 MiB Treads, written and never read: far more than the
	// socket buffers hold.
	go func() {
		for i := 0; i < 8; i++ {
			req := binary.LittleEndian.AppendUint32(nil, 1)
			req = binary.LittleEndian.AppendUint64(req, uint64(i)<<20)
			req = binary.LittleEndian.AppendUint32(req, msize-24)
			frame := binary.LittleEndian.AppendUint32(nil, uint32(7+len(req)))
			frame = append(frame, tTread)
			frame = binary.LittleEndian.AppendUint16(frame, uint16(10+i))
			if _, err := c.Write(append(frame, req...)); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still waits on a client that does not read, 10 s on")
	}
	if fs.hostFiles.Load() == 0 {
		t.Error("nothing was spliced")
	}
}
