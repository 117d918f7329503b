package move

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// The relaunch never carries the agent's environment in an argv (argv is
// world-readable in /proc/PID/cmdline, and a tmux server started by the
// move keeps its argv for life) nor in a file: a process of the owner's
// uid in a sandbox that shares the directory could open a file before its
// reader unlinked it. The session host runs a fixed launcher,
// `9harnessd --exec-env SOCKET HANDLE`, that connects back to the daemon
// on a socket made for this one move; the daemon gives the relaunch (the
// resume argv, the directory and the environment) once, over that
// connection, to a peer that the kernel shows is this daemon's own
// executable, of its uid, in the reference namespaces (not in a sandbox),
// and that presents the move's token. The launcher, in turn, judges the
// process holding the socket before it sends a byte, and takes a relaunch
// only from the daemon process its handle names: a socket a sandbox put
// in place of the move's gets nothing, not even the token, and cannot
// hand the launcher a program of its own.
//
// A dedicated socket per move, not the daemon's own: under socket
// activation the daemon's socket belongs to systemd, and a launcher that
// connected while the daemon was stopping (idle exit, SIGTERM: the daemon
// still waits for its moves) would start a new daemon that holds nothing;
// the move's socket reaches exactly the process that holds the relaunch,
// for exactly as long as the move waits, and keeps the launcher's bytes
// out of the 9P accept path and its bounds.

// Launch is what the launcher execs.
type Launch struct {
	Path string   // the resume binary, absolute
	Argv []string // the resume argv (argv[0] the harness's program name)
	Env  []string // the agent's environment, scrubbed and sanitized
	Cwd  string   // the agent's directory
}

// launchMsg is Launch on the wire: every string as bytes (base64 in JSON),
// because an environment, an argv or a directory name need not be UTF-8
// and JSON strings would replace such bytes.
type launchMsg struct {
	Path []byte   `json:"path"`
	Argv [][]byte `json:"argv"`
	Env  [][]byte `json:"env"`
	Cwd  []byte   `json:"cwd"`
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func fromBytes(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// Bounds of a relaunch: each string is under the kernel's per-string limit
// for execve (MAX_ARG_STRLEN, 32 pages), the whole well under ARG_MAX's
// usual 2 MiB.
const (
	MaxArgString = 128<<10 - 1
	MaxLaunch    = 1 << 20
	maxLaunchMsg = 4 << 20 // base64 makes the message a third larger than its strings
)

// HandoffWait bounds how long a launcher that connected has to present
// its token, and how long the launcher waits for the relaunch.
const HandoffWait = 5 * time.Second

func encodeLaunch(l Launch) ([]byte, error) {
	b, err := json.Marshal(launchMsg{Path: []byte(l.Path), Argv: toBytes(l.Argv), Env: toBytes(l.Env), Cwd: []byte(l.Cwd)})
	if err != nil {
		return nil, err
	}
	if len(b) > maxLaunchMsg {
		return nil, fmt.Errorf("the relaunch is %d bytes, more than %d", len(b), maxLaunchMsg)
	}
	return b, nil
}

func decodeLaunch(b []byte) (Launch, error) {
	var w launchMsg
	if err := json.Unmarshal(b, &w); err != nil {
		return Launch{}, err
	}
	l := Launch{Path: string(w.Path), Argv: fromBytes(w.Argv), Env: fromBytes(w.Env), Cwd: string(w.Cwd)}
	if !filepath.IsAbs(l.Path) || len(l.Argv) == 0 {
		return Launch{}, errors.New("the relaunch names no program to run")
	}
	return l, nil
}

// DefaultLaunchDir is $XDG_RUNTIME_DIR/9harness/launch (the unit makes
// %t/9harness writable), or 9harness-UID/launch under TMPDIR without a
// runtime directory. It holds the moves' sockets while they wait.
func DefaultLaunchDir() string {
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		return filepath.Join(rt, "9harness", "launch")
	}
	return filepath.Join(os.TempDir(), "9harness-"+strconv.Itoa(os.Geteuid()), "launch")
}

// ownerOnly checks that fd is a directory owned by uid that no one else
// may enter or write.
func ownerOnly(fd int, uid uint32, what string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", what)
	}
	if st.Uid != uid || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is owned by uid %d with mode %o, want uid %d and no access for others", what, st.Uid, st.Mode&0o7777, uid)
	}
	return nil
}

