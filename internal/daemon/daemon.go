// Package daemon owns the accept loop: it identifies every peer with the
// kernel before reading a byte, bounds the number of connections, and serves
// each connection with its own 9P server bound to that peer.
package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/accept"
	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/ninep"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/prochelper"
	"github.com/9harness/9harness/internal/tree"
)

// Logf is a printf-style logger.
type Logf func(format string, args ...any)

// Defaults.
const (
	// DefaultMaxConns bounds concurrent connections. Each connection costs
	// a goroutine per request in flight plus msize-sized buffers, so the
	// cap is what bounds memory: 64 connections at 1 MiB is 64 MiB of
	// buffers at worst, well under what a per-user daemon may take.
	DefaultMaxConns = 64
	// DefaultOwnerReserve is how many of those slots only the owner may
	// take, so that no other uid, nor all of them together, can lock the
	// owner out (rule 10). 16 covers what one person runs at once: a FUSE
	// mount, a `ps --watch`, an editor's mount, a few scripts each holding
	// a connection for a command. It is at most half of --max-conns, so a
	// small cap still admits other uids.
	DefaultOwnerReserve = 16
	// DefaultMaxConnsPerUID bounds the connections of each uid that is
	// not the owner (a grantee, or the owner's uid inside a sandbox), so
	// that one grantee cannot take every slot the others share. A
	// grantee's client uses one connection per command and a mount one
	// more: 8 leaves room for a few at once.
	DefaultMaxConnsPerUID = 8
	// DefaultIdleTimeout closes a connection of another uid once it has
	// had no request in flight and sent no frame for this long, so slots
	// held and forgotten come back. It is far above the pauses of any
	// client that is working (a ps --watch asks every few seconds), and
	// short enough that a peer parking connections gets them back within
	// minutes. The owner's connections never time out: its own mount may
	// sit idle all day.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxMsize is the largest msize granted. 1 MiB is where the
	// measured read throughput of both diod's C client and the Go client
	// levels off (BENCHMARKS.md); p9's own cap, 4 MiB, quadruples the
	// per-connection buffers for no gain.
	DefaultMaxMsize = 1 << 20
)

