package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/tree"
)

// Peers of other uids, in one process: a connection whose socket the
// test bound to the abstract name "@uid-<uid>-<n>" is named by the kernel
// as this process, and by the hooks below as that uid. Every other
// connection is this process's own uid, the owner.

const (
	strangerUID = 4242 // no grant names it
	granteeUID  = 4243 // granted by the test's policy
)

// fakeUID returns the uid a connection's bound name gives, or ok false.
func fakeUID(c net.Conn) (uint32, bool) {
	var uid uint32
	if _, err := fmt.Sscanf(c.RemoteAddr().String(), "@uid-%d-", &uid); err != nil {
		return 0, false
	}
	return uid, true
}

// peerCounts counts the hooks' calls by what they cost.
type peerCounts struct {
	quick, full       atomic.Int64 // all connections
	fullOther         atomic.Int64 // full identifications of a fake uid (a /proc read)
	sandbox, sandboxO atomic.Int64
}

// hookPeers installs the hooks for the test's duration.
func hookPeers(t *testing.T) *peerCounts {
	n := &peerCounts{}
	q, id := quickPeer, identifyPeer
	t.Cleanup(func() { quickPeer, identifyPeer = q, id })
	quickPeer = func(c net.Conn, groups bool) (peer.Cred, []uint32, error) {
		n.quick.Add(1)
		cr, gs, err := q(c, groups)
		if uid, ok := fakeUID(c); ok && err == nil {
			cr.UID, cr.GID, gs = uid, uid, nil
		}
		return cr, gs, err
	}
	identifyPeer = func(c net.Conn, procRoot string) (*peer.Peer, error) {
		n.full.Add(1)
		p, err := id(c, procRoot)
		if uid, ok := fakeUID(c); ok && err == nil {
			n.fullOther.Add(1)
			p.UID, p.GID, p.Groups = uid, uid, nil
		}
		return p, err
	}
	return n
}

var nameSeq atomic.Int64

// dialAs connects to sock as uid (through the hooks), without blocking:
// it returns the connected descriptor, or the connect's error.
func dialAs(sock string, uid uint32) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	name := fmt.Sprintf("@uid-%d-%d-%d", uid, os.Getpid(), nameSeq.Add(1))
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// logLines is a Logf that keeps its lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logLines) with(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

// serve runs s on a socket of its own until the test ends.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "harness")
	l, err := ListenUnix(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock
}

func newServer(logs *logLines) *Server {
	uid := uint32(os.Getuid())
	return &Server{
		Root:        tree.NewStatic("/", time.Time{}),
		GranteeRoot: tree.NewStatic("/", time.Time{}),
		UID:         uid, GID: uint32(os.Getgid()),
		Policy:   &authz.Policy{Owner: uid, AllowUIDs: []uint32{granteeUID}},
		MaxMsize: 64 << 10,
		Logf:     logs.logf,
	}
}

// ownerLs lists / as the owner through the project's client.
func ownerLs(sock string) error {
	c, err := client.Dial(sock)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ReadDir("/")
	return err
}

