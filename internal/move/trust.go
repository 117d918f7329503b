package move

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/confine"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// errNoServer is a socket of the user's in a safe directory that nothing
// listens on: a server that exited. tmux starts a new one there.
var errNoServer = errors.New("no server listens on the socket")

// Judge says whether the process at the other end of a unix connection
// is sandboxed, as the daemon judges its own peers: "" when the kernel
// shows it with no restriction the reference process lacks, else what
// differs ("user", "mnt", "pid", ..., or "unknown"). The daemon passes
// its peers' judgement (prochelper.Sandbox), so a tmux server is judged
// exactly as a client of the daemon would be.
type Judge func(net.Conn, *peer.Peer) (string, error)

// tmuxServer is a tmux server judged trustworthy, pinned by an O_PATH
// descriptor of its socket's inode: a tmux client given
// /proc/self/fd/N connects to that inode, so to the listening socket
// that was judged, whatever is renamed or bound at the socket's path
// since. (A same-uid sandbox that shares the directory can replace the
// path at any moment; it cannot rebind an inode.)
type tmuxServer struct {
	path string
	sock *os.File
}

func (s *tmuxServer) Close() { s.sock.Close() }

// TrustedTmux judges the tmux server socket before anything is asked of
// it (see judgeTmux).
func TrustedTmux(socket string, uid uint32, judge Judge) error {
	s, err := judgeTmux(socket, uid, judge)
	if err == nil {
		s.Close()
	}
	return err
}

// judgeTmux checks a tmux server socket before a tmux client is run
// against it: the socket is a socket owned by uid, in a directory owned by
// uid (or root) that no one else may write; the process listening on it is
// uid's (SO_PEERCRED) and judge finds it in no sandbox (its pidfd,
// SO_PEERPIDFD, read as a peer of the daemon is: through the proc helper,
// against the reference). A server in a sandbox is never asked anything:
// a tmux client obeys its server, and the daemon's clients run outside
// any sandbox. The socket's inode is pinned first and every check made
// through it, so the server judged is the one the returned descriptor
// reaches.
func judgeTmux(socket string, uid uint32, judge Judge) (*tmuxServer, error) {
	s, err := judgeTmuxOnce(socket, uid, judge)
	if err == errServerExited {
		// The server exited while it was judged, as a tmux server does
		// when its last session ends (a move out of a server's only
		// session stops that session's agent first). Its successor, if
		// any, is judged afresh from the path: nothing of the first
		// judgement is reused.
		s, err = judgeTmuxOnce(socket, uid, judge)
	}
	if err == errServerExited {
		err = fmt.Errorf("the tmux server on %s exited while it was judged, twice", socket)
	}
	return s, err
}

// errServerExited is a judgement that failed because the judged server
// exited meanwhile: neither trusted nor found in a sandbox.
var errServerExited = errors.New("the tmux server exited while it was judged")

func judgeTmuxOnce(socket string, uid uint32, judge Judge) (*tmuxServer, error) {
	if judge == nil {
		return nil, fmt.Errorf("the tmux server on %s cannot be judged: no judgement of its namespaces is configured", socket)
	}
	dir, base := filepath.Dir(socket), filepath.Base(socket)
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, errNoServer // tmux makes its directory (0700) when it starts a server
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if st.Uid != uid && st.Uid != 0 || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%s is owned by uid %d with mode %o: others could replace the socket", dir, st.Uid, st.Mode&0o7777)
	}
	sfd, err := unix.Openat(dfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, errNoServer
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", socket, err)
	}
	sock := os.NewFile(uintptr(sfd), socket)
	ok := false
	defer func() {
		if !ok {
			sock.Close()
		}
	}()
	if err := unix.Fstat(sfd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", socket, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Uid != uid {
		return nil, fmt.Errorf("%s is not a socket of uid %d", socket, uid)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(sfd)}); err != nil {
		unix.Close(fd)
		if err == unix.ECONNREFUSED {
			return nil, errNoServer
		}
		return nil, fmt.Errorf("connecting to %s: %w", socket, err)
	}
	f := os.NewFile(uintptr(fd), socket)
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", socket, err)
	}
	defer conn.Close()
	p, err := peer.Identify(conn, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", socket, err)
	}
	defer p.Close()
	if p.UID != uid {
		return nil, fmt.Errorf("the server on %s runs as uid %d, not %d", socket, p.UID, uid)
	}
	verdict, err := judge(conn, p)
	if (err != nil || verdict != "") && !p.Alive() {
		return nil, errServerExited
	}
	if err != nil {
		return nil, fmt.Errorf("the tmux server on %s (pid %d) cannot be judged: %v", socket, p.PID, err)
	}
	if verdict != "" {
		return nil, fmt.Errorf("the tmux server on %s (pid %d) %s (a sandbox): a sandbox's server is never asked, nor given an agent", socket, p.PID, sandboxName(verdict))
	}
	ok = true
	return &tmuxServer{path: socket, sock: sock}, nil
}

