package daemon

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/peer"
)

// Admission: what a connection costs before it is served, and where it
// waits when every slot it may take is held.
//
// A peer the policy refuses on its uid and groups alone is refused in the
// accept loop itself: one SO_PEERCRED read (and SO_PEERGROUPS when a
// group is granted), no goroutine, no pidfd, no /proc read, a log line
// limited per uid. A flood of connects then costs the daemon less than it
// costs the flooder, and the listen backlog drains.
//
// A connection that may be served but finds no slot waits for one, in
// order: the owner's in their own queue, served first whenever any slot
// frees (an owner's connection never waits behind another uid's); every
// other uid's (a grantee, or the owner's uid inside a sandbox) in one
// shared queue, bounded per uid and in all. Beyond the bounds, or after
// waiting too long, a connection is refused: closed without a reply, and
// logged.

const (
	// DefaultOwnerQueue bounds the owner's connections waiting for a
	// slot. Each costs a goroutine, the socket and the peer's pidfd
	// (tens of KiB at most): 2048 of them stay far below MemoryMax and
	// the unit's descriptor limit, and cover a burst of a thousand
	// commands started at once.
	DefaultOwnerQueue = 2048
	// DefaultOwnerWait bounds how long an owner's connection waits for a
	// slot: long enough for a burst to drain through the slots, short
	// enough that a client is not left hanging when all of them are held
	// by long-lived connections (mounts).
	DefaultOwnerWait = time.Minute
	// DefaultOtherWait bounds the wait of any other uid's connection.
	DefaultOtherWait = 10 * time.Second
)

// refusalInterval is how often a refused uid is logged: one line per uid
// per interval, the next one counting what was not logged.
const refusalInterval = time.Second

// identifyPeer is peer.Identify (pidfd, groups and the /proc read) and
// quickPeer peer.Quick (SO_PEERCRED alone): a test counts their calls,
// and names peers of other uids through them.
var (
	identifyPeer = peer.Identify
	quickPeer    = peer.Quick
)

// entryKey carries, in the context of a connection's handler, the entry
// the accept loop made for it.
type entryKey struct{}

// entry is a connection counted as pending (accepted, not yet holding a
// slot) against a slot class.
type entry struct {
	sl      slot
	entered bool
}

// waiter is a connection waiting for a slot.
type waiter struct {
	c       net.Conn
	sl      slot
	ready   chan struct{} // closed when granted, or when the daemon stops
	granted bool          // under Server.mu
}

// admission is the Server's waiting state, under Server.mu.
type admission struct {
	owners        []*waiter      // FIFO
	others        []*waiter      // FIFO across uids
	ownerPending  int            // the owner's connections identified, not yet holding a slot
	pending       map[uint32]int // other uids' connections accepted, not yet holding a slot
	othersPending int
}

func (s *Server) ownerQueue() int {
	if s.OwnerQueue > 0 {
		return s.OwnerQueue
	}
	return DefaultOwnerQueue
}

func (s *Server) waitFor(sl slot) time.Duration {
	if sl.owner {
		if s.OwnerWait > 0 {
			return s.OwnerWait
		}
		return DefaultOwnerWait
	}
	if s.OtherWait > 0 {
		return s.OtherWait
	}
	return DefaultOtherWait
}

// enter counts a connection as pending for sl, or says why it may not
// wait: a uid other than the owner's may have twice its slot cap held
// and pending together (its slots, and as many waiting), and all of them
// together twice what they may hold.
func (s *Server) enter(sl slot) (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.adm
	switch {
	case s.closed:
		return false, "the daemon is stopping"
	case sl.owner:
		if a.ownerPending >= s.ownerQueue() {
			return false, fmt.Sprintf("%d of the owner's connections are already waiting for a slot (the cap)", a.ownerPending)
		}
		a.ownerPending++
		return true, ""
	case s.perUID[sl.uid]+a.pending[sl.uid] >= 2*s.maxConnsPerUID():
		return false, fmt.Sprintf("uid %d already holds %d connections and has %d more waiting (the cap of each uid but the owner's)",
			sl.uid, s.perUID[sl.uid], a.pending[sl.uid])
	case s.others+a.othersPending >= 2*(s.maxConns()-s.ownerReserve()):
		return false, fmt.Sprintf("other uids already hold %d connections and have %d more waiting (the cap; %d more are kept for the owner)",
			s.others, a.othersPending, s.ownerReserve())
	}
	if a.pending == nil {
		a.pending = make(map[uint32]int)
	}
	a.pending[sl.uid]++
	a.othersPending++
	return true, ""
}

