// Package prochelper answers, across a unix socket, the few questions about
// the user's agents that the kernel refuses to a process in a user
// namespace, and answers them to one process only: the 9harness daemon of
// its own unit.
//
// Why it exists. The daemon parses bytes from any process of the user (and,
// over ssh, from other machines), so its unit runs in the strongest sandbox
// a user unit of systemd 252 enforces, and most of that sandbox
// (ProtectSystem=, ProtectHome=, PrivateDevices=, CapabilityBoundingSet=,
// PrivateNetwork=) only works with PrivateUsers=yes. Inside that user
// namespace the kernel's ptrace check (cap_ptrace_access_check: the target
// lives in the initial user namespace, where the daemon holds no
// CAP_SYS_PTRACE) denies /proc/<pid>/environ, cwd and fd/ of the user's own
// agents, and SO_PEERCRED reports every other uid as the overflow uid. The
// helper runs outside the namespace, in its own unit, and answers exactly
// the questions listed below: it reads no client-chosen path, runs nothing
// and writes nothing, so the part of 9harness that parses untrusted input
// holds none of that access itself. This is OpenSSH's privilege separation
// in miniature.
//
// # Who is answered
//
// Never widen (rule 9): the helper is a deputy with the user's full access
// to the user's processes, so it must not answer a process the kernel
// itself would refuse, such as one of the user's processes inside
// `unshare --user --pid`, which may not read /proc/<pid>/environ of any
// process outside. Before it reads a byte of a connection, the helper
// checks its peer (Gate.Check), through the peer's pidfd so that a pid
// reused in between cannot stand in for it:
//
//   - its uid (SO_PEERCRED) is the helper's own;
//   - its pid namespace is the helper's (the daemon's unit has none of
//     its own, and the pids the daemon asks about are read in this one);
//   - started by systemd (the helper's own cgroup is a unit such as
//     9harness-proc.service): the peer runs in the sibling daemon unit's
//     cgroup (9harness.service), and its user namespace is the helper's or
//     a child of it owned by the helper's uid (PrivateUsers=yes puts the
//     daemon in one; its mount namespace is its own too);
//   - started by hand (--unix PATH: tests): the peer shares the helper's
//     user and mount namespaces as well;
//   - its executable (the file /proc/<pid>/exe opens, compared by device
//     and inode) is the helper's own: the daemon and the helper are the
//     same 9harnessd.
//
// Any other peer is closed with no byte answered, and the helper logs why.
// When its own executable has been replaced on disk (an upgrade) the
// helper exits after such a refusal, so that socket activation starts the
// new one, which the new daemon passes.
//
// # Ops
//
// A request is 5 bytes: an op byte and a uint32 (little endian), the pid
// for the agent ops and 0 for the others; the peer op carries a connected
// socket as SCM_RIGHTS. A reply is a status byte (0 ok, 1 gone, 2 error
// with the message as payload), a uint32 length (little endian, at most
// MaxReply) and that many bytes. Every op is asked by the daemon only (the
// gate above); what differs is which processes it may be asked about.
//
// For candidate agents only: a pid of the helper's own uid that the
// harness classifiers (harness.All, each Classify on argv and comm, as the
// daemon's scan does) call a session or a helper of a harness. Any other
// pid is refused ("not a harness process"); a pid that does not exist is
// gone. The pid is pinned by a pidfd for the whole answer.
//
//	'c' cwd          the working directory (path)
//	'f' fds          the targets of the open descriptors (NUL-separated)
//	'x' exe          the executable's path
//	'n' namespaces   user, mnt, pid namespace inodes (3 uint64)
//	'k' confinement  the namespaces, then the rest of what the kernel
//	                 shows of a sandbox (proc.Confinement): no_new_privs
//	                 (1 byte), seccomp mode (1 byte), seccomp filters
//	                 (int32, -1 unknown), LSM labels (uint16 length and
//	                 the bytes)
//	't' tty size     columns, rows of the terminal on fd 0, 1 or 2 (2 uint32)
//	'h' tty held     whether a process of the uid other than the agent and
//	                 its descendants holds the agent's controlling terminal
//	                 (proc.Table.TTYHeld): 1 byte, 0 or 1; one bit about
//	                 the other processes, never their names
//	'e' environ      only the variables /active reads (proc.Wanted: the
//	                 zmx and tmux variables, HOME, PATH, TMPDIR,
//	                 XDG_RUNTIME_DIR, and each harness's own directory
//	                 variable), NUL-separated
//	'm' move environ the whole environment, for a move the daemon has
//	                 authorized (the helper cannot see the authorization:
//	                 it trusts the daemon it has checked); the daemon
//	                 passes it to the move's owner-only launcher channel
//	                 and never keeps, logs or serves it
//
// For a connected peer of the daemon (its socket passed as SCM_RIGHTS,
// pid field 0):
//
//	'p' peer         uid, gid, pid (3 uint32), its confinement as 'k'
//	                 gives an agent's (namespaces 0 when the helper can
//	                 neither read nor prove them: another uid, say; all 0
//	                 when its status cannot be read), then its
//	                 supplementary groups (uint32 each), as the initial
//	                 user namespace names them
//	'i' peer image   pid (uint32), then the device and inode (2 uint64) of
//	                 the file its /proc/<pid>/exe opens, read through its
//	                 pidfd: the daemon gives a move's relaunch only to a
//	                 launcher that is its own executable, and the kernel
//	                 refuses it that read inside its user namespace
//
// About the helper itself (pid field 0):
//
//	'r' reference    the helper's own user, mnt, pid namespaces (3
//	                 uint64): what the daemon judges peers and agents
//	                 against
//	'l' reference    the helper's proc.Baseline, encoded as 'k': its own
//	    confinement  namespaces and labels, and the no_new_privs and
//	                 seccomp of the user manager that started it where it
//	                 has those itself (its unit sets them)
//
// # What remains
//
// The checks are only as strong as what a process of the user cannot
// forge. Its uid, pid namespace, user namespace ancestry and executable
// (an exe link is the mapped file; an argv or comm is not consulted) it
// cannot forge. A process in `unshare --user` or `unshare --user --pid`
// (or any container of the user) therefore fails the namespace checks,
// whatever binary it runs; outside systemd so does any process in another
// mount namespace. What it can do:
//
//   - Under systemd, a process of the user that is in the helper's pid
//     namespace and can write the user's delegated cgroup tree (for
//     example one in `unshare --user` without --pid, whose mount namespace
//     still shows /sys/fs/cgroup read-write) can move itself into
//     9harness.service and exec 9harnessd there, and, being root of its
//     own user namespace, drive that 9harnessd (ptrace). It is then
//     answered as the daemon. A sandbox that mounts its own /sys or a
//     private cgroup namespace (bubblewrap, systemd-nspawn, most container
//     runtimes) cannot.
//   - A process that connects, queues a request and then execs 9harnessd
//     while a forked child keeps the socket passes the executable check if
//     it also passes the others; it only gains something where the
//     namespace and cgroup checks already let it through.
//   - The daemon itself, if compromised, reads the Wanted variables of
//     every process that looks like a harness (argv is the user's to
//     choose) and, through 'm', the whole environment of one. That is
//     what 'm' is for; the candidate rule keeps every other process of
//     the user out of reach.
//   - The gate judges the daemon by namespaces, cgroup and executable,
//     not by no_new_privs or seccomp, which the daemon's own unit sets
//     (so a Landlock domain, which needs no_new_privs, cannot be told
//     from the unit's). A Landlocked process that can write the user's
//     delegated cgroup tree could move itself into 9harness.service and
//     exec 9harnessd there, as in the first point; the peers and agents
//     the daemon asks about are judged by everything the kernel shows
//     (proc.Confinement), against this helper's Baseline.
//
// The kernel still applies its ptrace check to every read the helper
// makes, so it never sees a process the user could not see.
package prochelper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/accept"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/idle"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// The ops (see the package doc).
const (
	opCwd     = 'c'
	opFDs     = 'f'
	opExe     = 'x'
	opNS      = 'n'
	opTTY     = 't'
	opTTYHeld = 'h'
	opEnviron = 'e'
	opMoveEnv = 'm'
	opPeer    = 'p'
	opPeerExe = 'i'
	opRef     = 'r'
	opConf    = 'k'
	opRefConf = 'l'
)