// Server serves one tree to many connections.
type Server struct {
	// Root is the owner's view: the full mirror minus credentials.
	Root tree.Dir
	// GranteeRoot is what every other admitted peer sees (a granted uid,
	// or the owner's uid inside a sandbox): session state only. Nil
	// serves such peers an empty directory, never Root.
	GranteeRoot tree.Dir
	// Sandbox, if set, names the restriction the kernel shows on the
	// peer that the daemon's reference process does not have (a
	// proc.Restriction; "" when none); an error refuses the peer. Nil
	// treats every peer as unsandboxed.
	Sandbox  func(c net.Conn, p *peer.Peer) (string, error)
	UID, GID uint32 // the daemon's own ids: the gate admits only this uid
	MaxConns int
	// OwnerReserve is how many of MaxConns only the owner may take (0:
	// DefaultOwnerReserve, at most half of MaxConns; negative: none).
	OwnerReserve int
	// MaxConnsPerUID bounds each other uid's connections (0:
	// DefaultMaxConnsPerUID); as many more may wait for a slot, and one
	// over that is refused at once.
	MaxConnsPerUID int
	// IdleTimeout closes another uid's connection after that long with no
	// request in flight and no frame (0: DefaultIdleTimeout; negative:
	// never). The owner's connections have none.
	IdleTimeout time.Duration
	MaxMsize    uint32
	Owner       string // the daemon's user name, for 9P2000 stats
	Logf        Logf
	// Policy decides who may read (and later move). Nil admits only the
	// daemon's own uid.
	Policy *authz.Policy
	// Audit records refusals, at most one a second for each uid (the
	// next counting those not recorded), so that a flood cannot fill the
	// journal. Nil logs them with Logf.
	Audit audit.Sink
	// ProcRoot is where peers' /proc entries are read ("/proc").
	ProcRoot string
	// PeerCreds, if set, names a peer whose uid is not the daemon's when
	// the kernel cannot: inside a user namespace (the unit's
	// PrivateUsers=yes) SO_PEERCRED reports every other user as the
	// overflow uid, so a grant could not tell them apart. It is asked only
	// for such peers; the daemon's own uid is the one uid mapped inside.
	PeerCreds func(net.Conn) (prochelper.Cred, error)
	// Budget is the daemon's pool of bytes (budget.go): nil, one of
	// DefaultMaxBytes. MaxBytesPerUID is each other subject's ceiling
	// below it (0: DefaultMaxBytesPerUID).
	Budget         *budget.Pool
	MaxBytesPerUID int64
	poolsOnce      sync.Once
	pools          *pools

	// OwnerQueue bounds the owner's connections waiting for a slot (0:
	// DefaultOwnerQueue); OwnerWait and OtherWait bound how long the
	// owner's and any other uid's connection waits (0: DefaultOwnerWait,
	// DefaultOtherWait). Beyond them a connection is refused.
	OwnerQueue           int
	OwnerWait, OtherWait time.Duration

	// The logs a flood can cause, each limited per uid: refusals,
	// connections waiting, connections ended by their peer.
	refused, waits, closes uidLimiter
	now                    func() time.Time // their clock (nil: time.Now)
	// sandboxed are the owner's uid's processes last judged sandboxed.
	sandboxed sandboxedPIDs

	mu     sync.Mutex
	adm    admission // connections waiting for a slot
	idle   time.Time // when the last connection closed (zero while one is open)
	conns  map[net.Conn]slot
	others int            // connections of uids other than the owner
	perUID map[uint32]int // the same, by uid
	wg     sync.WaitGroup
	closed bool
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Serve accepts connections from l until ctx is done or l fails. On return
// every connection it accepted has been closed and its handlers finished.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	defer s.shutdown()
	return accept.Loop(ctx, l, s.logf, func(c net.Conn) {
		// A peer refused on its credentials alone costs no goroutine.
		ent, ok := s.early(c)
		if !ok {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ServeConn(context.WithValue(ctx, entryKey{}, ent), c)
		}()
	})
}

// ServeConn serves one connection and closes it.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	// The gate: a peer the policy does not let read gets nothing, not even
	// an Rversion, so no byte of the connection is read before this.
	p, subj, owner, ok := s.identify(ctx, c)
	if !ok {
		return
	}
	defer p.Close()
	root := s.Root
	if !owner {
		root = s.GranteeRoot
		if root == nil {
			root = tree.NewStatic("/", time.Time{})
		}
	}
	if ok, why := s.admit(ctx, c, slot{owner: owner, uid: p.UID}); !ok {
		s.refuse(p, why)
		return
	}
	defer s.untrack(c)

	cfg := ninep.Conn{
		Root: root, UID: s.UID, GID: s.GID, Owner: s.owner(),
		Writer: tree.Writer{Subject: subj, Comm: p.Comm},
		// Writes (moves) run on a context that neither the client's
		// hang-up nor the daemon's SIGTERM cancels: a started move
		// completes within its own bounds, and shutdown waits for it.
		WriteCtx: context.WithoutCancel(ctx),
		MaxMsize: s.maxMsize(),
		Logf:     s.Logf,
	}
	if !owner {
		cfg.IdleTimeout = s.idleTimeout()
	}
	// The bytes the peer makes the daemon hold are charged to a pool of
	// the connection's own, below its subject's (budget.go).
	pool, drop := s.budgets().connPool(p.UID, owner, s.Logf)
	defer drop()
	cfg.Budget = pool
	if err := ninep.Serve(ctx, c, cfg); err != nil {
		s.logClosed(p, err)
	}
}

// owner is the user name reported as the owner of every file on the
// 9P2000 side, which carries names where 9P2000.L carries numbers.
func (s *Server) owner() string {
	if s.Owner != "" {
		return s.Owner
	}
	return strconv.Itoa(int(s.UID))
}