// TestOwnerBurstWaits: 200 of the owner's clients at once against 4 slots
// are all served: those beyond the slots wait for one, they are not
// closed, and never more than 4 are served at a time.
//
// Guards rule 10: a burst of the owner's own clients waits for a slot.
func TestOwnerBurstWaits(t *testing.T) {
	logs := &logLines{}
	s := newServer(logs)
	s.MaxConns = 4
	sock := serve(t, s)
	var most atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := int64(s.Conns()); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	const clients = 200
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- ownerLs(sock)
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed == 0 {
				t.Errorf("an owner's client of the burst: %v", err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d owner's clients failed", failed, clients)
	}
	if most.Load() > 4 {
		t.Errorf("%d connections served at once, over the cap of 4", most.Load())
	}
	if len(logs.with("waits for a slot")) == 0 {
		t.Errorf("no connection waited: the burst did not pass the cap\n%s", strings.Join(logs.lines, "\n"))
	}
	if l := logs.with("refused"); len(l) > 0 {
		t.Errorf("owner's connections refused: %q", l)
	}
}

// flood connects as uid, and closes at once, from workers goroutines
// until stop closes.
func flood(sock string, uid uint32, workers int, stop <-chan struct{}) (wait func() int64) {
	var n atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if fd, err := dialAs(sock, uid); err == nil {
					n.Add(1)
					unix.Close(fd)
				} else {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	return func() int64 { wg.Wait(); return n.Load() }
}

// TestOwnerServedUnderFlood: while a uid no grant names, or a granted uid,
// connects and hangs up as fast as it can, the owner's 12 clients are all
// served; the refused uid's connections never cost a full identification
// (pidfd, groups, /proc), and the granted uid never holds more than its
// cap, nor waits with more than as many.
//
// Guards rule 10: no peer, nor any flood of connects, can lock the owner
// out.
func TestOwnerServedUnderFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		uid  uint32
	}{{"refused uid", strangerUID}, {"granted uid", granteeUID}} {
		t.Run(tc.name, func(t *testing.T) {
			n := hookPeers(t)
			logs := &logLines{}
			s := newServer(logs)
			s.MaxConns, s.MaxConnsPerUID = 8, 2
			sock := serve(t, s)
			var worst atomic.Int64
			stop := make(chan struct{})
			checked := make(chan struct{})
			go func() {
				defer close(checked)
				for {
					s.mu.Lock()
					held, waiting := s.perUID[tc.uid], s.adm.pending[tc.uid]
					s.mu.Unlock()
					if int64(held) > worst.Load() {
						worst.Store(int64(held))
					}
					if held > 2 || waiting > 2*2 {
						t.Errorf("uid %d holds %d connections and %d wait, over its caps", tc.uid, held, waiting)
					}
					select {
					case <-stop:
						return
					default:
						time.Sleep(time.Millisecond)
					}
				}
			}()
			wait := flood(sock, tc.uid, 8, stop)
			time.Sleep(100 * time.Millisecond)
			for i := range 12 {
				if err := ownerLs(sock); err != nil {
					t.Errorf("owner's client %d during the flood: %v", i+1, err)
				}
			}
			close(stop)
			made := wait()
			<-checked
			t.Logf("%d connects of uid %d; %d quick identifications, %d full (%d of the flooder)",
				made, tc.uid, n.quick.Load(), n.full.Load(), n.fullOther.Load())
			if made == 0 {
				t.Errorf("no connect: no flood")
			}
			if tc.uid == strangerUID && n.fullOther.Load() != 0 {
				t.Errorf("%d connections of a refused uid were identified in full (a /proc read each)", n.fullOther.Load())
			}
			if got := len(logs.with(fmt.Sprintf("uid=%d ", tc.uid))); int64(got) >= made/2 {
				t.Errorf("%d log lines for %d refused connects: not limited", got, made)
			}
		})
	}
}