// agentOps are the ops about one candidate agent.
func agentOp(op byte) bool {
	switch op {
	case opCwd, opFDs, opExe, opNS, opConf, opTTY, opTTYHeld, opEnviron, opMoveEnv:
		return true
	}
	return false
}

// The reply statuses.
const (
	stOK   = 0
	stGone = 1 // the process does not exist (proc.ErrGone)
	stErr  = 2 // anything else; the payload is the message
)

// MaxReply bounds one reply. An environment is at most what execve took
// (ARG_MAX with the default stack limit is 2 MiB for argv and envp
// together); fd targets of a process with thousands of descriptors fit too.
const MaxReply = 4 << 20

// maxPID is the kernel's largest pid (PID_MAX_LIMIT on 64-bit).
const maxPID = 1 << 22

// Logf is where the helper reports.
type Logf func(format string, args ...any)

// Server answers the helper's questions from a process table.
type Server struct {
	Procs *proc.Table
	UID   uint32 // the only peer uid served, and the only agents' uid
	Logf  Logf
	// Gate says which peer is the daemon. Nil: Serve builds it from this
	// process (NewGate), and does not serve if it cannot.
	Gate *Gate

	mu     sync.Mutex
	ref    proc.Confinement // the Baseline, once read (reference)
	conns  int
	idle   time.Time // when the last connection closed; zero while one is open
	cancel context.CancelFunc
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Serve accepts connections on l until ctx is done or, when idleExit is
// positive, until no connection has been open for that long. A shortage
// of descriptors or memory pauses it, as it pauses the daemon (package
// accept), rather than ending it.
func (s *Server) Serve(ctx context.Context, l net.Listener, idleExit time.Duration) error {
	if s.Gate == nil {
		g, err := NewGate(s.UID, "")
		if err != nil {
			l.Close()
			return err
		}
		s.Gate = g
	}
	s.logf("proc helper: answering only %s", s.Gate)
	// On return every connection is closed (by cancel, which runs before
	// the wait) and its goroutine done.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.idle = time.Now()
	s.cancel = cancel
	s.mu.Unlock()
	if idleExit > 0 {
		go idle.Watch(ctx, idleExit, func() time.Time {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.idle
		}, func() {
			s.logf("proc helper idle for %v: exiting (socket activation starts it again)", idleExit)
			cancel()
		})
	}
	err := accept.Loop(ctx, l, func(format string, args ...any) { s.logf("proc helper: "+format, args...) }, func(c net.Conn) {
		s.mu.Lock()
		s.conns++
		s.idle = time.Time{}
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				s.mu.Lock()
				s.conns--
				if s.conns == 0 {
					s.idle = time.Now()
				}
				s.mu.Unlock()
			}()
			s.serveConn(ctx, c)
		}()
	})
	if err != nil {
		return fmt.Errorf("prochelper: accept: %w", err)
	}
	return nil
}

