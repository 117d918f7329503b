// Package prochelper answers, across a unix socket, the few questions about
// the user's processes that the kernel refuses to a process in a user
// namespace: a process's working directory, its environment and its open
// descriptors, and the real credentials of a connected peer.
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
// those four questions and nothing else: it reads no client-chosen path,
// runs nothing and writes nothing, so the part of 9harness that parses
// untrusted input holds none of that access itself. This is OpenSSH's
// privilege separation in miniature.
//
// The helper grants nothing a caller did not have: it serves only peers of
// its own uid (by SO_PEERCRED), and the kernel still applies its ptrace
// check to the helper's reads, so it can only see processes the user could
// see anyway.
//
// The protocol is fixed-size and binary, one request and one reply at a
// time on a connection. A request is 5 bytes: an op and a pid (uint32, little
// endian); the peer op carries a connected socket as SCM_RIGHTS instead of
// a pid. A reply is a status byte, a length (uint32, little endian) and that
// many bytes.
package prochelper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/idle"
	"github.com/9harness/9harness/internal/proc"
)

// The ops.
const (
	opCwd     = 'c'
	opEnviron = 'e'
	opFDs     = 'f'
	opPeer    = 'p'
)

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

// Logf is where the helper reports.
type Logf func(format string, args ...any)

// Server answers the helper's questions from a process table.
type Server struct {
	Procs *proc.Table
	UID   uint32 // the only peer uid served
	Logf  Logf

	mu    sync.Mutex
	conns int
	idle  time.Time // when the last connection closed; zero while one is open
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Serve accepts connections on l until ctx is done or, when idleExit is
// positive, until no connection has been open for that long.
func (s *Server) Serve(ctx context.Context, l net.Listener, idleExit time.Duration) error {
	// On return every connection is closed (by cancel, which runs before
	// the wait) and its goroutine done.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.idle = time.Now()
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
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("prochelper: accept: %w", err)
		}
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
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	cr, err := ucred(uc)
	if err != nil {
		s.logf("proc helper: refused a connection: %v", err)
		return
	}
	if cr.Uid != s.UID {
		s.logf("proc helper: refused pid=%d uid=%d: only uid %d is served", cr.Pid, cr.Uid, s.UID)
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

func (s *Server) answer(op byte, pid32 uint32, fds []int) (byte, []byte) {
	pid := int(pid32)
	if op != opPeer && (pid <= 0 || pid32 > 1<<22) {
		return stErr, []byte("bad pid " + strconv.FormatUint(uint64(pid32), 10))
	}
	switch op {
	case opCwd:
		p, err := s.Procs.Cwd(pid)
		return status(err, []byte(p))
	case opEnviron:
		env, err := s.Procs.Environ(pid)
		return status(err, []byte(strings.Join(env, "\x00")))
	case opFDs:
		fs, err := s.Procs.FDs(pid)
		return status(err, []byte(strings.Join(fs, "\x00")))
	case opPeer:
		if len(fds) != 1 {
			return stErr, []byte("peer: want exactly one descriptor")
		}
		cr, err := unix.GetsockoptUcred(fds[0], unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return stErr, []byte("peer: SO_PEERCRED: " + err.Error())
		}
		out := fmt.Sprintf("%d %d %d", cr.Uid, cr.Gid, cr.Pid)
		if gs, err := peerGroups(fds[0]); err == nil {
			for _, g := range gs {
				out += " " + strconv.FormatUint(uint64(g), 10)
			}
		}
		return stOK, []byte(out)
	}
	return stErr, []byte(fmt.Sprintf("unknown op %q", op))
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

// peerGroups reads SO_PEERGROUPS: the peer's supplementary groups when it
// connected, as the kernel names them in the reader's user namespace.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e == unix.ERANGE && int(n/4) > len(buf) {
			buf = make([]uint32, n/4)
			continue
		}
		if e != 0 {
			return nil, e
		}
		return buf[:n/4], nil
	}
}

func ucred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cr *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cr, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cr, serr
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
// names them.
type Cred struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32
}

// Peer asks the helper who is connected on conn: SO_PEERCRED and
// SO_PEERGROUPS read outside the daemon's user namespace, where another
// user is not the overflow uid. conn is passed as a descriptor; the helper
// reads nothing from it.
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
	f := bytes.Fields(b)
	if len(f) < 3 {
		return Cred{}, fmt.Errorf("proc helper: malformed peer reply %q", b)
	}
	var nums []uint64
	for _, x := range f {
		n, err := strconv.ParseUint(string(x), 10, 32)
		if err != nil {
			return Cred{}, fmt.Errorf("proc helper: malformed peer reply %q", b)
		}
		nums = append(nums, n)
	}
	cr := Cred{UID: uint32(nums[0]), GID: uint32(nums[1]), PID: int32(nums[2])}
	for _, g := range nums[3:] {
		cr.Groups = append(cr.Groups, uint32(g))
	}
	return cr, nil
}

type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// The ops below are declared for proc.Guarded; the helper answers them
// once its protocol carries them.

// Exe returns the agent's executable path.
func (c *Client) Exe(pid int) (string, error) {
	return "", errors.New("prochelper: exe: not answered yet")
}

// Namespaces returns the agent's namespaces.
func (c *Client) Namespaces(pid int) (proc.NS, error) {
	return proc.NS{}, errors.New("prochelper: namespaces: not answered yet")
}

// Reference returns the helper's own namespaces.
func (c *Client) Reference() (proc.NS, error) {
	return proc.NS{}, errors.New("prochelper: reference: not answered yet")
}

// TTYSize returns the size of the agent's terminal.
func (c *Client) TTYSize(pid int) (int, int, error) {
	return 0, 0, errors.New("prochelper: tty size: not answered yet")
}

// MoveEnviron returns the agent's whole environment for an authorized move.
func (c *Client) MoveEnviron(pid int) ([]string, error) {
	return c.Environ(pid)
}
