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

	"github.com/hugelgupf/p9/p9"
)

// Msize is what the client asks for; the daemon grants at most its cap.
const Msize = 1 << 20

// Client is one attached 9P session.
type Client struct {
	conn net.Conn
	c    *p9.Client
	root p9.File
}

// ErrUnanswered means the daemon accepted the connection and closed it
// without a reply: the peer gate refused this uid, or the connection cap was
// reached.
var ErrUnanswered = errors.New("the daemon closed the connection without answering (only its own uid is served; or too many connections are open)")

// Dial connects to the daemon's socket and attaches to the root.
func Dial(sock string) (*Client, error) {
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := New(conn)
	if err != nil {
		// The socket accepted us, so something is there; a 9P daemon that
		// hangs up before Rversion has refused this peer.
		return nil, fmt.Errorf("%w [%v]", ErrUnanswered, err)
	}
	return c, nil
}

// New runs a session over an established connection.
func New(conn net.Conn) (*Client, error) {
	c, err := p9.NewClient(conn, p9.WithMessageSize(Msize))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("9P version: %w", err)
	}
	root, err := c.Attach("/")
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("9P attach: %w", err)
	}
	return &Client{conn: conn, c: c, root: root}, nil
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
	return &Reader{f: f}, nil
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
		ents, err := r.f.Readdir(off, Msize-64)
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
}

func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if n > 0 && errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// ReadAt reads at an offset.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }

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
