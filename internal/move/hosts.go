package move

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/shquote"
)

// Target is where a move lands: the session, its directory and size, and
// where the host keeps it. Every field was decided by the daemon; the only
// client bytes in it are the validated name.
type Target struct {
	Name       string
	Cwd        string
	Cols, Rows int
	// tmux: the server's socket and its label as the tmux file shows it
	// ("" for the default server), and the TMUX_TMPDIR the default
	// server's socket is under.
	Socket, Label string
	Tmpdir        string
	// zmx: the socket directory and the session-name prefix, resolved from
	// the agent's environment as zmx resolves them.
	ZmxDir, ZmxPrefix string

	uid uint32 // whose tmux server it must be
}

// Host is a terminal-session host a move can land in: zmx or tmux.
type Host interface {
	Name() string
	// Place decides the target from the agent's environment and the
	// server part of what the client wrote ("" when it wrote none).
	Place(server, name string, env []string, tmuxSocket string, uid uint32) (Target, error)
	// Check refuses a target this host cannot take (a limit of the host).
	Check(t Target) error
	// InUse reports whether a live session of that name exists.
	InUse(ctx context.Context, hostPath string, env []string, t Target) (bool, error)
	// Command is the argv (hostPath first) that creates a detached session
	// running launcher (the fixed `9harnessd --exec-env FILE`).
	Command(hostPath string, t Target, launcher []string) []string
	// Env is the host command's own environment: the daemon's, plus what
	// locates the host's sockets. Never the agent's values.
	Env(t Target, hostPath string) []string
	// Attach is what the user types to reach the session.
	Attach(t Target) string
}

// Hosts are the known hosts by file name.
func Hosts() map[string]Host { return map[string]Host{"zmx": Zmx{}, "tmux": Tmux{}} }