// openDir returns dir pinned, once it and its parent are checked to be
// owner-only directories; with create, it makes either (mode 0700) when
// missing. Both are made and opened each through the one above, never
// through a link, so a process of the uid that can write the runtime
// directory cannot point the daemon at a directory elsewhere.
func openDir(dir string, create bool) (int, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || filepath.Dir(dir) == "/" {
		return -1, fmt.Errorf("launch directory %q is not an absolute path two levels below /", dir)
	}
	uid := uint32(os.Geteuid())
	parent := filepath.Dir(dir)
	top, err := unix.Open(filepath.Dir(parent), unix.O_DIRECTORY|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", filepath.Dir(parent), err)
	}
	defer unix.Close(top)
	pfd, err := subdir(top, parent, uid, create)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	return subdir(pfd, dir, uid, create)
}

// subdir opens the last component of path under dfd, making it first with
// create, and checks it is an owner-only directory.
func subdir(dfd int, path string, uid uint32, create bool) (int, error) {
	base := filepath.Base(path)
	if create {
		if err := unix.Mkdirat(dfd, base, 0o700); err != nil && err != unix.EEXIST {
			return -1, fmt.Errorf("%s: %w", path, err)
		}
	}
	fd, err := unix.Openat(dfd, base, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	if err := ownerOnly(fd, uid, path); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// under names base in the directory held by dfd, for bind and connect:
// through the descriptor, so a directory renamed or replaced after it was
// checked is not the one used, and a long directory name still fits in a
// socket address.
func under(dfd int, base string) string {
	return "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + base
}

// Handoff gives each move's relaunch to its launcher alone.
type Handoff struct {
	// Dir holds the moves' sockets (DefaultLaunchDir).
	Dir string
	// Sandbox is the daemon's judgement of a connected peer (the one the
	// accept loop makes, daemon.Server.Sandbox): "" when the peer is in
	// the reference namespaces. A launcher judged anything else gets
	// nothing; nil judges every launcher sandboxed.
	Sandbox func(net.Conn, *peer.Peer) (string, error)
	// PeerExe identifies a connected peer's executable by device and
	// inode. Nil reads it through the peer's pidfd (peer.Peer.Exe); a
	// daemon in a user namespace, refused that read by the kernel, asks
	// its proc helper (prochelper.PeerExe).
	PeerExe func(net.Conn, *peer.Peer) (peer.FileID, error)
	// Logf, if set, is told of each launcher refused (never of what the
	// relaunch holds).
	Logf func(format string, args ...any)
}

// tokenLen is the token's size in bytes (hex in the launcher's argv).
const tokenLen = 32

// Offer is one move's relaunch, waiting for its launcher.
type Offer struct {
	h      *Handoff
	path   string // the socket, as the launcher names it
	handle string // PID:START:TOKEN
	token  []byte // hex, as the launcher sends it
	dfd    int
	name   string
	ino    uint64
	self   peer.FileID
	uid    uint32
	ln     *net.UnixListener

	mu      sync.Mutex
	msg     []byte   // nil once given or dropped
	refused []string // why launchers were refused, the first few
	fetched atomic.Int64
	done    chan struct{}
}

// Offer binds a socket for l in the launch directory and serves it to the
// launcher until it is fetched or the offer is closed.
func (h *Handoff) Offer(l Launch) (*Offer, error) {
	msg, err := encodeLaunch(l)
	if err != nil {
		return nil, err
	}
	self, err := peer.SelfExe()
	if err != nil {
		return nil, fmt.Errorf("the daemon's own executable: %w", err)
	}
	start, err := selfStart()
	if err != nil {
		return nil, err
	}
	dfd, err := openDir(h.Dir, true)
	if err != nil {
		return nil, fmt.Errorf("launch directory: %w", err)
	}
	o := &Offer{h: h, dfd: dfd, self: self, uid: uint32(os.Geteuid()), msg: msg, done: make(chan struct{})}
	fail := func(err error) (*Offer, error) {
		if o.name != "" {
			o.unlink()
		}
		unix.Close(dfd)
		return nil, err
	}
	rnd := make([]byte, 16+tokenLen)
	if _, err := rand.Read(rnd); err != nil {
		return fail(err)
	}
	o.name = hex.EncodeToString(rnd[:16]) + ".sock"
	o.token = []byte(hex.EncodeToString(rnd[16:]))
	o.path = filepath.Join(h.Dir, o.name)
	o.handle = strconv.Itoa(os.Getpid()) + ":" + strconv.FormatUint(start, 10) + ":" + string(o.token)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	f := os.NewFile(uintptr(fd), o.name)
	defer f.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: under(dfd, o.name)}); err != nil {
		o.name = ""
		return fail(fmt.Errorf("binding the launch socket: %w", err))
	}
	// Its mode, whatever the umask: changed through a descriptor of the
	// socket itself, never through a name that could have become a link.
	sfd, err := unix.Openat(dfd, o.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	err = unix.Fstat(sfd, &st)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		err = errors.New("the launch socket was replaced")
	}
	if err == nil {
		o.ino = st.Ino
		err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(sfd), 0o600)
	}
	unix.Close(sfd)
	if err != nil {
		return fail(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		return fail(err)
	}
	fl, err := net.FileListener(f)
	if err != nil {
		return fail(err)
	}
	o.ln = fl.(*net.UnixListener)
	o.ln.SetUnlinkOnClose(false) // unlinked through the pinned directory
	go o.serve()
	return o, nil
}

