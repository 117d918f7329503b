package ninep

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// serveL serves a 9P2000.L session with the p9 fork, the Tversion first
// read put back in front of the connection. Replies are written to c
// itself, so that the fork can splice file data to the socket.
func serveL(ctx context.Context, c net.Conn, first []byte, cfg Conn) {
	bytes := newCharger(cfg.Budget, cfg.Logf)
	opts := []p9.ServerOpt{
		// diod's libnpclient (diodls, diodcat) takes only success or
		// ENOENT as "no authentication required".
		p9.WithAuthError(linux.ENOENT),
		p9.WithMaxMessageSize(cfg.MaxMsize),
		p9.WithoutXattrs(),
		p9.WithMaxRequests(maxRequests),
		p9.WithMaxBlockingReads(maxBlockingReads),
		// A Tread's buffer is charged from before the read until its
		// reply is written (or, waiting for an event, while it waits).
		p9.WithReadBuffers(func(n int64) error { return bytes.charge(n, "a read buffer") }, bytes.release),
		p9.WithReadTimeout(readTimeout),
		p9.WithWriteTimeout(writeTimeout),
		p9.WithContext(ctx),
	}
	if cfg.IdleTimeout > 0 {
		opts = append(opts, p9.WithIdleTimeout(cfg.IdleTimeout))
	}
	if cfg.Logf != nil {
		opts = append(opts, p9.WithServerLogger(endLogger(cfg.Logf)))
	}
	// The fids are bounded by their bytes, not their number: each walked
	// name is charged to the connection's budget (budget.go), and one
	// that does not fit is refused EMFILE.
	a := &Attacher{Root: cfg.Root, UID: cfg.UID, GID: cfg.GID, Writer: cfg.Writer, Ctx: cfg.WriteCtx,
		listers: make(chan struct{}, lListers), bytes: bytes}
	p9.NewServer(a, opts...).Handle(&prefixed{Conn: c, first: first}, c)
}

// prefixed is c with the bytes the front door consumed put back in front.
// It keeps c's deadlines (the fork's stall bounds set them) but not its
// SyscallConn: a readv from the socket would skip the bytes still here.
type prefixed struct {
	net.Conn
	first []byte
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// endLogger passes on what p9 logs about a connection's end and drops its
// per-message trace, before formatting it. A client that hangs up (a ^C,
// a reader that closed its pipe) is the normal end of a connection, not
// news: it is not logged. A stall that the bounds cut off still is.
type endLogger func(format string, args ...any)

func (l endLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "p9.recv:") || strings.HasPrefix(format, "p9.send:") {
		if len(args) == 1 {
			if err, ok := args[0].(error); ok && hungUp(err) {
				return
			}
		}
		l(format, args...)
		return
	}
	if strings.HasPrefix(format, "panic") {
		l(format, args...)
	}
}

// hungUp tells whether err is the peer closing its end.
func hungUp(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

func (l endLogger) Print(args ...any) {}