// admit identifies c's peer and checks it against the gate. A refusal is
// logged; the caller closes the connection without a byte.
func (s *Server) admit(c *net.UnixConn) bool {
	p, err := peer.Identify(c, "/proc")
	if err != nil {
		s.logf("proc helper: refused a connection: %v", err)
		return false
	}
	defer p.Close()
	err = s.Gate.Check(p)
	if err == nil {
		return true
	}
	s.logf("proc helper: refused %v: %v", p, err)
	if errors.Is(err, errOtherExe) && selfReplaced() {
		s.logf("proc helper: exiting: its own executable was replaced on disk, and the new one (the daemon's) starts on the next connection")
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Unlock()
	}
	return false
}

// selfReplaced reports whether this process's executable is no longer on
// disk under its name (a package upgrade renamed a new file over it).
func selfReplaced() bool {
	l, err := os.Readlink("/proc/self/exe")
	return err == nil && strings.HasSuffix(l, " (deleted)")
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok || !s.admit(uc) {
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var req [5]byte
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := uc.ReadMsgUnix(req[:], oob)
		if err != nil || n == 0 {
			return
		}
		var fds []int
		if oobn > 0 {
			fds = parseRights(oob[:oobn])
		}
		// A request arrives in one write; a short one is a broken peer.
		if n < len(req) {
			if _, err := io.ReadFull(uc, req[n:]); err != nil {
				closeAll(fds)
				return
			}
		}
		st, payload := s.answer(req[0], binary.LittleEndian.Uint32(req[1:]), fds)
		closeAll(fds)
		if err := writeReply(uc, st, payload); err != nil {
			return
		}
	}
}