// leaveLocked undoes enter.
func (s *Server) leaveLocked(sl slot) {
	a := &s.adm
	if sl.owner {
		a.ownerPending--
		return
	}
	a.othersPending--
	if a.pending[sl.uid]--; a.pending[sl.uid] <= 0 {
		delete(a.pending, sl.uid)
	}
}

func (s *Server) leave(sl slot) {
	s.mu.Lock()
	s.leaveLocked(sl)
	s.mu.Unlock()
}

// admit takes a slot for c, entered as sl, waiting for one if every slot
// sl may take is held; it says why not when the daemon stops or the wait
// is over. Either way the entry is spent.
func (s *Server) admit(ctx context.Context, c net.Conn, sl slot) (ok bool, why string) {
	s.mu.Lock()
	if s.closed {
		s.leaveLocked(sl)
		s.mu.Unlock()
		return false, "the daemon is stopping"
	}
	// Slots are handed to waiters as they free (grantLocked), so a free
	// slot here has no one of this class waiting before c.
	full := s.fullLocked(sl)
	if full == "" {
		s.takeLocked(c, sl)
		s.leaveLocked(sl)
		s.mu.Unlock()
		return true, ""
	}
	w := &waiter{c: c, sl: sl, ready: make(chan struct{})}
	if sl.owner {
		s.adm.owners = append(s.adm.owners, w)
	} else {
		s.adm.others = append(s.adm.others, w)
	}
	s.mu.Unlock()
	if log, suppressed := s.waits.note(sl.uid, s.clock()); log {
		more := ""
		if suppressed > 0 {
			more = fmt.Sprintf(" (and %d more of this uid since the last line)", suppressed)
		}
		who := "the owner's"
		if !sl.owner {
			who = fmt.Sprintf("uid %d's", sl.uid)
		}
		s.logf("a connection of %s waits for a slot: %s%s", who, full, more)
	}

	wait := s.waitFor(sl)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		return true, ""
	}
	if sl.owner {
		s.adm.owners = slices.DeleteFunc(s.adm.owners, func(x *waiter) bool { return x == w })
	} else {
		s.adm.others = slices.DeleteFunc(s.adm.others, func(x *waiter) bool { return x == w })
	}
	s.leaveLocked(sl)
	if s.closed || ctx.Err() != nil {
		return false, "the daemon is stopping"
	}
	return false, fmt.Sprintf("no slot came free within %v: %s", wait, s.fullLocked(sl))
}

// grantLocked hands free slots to waiters: the owner's first, then other
// uids' in the order they came, each that its caps let take one.
func (s *Server) grantLocked() {
	a := &s.adm
	for len(a.owners) > 0 && s.fullLocked(slot{owner: true}) == "" {
		w := a.owners[0]
		a.owners[0] = nil
		a.owners = a.owners[1:]
		s.grantOneLocked(w)
	}
	if len(a.owners) > 0 {
		return // every slot is taken
	}
	for i := 0; i < len(a.others); {
		w := a.others[i]
		if s.fullLocked(w.sl) != "" {
			i++
			continue
		}
		a.others = slices.Delete(a.others, i, i+1)
		s.grantOneLocked(w)
	}
}

func (s *Server) grantOneLocked(w *waiter) {
	s.takeLocked(w.c, w.sl)
	s.leaveLocked(w.sl)
	w.granted = true
	close(w.ready)
}

// wakeAllLocked ends every wait without a slot: the daemon stops.
func (s *Server) wakeAllLocked() {
	for _, q := range [][]*waiter{s.adm.owners, s.adm.others} {
		for _, w := range q {
			close(w.ready)
		}
	}
	s.adm.owners, s.adm.others = nil, nil
}

