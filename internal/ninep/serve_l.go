package ninep

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// The 9P2000.L side's bounds per connection (rule 10). The p9 fork
// enforces them (internal/ninep/p9fork/PATCHES); these are its settings.
const (
	// lRequests bounds the requests p9 handles at once; the next frame
	// stays on the socket until one is answered. Each holds a goroutine
	// and, for a Tread, a read buffer of up to msize while its reply is
	// written: 16 at the 1 MiB msize is 16 MiB for a client that
	// pipelines reads and never takes the replies. A kernel mount keeps
	// a few reads in flight per reader; 16 is the 9P2000 side's number
	// (gateRequests) for the same reasons.
	lRequests = 16
	// lBlockingReads bounds the reads of one connection waiting in a
	// ContextReader (the events file). They do not hold request slots
	// while they wait, so waiting readers never keep a connection from
	// its other requests, or from the Tflush that releases them; one
	// beyond the bound is refused at once (EAGAIN). Same number as
	// gateBlockingReads, for the same reasons (1,000 blocked readers
	// across the connection cap, 16 msize of buffers at most).
	lBlockingReads = 16
	// lReadTimeout bounds the rest of a frame once its first byte has
	// arrived: a peer that sends half a frame and stalls is dropped. Any
	// frame crosses a unix socket in far less; 30 s forgives a stopped
	// (SIGSTOP, debugger) client.
	lReadTimeout = 30 * time.Second
	// lWriteTimeout bounds each reply's write: a peer that stops reading
	// is dropped once its socket buffer has stayed full this long. Same
	// reasoning as lReadTimeout.
	lWriteTimeout = 30 * time.Second
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
		p9.WithMaxRequests(lRequests),
		p9.WithMaxBlockingReads(lBlockingReads),
		// A Tread's buffer is charged from before the read until its
		// reply is written (or, waiting for an event, while it waits).
		p9.WithReadBuffers(func(n int64) error { return bytes.charge(n, "a read buffer") }, bytes.release),
		p9.WithReadTimeout(lReadTimeout),
		p9.WithWriteTimeout(lWriteTimeout),
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
