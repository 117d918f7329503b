// Package client is the thin 9P2000.L client the 9harness command and the
// tests use: dial a socket, attach, walk slash-separated paths, read, list,
// stat. It knows nothing of harnesses, and nothing of 9P's bytes: the
// session is internal/ninep/p9client's.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/ninep/p9client"
	"github.com/9harness/9harness/internal/sockpath"
)

// Msize is what the client asks for; the daemon grants at most its cap.
const Msize = p9client.Msize

// The 9P session's own types, under the names callers of this package use.
type (
	// QID is a file's identity: QID.IsDir tells a directory.
	QID = p9client.QID
	// Attr is a file's attributes.
	Attr = p9client.Attr
	// Entry is one name of a listing.
	Entry = p9client.Entry
	// File is a fid, walked (and maybe opened); the caller closes it.
	File = p9client.File
	// Mode is how a File is opened.
	Mode = p9client.Mode
)

// The modes of OpenFile.
const (
	ReadOnly  = p9client.ReadOnly
	WriteOnly = p9client.WriteOnly
	ReadWrite = p9client.ReadWrite
)

// Client is one attached 9P session.
type Client struct {
	conn net.Conn // the session's connection: what TransportError asks
	s    *p9client.Session
	bg   chan struct{} // closed when work begun beside the session ends
}

// ErrUnanswered means the daemon accepted the connection and closed it
// without a reply: the peer gate refused this uid, or the connection cap was
// reached.
var ErrUnanswered = errors.New("the daemon closed the connection without answering (only its own uid is served; or too many connections are open)")

// Dial connects to the daemon's socket and attaches to the root: DialAname
// with the aname "/".
func Dial(sock string) (*Client, error) { return DialAname(sock, "/") }

// DialAname connects to a 9P2000.L server's socket and attaches to the tree
// named aname (9harnessd serves one tree and ignores it; diod serves each
// of its exports by its path). It falls back to plain 9P2000.L for a
// server that refuses the p9 library's version string (p9client.Dial).
//
// Before a byte is sent, the socket's directory and its server are checked
// (sockpath.Dial): a socket that is not the user's, nor root's, nor its
// directory owner's is refused with a *sockpath.Untrusted naming the path
// and the owner found.
func DialAname(sock, aname string) (*Client, error) {
	return DialFunc(context.Background(), func() (net.Conn, error) {
		return sockpath.Dial(sock, 5*time.Second)
	}, aname)
}

// DialFunc is DialAname over the connections dial makes: one, or a second
// one when the server refuses the Google version string. A daemon that
// hangs up before answering gives an error wrapping ErrUnanswered. When
// ctx ends first the dial is given up (as NewContext's).
func DialFunc(ctx context.Context, dial func() (net.Conn, error), aname string) (*Client, error) {
	var last net.Conn
	var stops []func() bool
	s, err := p9client.Dial(func() (net.Conn, error) {
		c, err := dial()
		if err == nil {
			stops = append(stops, context.AfterFunc(ctx, func() { c.Close() }))
		}
		last = c
		return c, err
	}, aname)
	given := false
	for _, stop := range stops {
		if !stop() {
			given = true
		}
	}
	if given {
		if err == nil {
			s.Close()
		}
		return nil, givenUp(ctx)
	}
	var ue *p9client.UnansweredError
	if errors.As(err, &ue) {
		return nil, fmt.Errorf("%w [%v]", ErrUnanswered, ue.Err)
	}
	if err != nil {
		return nil, err
	}
	return &Client{conn: last, s: s}, nil
}

// New runs a session over an established connection, asking for the p9
// library's Google version of 9P2000.L (what 9harnessd, also through a
// relay, serves). It does not fall back: a refusal is an error (Dial and
// DialFunc, which can open a second connection, fall back). On failure
// conn is closed.
func New(conn net.Conn) (*Client, error) {
	s, err := p9client.New(conn, "/")
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, s: s}, nil
}

// givenUp is the error of a dial whose context ended first.
func givenUp(ctx context.Context) error {
	return fmt.Errorf("given up: %w", context.Cause(ctx))
}

// NewContext is New, given up when ctx ends first: conn is closed, which
// ends the version and attach in flight (a *CommandConn's program is
// killed), and the error wraps ctx's cause. A dial waited for no longer
// leaves neither a goroutine nor an ssh behind.
func NewContext(ctx context.Context, conn net.Conn) (*Client, error) {
	stop := context.AfterFunc(ctx, func() {
		if cc, ok := conn.(*CommandConn); ok {
			cc.Abort()
		} else {
			conn.Close()
		}
	})
	c, err := New(conn)
	if !stop() {
		if err == nil {
			c.Close()
		}
		return nil, givenUp(ctx)
	}
	return c, err
}

// Msize is the msize the server granted: no request or reply of the
// session is larger.
func (c *Client) Msize() uint32 { return c.s.Msize() }