// early judges a new connection on what the kernel recorded at connect
// time, in the accept loop, before any goroutine is spent on it. It
// returns false when it refused and closed c.
//
// The owner's uid passes: whether the peer is the owner or the owner's
// uid in a sandbox takes the full identification. Only a process already
// judged sandboxed is counted here against the sandbox's bound
// (sandboxedPIDs). Any other uid is refused here unless a grant could name
// it, and otherwise counted as pending against its uid's bound, so that a
// granted uid's flood stops here too.
func (s *Server) early(c net.Conn) (entry, bool) {
	pol := s.policy()
	grants := len(pol.AllowUIDs)+len(pol.AllowGroups) > 0
	cr, groups, err := quickPeer(c, len(pol.AllowGroups) > 0)
	if err != nil {
		s.refuseUnknown(err)
		c.Close()
		return entry{}, false
	}
	switch {
	case cr.UID == s.UID:
		if !s.sandboxed.is(cr.PID, s.clock()) {
			return entry{}, true
		}
		// A process of the owner's uid last judged sandboxed: counted
		// against the sandbox's bound now, judged in full after.
	case s.PeerCreds == nil || !grants:
		// Inside a user namespace (PeerCreds set) the kernel names every
		// other user as one overflow uid: with no grant at all, every one
		// of them is refused all the same.
		subj := authz.Subject{UID: cr.UID, GID: cr.GID, Groups: groups, PID: cr.PID}
		if d := pol.Decide(context.Background(), subj, authz.Read); !d.Allow {
			s.refuseQuick(c, cr, d.Reason)
			c.Close()
			return entry{}, false
		}
	}
	// The owner's uid in a sandbox, a uid that may be served, or one only
	// the proc helper can name (counted meanwhile under the overflow uid,
	// all such peers together).
	sl := slot{uid: cr.UID}
	if ok, why := s.enter(sl); !ok {
		s.refuseQuick(c, cr, why)
		c.Close()
		return entry{}, false
	}
	return entry{sl: sl, entered: true}, true
}

// identify names c's peer in full (pidfd, groups, /proc, its real
// credentials through the proc helper, its sandbox), asks the policy, and
// counts the connection as pending against the slot class it belongs to.
// It returns the peer (the caller closes it), its subject and whether it
// is the owner; on a refusal it has logged it and returns ok false, and c
// is for the caller to close.
func (s *Server) identify(ctx context.Context, c net.Conn) (p *peer.Peer, subj authz.Subject, owner bool, ok bool) {
	ent, _ := ctx.Value(entryKey{}).(entry)
	fail := func() (*peer.Peer, authz.Subject, bool, bool) {
		if ent.entered {
			s.leave(ent.sl)
		}
		if p != nil {
			p.Close()
		}
		return nil, authz.Subject{}, false, false
	}
	p, err := identifyPeer(c, s.ProcRoot)
	if err != nil {
		s.refuseUnknown(err)
		return fail()
	}
	if s.PeerCreds != nil && p.UID != s.UID {
		cr, err := s.PeerCreds(c)
		if err != nil {
			// Refused rather than judged as the overflow uid, which
			// would stand for every other user at once.
			s.refuse(p, fmt.Sprintf("its real credentials are unknown: %v", err))
			return fail()
		}
		p.UID, p.GID, p.Groups = cr.UID, cr.GID, cr.Groups
	}
	subj = Subject(p)
	if s.Sandbox != nil {
		ns, err := s.Sandbox(c, p)
		if err != nil {
			s.refuse(p, fmt.Sprintf("its confinement is unknown: %v", err))
			return fail()
		}
		subj.Sandbox = ns
	}
	// The gate: a peer the policy does not let read gets nothing, not even
	// an Rversion, so no byte of the connection is read before this.
	if d := s.policy().Decide(ctx, subj, authz.Read); !d.Allow {
		s.refuse(p, d.Reason)
		return fail()
	}
	owner = s.policy().IsOwner(subj)
	if !owner && p.UID == s.UID {
		s.sandboxed.note(p.PID, p.PIDFD(), s.clock())
	}
	sl := slot{owner: owner, uid: p.UID}
	if !ent.entered || ent.sl != sl {
		if ent.entered {
			s.leave(ent.sl)
			ent.entered = false
		}
		if ok, why := s.enter(sl); !ok {
			s.refuse(p, why)
			return fail()
		}
	}
	return p, subj, owner, true
}

// uidLimiter limits a log (of refused connections, of connections
// waiting) to one line per uid per refusalInterval; the line after a pause
// counts those not logged.
type uidLimiter struct {
	mu    sync.Mutex
	byUID map[uint32]*uidLine
}

type uidLine struct {
	last       time.Time
	suppressed int
}

// note records a refusal of uid at now and says whether to log it, and
// how many of uid's lines were not logged before it.
func (r *uidLimiter) note(uid uint32, now time.Time) (log bool, suppressed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byUID == nil {
		r.byUID = make(map[uint32]*uidLine)
	}
	u := r.byUID[uid]
	if u == nil {
		if len(r.byUID) >= 1024 {
			// Many uids refused: forget those quiet for an interval
			// (their count of lines not logged is lost, not their
			// refusal).
			for k, v := range r.byUID {
				if now.Sub(v.last) >= refusalInterval {
					delete(r.byUID, k)
				}
			}
		}
		u = &uidLine{}
		r.byUID[uid] = u
	} else if now.Sub(u.last) < refusalInterval {
		u.suppressed++
		return false, 0
	}
	u.last = now
	suppressed, u.suppressed = u.suppressed, 0
	return true, suppressed
}