func (s *Server) maxMsize() uint32 {
	if s.MaxMsize > 0 {
		return s.MaxMsize
	}
	return DefaultMaxMsize
}

// Subject is the peer as the policy sees it.
func Subject(p *peer.Peer) authz.Subject {
	return authz.Subject{UID: p.UID, GID: p.GID, Groups: p.Groups, PID: p.PID, StartTime: p.StartTime}
}

func (s *Server) policy() *authz.Policy {
	if s.Policy != nil {
		return s.Policy
	}
	return &authz.Policy{Owner: s.UID}
}

// refuse records a refused connection.
func (s *Server) refuse(p *peer.Peer, reason string) {
	s.refuseAs(p.Cred, p.Comm, reason)
}

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

// ownerReserve is the number of slots other uids may not take.
func (s *Server) ownerReserve() int {
	r := s.OwnerReserve
	switch {
	case r < 0:
		return 0
	case r == 0:
		r = DefaultOwnerReserve
	}
	return min(r, s.maxConns()/2)
}

func (s *Server) maxConnsPerUID() int {
	if s.MaxConnsPerUID > 0 {
		return s.MaxConnsPerUID
	}
	return DefaultMaxConnsPerUID
}

// idleTimeout is the idle bound of a connection of another uid (0: none).
func (s *Server) idleTimeout() time.Duration {
	switch {
	case s.IdleTimeout < 0:
		return 0
	case s.IdleTimeout == 0:
		return DefaultIdleTimeout
	}
	return s.IdleTimeout
}

// slot is what a tracked connection counts against.
type slot struct {
	owner bool
	uid   uint32
}

// track takes a slot for c, or says why there is none. The owner may take
// any of MaxConns; other uids share all but the owner's reserve, each at
// most MaxConnsPerUID.
func (s *Server) track(c net.Conn, sl slot) (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, "the daemon is stopping"
	}
	if why := s.fullLocked(sl); why != "" {
		return false, why
	}
	s.takeLocked(c, sl)
	return true, ""
}

// fullLocked says why sl may take no slot now ("" when it may).
func (s *Server) fullLocked(sl slot) string {
	switch {
	case len(s.conns) >= s.maxConns():
		return fmt.Sprintf("%d connections are already open (the cap)", s.maxConns())
	case !sl.owner && s.perUID[sl.uid] >= s.maxConnsPerUID():
		return fmt.Sprintf("uid %d already holds %d connections (the cap of each uid but the owner's)", sl.uid, s.maxConnsPerUID())
	case !sl.owner && s.others >= s.maxConns()-s.ownerReserve():
		return fmt.Sprintf("other uids already hold %d connections (the cap; %d more are kept for the owner)", s.others, s.ownerReserve())
	}
	return ""
}

func (s *Server) takeLocked(c net.Conn, sl slot) {
	if s.conns == nil {
		s.conns = make(map[net.Conn]slot)
		s.perUID = make(map[uint32]int)
	}
	s.conns[c] = sl
	if !sl.owner {
		s.others++
		s.perUID[sl.uid]++
	}
	s.idle = time.Time{}
}

// untrack frees c's slot and hands it to the first connection waiting
// that may take it.
func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	if sl, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if !sl.owner {
			s.others--
			if s.perUID[sl.uid]--; s.perUID[sl.uid] == 0 {
				delete(s.perUID, sl.uid)
			}
		}
	}
	if !s.closed {
		s.grantLocked()
	}
	if len(s.conns) == 0 {
		s.idle = time.Now()
	}
	s.mu.Unlock()
}

// IdleSince returns when the daemon last became idle (no connection), or
// the zero time while a connection is open.
func (s *Server) IdleSince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}

// Conns reports the number of connections being served.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) shutdown() {
	s.mu.Lock()
	s.closed = true
	s.wakeAllLocked()
	s.sandboxed.closeAll()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
