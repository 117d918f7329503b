package ninep

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/tree"
)

// The front door reads exactly the first message of a connection and picks
// the server by the version the client asks for: one socket serves
// 9P2000.L (hugelgupf/p9) and plain 9P2000 (srv9p), so the Plan 9 tooling
// (plan9port's 9p, 9pfuse) and the Linux tooling (v9fs, diod's clients)
// reach the same tree.
const (
	// firstTimeout bounds how long a connection may take to send its
	// Tversion: a peer that connects and says nothing holds a slot.
	firstTimeout = 5 * time.Second
	// firstMax bounds the first message: a Tversion is 13 bytes plus
	// the version string.
	firstMax = 8192
	// MinMsize is the smallest msize served: below it, srv9p's count
	// clamp underflows.
	MinMsize = 4096
)

// Conn is what Serve needs to serve one connection: the tree the peer
// sees and who it is on the wire.
type Conn struct {
	// Root is the tree the peer sees.
	Root tree.Dir
	// UID and GID own every file on the 9P2000.L side; Owner names the
	// owner on the 9P2000 side, which carries names where 9P2000.L
	// carries numbers.
	UID, GID uint32
	Owner    string
	// Writer is the peer as the writes (moves) it asks for record it.
	Writer tree.Writer
	// WriteCtx is the context writes run on. The daemon passes one that
	// neither the client's hang-up nor SIGTERM cancels: a started move
	// completes within its own bounds. Nil means context.Background().
	WriteCtx context.Context
	// MaxMsize is the largest msize granted.
	MaxMsize uint32
	// IdleTimeout, if positive, closes the connection once it has had no
	// request in flight and no message for that long. The daemon sets it
	// for peers other than the owner, so slots they hold unused come back.
	IdleTimeout time.Duration
	// Logf, if not nil, receives why a 9P2000.L connection was ended,
	// and the first charge the connection's budget refused.
	Logf func(format string, args ...any)
	// Budget is the connection's pool of bytes (package budget): every
	// fid, listing, open snapshot and read buffer the peer makes the
	// daemon hold is charged to it while held. The daemon makes it below
	// the peer's uid's pool; nil: a pool of DefaultConnBytes of its own.
	Budget *budget.Pool
}

// ErrFirst is a connection whose first message is not a Tversion Serve
// can answer.
var ErrFirst = errors.New("first message is not a well-formed Tversion")

// Serve serves one connection until the client hangs up or ctx is done,
// when it closes c to end the session. It reads the Tversion within
// firstTimeout and serves the dialect it names. The error says why a
// connection ended before a session began (a malformed or unknown
// version, an msize below MinMsize, a client that sent nothing); it is
// nil once a session was served.
func Serve(ctx context.Context, c net.Conn, cfg Conn) error {
	if cfg.WriteCtx == nil {
		cfg.WriteCtx = context.Background()
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetReadDeadline(time.Now().Add(firstTimeout))
	first, err := proto.ReadFrame(c, firstMax)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		if errors.Is(err, proto.ErrFrame) {
			return fmt.Errorf("%w: %v", ErrFirst, err)
		}
		return err
	}
	v, err := proto.ParseVersion(first, proto.Tversion)
	if err != nil {
		return ErrFirst
	}
	if v.Msize < MinMsize {
		return fmt.Errorf("msize %d below the floor of %d", v.Msize, MinMsize)
	}
	switch proto.Pick(v.Version) {
	case proto.Dialect2000L:
		serveL(ctx, c, first, cfg)
	case proto.Dialect2000:
		serve2000(ctx, c, first, cfg)
	default:
		c.Write(proto.AppendVersion(nil, proto.Rversion, proto.Version{Tag: v.Tag, Msize: v.Msize, Version: proto.VersionUnknown}))
		return fmt.Errorf("unknown version %q", v.Version)
	}
	return nil
}

// The bounds of one connection (rule 10), the same in both dialects;
// each fork enforces them where its requests are read and answered
// (internal/ninep/p9fork/PATCHES, internal/ninep/srv9pfork/PATCHES), and
// these are their settings.
const (
	// maxRequests bounds the requests handled at once; the next frame
	// stays on the socket until one is answered. Each holds a goroutine
	// and, for a Tread, a read buffer of up to msize while its reply is
	// written: 16 at the 1 MiB msize is 16 MiB for a client that
	// pipelines reads and never takes the replies. A kernel mount keeps
	// a few reads in flight per reader (plan9port's 9pfuse one per FUSE
	// thread, Plan 9's devmnt one per process).
	maxRequests = 16
	// maxBlockingReads bounds the reads of one connection waiting in a
	// ContextReader (the events file). They do not hold request slots
	// while they wait, so waiting readers never keep a connection from
	// its other requests, or from the Tflush that releases them; one
	// beyond the bound is refused at once (EAGAIN). A client waits on
	// events with one or two readers, but a machine's many watchers
	// (status lines, notifiers) share the daemon's connection cap: 16
	// lets 1,000 readers wait at once across DefaultMaxConns (64 × 16 =
	// 1,024), and bounds their buffers to 16 msize.
	maxBlockingReads = 16
	// readTimeout bounds the rest of a frame once its first byte has
	// arrived: a peer that sends half a frame and stalls is dropped. Any
	// frame crosses a unix socket in far less; 30 s forgives a stopped
	// (SIGSTOP, debugger) client.
	readTimeout = 30 * time.Second
	// writeTimeout bounds each reply's write: a peer that stops reading
	// is dropped once its socket buffer has stayed full this long. Same
	// reasoning as readTimeout.
	writeTimeout = 30 * time.Second
	// maxFids9 bounds the fids of one 9P2000 connection by number, beside
	// their bytes (budget.go), which bound both dialects' fids.
	// plan9port's 9pfuse holds a fid per file the kernel has looked up
	// until it forgets it, so a whole listing of the largest mirrored
	// directory (10,000 transcripts in the bench) must fit.
	maxFids9 = 16384
)

// serve2000 serves a plain 9P2000 session with the srv9p fork, the
// Tversion first read put back in front of the connection.
func serve2000(ctx context.Context, c net.Conn, first []byte, cfg Conn) {
	bytes := newCharger(cfg.Budget, cfg.Logf)
	srv := newPlan9(bytes, cfg.Root, cfg.Owner, cfg.MaxMsize, cfg.Writer, cfg.WriteCtx)
	srv.MaxFids = maxFids9
	srv.MaxRequests = maxRequests
	srv.MaxBlockingReads = maxBlockingReads
	srv.ReadTimeout = readTimeout
	srv.WriteTimeout = writeTimeout
	srv.IdleTimeout = cfg.IdleTimeout
	// A Tread's buffer is charged from before the read until its reply
	// is written (or, waiting for an event, while it waits).
	srv.ChargeRead = func(n int64) error {
		if err := bytes.charge(n, "a read buffer"); err != nil {
			return plan9Err(err)
		}
		return nil
	}
	srv.ReleaseRead = bytes.release
	srv.ServeContext(ctx, &prefixed{Conn: c, first: first}, c)
}