// selfStart is this process's start time (field 22 of its stat).
func selfStart() (uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	p, err := proc.ParseStat(b)
	if err != nil {
		return 0, err
	}
	return p.Start, nil
}

// Argv is the launcher's command line: prefix (this daemon's executable
// and --exec-env), the socket and the handle. No byte of the relaunch.
func (o *Offer) Argv(prefix []string) []string {
	return append(append([]string{}, prefix...), o.path, o.handle)
}

// placeholderArgv is a launcher command line of the size a real one has,
// for checking a host command before anything is made.
func placeholderArgv(prefix []string, dir string) []string {
	h := strconv.Itoa(os.Getpid()) + ":" + strconv.FormatUint(1<<62, 10) + ":" + strings.Repeat("0", 2*tokenLen)
	return append(append([]string{}, prefix...), filepath.Join(dir, strings.Repeat("0", 32)+".sock"), h)
}

// Fetched is the pid of the launcher that took the relaunch, or 0.
func (o *Offer) Fetched() int { return int(o.fetched.Load()) }

// Refused says why launchers were refused, or "".
func (o *Offer) Refused() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.refused, "; ")
}

// Close drops the relaunch (if it was never fetched), closes the socket
// and removes it.
func (o *Offer) Close() {
	o.ln.Close()
	<-o.done
	o.drop()
	o.unlink()
	unix.Close(o.dfd)
}

func (o *Offer) drop() {
	o.mu.Lock()
	clear(o.msg)
	o.msg = nil
	o.mu.Unlock()
}