func (s *Server) answer(op byte, arg uint32, fds []int) (byte, []byte) {
	switch {
	case agentOp(op):
		if arg == 0 || arg > maxPID {
			return stErr, []byte("bad pid " + strconv.FormatUint(uint64(arg), 10))
		}
		return s.agent(op, int(arg))
	case op == opPeer:
		if arg != 0 {
			return stErr, []byte("peer: the pid field must be 0")
		}
		if len(fds) != 1 {
			return stErr, []byte("peer: want exactly one descriptor")
		}
		return peerReply(fds[0], s.Gate.Self)
	case op == opPeerExe:
		if arg != 0 {
			return stErr, []byte("peer image: the pid field must be 0")
		}
		if len(fds) != 1 {
			return stErr, []byte("peer image: want exactly one descriptor")
		}
		return peerExeReply(fds[0])
	case op == opRef:
		if arg != 0 {
			return stErr, []byte("reference: the pid field must be 0")
		}
		return stOK, putNS(nil, s.Gate.Self)
	case op == opRefConf:
		if arg != 0 {
			return stErr, []byte("reference: the pid field must be 0")
		}
		ref, err := s.reference()
		if err != nil {
			return stErr, []byte("reference: " + err.Error())
		}
		return stOK, putConf(nil, ref)
	}
	return stErr, []byte(fmt.Sprintf("unknown op %q", op))
}

// errNotCandidate refuses an agent op about a process that no harness
// claims.
var errNotCandidate = errors.New("not a harness process")

// agent answers an op about pid, once pid is a candidate agent. A pidfd
// pins the process from the classification to the end of the answer: the
// kernel gives its pid to no other process while the pidfd is open, so
// every read is of that one process or fails.
func (s *Server) agent(op byte, pid int) (byte, []byte) {
	if s.Procs.Root() == "/proc" {
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			if err == unix.ESRCH {
				return stGone, []byte(fmt.Sprintf("pid %d: %v", pid, err))
			}
			return stErr, []byte(fmt.Sprintf("pid %d: pidfd_open: %v", pid, err))
		}
		defer unix.Close(pidfd)
		st, b := s.agent1(op, pid)
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err == unix.ESRCH {
			return stGone, []byte(fmt.Sprintf("pid %d exited while it was read", pid))
		}
		return st, b
	}
	return s.agent1(op, pid)
}

func (s *Server) agent1(op byte, pid int) (byte, []byte) {
	if err := s.candidate(pid); err != nil {
		return status(err, nil)
	}
	t := s.Procs
	switch op {
	case opCwd:
		p, err := t.Cwd(pid)
		return status(err, []byte(p))
	case opFDs:
		fs, err := t.FDs(pid)
		return status(err, []byte(strings.Join(fs, "\x00")))
	case opExe:
		p, err := t.Exe(pid)
		return status(err, []byte(p))
	case opNS:
		ns, err := t.Namespaces(pid)
		return status(err, putNS(nil, ns))
	case opConf:
		c, err := t.Confinement(pid)
		return status(err, putConf(nil, c))
	case opTTY:
		cols, rows, err := t.TTYSize(pid)
		b := binary.LittleEndian.AppendUint32(nil, uint32(cols))
		return status(err, binary.LittleEndian.AppendUint32(b, uint32(rows)))
	case opTTYHeld:
		held, err := t.TTYHeldNow(pid)
		b := []byte{0}
		if held {
			b[0] = 1
		}
		return status(err, b)
	case opEnviron:
		env, err := t.Environ(pid)
		return status(err, []byte(strings.Join(proc.OnlyWanted(env), "\x00")))
	case opMoveEnv:
		env, err := t.MoveEnviron(pid)
		if err == nil {
			// The pid only: the environment is never logged.
			s.logf("proc helper: gave the daemon the whole environment of pid %d, for a move", pid)
		}
		return status(err, []byte(strings.Join(env, "\x00")))
	}
	return stErr, []byte(fmt.Sprintf("unknown op %q", op))
}

// candidate says whether pid is a process of the served uid that a
// harness claims, as a session or as one of its helpers, by the same
// classifiers the daemon's scan uses (argv, comm, the parent's argv).
func (s *Server) candidate(pid int) error {
	p, err := s.Procs.Stat(pid)
	if err != nil {
		return err
	}
	if len(p.Argv) == 0 || p.UID != s.UID {
		return fmt.Errorf("pid %d: %w", pid, errNotCandidate)
	}
	parent := proc.Proc{PID: p.PPID}
	if argv, err := s.Procs.Argv(p.PPID); err == nil {
		parent.Argv = argv
	}
	for _, h := range harness.All() {
		if h.Classify(p, parent) != harness.None {
			return nil
		}
	}
	return fmt.Errorf("pid %d: %w", pid, errNotCandidate)
}

