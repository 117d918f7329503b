// Package client is the thin 9P2000.L client the 9harness command and the
// tests use: dial a socket, attach, walk slash-separated paths, read, list,
// stat. It knows nothing of harnesses.
package client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/sockpath"
)

// Msize is what the client asks for; the daemon grants at most its cap.
const Msize = 1 << 20

// Client is one attached 9P session.
type Client struct {
	conn  net.Conn
	c     *p9.Client
	root  p9.File
	msize uint32 // granted by the server
}

// ioHeader is the most a Rread or Rreaddir adds to its count of bytes
// (size[4] type[1] tag[2] count[4], rounded up as servers reckon it).
const ioHeader = 24

// ErrUnanswered means the daemon accepted the connection and closed it
// without a reply: the peer gate refused this uid, or the connection cap was
// reached.
var ErrUnanswered = errors.New("the daemon closed the connection without answering (only its own uid is served; or too many connections are open)")

// Dial connects to the daemon's socket and attaches to the root: DialAname
// with the aname "/".
func Dial(sock string) (*Client, error) { return DialAname(sock, "/") }

// DialAname connects to a 9P2000.L server's socket and attaches to the tree
// named aname (9harnessd serves one tree and ignores it; diod serves each
// of its exports by its path).
//
// It asks first for "9P2000.L.Google.7", the dialect of the 9P library
// (hugelgupf/p9), whose extensions (Twalkgetattr: walk and stat in one round
// trip) 9harnessd serves. A server that refuses that version string instead
// of answering with the "9P2000.L" it speaks (diod replies Rlerror EIO to
// anything but exactly "9P2000.L", and keeps the connection open) gets a
// second connection on which the client asks for plain "9P2000.L": the
// library lowers its version only on EAGAIN and has no option to ask for
// 9P2000.L from the start, so the second attempt rewrites the Tversion on
// its way out, and names this process's uid in the Tattach, which such a
// server needs (see plainConn). The library then speaks 9P2000.L without
// extensions, as the server's Rversion says.
//
// Before a byte is sent, the socket's directory and its server are checked
// (sockpath.Dial): a socket that is not the user's, nor root's, nor its
// directory owner's is refused with a *sockpath.Untrusted naming the path
// and the owner found.
func DialAname(sock, aname string) (*Client, error) {
	return DialFunc(func() (net.Conn, error) {
		return sockpath.Dial(sock, 5*time.Second)
	}, aname)
}

// DialFunc is DialAname over the connections dial makes: one, or a second
// one when the server refuses the Google version string.
func DialFunc(dial func() (net.Conn, error), aname string) (*Client, error) {
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	c, err := newClient(conn, aname)
	if err == nil {
		return c, nil
	}
	if !versionRefused(err) {
		// The socket accepted us, so something is there; a 9P daemon that
		// hangs up before Rversion has refused this peer.
		return nil, fmt.Errorf("%w [%v]", ErrUnanswered, err)
	}
	conn, err2 := dial()
	if err2 != nil {
		return nil, fmt.Errorf("%v; redialling for %s: %w", err, Version9P2000L, err2)
	}
	c, err2 = newClient(&plainConn{Conn: conn}, aname)
	if err2 != nil {
		return nil, fmt.Errorf("the server refused %s (%v), and then %s: %w", p9.HighestVersionString(), errors.Unwrap(err), Version9P2000L, err2)
	}
	return c, nil
}

// New runs a session over an established connection, asking for the p9
// library's Google version of 9P2000.L (what 9harnessd, also through a
// relay, serves). It does not fall back: a refusal is an error (Dial and
// DialFunc, which can open a second connection, fall back).
func New(conn net.Conn) (*Client, error) {
	return newClient(conn, "/")
}

func newClient(conn net.Conn, aname string) (*Client, error) {
	mc := &msizeConn{Conn: conn}
	c, err := p9.NewClient(mc, p9.WithMessageSize(Msize))
	if err != nil {
		conn.Close()
		return nil, &versionError{err}
	}
	root, err := c.Attach(aname)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("9P attach: %w", err)
	}
	return &Client{conn: conn, c: c, root: root, msize: mc.granted()}, nil
}

// Msize is the msize the server granted: no request or reply of the
// session is larger.
func (c *Client) Msize() uint32 { return c.msize }

// versionError is a failed Tversion exchange.
type versionError struct{ err error }

func (e *versionError) Error() string { return "9P version: " + e.err.Error() }
func (e *versionError) Unwrap() error { return e.err }

// versionRefused tells whether the Tversion failed because the server
// answered it with an error (Rlerror, as diod does) or with a version string
// the library does not take (the spec's "unknown"), rather than hanging up.
func versionRefused(err error) bool {
	var ve *versionError
	if !errors.As(err, &ve) {
		return false
	}
	var errno linux.Errno
	return errors.As(ve.err, &errno) || errors.Is(ve.err, p9.ErrBadVersionString)
}

// Close ends the session.
func (c *Client) Close() error {
	c.root.Close()
	return c.c.Close()
}

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
func (c *Client) Walk(path string) (p9.File, error) {
	_, f, err := c.root.Walk(Split(path))
	return f, err
}

// Stat returns the qid and attributes of path.
func (c *Client) Stat(path string) (p9.QID, p9.Attr, error) {
	f, err := c.Walk(path)
	if err != nil {
		return p9.QID{}, p9.Attr{}, err
	}
	defer f.Close()
	q, _, a, err := f.GetAttr(p9.AttrMaskAll)
	return q, a, err
}

// Open opens path for reading and returns a reader over it.
func (c *Client) Open(path string) (*Reader, error) {
	f, err := c.Walk(path)
	if err != nil {
		return nil, err
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		f.Close()
		return nil, err
	}
	return &Reader{f: f, max: int(c.msize - ioHeader)}, nil
}

// ReadFile returns the whole content of path.
func (c *Client) ReadFile(path string) ([]byte, error) {
	r, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// ReadDir lists path completely, following the offset cookies.
func (c *Client) ReadDir(path string) ([]p9.Dirent, error) {
	r, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []p9.Dirent
	var off uint64
	for {
		ents, err := r.f.Readdir(off, c.msize-ioHeader)
		if err != nil {
			return nil, err
		}
		if len(ents) == 0 {
			return out, nil
		}
		out = append(out, ents...)
		off = ents[len(ents)-1].Offset
	}
}

// Reader reads an opened file sequentially.
type Reader struct {
	f   p9.File
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
func (r *Reader) File() p9.File { return r.f }

// Close clunks the fid.
func (r *Reader) Close() error { return r.f.Close() }

// WriteFile writes data at offset 0 of path in one write: the tree's one
// writable kind of file (an agent's zmx or tmux) takes a whole value.
func (c *Client) WriteFile(path string, data []byte) error {
	f, err := c.Walk(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, _, err := f.Open(p9.WriteOnly); err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	return err
}
