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
//
// A client reading a file in sequence waits for each reply before it asks
// for the next chunk, and the splice from the file is then on its path
// (about 30 of the 400 µs of a 1 MiB Tread here). So once a reply that
// continues the one before it has been sent, the next chunk is spliced
// into a pipe while the client reads (readAhead), and the Tread that asks
// for it is answered from that pipe, if the file's inode, size, mtime and
// ctime are still what they were before that splice. The pipe holds references
// to the file's pages, not a copy: a write into them shows, as it would in
// a reply spliced the moment it was asked; a truncation, or anything else
// that replaces pages, changes the size or the ctime, and the chunk is
// spliced anew. (A file system with multigrain timestamps, as ext4, xfs,
// btrfs and tmpfs have since Linux 6.13, gives a change after a stat a
// later ctime even within the same clock tick; with coarse ones, a change
// in the tick of the change before it can go unseen, and the chunk is
// then as the file was when the reply before it was sent.)
//
// A connection keeps one chunk ahead at most, until its next Tread takes
// it or closes it, or the connection ends: a pipe's worth of the file's
// cached pages pinned, none of this process's memory. A Tread that does
// not continue the last spliced reply reads nothing ahead, so reads out of
// sequence pay nothing for it. (No timer closes a chunk nobody asks for:
// a Go timer reset for every chunk, or merely kept pending, cost 9-16% of
// a 64 KiB sequential read, more than reading ahead saves there.)

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
	last   struct {
		fid *fidRef // by identity: a File need not be comparable
		end uint64
	} // where the last spliced reply ended
	ahead *readAhead // the next chunk of last.fid, if read ahead
}

// readAhead is a chunk of a file spliced into a pipe before its Tread came.
type readAhead struct {
	fid   *fidRef // by identity, as last.fid
	off   uint64
	count uint32
	st    unix.Stat_t // the file, just before the splice
	m     *rreadSplice
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

// close closes the idle pipe and the chunk read ahead; pipes in use are
// closed by their replies.
func (s *splicer) close() {
	s.mu.Lock()
	s.closed = true
	p := s.idle
	s.idle = nil
	if p != nil {
		s.open--
	}
	a := s.ahead
	s.ahead = nil
	s.last.fid = nil
	s.mu.Unlock()
	if p != nil {
		p.close()
	}
	if a != nil {
		a.m.release()
	}
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// spliceRead serves a Tread of ref's file by splice, if it is a host
// file, the transport a socket and count large enough; nil means "use
// ReadAt". Called under ref's reference.
func (cs *connState) spliceRead(ref *fidRef, off uint64, count uint32) message {
	if count < spliceMin || off > math.MaxInt64 {
		return nil
	}
	f := ref.file
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
	m := s.takeAhead(ref, rc, off, count)
	if m == nil {
		if m = s.splice(f, rc, off, count); m == nil {
			return nil
		}
	}
	if s.follows(ref, off, m.n+m.tn) && m.n+m.tn == int(count) {
		// A read in sequence: the next chunk is read ahead once this
		// one is sent, under the fid's reference, held till then.
		ref.IncRef()
		m.next = &nextChunk{ref: ref, rc: rc, off: off + uint64(count), count: count}
	}
	return m
}

// follows reports whether a reply of n bytes of fid's file from off
// continues the last spliced reply, and makes it the last.
func (s *splicer) follows(fid *fidRef, off uint64, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.last.fid == fid && s.last.end == off
	s.last.fid, s.last.end = fid, off+uint64(n)
	return ok
}

// splice moves up to count bytes of f from off into a pipe, and reads and
// copies what the pipe cannot hold; nil if there is no pipe to be had or
// nothing could be moved.
func (s *splicer) splice(f File, rc syscall.RawConn, off uint64, count uint32) *rreadSplice {
	p := s.get(int(count))
	if p == nil {
		return nil
	}
	var (
		n   int
		eof bool
	)
	err := rc.Read(func(fd uintptr) bool {
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

// nextChunk is the chunk a reply reads ahead once it is sent.
type nextChunk struct {
	ref   *fidRef // held from the Tread to the read ahead
	rc    syscall.RawConn
	off   uint64
	count uint32
}

// afterSend reads the next chunk ahead, if the reply is one that does and
// it was sent. Called outside the send lock.
func (m *rreadSplice) afterSend(sent bool) {
	c := m.next
	if c == nil {
		return
	}
	m.next = nil
	defer c.ref.DecRef()
	if sent {
		m.s.readAhead(c.ref, c.rc, c.off, c.count)
	}
}

// readAhead splices count bytes of fid's file from off into a pipe and
// keeps them for the Tread that asks for them, if the file has them all.
// Called under fid's reference.
func (s *splicer) readAhead(fid *fidRef, rc syscall.RawConn, off uint64, count uint32) {
	a := &readAhead{fid: fid, off: off, count: count}
	if !fstat(rc, &a.st) {
		return
	}
	if a.m = s.splice(fid.file, rc, off, count); a.m == nil {
		return
	}
	if a.m.n+a.m.tn != int(count) { // the end of the file: nothing to gain
		a.m.release()
		return
	}
	s.mu.Lock()
	old := s.ahead
	s.ahead = nil
	keep := !s.closed
	if keep {
		s.ahead = a
	}
	s.mu.Unlock()
	if old != nil {
		old.m.release()
	}
	if !keep {
		a.m.release()
	}
}

// takeAhead returns the reply read ahead for a Tread of count bytes of
// fid's file from off, if there is one and the file is as it was when it
// was read; any other chunk read ahead is closed.
func (s *splicer) takeAhead(fid *fidRef, rc syscall.RawConn, off uint64, count uint32) *rreadSplice {
	s.mu.Lock()
	a := s.ahead
	s.ahead = nil
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	var st unix.Stat_t
	if a.fid == fid && a.off == off && a.count == count && fstat(rc, &st) &&
		st.Ino == a.st.Ino && st.Dev == a.st.Dev && st.Size == a.st.Size &&
		st.Mtim == a.st.Mtim && st.Ctim == a.st.Ctim {
		return a.m
	}
	a.m.release()
	return nil
}

// fstat stats the file rc reads.
func fstat(rc syscall.RawConn, st *unix.Stat_t) bool {
	var err error
	if cerr := rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), st) }); cerr != nil {
		return false
	}
	return err == nil
}

// rreadSplice is an Rread whose first n bytes of data wait in a pipe and
// whose last tn in tail.
type rreadSplice struct {
	s    *splicer
	p    *pipe
	n    int
	tail *[]byte
	tn   int
	next *nextChunk // read ahead after the send, or nil
}

// release closes the pipe of a reply that will not be sent.
func (m *rreadSplice) release() {
	m.s.drop(m.p)
	putReadBuf(m.tail)
	m.tail = nil
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
			m.s.sendBuffer(m.s.own / 2) // setsockopt doubles what it is given
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