// peerReply answers the peer op for the connected socket fd; self is the
// helper's own namespaces, the reference the daemon compares them with.
func peerReply(fd int, self proc.NS) (byte, []byte) {
	p, err := peer.FromFD(fd)
	if err != nil {
		return stErr, []byte("peer: " + err.Error())
	}
	defer p.Close()
	// Zero namespaces when the kernel refuses them and the peer's other
	// files do not prove them (a peer of another uid that is not
	// dumpable, say): the daemon counts that as unknown, never as its
	// own.
	c, err := p.Confinement("/proc/self", self)
	if err != nil {
		c = proc.Confinement{}
	}
	b := binary.LittleEndian.AppendUint32(nil, p.UID)
	b = binary.LittleEndian.AppendUint32(b, p.GID)
	b = binary.LittleEndian.AppendUint32(b, uint32(p.PID))
	b = putConf(b, c)
	if gs, err := peer.Groups(fd); err == nil {
		for _, g := range gs {
			b = binary.LittleEndian.AppendUint32(b, g)
		}
	}
	return stOK, b
}

// reference is the helper's Baseline, read once (proc.ReadReference):
// neither the helper nor the manager that started it changes its
// no_new_privs or seccomp afterwards. An error is not kept: the next
// question reads again.
func (s *Server) reference() (proc.Confinement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ref.NS != (proc.NS{}) {
		return s.ref, nil
	}
	ref, err := proc.ReadReference()
	if err != nil {
		return proc.Confinement{}, err
	}
	if ref.NS != s.Gate.Self {
		return proc.Confinement{}, fmt.Errorf("the helper's namespaces changed since it started")
	}
	s.ref = ref
	return ref, nil
}

// putConf appends c as the 'k' op gives it.
func putConf(b []byte, c proc.Confinement) []byte {
	b = putNS(b, c.NS)
	nnp := byte(0)
	if c.NoNewPrivs {
		nnp = 1
	}
	b = append(b, nnp, c.Seccomp)
	b = binary.LittleEndian.AppendUint32(b, uint32(c.SeccompFilters))
	lsm := c.LSM
	if len(lsm) > 0xffff {
		// More than any LSM's label; a cut label is still not the
		// reference's.
		lsm = lsm[:0xffff]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(lsm)))
	return append(b, lsm...)
}

// getConf reads a confinement putConf wrote at the start of b, and
// returns the rest.
func getConf(b []byte) (proc.Confinement, []byte, bool) {
	ns, ok := getNS(b)
	if !ok || len(b) < 32 {
		return proc.Confinement{}, nil, false
	}
	c := proc.Confinement{NS: ns, NoNewPrivs: b[24] == 1, Seccomp: b[25], SeccompFilters: int32(binary.LittleEndian.Uint32(b[26:]))}
	n := int(binary.LittleEndian.Uint16(b[30:]))
	if b[24] > 1 || len(b) < 32+n {
		return proc.Confinement{}, nil, false
	}
	c.LSM = string(b[32 : 32+n])
	return c, b[32+n:], true

}

// peerExeReply answers the peer image op for the connected socket fd.
func peerExeReply(fd int) (byte, []byte) {
	p, err := peer.FromFD(fd)
	if err != nil {
		return stErr, []byte("peer image: " + err.Error())
	}
	defer p.Close()
	id, err := p.Exe()
	if err != nil {
		return stErr, []byte(err.Error())
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(p.PID))
	b = binary.LittleEndian.AppendUint64(b, id.Dev)
	return stOK, binary.LittleEndian.AppendUint64(b, id.Ino)
}

func putNS(b []byte, ns proc.NS) []byte {
	b = binary.LittleEndian.AppendUint64(b, ns.User)
	b = binary.LittleEndian.AppendUint64(b, ns.Mnt)
	return binary.LittleEndian.AppendUint64(b, ns.PID)
}

func getNS(b []byte) (proc.NS, bool) {
	if len(b) < 24 {
		return proc.NS{}, false
	}
	return proc.NS{User: binary.LittleEndian.Uint64(b), Mnt: binary.LittleEndian.Uint64(b[8:]), PID: binary.LittleEndian.Uint64(b[16:])}, true
}

