package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ---------------------------------------------------------------- raw 9P2000.L client

const (
	tversion = 100
	tattach  = 104
	twalk    = 110
	tgetattr = 24
	tlopen   = 12
	tread    = 116
	tclunk   = 120
	rlerror  = 7
	notag    = 0xffff
	nofid    = 0xffffffff
)

// conn9 is one connection, attached as fid 0, with fid 1 walked to a file.
type conn9 struct {
	net.Conn
	msize uint32
	req   []byte // the Tgetattr frame on fid 1, built once
	resp  []byte
}

type frame struct{ b []byte }

func newFrame(typ uint8, tag uint16) *frame {
	f := &frame{b: make([]byte, 7, 64)}
	f.b[4] = typ
	binary.LittleEndian.PutUint16(f.b[5:], tag)
	return f
}
func (f *frame) u16(v uint16) *frame { f.b = binary.LittleEndian.AppendUint16(f.b, v); return f }
func (f *frame) u32(v uint32) *frame { f.b = binary.LittleEndian.AppendUint32(f.b, v); return f }
func (f *frame) u64(v uint64) *frame { f.b = binary.LittleEndian.AppendUint64(f.b, v); return f }
func (f *frame) str(s string) *frame { f.u16(uint16(len(s))); f.b = append(f.b, s...); return f }
func (f *frame) bytes() []byte {
	binary.LittleEndian.PutUint32(f.b, uint32(len(f.b)))
	return f.b
}

// rpc sends one frame and returns the reply's body, failing on Rlerror and
// on a reply of another type than want.
func (c *conn9) rpc(req []byte, want uint8) ([]byte, error) {
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	return c.reply(want)
}

// reply reads one reply frame into c.resp and returns its body.
func (c *conn9) reply(want uint8) ([]byte, error) {
	if _, err := io.ReadFull(c, c.resp[:4]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(c.resp)
	if n < 7 || int(n) > len(c.resp) {
		return nil, fmt.Errorf("reply size %d", n)
	}
	if _, err := io.ReadFull(c, c.resp[4:n]); err != nil {
		return nil, err
	}
	typ, body := c.resp[4], c.resp[7:n]
	switch {
	case typ == rlerror && len(body) >= 4:
		return nil, fmt.Errorf("Rlerror %v", syscall.Errno(binary.LittleEndian.Uint32(body)))
	case typ != want:
		return nil, fmt.Errorf("reply type %d, want %d", typ, want)
	}
	return body, nil
}

// dial9 connects at msize 64 KiB and walks fid 1 to big.
func dial9(t target) (*conn9, error) { return dial9m(t, diodCap, "big") }

// dial9m connects, negotiates 9P2000.L at msize, attaches as our euid
// (fid 0) and, unless rel is empty, walks fid 1 to rel (under the target's
// prefix).
func dial9m(t target, msize uint32, rel string) (*conn9, error) {
	nc, err := net.Dial("unix", t.sock)
	if err != nil {
		return nil, err
	}
	c := &conn9{Conn: nc, msize: msize, resp: make([]byte, msize)}
	fail := func(what string, err error) (*conn9, error) {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	body, err := c.rpc(newFrame(tversion, notag).u32(msize).str("9P2000.L").bytes(), tversion+1)
	if err != nil {
		return fail("Tversion", err)
	}
	if len(body) < 6 || string(body[6:]) != "9P2000.L" {
		return fail("Tversion", fmt.Errorf("server answered %q", body[min(6, len(body)):]))
	}
	if got := binary.LittleEndian.Uint32(body); got < msize {
		c.msize = got
	}
	if _, err := c.rpc(newFrame(tattach, 1).u32(0).u32(nofid).str("").str(t.aname).u32(uint32(os.Geteuid())).bytes(), tattach+1); err != nil {
		return fail("Tattach", err)
	}
	if rel == "" {
		return c, nil
	}
	if err := c.walk(1, t.prefix+rel); err != nil {
		return fail("Twalk", err)
	}
	c.req = newFrame(tgetattr, 1).u32(1).u64(0x3fff).bytes()
	return c, nil
}

// walk walks fid 0 (the root) to path in one Twalk onto newfid.
func (c *conn9) walk(newfid uint32, path string) error {
	names := strings.Split(path, "/")
	w := newFrame(twalk, 1).u32(0).u32(newfid).u16(uint16(len(names)))
	for _, s := range names {
		w.str(s)
	}
	body, err := c.rpc(w.bytes(), twalk+1)
	if err != nil {
		return err
	}
	if len(body) < 2 || int(binary.LittleEndian.Uint16(body)) != len(names) {
		return errors.New("partial walk")
	}
	return nil
}

// getattr sends one Tgetattr on fid 1 and returns the size it reports.
func (c *conn9) getattr() (uint64, error) { return c.getattrOf(c.req) }

func (c *conn9) getattrOf(req []byte) (uint64, error) {
	body, err := c.rpc(req, tgetattr+1)
	if err != nil {
		return 0, err
	}
	// valid[8] qid[13] mode[4] uid[4] gid[4] nlink[8] rdev[8] size[8]
	if len(body) < 57 {
		return 0, fmt.Errorf("short Rgetattr (%d bytes)", len(body))
	}
	return binary.LittleEndian.Uint64(body[49:]), nil
}

// statPath walks a new fid from the root to path, sends Tgetattr on it and
// clunks it: three round trips, what a client's stat of a path costs. It
// returns the size Rgetattr reports.
func (c *conn9) statPath(path string) (uint64, error) {
	const fid = 2
	if err := c.walk(fid, path); err != nil {
		return 0, fmt.Errorf("walk %s: %w", path, err)
	}
	size, err := c.getattrOf(newFrame(tgetattr, 1).u32(fid).u64(0x3fff).bytes())
	if err != nil {
		return 0, fmt.Errorf("getattr %s: %w", path, err)
	}
	if _, err := c.rpc(newFrame(tclunk, 1).u32(fid).bytes(), tclunk+1); err != nil {
		return 0, fmt.Errorf("clunk %s: %w", path, err)
	}
	return size, nil
}

// open opens fid 1 for reading (Tlopen O_RDONLY).
func (c *conn9) open() error {
	_, err := c.rpc(newFrame(tlopen, 1).u32(1).u32(0).bytes(), tlopen+1)
	return err
}

// readAll reads fid 1 (opened) from offset 0 to its end with Treads of
// msize-24 bytes (what diodcat asks for), one at a time, and writes the
// data to w if w is not nil. It returns the bytes read.
func (c *conn9) readAll(w io.Writer) (int64, error) {
	count := c.msize - 24
	var off int64
	for {
		body, err := c.rpc(newFrame(tread, 1).u32(1).u64(uint64(off)).u32(count).bytes(), tread+1)
		if err != nil {
			return off, fmt.Errorf("Tread at %d: %w", off, err)
		}
		if len(body) < 4 {
			return off, errors.New("short Rread")
		}
		n := binary.LittleEndian.Uint32(body)
		if int(n) > len(body)-4 || n > count {
			return off, fmt.Errorf("Rread count %d", n)
		}
		if n == 0 {
			return off, nil
		}
		if w != nil {
			w.Write(body[4 : 4+n])
		}
		off += int64(n)
	}
}

// readFile is one whole read as a client does it: dial, attach, walk,
// open, read to the end, hang up.
func readFile(t target, msize uint32, rel string, w io.Writer) (int64, error) {
	c, err := dial9m(t, msize, rel)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.open(); err != nil {
		return 0, fmt.Errorf("Tlopen: %w", err)
	}
	return c.readAll(w)
}

// getattrRate opens conns connections (untimed), then runs Tgetattr in a
// closed loop on each for d and returns the total rate.
func getattrRate(t target, conns int, d time.Duration) (float64, error) {
	cs := make([]*conn9, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := dial9(t)
		if err != nil {
			return 0, err
		}
		cs = append(cs, c)
	}
	return closedLoop(len(cs), d, func(i int) error { _, err := cs[i].getattr(); return err })
}

// closedLoop runs op in n goroutines until d has passed and returns
// completed ops per second over the time until the last one finished.
func closedLoop(n int, d time.Duration, op func(i int) error) (float64, error) {
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	go1 := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			var k int64
			for !stop.Load() {
				if err := op(i); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					stop.Store(true)
					break
				}
				k++
			}
			total.Add(k)
		}()
	}
	t0 := time.Now()
	close(go1)
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	wg.Wait()
	timer.Stop()
	el := time.Since(t0)
	if first != nil {
		return 0, first
	}
	return float64(total.Load()) / el.Seconds(), nil
}