// TestRefusedCostsNoProc: 200 connections of a uid no grant names are
// each refused (closed unanswered) on SO_PEERCRED alone: no full
// identification (pidfd, groups, the /proc read), no sandbox check, and
// one log line for them all within a second; the line after the next
// second counts the 199 not logged.
//
// Guards rule 10: a flood of connects costs the daemon a small fixed
// amount, so it cannot lock the owner out.
func TestRefusedCostsNoProc(t *testing.T) {
	n := hookPeers(t)
	logs := &logLines{}
	s := newServer(logs)
	var sandboxed atomic.Int64
	s.Sandbox = func(net.Conn, *peer.Peer) (string, error) { sandboxed.Add(1); return "", nil }
	var clock atomic.Int64
	clock.Store(time.Unix(1e9, 0).UnixNano())
	s.now = func() time.Time { return time.Unix(0, clock.Load()) }
	sock := serve(t, s)
	refusedOnce := func() {
		t.Helper()
		fd, err := dialAs(sock, strangerUID)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		// Closed unanswered: the read ends, with no byte.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			// The runtime's preemption signal interrupts a poll.
			if _, err := unix.Poll(pfd, 10_000); err != unix.EINTR {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		var b [1]byte
		k, err := unix.Read(fd, b[:])
		for err == unix.EINTR {
			k, err = unix.Read(fd, b[:])
		}
		if k > 0 || (err != nil && err != unix.ECONNRESET) {
			t.Fatalf("a refused connection read %d bytes, %v", k, err)
		}
	}
	for range 200 {
		refusedOnce()
	}
	if got := n.full.Load(); got != 0 {
		t.Errorf("%d full identifications (a pidfd, groups and a /proc read each) for 200 refused connections", got)
	}
	if got := sandboxed.Load(); got != 0 {
		t.Errorf("%d sandbox checks for refused connections", got)
	}
	if got := logs.with("uid=4242 "); len(got) != 1 {
		t.Errorf("%d log lines for 200 refusals within a second, want 1: %q", len(got), got)
	}
	clock.Add(int64(time.Second))
	refusedOnce()
	got := logs.with("uid=4242 ")
	if len(got) != 2 || !strings.Contains(got[1], "and 199 more") {
		t.Errorf("after a second: %q, want a second line counting 199 not logged", got)
	}
	// The owner is still served, in full.
	if err := ownerLs(sock); err != nil {
		t.Fatal(err)
	}
	if n.full.Load() != 1 || sandboxed.Load() != 1 {
		t.Errorf("the owner's connection: %d full identifications, %d sandbox checks; want 1 each", n.full.Load(), sandboxed.Load())
	}
}

// TestOthersWaitBounded: a granted uid's connections beyond its cap wait,
// as many as the cap, and the rest are refused at once; those waiting are
// refused after OtherWait, or served when a slot frees; the owner is
// served meanwhile.
//
// Guards rule 10: the waiting of other uids is bounded, and never in the
// owner's way.
func TestOthersWaitBounded(t *testing.T) {
	hookPeers(t)
	logs := &logLines{}
	s := newServer(logs)
	s.MaxConns, s.MaxConnsPerUID = 8, 2
	s.OtherWait = 3 * time.Second
	var clock atomic.Int64
	clock.Store(time.Unix(1e9, 0).UnixNano())
	s.now = func() time.Time { return time.Unix(0, clock.Load()) }
	sock := serve(t, s)
	var fds []int
	for range 10 {
		fd, err := dialAs(sock, granteeUID)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		fds = append(fds, fd)
	}
	// The accept loop judged all ten: 2 hold a slot, 2 wait, 6 are closed.
	var held, waiting int
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		held, waiting = s.perUID[granteeUID], s.adm.pending[granteeUID]
		s.mu.Unlock()
		if held == 2 && waiting == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held != 2 || waiting != 2 {
		t.Errorf("held %d, waiting %d; want 2 and 2", held, waiting)
	}
	if err := ownerLs(sock); err != nil {
		t.Errorf("the owner with a grantee's connections waiting: %v", err)
	}
	if got := logs.with("more waiting (the cap of each uid but the owner's)"); len(got) == 0 {
		t.Errorf("no log line for the connections refused past the bound:\n%s", strings.Join(logs.lines, "\n"))
	}
	// Those waiting are refused after OtherWait, and logged: a second
	// after the last line of this uid.
	clock.Add(int64(time.Second))
	eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.adm.pending[granteeUID] == 0
	}, "the waiting connections refused after OtherWait")
	if got := logs.with("no slot came free within 3s"); len(got) == 0 {
		t.Errorf("no log line for a wait that ended:\n%s", strings.Join(logs.lines, "\n"))
	}
}