func status(err error, payload []byte) (byte, []byte) {
	switch {
	case err == nil:
		if len(payload) > MaxReply {
			return stErr, []byte("reply too large")
		}
		return stOK, payload
	case errors.Is(err, proc.ErrGone):
		return stGone, []byte(err.Error())
	}
	return stErr, []byte(err.Error())
}

func writeReply(c net.Conn, st byte, payload []byte) error {
	var h [5]byte
	h[0] = st
	binary.LittleEndian.PutUint32(h[1:], uint32(len(payload)))
	bufs := net.Buffers{h[:], payload}
	_, err := bufs.WriteTo(c)
	return err
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if rights, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, rights...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Client asks a helper. It implements proc.Guarded, so a process table
// given one reads cwd, environ and fd/ through the helper. It keeps a few
// connections open for reuse: the daemon asks from many goroutines at once.
type Client struct {
	Path string

	mu   sync.Mutex
	idle []*net.UnixConn
}

// maxIdle is how many connections a Client keeps open between requests.
const maxIdle = 4

// Dial returns a client of the helper at path. It connects lazily, so a
// helper that systemd starts on demand is started by the first question.
func Dial(path string) *Client { return &Client{Path: path} }

// Close closes the idle connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, uc := range c.idle {
		uc.Close()
	}
	c.idle = nil
	return nil
}

func (c *Client) get() (*net.UnixConn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		uc := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return uc, nil
	}
	c.mu.Unlock()
	conn, err := net.DialTimeout("unix", c.Path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("proc helper %s: %w", c.Path, err)
	}
	return conn.(*net.UnixConn), nil
}

func (c *Client) put(uc *net.UnixConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) < maxIdle {
		c.idle = append(c.idle, uc)
		return
	}
	uc.Close()
}

// ask sends one request and reads its reply. A connection that fails is
// closed; a fresh one is tried once, since an idle connection may belong to
// a helper that has since exited on its idle timer.
func (c *Client) ask(op byte, pid int, fd int) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		uc, err := c.get()
		if err != nil {
			return nil, err
		}
		b, err, retry := c.ask1(uc, op, pid, fd)
		if err == nil || !retry || attempt > 0 {
			if retry {
				uc.Close()
			} else {
				c.put(uc)
			}
			return b, err
		}
		uc.Close()
	}
}

