// Package p9client is the client side of 9P2000.L: it negotiates a session
// with a server (9harnessd, or any other such as diod) over hugelgupf/p9's
// client, and hands its callers fids with the project's own types: a QID,
// an Attr, an Entry, and errors that are syscall.Errno values when the
// server answered with one. No hugelgupf/p9 type is part of its API but
// Fid's, the escape for tests that send the messages this API does not.
package p9client

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// Msize is what the client asks for; a server grants at most its cap.
const Msize = 1 << 20

// IOHeader is the most a Rread or Rreaddir adds to its count of bytes
// (size[4] type[1] tag[2] count[4], rounded up as servers reckon it).
const IOHeader = 24

// UnansweredError is a server that accepted the connection and closed it
// without answering the Tversion: Err is how the exchange ended.
type UnansweredError struct{ Err error }

func (e *UnansweredError) Error() string {
	return "the server closed the connection without answering [" + e.Err.Error() + "]"
}
func (e *UnansweredError) Unwrap() error { return e.Err }

// Session is one attached 9P2000.L session.
type Session struct {
	c     *p9.Client
	root  *File
	msize uint32 // granted by the server
}

// Dial runs a session over the connections dial makes, attached to the
// tree named aname.
//
// It asks first for "9P2000.L.Google.7", the dialect of the 9P library
// (hugelgupf/p9), whose extensions (Twalkgetattr: walk and stat in one
// round trip) 9harnessd serves. A server that refuses that version string
// instead of answering with the "9P2000.L" it speaks (diod replies Rlerror
// EIO to anything but exactly "9P2000.L", and keeps the connection open)
// gets a second connection on which the client asks for plain "9P2000.L"
// (the library lowers its version only on EAGAIN) and names this process's
// effective uid in the Tattach's n_uname, as the Linux kernel's client
// does: such a server takes the attaching user from it and refuses an
// attach that names none. (9harnessd judges the peer by its socket
// credentials and ignores it.) The library then speaks 9P2000.L without
// extensions, as the server's Rversion says.
//
// A server that hangs up before its Rversion gives an *UnansweredError,
// and no second connection.
func Dial(dial func() (net.Conn, error), aname string) (*Session, error) {
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	s, err := New(conn, aname)
	if err == nil {
		return s, nil
	}
	if !versionRefused(err) {
		// The socket accepted us, so something is there; a 9P server that
		// hangs up before Rversion has refused this peer.
		return nil, &UnansweredError{err}
	}
	conn, err2 := dial()
	if err2 != nil {
		return nil, fmt.Errorf("%v; redialling for %s: %w", err, proto.Version2000L, err2)
	}
	s, err2 = newSession(conn, aname, p9.WithVersion(0), p9.WithAttachUID(p9.UID(os.Geteuid())))
	if err2 != nil {
		return nil, fmt.Errorf("the server refused %s (%v), and then %s: %w", p9.HighestVersionString(), errors.Unwrap(err), proto.Version2000L, err2)
	}
	return s, nil
}

// New runs a session over an established connection, asking for the p9
// library's Google version of 9P2000.L. It does not fall back: a refusal
// is an error (Dial, which can open a second connection, falls back). On
// failure conn is closed.
func New(conn net.Conn, aname string) (*Session, error) {
	return newSession(conn, aname)
}

func newSession(conn net.Conn, aname string, opts ...p9.ClientOpt) (*Session, error) {
	c, err := p9.NewClient(&wholeConn{Conn: conn}, append([]p9.ClientOpt{p9.WithMessageSize(Msize)}, opts...)...)
	if err != nil {
		conn.Close()
		return nil, &versionError{err}
	}
	root, err := c.Attach(aname)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("9P attach: %w", wireError(err))
	}
	return &Session{c: c, root: &File{f: root}, msize: c.MessageSize()}, nil
}

// Msize is the msize the server granted: no request or reply of the
// session is larger.
func (s *Session) Msize() uint32 { return s.msize }

// MaxIO is the most one Tread or Treaddir of the session asks for: the
// granted msize less the I/O header, rounded down to 512 bytes as the
// library rounds its payload. A larger count the library would send as
// two requests, the second of a few hundred bytes.
func (s *Session) MaxIO() uint32 { return (s.msize - IOHeader) &^ 511 }

// Root is the fid of the attached tree. It is the session's: Close ends it.
func (s *Session) Root() *File { return s.root }

// Close ends the session.
func (s *Session) Close() error {
	s.root.Close()
	return s.c.Close()
}

// versionError is a failed Tversion exchange.
type versionError struct{ err error }

func (e *versionError) Error() string { return "9P version: " + e.err.Error() }
func (e *versionError) Unwrap() error { return wireError(e.err) }

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