func (s *Server) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// logClosed logs a connection that ended with an error (its peer hung up
// mid-request, or before its first frame: a flood of connects that are
// served), at most once per uid per refusalInterval.
func (s *Server) logClosed(p *peer.Peer, err error) {
	if log, suppressed := s.closes.note(p.UID, s.clock()); log {
		more := ""
		if suppressed > 0 {
			more = fmt.Sprintf(" (and %d more of this uid since the last line)", suppressed)
		}
		s.logf("closed connection from %v: %v%s", p, err, more)
	}
}

// limitLogf returns logf limited to one line per format per interval,
// the next line counting those not written: for the lines a peer can
// cause once per connection.
func limitLogf(logf Logf, interval time.Duration) Logf {
	if logf == nil {
		return nil
	}
	var mu sync.Mutex
	type line struct {
		last       time.Time
		suppressed int
	}
	lines := map[string]*line{}
	return func(format string, args ...any) {
		now := time.Now()
		mu.Lock()
		l := lines[format]
		if l == nil {
			l = &line{}
			lines[format] = l
		} else if now.Sub(l.last) < interval {
			l.suppressed++
			mu.Unlock()
			return
		}
		l.last = now
		n := l.suppressed
		l.suppressed = 0
		mu.Unlock()
		if n > 0 {
			logf(format+" (and %d more such lines not written since the last)", append(args, n)...)
			return
		}
		logf(format, args...)
	}
}

// refuseUnknown logs a connection refused because the kernel would not
// name its peer, at most once per refusalInterval.
func (s *Server) refuseUnknown(err error) {
	if log, suppressed := s.refused.note(^uint32(0), s.clock()); log {
		more := ""
		if suppressed > 0 {
			more = fmt.Sprintf(" (and %d more since the last line)", suppressed)
		}
		s.logf("refused connection: %v%s", err, more)
	}
}

// refuseQuick records a connection refused on its credentials alone.
func (s *Server) refuseQuick(c net.Conn, cr peer.Cred, reason string) {
	log, suppressed := s.refused.note(cr.UID, s.clock())
	if !log {
		return
	}
	// Inside a user namespace (PeerCreds set) the kernel names every
	// other user as one overflow uid: only a line that is logged, at most
	// one a second, asks the proc helper who it is.
	if s.PeerCreds != nil && cr.UID != s.UID {
		if real, err := s.PeerCreds(c); err == nil {
			cr.UID, cr.GID = real.UID, real.GID
		}
	}
	s.logRefusal(cr, "", reason, suppressed)
}

// refuseAs records a refused connection, at most once per uid per
// refusalInterval.
func (s *Server) refuseAs(cr peer.Cred, comm, reason string) {
	if log, suppressed := s.refused.note(cr.UID, s.clock()); log {
		s.logRefusal(cr, comm, reason, suppressed)
	}
}

// logRefusal writes the line (or journal entry) of a refused connection,
// saying how many of the uid's were not logged before it.
func (s *Server) logRefusal(cr peer.Cred, comm, reason string, suppressed int) {
	more := ""
	if suppressed > 0 {
		more = fmt.Sprintf(" (and %d more of this uid not logged since the last line)", suppressed)
	}
	if s.Audit == nil {
		s.logf("refused connection from %v%s: %s%s", cr, commField(comm), reason, more)
		return
	}
	fields := map[string]string{
		"PEER_UID": strconv.FormatUint(uint64(cr.UID), 10),
		"PEER_GID": strconv.FormatUint(uint64(cr.GID), 10),
		"PEER_PID": strconv.Itoa(int(cr.PID)),
		"ACTION":   string(authz.Read),
		"DECISION": "deny",
		"REASON":   reason,
	}
	if comm != "" {
		fields["PEER_COMM"] = comm
	}
	if suppressed > 0 {
		fields["SUPPRESSED"] = strconv.Itoa(suppressed)
	}
	s.Audit.Send(audit.Event{
		ID:       audit.IDConnRefused,
		Priority: audit.PriWarning,
		Message:  fmt.Sprintf("refused a connection from uid %d (pid %d%s): %s%s", cr.UID, cr.PID, commSuffix(comm), reason, more),
		Fields:   fields,
	})
}

func commField(comm string) string {
	if comm == "" {
		return ""
	}
	return " comm=" + strconv.Quote(comm)
}

func commSuffix(comm string) string {
	if comm == "" {
		return ""
	}
	return ", " + comm
}