// ask1 reports retry when the connection itself failed (and must be
// closed), as opposed to the helper answering with an error.
func (c *Client) ask1(uc *net.UnixConn, op byte, pid int, fd int) ([]byte, error, bool) {
	var req [5]byte
	req[0] = op
	binary.LittleEndian.PutUint32(req[1:], uint32(pid))
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	defer uc.SetDeadline(time.Time{})
	if _, _, err := uc.WriteMsgUnix(req[:], oob, nil); err != nil {
		return nil, fmt.Errorf("proc helper %s: %w", c.Path, err), true
	}
	var h [5]byte
	if _, err := io.ReadFull(uc, h[:]); err != nil {
		return nil, fmt.Errorf("proc helper %s: %w", c.Path, err), true
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if n > MaxReply {
		return nil, fmt.Errorf("proc helper %s: reply of %d bytes", c.Path, n), true
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(uc, b); err != nil {
		return nil, fmt.Errorf("proc helper %s: %w", c.Path, err), true
	}
	switch h[0] {
	case stOK:
		return b, nil, false
	case stGone:
		return nil, fmt.Errorf("%w: %s", proc.ErrGone, b), false
	}
	return nil, fmt.Errorf("proc helper: %s", b), false
}

// Cwd implements proc.Guarded.
func (c *Client) Cwd(pid int) (string, error) {
	b, err := c.ask(opCwd, pid, -1)
	return string(b), err
}

// Environ implements proc.Guarded.
func (c *Client) Environ(pid int) ([]string, error) {
	b, err := c.ask(opEnviron, pid, -1)
	if err != nil {
		return nil, err
	}
	return proc.SplitCmdline(b), nil
}

// FDs implements proc.Guarded.
func (c *Client) FDs(pid int) ([]string, error) {
	b, err := c.ask(opFDs, pid, -1)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return strings.Split(string(b), "\x00"), nil
}

// Cred is a peer's credentials as the helper's (initial) user namespace
// names them, and its confinement (namespaces zero when the helper may
// not read them).
type Cred struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32
	Conf     proc.Confinement
}

// Peer asks the helper who is connected on conn: SO_PEERCRED and
// SO_PEERGROUPS read outside the daemon's user namespace, where another
// user is not the overflow uid, and the peer's namespaces. conn is passed
// as a descriptor; the helper reads nothing from it.
func (c *Client) Peer(conn net.Conn) (Cred, error) {
	sc, ok := conn.(syscallConn)
	if !ok {
		return Cred{}, fmt.Errorf("proc helper: %T has no descriptor", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var b []byte
	var aerr error
	if err := raw.Control(func(fd uintptr) { b, aerr = c.ask(opPeer, 0, int(fd)) }); err != nil {
		return Cred{}, err
	}
	if aerr != nil {
		return Cred{}, aerr
	}
	return parsePeer(b)
}

func parsePeer(b []byte) (Cred, error) {
	if len(b) < 12 {
		return Cred{}, fmt.Errorf("proc helper: malformed peer reply of %d bytes", len(b))
	}
	cr := Cred{UID: binary.LittleEndian.Uint32(b), GID: binary.LittleEndian.Uint32(b[4:]), PID: int32(binary.LittleEndian.Uint32(b[8:]))}
	c, groups, ok := getConf(b[12:])
	if !ok || len(groups)%4 != 0 {
		return Cred{}, fmt.Errorf("proc helper: malformed peer reply of %d bytes", len(b))
	}
	cr.Conf = c
	for g := groups; len(g) >= 4; g = g[4:] {
		cr.Groups = append(cr.Groups, binary.LittleEndian.Uint32(g))
	}
	return cr, nil
}

// PeerExe returns a function that identifies a connected peer's
// executable (the file its /proc/<pid>/exe opens, by device and inode),
// read through its pidfd: by the helper when c is not nil (a daemon in a
// user namespace may not read it), by the daemon otherwise. The helper's
// answer must name the pid the kernel names to the daemon.
func PeerExe(c *Client) func(net.Conn, *peer.Peer) (peer.FileID, error) {
	return func(conn net.Conn, p *peer.Peer) (peer.FileID, error) {
		if c == nil {
			return p.Exe()
		}
		sc, ok := conn.(syscallConn)
		if !ok {
			return peer.FileID{}, fmt.Errorf("proc helper: %T has no descriptor", conn)
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return peer.FileID{}, err
		}
		var b []byte
		var aerr error
		if err := raw.Control(func(fd uintptr) { b, aerr = c.ask(opPeerExe, 0, int(fd)) }); err != nil {
			return peer.FileID{}, err
		}
		if aerr != nil {
			return peer.FileID{}, aerr
		}
		if len(b) != 20 {
			return peer.FileID{}, fmt.Errorf("proc helper %s: malformed peer image reply of %d bytes", c.Path, len(b))
		}
		if pid := int32(binary.LittleEndian.Uint32(b)); pid != p.PID {
			return peer.FileID{}, fmt.Errorf("the helper named pid %d, the kernel %d", pid, p.PID)
		}
		return peer.FileID{Dev: binary.LittleEndian.Uint64(b[4:]), Ino: binary.LittleEndian.Uint64(b[12:])}, nil
	}
}

type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// Exe implements proc.Guarded: the agent's executable path.
func (c *Client) Exe(pid int) (string, error) {
	b, err := c.ask(opExe, pid, -1)
	return string(b), err
}

// Namespaces implements proc.Guarded: the agent's namespaces.
func (c *Client) Namespaces(pid int) (proc.NS, error) {
	b, err := c.ask(opNS, pid, -1)
	if err != nil {
		return proc.NS{}, err
	}
	return c.ns(b)
}

// Reference implements proc.Guarded: the helper's own namespaces.
func (c *Client) Reference() (proc.NS, error) {
	b, err := c.ask(opRef, 0, -1)
	if err != nil {
		return proc.NS{}, err
	}
	return c.ns(b)
}

// Confinement implements proc.Guarded: the agent's confinement.
func (c *Client) Confinement(pid int) (proc.Confinement, error) {
	b, err := c.ask(opConf, pid, -1)
	if err != nil {
		return proc.Confinement{}, err
	}
	return c.conf(b)
}

// ReferenceConfinement implements proc.Guarded: the helper's Baseline.
func (c *Client) ReferenceConfinement() (proc.Confinement, error) {
	b, err := c.ask(opRefConf, 0, -1)
	if err != nil {
		return proc.Confinement{}, err
	}
	return c.conf(b)
}

func (c *Client) conf(b []byte) (proc.Confinement, error) {
	conf, rest, ok := getConf(b)
	if !ok || len(rest) != 0 {
		return proc.Confinement{}, fmt.Errorf("proc helper %s: malformed confinement reply of %d bytes", c.Path, len(b))
	}
	return conf, nil
}

func (c *Client) ns(b []byte) (proc.NS, error) {
	ns, ok := getNS(b)
	if !ok || len(b) != 24 {
		return proc.NS{}, fmt.Errorf("proc helper %s: malformed namespaces reply of %d bytes", c.Path, len(b))
	}
	return ns, nil
}

// TTYSize implements proc.Guarded: the size of the agent's terminal.
func (c *Client) TTYSize(pid int) (int, int, error) {
	b, err := c.ask(opTTY, pid, -1)
	if err != nil {
		return 0, 0, err
	}
	if len(b) != 8 {
		return 0, 0, fmt.Errorf("proc helper %s: malformed tty size reply of %d bytes", c.Path, len(b))
	}
	return int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:])), nil
}