// echoRate is the transport's own limit for one synchronous stream: 64-byte
// request and reply over a unix socket to an in-process echo goroutine.
func echoRate(dir string, d time.Duration) (float64, error) {
	p := filepath.Join(dir, "echo.sock")
	os.Remove(p)
	l, err := net.Listen("unix", p)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	go func() {
		s, err := l.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		b := make([]byte, 64)
		for {
			if _, err := io.ReadFull(s, b); err != nil {
				return
			}
			if _, err := s.Write(b); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	b := make([]byte, 64)
	return closedLoop(1, d, func(int) error {
		if _, err := c.Write(b); err != nil {
			return err
		}
		_, err := io.ReadFull(c, b)
		return err
	})
}

// stream is the read tables' transport ceiling, one run of it: one
// goroutine writes size bytes over a unix socket (in dir), another reads
// them into a 1 MiB buffer; no protocol. With file "" the writer writes an
// in-memory 1 MiB buffer again and again; otherwise it feeds the socket
// from the file with sendfile(2), 1 MiB at a time from its start to size,
// which is the most a server that copies nothing itself could do.
func stream(dir, file string, size int64) error {
	p := filepath.Join(dir, "stream.sock")
	os.Remove(p)
	l, err := net.Listen("unix", p)
	if err != nil {
		return err
	}
	defer l.Close()
	werr := make(chan error, 1)
	feed := feedMemory
	if file != "" {
		feed = func(s net.Conn, size int64) error { return feedFile(s, file, size) }
	}
	go func() {
		s, err := l.Accept()
		if err != nil {
			werr <- err
			return
		}
		defer s.Close() // the reader's EOF
		werr <- feed(s, size)
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([]byte, 1<<20)
	var n int64
	for {
		m, err := c.Read(b)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("stream: %d bytes received, want %d", n, size)
	}
	return nil
}

// feedMemory writes size bytes to s from a 1 MiB buffer.
func feedMemory(s net.Conn, size int64) error {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i)
	}
	for size > 0 {
		n, err := s.Write(b[:min(int64(len(b)), size)])
		if err != nil {
			return err
		}
		size -= int64(n)
	}
	return nil
}

// feedFile sends the first size bytes of file to s with sendfile(2).
func feedFile(s net.Conn, file string, size int64) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, err := s.(*net.UnixConn).SyscallConn()
	if err != nil {
		return err
	}
	var off int64
	for off < size {
		var serr error
		err := raw.Write(func(fd uintptr) bool {
			var n int
			n, serr = syscall.Sendfile(int(fd), int(f.Fd()), &off, int(min(1<<20, size-off)))
			if serr == syscall.EAGAIN {
				return false // wait until the socket takes more
			}
			if n == 0 && serr == nil {
				serr = fmt.Errorf("sendfile: %s ends at %d, before %d", file, off, size)
			}
			return true
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
