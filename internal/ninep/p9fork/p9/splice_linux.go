//go:build linux

package p9

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Tread of a host file is served with splice(2): up to count bytes move
// from the file into a pipe (page references, no copy), which tells how
// many there are; then, under the connection's send lock, the Rread header
// with that count is written and the pipe is spliced into the socket.
// Nothing is copied through this process's memory, which is what lets a
// sequential read approach what sendfile(2) alone does on the same socket.
//
// The file side runs in the handler, under the fid's reference, like
// ReadAt would; the socket side runs when the reply is sent. Any failure
// before a byte is in the pipe falls back to ReadAt, which reports the
// error as it always has.

const (
	// spliceMin is the smallest count served by splice: below it, a read
	// and a copy cost less than the pipe's extra system calls.
	spliceMin = 16 << 10

	// maxPipes is how many pipes one connection may hold at once, one per
	// Tread between its splice from the file and its reply's send. A Tread
	// beyond them is read and copied. Each pipe is two descriptors.
	maxPipes = 2

	// maxPipeSize is the largest capacity asked of a pipe: the default
	// /proc/sys/fs/pipe-max-size, the most an unprivileged daemon gets. A
	// count the pipe cannot hold has its last bytes read and copied.
	maxPipeSize = 1 << 20

	pageSize = 4096

	// sendBuffer is the SO_SNDBUF asked for a socket that carries spliced
	// replies: a pipe's worth, so that a whole Rread goes into the socket
	// at once (the kernel doubles it for its own bookkeeping, and caps it
	// at net.core.wmem_max).
	sendBuffer = maxPipeSize
)

// splicer is a connection's splice state: the socket, found on first use,
// and its pipes.
type splicer struct {
	once sync.Once
	raw  syscall.RawConn // the socket; nil: the transport cannot splice
	own  int             // the socket's send buffer before sendBuffer, in bytes
	low  bool            // the socket has own, not sendBuffer (under the send lock)

	mu     sync.Mutex
	idle   *pipe // at most one kept between Treads
	open   int   // pipes open, idle or in use
	closed bool
}

type pipe struct {
	r, w int
	size int // capacity in bytes
}

// transport returns the socket w writes to, if w is one: the writer itself
// must be the syscall.Conn (a wrapper that buffered would have the header
// and the spliced data written out of order).
func (s *splicer) transport(w io.Writer) syscall.RawConn {
	s.once.Do(func() {
		sc, ok := w.(syscall.Conn)
		if !ok {
			return
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return
		}
		typ, own := -1, 0
		if err := raw.Control(func(fd uintptr) {
			typ, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
			own, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		}); err != nil || typ != unix.SOCK_STREAM || own <= 0 {
			return
		}
		// A send buffer that holds a whole reply lets one splice move
		// the pipe into the socket and the handler go on while the
		// client reads; at the default (208 KiB) a 1 MiB Rread goes out
		// in four or five turns of writer and reader. It bounds what
		// the connection may have in flight; nothing is allocated for
		// it.
		s.own = own
		s.raw = raw
		s.sendBuffer(sendBuffer)
	})
	return s.raw
}

// sendBuffer sets the socket's SO_SNDBUF to n (which the kernel doubles).
func (s *splicer) sendBuffer(n int) {
	s.raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
	})
}

// get returns a pipe that can hold count bytes if the system allows, or
// nil if the connection has all the pipes it may have.
func (s *splicer) get(count int) *pipe {
	s.mu.Lock()
	p := s.idle
	s.idle = nil
	if p == nil {
		if s.closed || s.open >= maxPipes {
			s.mu.Unlock()
			return nil
		}
		s.open++
	}
	s.mu.Unlock()
	if p == nil {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			s.mu.Lock()
			s.open--
			s.mu.Unlock()
			return nil
		}
		p = &pipe{r: fds[0], w: fds[1], size: 16 * pageSize}
	}
	// A count not aligned to pages can span two more pages than it fills.
	if want := min(count+2*pageSize, maxPipeSize); p.size < want {
		if n, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, want); err == nil {
			p.size = n
		}
	}
	return p
}

// put keeps p, drained, for the next Tread, or closes it.
func (s *splicer) put(p *pipe) {
	s.mu.Lock()
	if s.idle == nil && !s.closed {
		s.idle = p
		s.mu.Unlock()
		return
	}
	s.open--
	s.mu.Unlock()
	p.close()
}

// drop closes p, which may still hold data.
func (s *splicer) drop(p *pipe) {
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
	p.close()
}