// daemonEnv is the part of the daemon's own environment a host command
// needs to run at all.
func daemonEnv(hostPath string) []string {
	env := []string{"PATH=" + hostPath}
	for _, k := range []string{"HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Zmx is upstream zmx (neurosnap/zmx): one unix socket per session under a
// socket directory resolved from the environment.
type Zmx struct{}

func (Zmx) Name() string { return "zmx" }

// SocketDir resolves zmx's socket directory as zmx does:
// $ZMX_DIR, $XDG_RUNTIME_DIR/zmx, $TMPDIR/zmx-$UID, /tmp/zmx-$UID.
func (Zmx) SocketDir(env []string) string {
	if d := getenv(env, "ZMX_DIR"); d != "" {
		return d
	}
	if d := getenv(env, "XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "zmx")
	}
	uid := strconv.Itoa(os.Getuid())
	if d := getenv(env, "TMPDIR"); d != "" {
		return filepath.Join(d, "zmx-"+uid)
	}
	return "/tmp/zmx-" + uid
}

func (t Target) zmxFull() string { return t.ZmxPrefix + t.Name }

// Place implements Host: zmx has one namespace of sessions per socket
// directory, the agent's.
func (z Zmx) Place(server, name string, env []string, _ string, _ uint32) (Target, error) {
	if server != "" {
		return Target{}, errs.E("move", errs.Invalid, name, fmt.Errorf("a zmx session name has no server part"))
	}
	return Target{Name: name, ZmxDir: z.SocketDir(env), ZmxPrefix: getenv(env, "ZMX_SESSION_PREFIX")}, nil
}

// Check implements Host: the socket path must fit in sun_path (107 bytes
// and a NUL), as zmx requires.
func (Zmx) Check(t Target) error {
	p := filepath.Join(t.ZmxDir, t.zmxFull())
	if len(p) > 107 {
		return errs.E("move", errs.Invalid, t.Name, fmt.Errorf("zmx socket path %s is %d bytes, more than the 107 a unix socket can take", p, len(p)))
	}
	return nil
}

// InUse implements Host: in use means a socket at the session's path that
// accepts a connection (zmx's own definition; a refused one is stale).
func (Zmx) InUse(ctx context.Context, hostPath string, env []string, t Target) (bool, error) {
	p := filepath.Join(t.ZmxDir, t.zmxFull())
	fi, err := os.Lstat(p)
	if err != nil {
		return false, nil
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return true, nil // something else holds the name: zmx would fail on it
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "unix", p)
	if err != nil {
		return false, nil
	}
	c.Close()
	return true, nil
}

// Command implements Host. zmx types the quoted command into a login
// shell in the session; -d detaches the client once it is sent. zmx has no
// size of its own: the session takes the size of the terminal that
// attaches.
func (Zmx) Command(hostPath string, t Target, launcher []string) []string {
	return append([]string{hostPath, "run", t.Name, "-d"}, launcher...)
}

// Env implements Host: the socket directory and prefix the daemon
// resolved, so the zmx client puts the session where the agent's zmx
// looks.
func (Zmx) Env(t Target, hostPath string) []string {
	env := append(daemonEnv(hostPath), "ZMX_DIR="+t.ZmxDir)
	if t.ZmxPrefix != "" {
		env = append(env, "ZMX_SESSION_PREFIX="+t.ZmxPrefix)
	}
	return env
}

func (Zmx) Attach(t Target) string { return "zmx attach " + t.Name }

// Tmux is tmux: the agent's own server when it was in a trustworthy one,
// the user's default server otherwise. Every server is judged (judgeTmux)
// before a client is run against it, with Sandbox, the daemon's judgement
// of its peers; without one no server is trusted.
type Tmux struct{ Sandbox Judge }

func (Tmux) Name() string { return "tmux" }

// tmuxTmpdir is where tmux puts its per-uid socket directory.
func tmuxTmpdir(env []string) string {
	if d := getenv(env, "TMUX_TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}

// TmuxLabel names a tmux server as the tmux file shows it: "" for the
// default server, the -L label for a socket in the per-uid directory under
// tmpdir ($TMUX_TMPDIR, "" meaning /tmp), else the socket's absolute path.
func TmuxLabel(socket, tmpdir string, uid uint32) string {
	if tmpdir == "" {
		tmpdir = "/tmp"
	}
	socket = filepath.Clean(socket)
	if filepath.Dir(socket) == filepath.Join(tmpdir, "tmux-"+strconv.FormatUint(uint64(uid), 10)) {
		if b := filepath.Base(socket); b != "default" {
			return b
		}
		return ""
	}
	return socket
}

// TmuxDisplay is the content of the tmux file: NAME on the default
// server, LABEL:NAME on another (split at the last ':').
func TmuxDisplay(socket, tmpdir string, uid uint32, name string) string {
	if name == "" {
		return ""
	}
	if l := TmuxLabel(socket, tmpdir, uid); l != "" {
		return l + ":" + name
	}
	return name
}

// Place implements Host: the agent's own server when its socket is
// trustworthy, else the default server of the agent's TMUX_TMPDIR. A
// server part the client wrote must name that same server (by its label
// or its socket path): a client byte never picks a socket.
func (tm Tmux) Place(server, name string, env []string, tmuxSocket string, uid uint32) (Target, error) {
	tmpdir := tmuxTmpdir(env)
	t := Target{Name: name, uid: uid}
	if tmuxSocket != "" && filepath.IsAbs(tmuxSocket) && TrustedTmux(tmuxSocket, uid, tm.Sandbox) == nil {
		t.Socket = filepath.Clean(tmuxSocket)
	} else {
		t.Socket = filepath.Join(tmpdir, "tmux-"+strconv.FormatUint(uint64(uid), 10), "default")
		t.Tmpdir = tmpdir
		// The default server is named with -L default and TMUX_TMPDIR, so
		// tmux makes its per-uid directory (0700) when there is none, and
		// refuses one with unsafe permissions itself: the daemon, whose
		// unit sees /tmp read-only, creates nothing. An existing one is
		// checked here, before the agent is touched.
		if fi, err := os.Lstat(filepath.Dir(t.Socket)); err == nil && (!fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || ownerOf(fi) != uid) {
			return Target{}, errs.E("move", errs.Permission, name, fmt.Errorf("the default tmux server's directory %s is not a directory of uid %d that only it may write", filepath.Dir(t.Socket), uid))
		}
		if _, err := os.Lstat(t.Socket); err == nil {
			if err := TrustedTmux(t.Socket, uid, tm.Sandbox); err != nil && err != errNoServer {
				return Target{}, errs.E("move", errs.Permission, name, fmt.Errorf("the default tmux server is not trustworthy: %v", err))
			}
		}
	}
	t.Label = TmuxLabel(t.Socket, tmpdir, uid)
	if server != "" && server != t.Label && server != t.Socket && !(t.Label == "" && server == "default") {
		return Target{}, errs.E("move", errs.Invalid, name, fmt.Errorf("%q is not the agent's own tmux server (%s): a move stays on that server", server, t.Attach()))
	}
	return t, nil
}

// server is how tmux is told the target's server: -L default (with
// TMUX_TMPDIR in its environment) for the default server, -S SOCKET for
// the agent's own.
func (t Target) server() []string {
	if t.Label == "" && t.Tmpdir != "" {
		return []string{"-L", "default"}
	}
	return []string{"-S", t.Socket}
}

// tmuxEnv is env with the target's TMUX_TMPDIR, for the default server.
func (t Target) tmuxEnv(env []string) []string {
	if t.Label == "" && t.Tmpdir != "" {
		return append(append([]string{}, env...), "TMUX_TMPDIR="+t.Tmpdir)
	}
	return env
}

// Attach on a target with a socket names the server.
func (t Target) Attach() string {
	switch {
	case t.Label == "":
		return "tmux attach -t " + t.Name
	case filepath.IsAbs(t.Label):
		return "tmux -S " + shquote.Quote(t.Label) + " attach -t " + t.Name
	}
	return "tmux -L " + shquote.Quote(t.Label) + " attach -t " + t.Name
}

// tmuxMsgMax is what one tmux client message can carry (MAX_IMSGSIZE,
// 16384, less its header and tmux's own framing).
const tmuxMsgMax = 16384 - 256

// Check implements Host: tmux treats '.' and ':' in a target as separators
// and rewrites them in new names, so a name with them would not be found
// again under itself; a command longer than one client message is refused
// by the server ("command too long").
func (Tmux) Check(t Target) error {
	if strings.ContainsAny(t.Name, ".:") {
		return errs.E("move", errs.Invalid, t.Name, fmt.Errorf("tmux session names cannot contain '.' or ':'"))
	}
	if len(t.Socket) > 107 {
		return errs.E("move", errs.Invalid, t.Name, fmt.Errorf("tmux socket path %s is %d bytes, more than the 107 a unix socket can take", t.Socket, len(t.Socket)))
	}
	return nil
}

func checkTmuxLen(argv []string) error {
	n := 0
	for _, a := range argv[1:] {
		n += len(a) + 1
	}
	if n > tmuxMsgMax {
		return fmt.Errorf("the tmux command is %d bytes, more than the %d one tmux message can carry", n, tmuxMsgMax)
	}
	return nil
}

// InUse implements Host: no server listens, or the judged server lists
// no session of that name. A client that fails is an error, never "not in
// use": the move would kill the agent and then fail to create the session.
func (tm Tmux) InUse(ctx context.Context, hostPath string, env []string, t Target) (bool, error) {
	out, err := askTmux(ctx, tm.Sandbox, t.uid, hostPath, env, t.Socket, "list-sessions", "-F", "#{session_name}")
	if err == errNoServer {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return slices.Contains(strings.Split(string(out), "\n"), t.Name), nil
}

// Create creates the session on the server already listening on the
// target's socket, through a confined client of that server, judged and
// pinned (the server lives outside the daemon's cgroup already: the new
// pane is its child). done is false when no server listens: the caller
// then has the Launcher start one with the session (argv), whose tmux
// client talks to the server it forks over a socketpair, not the path.
// A server that is there and not trusted refuses the launch.
//
// What this cannot close: that launched client, unconfined (the server it
// forks, and the agent, inherit whatever confines it), looks for a server
// at the path before it starts one, as every tmux does. A sandbox sharing
// the directory that binds the path in the moment between this check and
// that connect gets that one client; the launch then judges the server it
// found and the move fails, but the client has already been its client.
func (tm Tmux) Create(ctx context.Context, hostPath string, env []string, t Target, argv []string) (done bool, err error) {
	s, err := judgeTmux(t.Socket, t.uid, tm.Sandbox)
	if err == errNoServer {
		return false, nil
	} else if err != nil {
		return true, err
	}
	defer s.Close()
	n := 1 + len(t.server())
	if len(argv) <= n || argv[n] != "new-session" {
		return true, fmt.Errorf("not a tmux new-session command: %q", argv)
	}
	_, err = s.run(ctx, hostPath, env, argv[n:]...)
	if err != nil && TrustedTmux(t.Socket, t.uid, tm.Sandbox) == errNoServer {
		return false, nil // the server exited meanwhile: start one
	}
	return true, err
}

// Command implements Host. The pane runs the launcher, which fetches the
// agent's environment itself: a new pane gets the server's environment,
// not the client's, and nothing of the agent's passes through tmux.
func (Tmux) Command(hostPath string, t Target, launcher []string) []string {
	cmd := append([]string{hostPath}, t.server()...)
	cmd = append(cmd, "new-session", "-d", "-s", t.Name, "-c", t.Cwd,
		"-x", strconv.Itoa(t.Cols), "-y", strconv.Itoa(t.Rows), "--")
	return append(cmd, launcher...)
}

// Env implements Host: the socket is named with -S, so tmux needs nothing
// of the agent's.
func (Tmux) Env(t Target, hostPath string) []string { return t.tmuxEnv(daemonEnv(hostPath)) }

func (Tmux) Attach(t Target) string { return t.Attach() }

// tmuxSessionOf asks the tmux server at socket, once judged, which
// session pane belongs to, with bin (found on hostPath) and the daemon's
// own environment.
func tmuxSessionOf(ctx context.Context, judge Judge, uid uint32, bin, hostPath, socket, pane string) (string, error) {
	out, err := askTmux(ctx, judge, uid, bin, daemonEnv(hostPath), socket, "display-message", "-p", "-t", pane, "#{session_name}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// panes lists the pids of the panes of session name, on the target's
// server once judged.
func (tm Tmux) panes(ctx context.Context, hostPath string, env []string, t Target) ([]int, error) {
	out, err := askTmux(ctx, tm.Sandbox, t.uid, hostPath, env, t.Socket, "list-panes", "-s", "-t", "="+t.Name, "-F", "#{pane_pid}")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

func ownerOf(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}