// sandboxName says what a judgement found.
func sandboxName(verdict string) string {
	switch verdict {
	case "user", "mnt", "pid":
		return "is in another " + nsName(verdict) + " namespace than the reference's"
	}
	return proc.Restriction(verdict).Phrase("the reference's")
}

// tmuxRules are the files a confined tmux client may read besides its
// program: the locale data it needs a UTF-8 LC_CTYPE from (it refuses to
// run without one). All of it is the system's, readable by anyone.
func tmuxRules() []confine.Rule {
	rules := []confine.Rule{
		{Path: "/usr/lib/locale", Access: confine.ReadTree},
		{Path: "/usr/share/locale/locale.alias", Access: confine.Read},
	}
	if a := os.Getenv("LOCALE_ARCHIVE"); filepath.IsAbs(a) {
		rules = append(rules, confine.Rule{Path: a, Access: confine.Read})
	}
	return append(rules, testRules...)
}

// testRules lets a test's fake tmux record its argv in a file.
var testRules []confine.Rule

// viaFD is how a tmux client is told the judged server: the pinned
// socket, inherited as descriptor 3.
const viaFD = "/proc/self/fd/3"

// command is a tmux client (bin) that asks this server args, started by
// run: cwd /, env (the daemon's own, Host.Env), the socket through the
// pinned descriptor.
func (s *tmuxServer) command(ctx context.Context, bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, append([]string{"-S", viaFD}, args...)...)
	cmd.ExtraFiles = []*os.File{s.sock}
	cmd.Dir = "/"
	cmd.Env = env
	if v, ok := os.LookupEnv("LOCALE_ARCHIVE"); ok {
		cmd.Env = append(append([]string{}, env...), "LOCALE_ARCHIVE="+v)
	}
	return cmd
}

// run runs a tmux client against the judged server and returns its
// output. The client is confined (package confine): no file a hook of the
// server names can be opened by it, no program execed. On a kernel
// without Landlock the client runs unconfined, and only ever against a
// server judged here: in the reference's namespaces, the user's own, the
// socket's inode pinned (the daemon logs this once at start).
func (s *tmuxServer) run(ctx context.Context, bin string, env []string, args ...string) ([]byte, error) {
	cmd := s.command(ctx, bin, env, args...)
	var out []byte
	var err error
	if confine.ABI() > 0 {
		out, err = confine.Output(cmd, tmuxRules())
	} else {
		out, err = cmd.Output()
	}
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(bytes.ToValidUTF8(ee.Stderr[:min(len(ee.Stderr), 512)], nil))))
	}
	return out, err
}

// askTmux judges the server on socket and runs one tmux client against it.
func askTmux(ctx context.Context, judge Judge, uid uint32, bin string, env []string, socket string, args ...string) ([]byte, error) {
	s, err := judgeTmux(socket, uid, judge)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.run(ctx, bin, env, args...)
}