// close closes the idle pipe; pipes in use are closed by their replies.
func (s *splicer) close() {
	s.mu.Lock()
	s.closed = true
	p := s.idle
	s.idle = nil
	if p != nil {
		s.open--
	}
	s.mu.Unlock()
	if p != nil {
		p.close()
	}
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// spliceRead serves a Tread of f by splice, if f is a host file, the
// transport a socket and count large enough; nil means "use ReadAt".
func (cs *connState) spliceRead(f File, off uint64, count uint32) message {
	if count < spliceMin || off > math.MaxInt64 {
		return nil
	}
	hf, ok := f.(HostFileReader)
	if !ok {
		return nil
	}
	src, ok := hf.HostFile()
	if !ok {
		return nil
	}
	s := &cs.splice
	if s.transport(cs.r) == nil {
		return nil
	}
	rc, err := src.SyscallConn()
	if err != nil {
		return nil
	}
	p := s.get(int(count))
	if p == nil {
		return nil
	}
	var (
		n   int
		eof bool
	)
	err = rc.Read(func(fd uintptr) bool {
		o := int64(off)
		for n < int(count) {
			want := int(count) - n
			k, err := unix.Splice(int(fd), &o, p.w, nil, want, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil: // EAGAIN: the pipe is full
				return true
			case k == 0:
				eof = true
				return true
			}
			n += int(k)
			if int(k) < want {
				// A pipe filled to its last page (a count not aligned
				// to pages spans one more page than the pipe has), or
				// the end of the file: asking again would only hear
				// EAGAIN, or 0, which the next Tread hears anyway.
				return true
			}
		}
		return true
	})
	if err != nil || n == 0 {
		// Nothing was moved: at the end of the file, on an error, or for
		// a file splice cannot read; ReadAt says which.
		s.put(p)
		return nil
	}
	m := &rreadSplice{s: s, p: p, n: n}
	if !eof && n < int(count) {
		// The pipe was full: the rest is read and copied, so that the
		// reply is as long as a read would have made it.
		m.tail = getReadBuf(int(count) - n)
		k, err := f.ReadAt((*m.tail)[:int(count)-n], int64(off)+int64(n))
		if err != nil && !errors.Is(err, io.EOF) {
			k = 0 // a short read now; the next Tread reports the error
		}
		m.tn = k
	}
	return m
}

// rreadSplice is an Rread whose first n bytes of data wait in a pipe and
// whose last tn in tail.
type rreadSplice struct {
	s    *splicer
	p    *pipe
	n    int
	tail *[]byte
	tn   int
}

func (*rreadSplice) decode(b *buffer)   { b.markOverrun() } // only ever sent
func (m *rreadSplice) encode(b *buffer) { b.Write32(uint32(m.n + m.tn)) }
func (*rreadSplice) typ() msgType       { return msgRread }
func (m *rreadSplice) String() string {
	return fmt.Sprintf("Rread{spliced: %d, copied: %d}", m.n, m.tn)
}

// sendDirect writes the header, splices the pipe into the socket and
// writes the tail. Called under the connection's send lock.
//
// A reply larger than the socket's own send buffer (208 KiB by default)
// leaves the socket with that buffer while the client reads it, and the
// next spliced reply gets sendBuffer back. Why: a socket is writable
// again, and wakes what waits on it, each time the client's reading frees
// a little of it while less than a quarter of the buffer is queued; and
// this process's poller waits on every socket for writability. With 2 MiB
// while a 1 MiB Rread drained, that was six or seven wake-ups of the
// daemon per Rread, none wanted, each a thread switch on both sides (and
// the client's reading paid for waking it); with 208 KiB, one.
func (m *rreadSplice) sendDirect(w io.Writer, t tag) error {
	left := m.n
	defer func() {
		if left == 0 {
			m.s.put(m.p)
		} else {
			m.s.drop(m.p)
		}
		putReadBuf(m.tail)
	}()
	if m.s.low {
		m.s.sendBuffer(sendBuffer)
		m.s.low = false
	}
	if int(rreadHeaderLength)+m.n+m.tn > m.s.own {
		defer func() {
			m.s.sendBuffer(m.s.own / 2) // getsockopt reported it doubled
			m.s.low = true
		}()
	}
	var h [rreadHeaderLength]byte
	putRreadHeader(&h, t, uint32(m.n+m.tn))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	var serr error
	err := m.s.raw.Write(func(fd uintptr) bool {
		for left > 0 {
			k, err := unix.Splice(m.p.r, nil, int(fd), nil, left, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN: // the socket is full (the pipe is not empty)
				return false
			case err != nil:
				serr = err
				return true
			case k == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
			left -= int(k)
		}
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if m.tn > 0 {
		_, err = w.Write((*m.tail)[:m.tn])
	}
	return err
}