// TestOwnerNeverBehindOthers: with every slot taken, an owner's connection
// waiting and a grantee's waiting, the first slot that frees goes to the
// owner, whichever came first.
func TestOwnerNeverBehindOthers(t *testing.T) {
	s := &Server{MaxConns: 2, OwnerReserve: -1, MaxConnsPerUID: 2}
	a, b := &slotConn{n: 1}, &slotConn{n: 2}
	if ok, why := s.track(a, slot{uid: 7}); !ok {
		t.Fatal(why)
	}
	if ok, why := s.track(b, slot{uid: 8}); !ok {
		t.Fatal(why)
	}
	type res struct {
		who string
		ok  bool
	}
	got := make(chan res, 2)
	admit := func(who string, sl slot, c net.Conn) {
		if ok, why := s.enter(sl); !ok {
			t.Error(why)
			return
		}
		go func() {
			ok, _ := s.admit(context.Background(), c, sl)
			got <- res{who, ok}
		}()
	}
	admit("grantee", slot{uid: 9}, &slotConn{n: 3})
	eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.adm.others) == 1 }, "the grantee waiting")
	admit("owner", slot{owner: true, uid: 0}, &slotConn{n: 4})
	eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.adm.owners) == 1 }, "the owner waiting")
	s.untrack(a)
	if r := <-got; r.who != "owner" || !r.ok {
		t.Errorf("the first slot went to %+v, want the owner", r)
	}
	s.untrack(b)
	if r := <-got; r.who != "grantee" || !r.ok {
		t.Errorf("the second slot went to %+v, want the grantee", r)
	}
	if s.Conns() != 2 || s.adm.ownerPending != 0 || s.adm.othersPending != 0 {
		t.Errorf("after: %d conns, pending %d/%d", s.Conns(), s.adm.ownerPending, s.adm.othersPending)
	}
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSandboxedPIDs: a process judged sandboxed is remembered while it
// lives, for sandboxedFor after its last connection, and forgotten once it
// exits (its pid may then be another process's); at most sandboxedKeep
// are held.
func TestSandboxedPIDs(t *testing.T) {
	sleeper := func() (*os.Process, int) {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.PidfdOpen(p.Pid, 0)
		if err != nil {
			p.Kill()
			p.Wait()
			if os.Getenv("CI") == "true" {
				t.Fatalf("missing in CI: pidfd_open: %v", err)
			}
			t.Skipf("pidfd_open: %v", err)
		}
		t.Cleanup(func() { p.Kill(); p.Wait(); unix.Close(fd) })
		return p, fd
	}
	var m sandboxedPIDs
	defer m.closeAll()
	now := time.Unix(1e9, 0)
	a, afd := sleeper()
	m.note(int32(a.Pid), afd, now)
	if !m.is(int32(a.Pid), now.Add(time.Second)) {
		t.Error("a process just judged sandboxed is not remembered")
	}
	if m.is(int32(a.Pid)+1, now) {
		t.Error("another pid is remembered")
	}
	if m.is(int32(a.Pid), now.Add(time.Second+sandboxedFor+time.Millisecond)) {
		t.Error("remembered past sandboxedFor after its last connection")
	}
	b, bfd := sleeper()
	m.note(int32(b.Pid), bfd, now)
	b.Kill()
	b.Wait()
	if m.is(int32(b.Pid), now) {
		t.Error("a process that exited is still remembered")
	}
	for i := range 2 * sandboxedKeep {
		m.note(int32(1_000_000+i), afd, now.Add(time.Duration(i)))
	}
	if len(m.pids) > sandboxedKeep {
		t.Errorf("%d processes remembered, over %d", len(m.pids), sandboxedKeep)
	}
}

// TestOwnerQueueBounded: the owner's connections waiting are bounded in
// number (OwnerQueue) and in time (OwnerWait); past either a connection is
// refused with the reason.
func TestOwnerQueueBounded(t *testing.T) {
	s := &Server{MaxConns: 1, OwnerQueue: 2, OwnerWait: 100 * time.Millisecond}
	if ok, why := s.track(&slotConn{n: 1}, slot{owner: true}); !ok {
		t.Fatal(why)
	}
	owner := slot{owner: true}
	for i := range 2 {
		if ok, why := s.enter(owner); !ok {
			t.Fatalf("owner's connection %d may not wait: %s", i+1, why)
		}
	}
	if ok, why := s.enter(owner); ok || !strings.Contains(why, "2 of the owner's connections are already waiting") {
		t.Errorf("a third owner's connection: %v %q, want refused past OwnerQueue", ok, why)
	}
	ok, why := s.admit(context.Background(), &slotConn{n: 2}, owner)
	if ok || !strings.Contains(why, "no slot came free within 100ms: 1 connections are already open (the cap)") {
		t.Errorf("after OwnerWait: %v %q, want refused", ok, why)
	}
	s.leave(owner)
	if s.adm.ownerPending != 0 || len(s.adm.owners) != 0 {
		t.Errorf("after: %d pending, %d waiting", s.adm.ownerPending, len(s.adm.owners))
	}
}