// Hangup cuts the session's transport at once: the requests in flight
// fail now (a host that stopped answering), and a transport program is
// stopped (CommandConn.Close). Close still ends the session.
func (c *Client) Hangup() {
	c.conn.SetDeadline(time.Now())
	c.conn.Close()
}

// Close ends the session, and waits for work begun beside it (an ssh
// forward's setup, which is bounded).
func (c *Client) Close() error {
	err := c.s.Close()
	if c.bg != nil {
		<-c.bg
	}
	return err
}

// IsErrno tells whether err is the daemon's answer e (an Rlerror), as
// opposed to a failed transport.
func IsErrno(err error, e syscall.Errno) bool {
	got, ok := p9client.Errno(err)
	return ok && got == e
}

// IsWireErrno tells whether err is an answer from the daemon (an errno),
// as opposed to a failed transport.
func IsWireErrno(err error) bool {
	_, ok := p9client.Errno(err)
	return ok
}

// Errno is the daemon's answer err carries, if it is one.
func Errno(err error) (syscall.Errno, bool) { return p9client.Errno(err) }

// Split turns "/a/b" or "a/b" into its components; "/" is none.
func Split(path string) []string {
	var out []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Walk returns a new fid for path. The caller closes it.
func (c *Client) Walk(path string) (*File, error) {
	return c.s.Root().Walk(Split(path))
}

// Stat returns the qid and attributes of path.
func (c *Client) Stat(path string) (QID, Attr, error) {
	f, err := c.Walk(path)
	if err != nil {
		return QID{}, Attr{}, err
	}
	defer f.Close()
	return f.Stat()
}

// OpenFile walks to path and opens it as mode says. The caller closes it.
func (c *Client) OpenFile(path string, mode Mode) (*File, error) {
	f, err := c.Walk(path)
	if err != nil {
		return nil, err
	}
	if err := f.Open(mode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Open opens path for reading and returns a reader over it.
func (c *Client) Open(path string) (*Reader, error) {
	f, err := c.OpenFile(path, ReadOnly)
	if err != nil {
		return nil, err
	}
	return &Reader{f: f, max: int(c.s.MaxIO())}, nil
}

// ReadFile returns the whole content of path.
func (c *Client) ReadFile(path string) ([]byte, error) {
	chunks, err := c.readChunks(path, 64<<10)
	if len(chunks) == 1 {
		return chunks[0], err
	}
	return bytes.Join(chunks, nil), err
}

// readChunks reads the whole content of path into buffers that each
// take the next part, the first of first bytes (at most what one Tread
// carries) and every later one twice as large as all before it: with 64
// KiB, 64 KiB, 128 KiB, 384 KiB, ... So a small file costs a small
// buffer, and the later Treads ask for up to the most a message carries,
// so a large file costs a few round trips (io.ReadAll's start at 512
// bytes would cost tens). Unlike a buffer grown by append, no byte is
// copied from one buffer to a larger one, and memory fresh from the
// system is not cleared before the read fills it. Every chunk is full
// but the last, which is not empty unless it is the only one.
func (c *Client) readChunks(path string, first int) ([][]byte, error) {
	r, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var chunks [][]byte
	buf, total := make([]byte, 0, min(first, r.max)), 0
	for {
		if len(buf) == cap(buf) {
			chunks = append(chunks, buf)
			buf = make([]byte, 0, 2*total)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		total += n
		if err != nil {
			if len(buf) > 0 || len(chunks) == 0 {
				chunks = append(chunks, buf)
			}
			if err == io.EOF {
				err = nil
			}
			return chunks, err
		}
	}
}

// ReadDir lists path completely, following the offset cookies, sorted by
// name (the daemon lists a directory too big for one read in the order of
// the file system it mirrors).
func (c *Client) ReadDir(path string) ([]Entry, error) {
	r, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Entry
	var off uint64
	for {
		ents, err := r.f.Readdir(off, c.s.MaxIO())
		if err != nil {
			return nil, err
		}
		if len(ents) == 0 {
			slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
			return out, nil
		}
		out = append(out, ents...)
		off = ents[len(ents)-1].Offset
	}
}

// Reader reads an opened file sequentially.
type Reader struct {
	f   *File
	off int64
	max int // the largest count one Tread may ask for
}

// Read reads at most one Tread's worth.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) > r.max {
		p = p[:r.max]
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if n > 0 && errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// ReadAt reads at an offset, in Treads of at most the granted msize.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.f.ReadAt(p[n:min(len(p), n+r.max)], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
	}
	return n, nil
}

// File is the underlying fid.
func (r *Reader) File() *File { return r.f }

// Close clunks the fid.
func (r *Reader) Close() error { return r.f.Close() }

// WriteFile writes data at offset 0 of path in one write: the tree's one
// writable kind of file (an agent's zmx or tmux) takes a whole value.
func (c *Client) WriteFile(path string, data []byte) error {
	f, err := c.OpenFile(path, WriteOnly)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(data, 0)
	return err
}