// unlink removes the socket if the name still holds it.
func (o *Offer) unlink() {
	var st unix.Stat_t
	if unix.Fstatat(o.dfd, o.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == o.ino {
		unix.Unlinkat(o.dfd, o.name, 0)
	}
}

// serve judges each connection in turn until one launcher has taken the
// relaunch or the listener is closed. The judgement needs nothing from
// the peer, so one that connects and stays silent holds nothing up; only
// a peer that passed it is read from, within HandoffWait.
func (o *Offer) serve() {
	defer close(o.done)
	for {
		c, err := o.ln.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if o.give(c) {
			o.ln.Close()
			return
		}
	}
}

const maxRefusals = 4

func (o *Offer) refuse(p *peer.Peer, why string) {
	who := "a peer"
	if p != nil {
		who = fmt.Sprintf("pid %d (%q)", p.PID, p.Comm)
	}
	msg := "refused a launcher: " + who + ": " + why
	if o.h.Logf != nil {
		o.h.Logf("move: %s", msg)
	}
	o.mu.Lock()
	if len(o.refused) < maxRefusals {
		o.refused = append(o.refused, who+": "+why)
	}
	o.mu.Unlock()
}

// give hands the relaunch to c's peer if it is the launcher, and reports
// whether it did.
func (o *Offer) give(c *net.UnixConn) bool {
	defer c.Close()
	p, err := peer.Identify(c, "/proc")
	if err != nil {
		o.refuse(nil, err.Error())
		return false
	}
	defer p.Close()
	if why := o.judge(c, p); why != "" {
		o.refuse(p, why)
		return false
	}
	// Only now is a byte read: the token says which move it came for.
	c.SetDeadline(time.Now().Add(HandoffWait))
	line, err := bufio.NewReaderSize(io.LimitReader(c, 2*tokenLen+1), 2*tokenLen+1).ReadSlice('\n')
	if err != nil {
		o.refuse(p, "no token: "+err.Error())
		return false
	}
	if subtle.ConstantTimeCompare(line[:len(line)-1], o.token) != 1 {
		o.refuse(p, "its token is not this move's")
		return false
	}
	if !p.Alive() {
		o.refuse(p, "it exited")
		return false
	}
	o.mu.Lock()
	msg := o.msg
	o.msg = nil
	o.mu.Unlock()
	if msg == nil {
		return false
	}
	defer clear(msg)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(msg)))
	bufs := net.Buffers{n[:], msg}
	if _, err := bufs.WriteTo(c); err != nil {
		// The relaunch may be partly in the socket of a launcher that is
		// gone: it is not offered again, and the move fails as one whose
		// launcher never ran.
		o.refuse(p, "sending the relaunch: "+err.Error())
		return true
	}
	o.fetched.Store(int64(p.PID))
	return true
}

// judge says why p is not this daemon's launcher, or "". Every fact is the
// kernel's, read through the peer's pidfd: its uid, its namespaces as the
// daemon's reference judges them, and its executable by device and inode.
func (o *Offer) judge(c net.Conn, p *peer.Peer) string {
	if p.PIDFD() < 0 || p.PID <= 0 {
		return "the kernel gave no pidfd for it"
	}
	if p.UID != o.uid {
		return fmt.Sprintf("its uid is %d, not %d", p.UID, o.uid)
	}
	if o.h.Sandbox == nil {
		return "no judgement of its namespaces is configured"
	}
	switch v, err := o.h.Sandbox(c, p); {
	case err != nil:
		return "its confinement is unknown: " + err.Error()
	case v != "":
		return "it " + sandboxName(v) + " (a sandbox)"
	}
	exe, err := o.peerExe(c, p)
	if err != nil {
		return "its executable cannot be read: " + err.Error()
	}
	if exe != o.self {
		return fmt.Sprintf("its executable (%d:%d) is not the daemon's (%d:%d)", exe.Dev, exe.Ino, o.self.Dev, o.self.Ino)
	}
	if !p.Alive() {
		return "it exited while it was judged"
	}
	return ""
}

func (o *Offer) peerExe(c net.Conn, p *peer.Peer) (peer.FileID, error) {
	if o.h.PeerExe != nil {
		return o.h.PeerExe(c, p)
	}
	return p.Exe()
}

