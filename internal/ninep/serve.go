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

// serve2000 serves a plain 9P2000 session with srv9p, through the gate.
func serve2000(ctx context.Context, c net.Conn, first []byte, cfg Conn) {
	serve2000Bounded(ctx, c, first, cfg, newBounds9(gateRequests, gateBlockingReads))
}

func serve2000Bounded(ctx context.Context, c net.Conn, first []byte, cfg Conn, b *bounds9) {
	// srv9p's Serve returns at EOF without cancelling handlers; the
	// replay cancels rctx at EOF, which releases blocked reads.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := newGate9(rctx, newReplay(first, c, cancel), c, cfg.MaxMsize, b)
	g.writeTimeout = gateWriteTimeout
	// The idle timeout is armed by the Rversion, when nothing is in
	// flight, and disarmed by each request until it is answered.
	g.idle, g.conn = cfg.IdleTimeout, c
	newPlan9(rctx, b, newCharger(cfg.Budget, cfg.Logf), cfg.Root, cfg.Owner, cfg.MaxMsize, cfg.Writer, cfg.WriteCtx).Serve(g, g)
}