// TTYHeld implements proc.Guarded: whether another process holds the
// agent's controlling terminal.
func (c *Client) TTYHeld(pid int) (bool, error) {
	b, err := c.ask(opTTYHeld, pid, -1)
	if err != nil {
		return false, err
	}
	if len(b) != 1 || b[0] > 1 {
		return false, fmt.Errorf("proc helper %s: malformed tty held reply of %d bytes", c.Path, len(b))
	}
	return b[0] == 1, nil
}

// MoveEnviron implements proc.Guarded: the agent's whole environment, for
// a move the daemon has authorized.
func (c *Client) MoveEnviron(pid int) ([]string, error) {
	b, err := c.ask(opMoveEnv, pid, -1)
	if err != nil {
		return nil, err
	}
	return proc.SplitCmdline(b), nil
}

// Sandbox returns the daemon's Server.Sandbox: the restriction a
// connected peer has that the reference does not (proc.Restriction: a
// namespace, a seccomp filter, no_new_privs, an LSM label), "" when
// none, proc.Unknown when the peer's confinement or the reference's
// cannot be read (never the owner's view by default). With a helper (c
// not nil) the helper reads the peer's, through the socket passed to it,
// and the reference is the helper's Baseline; without one the daemon
// reads the peer's, pinned by its pidfd, against its own Baseline
// (proc.ReadReference). Where the kernel refuses a peer's namespaces (a
// non-dumpable peer, such as sshd forwarding a socket for the user),
// each reader decides them from the peer's world-readable files against
// its own (proc.ReadNSAgainst). It never errs: an unknown peer is
// served, as a grantee. logf, if set, is told of every sandboxed peer of
// uid owner (others are grantees anyway).
func Sandbox(c *Client, owner uint32, logf Logf) func(net.Conn, *peer.Peer) (string, error) {
	// The daemon's own Baseline, read once it is read whole: neither the
	// daemon nor the manager that started it changes it, and every
	// connection is judged against it before it is served.
	var (
		mu   sync.Mutex
		self proc.Confinement
	)
	reference := func() (proc.Confinement, error) {
		mu.Lock()
		defer mu.Unlock()
		if self.NS != (proc.NS{}) {
			return self, nil
		}
		ref, err := proc.ReadReference()
		if err == nil {
			self = ref
		}
		return ref, err
	}
	return func(conn net.Conn, p *peer.Peer) (string, error) {
		var verdict proc.Restriction
		var against string
		if c != nil {
			against = "the proc helper's reference"
			cr, err := c.Peer(conn)
			if err == nil && cr.PID != p.PID {
				err = fmt.Errorf("the helper named pid %d, the kernel %d", cr.PID, p.PID)
			}
			var ref proc.Confinement
			if err == nil {
				ref, err = c.ReferenceConfinement()
			}
			verdict = proc.Judge(cr.Conf, err, ref)
		} else {
			against = "the daemon's reference"
			ref, err := reference()
			if err != nil {
				verdict = proc.Unknown
			} else {
				verdict = p.Restriction(ref)
			}
		}
		switch {
		case verdict == "" || logf == nil || p.UID != owner:
		case verdict == proc.Unknown:
			logf("peer %v %s: served as a grantee, and it may never move", p, verdict.Phrase(against))
		default:
			logf("peer %v %s (a sandbox): served as a grantee, and it may never move", p, verdict.Phrase(against))
		}
		return string(verdict), nil
	}
}