// Fetch is the launcher's side: it connects to sock, takes the relaunch
// only from the daemon process handle names (its pid and start time,
// pinned by the socket's pidfd), presents the token and reads the
// relaunch.
func Fetch(sock, handle string) (Launch, error) {
	var l Launch
	f := strings.SplitN(handle, ":", 3)
	if len(f) != 3 || len(f[2]) != 2*tokenLen {
		return l, fmt.Errorf("%q is not a launch handle", handle)
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if _, err3 := hex.DecodeString(f[2]); err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return l, fmt.Errorf("%q is not a launch handle", handle)
	}
	if !filepath.IsAbs(sock) {
		return l, fmt.Errorf("%q is not an absolute socket path", sock)
	}
	dfd, err := openDir(filepath.Dir(sock), false)
	if err != nil {
		return l, err
	}
	defer unix.Close(dfd)
	c, err := dialRetry(under(dfd, filepath.Base(sock)))
	if err != nil {
		return l, fmt.Errorf("connecting to the daemon at %s: %w", sock, err)
	}
	defer c.Close()
	p, err := peer.Identify(c, "/proc")
	if err != nil {
		return l, err
	}
	defer p.Close()
	if p.PIDFD() < 0 || int(p.PID) != pid || p.StartTime != start || p.UID != uint32(os.Geteuid()) || !p.Alive() {
		return l, fmt.Errorf("the socket %s is held by pid %d (uid %d, started at %d), not by the daemon that made the move (pid %d, started at %d)", sock, p.PID, p.UID, p.StartTime, pid, start)
	}
	// The daemon judges the launcher before it reads a byte: one it
	// refuses finds the connection closed, before or after the token.
	c.SetDeadline(time.Now().Add(HandoffWait))
	var n [4]byte
	if _, err := io.WriteString(c, f[2]+"\n"); err != nil {
		return l, fmt.Errorf("the daemon refused this launcher (its log says why): %w", err)
	}
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return l, fmt.Errorf("the daemon refused this launcher (its log says why): %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxLaunchMsg {
		return l, fmt.Errorf("a relaunch of %d bytes", size)
	}
	b := make([]byte, size)
	defer clear(b)
	if _, err := io.ReadFull(c, b); err != nil {
		return l, err
	}
	return decodeLaunch(b)
}

// connectWait bounds how long the launcher waits out a full backlog
// (other processes of the uid connecting to the move's socket at the same
// time, each judged in turn): well inside the move's own wait for the
// session.
const connectWait = 3 * HandoffWait

// dialRetry connects to a unix socket, waiting out a full backlog for
// connectWait; a socket nobody listens on fails at once.
func dialRetry(addr string) (*net.UnixConn, error) {
	deadline := time.Now().Add(connectWait)
	for {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		// A blocking connect to a full backlog waits this long, then
		// fails with EAGAIN.
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 1})
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: addr})
		if err == nil {
			f := os.NewFile(uintptr(fd), "launch")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				return nil, err
			}
			return c.(*net.UnixConn), nil
		}
		unix.Close(fd)
		if err != unix.EAGAIN && err != unix.EINTR || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostSet are the variables the new session host gives the process: where
// it now lives (tmux's pane, zmx's session) and what its terminal is. The
// launcher keeps its own values of these over the agent's old ones.
var hostSet = []string{"TMUX", "TMUX_PANE", "ZMX_SESSION", "TERM"}

// ExecEnv is `9harnessd --exec-env SOCKET HANDLE`: it fetches the
// relaunch from the daemon and execs the resume argv in the agent's
// directory with the agent's environment plus the new host's variables.
// It returns only on failure.
func ExecEnv(sock, handle string) error {
	l, err := Fetch(sock, handle)
	if err != nil {
		return err
	}
	env := l.Env
	for _, k := range hostSet {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			env = setenv(env, k, v)
		}
	}
	if l.Cwd != "" {
		if err := os.Chdir(l.Cwd); err != nil {
			return err
		}
	}
	return unix.Exec(l.Path, l.Argv, env)
}

func setenv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}
