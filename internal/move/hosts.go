package move

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/errs"
)

// Host is a terminal-session host a move can land in: zmx or tmux.
type Host interface {
	Name() string
	// Check refuses a name this host cannot take, given the agent's
	// environment (where the host's sockets live depends on it).
	Check(name string, env []string) error
	// InUse reports whether a live session of that name exists.
	InUse(ctx context.Context, hostPath, name string, env []string) (bool, error)
	// Command is the argv (hostPath first) that creates a detached
	// session named name running argv in cwd with exactly env.
	Command(hostPath, name, cwd string, argv, env []string) []string
	// Attach is what the user types to reach the session.
	Attach(name string) string
}

// Hosts are the known hosts by file name.
func Hosts() map[string]Host { return map[string]Host{"zmx": Zmx{}, "tmux": Tmux{}} }

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

func (z Zmx) fullName(name string, env []string) string {
	return getenv(env, "ZMX_SESSION_PREFIX") + name
}

// Check implements Host: the socket path must fit in sun_path (107 bytes
// and a NUL), as zmx requires.
func (z Zmx) Check(name string, env []string) error {
	p := filepath.Join(z.SocketDir(env), z.fullName(name, env))
	if len(p) > 107 {
		return errs.E("move", errs.Invalid, name, fmt.Errorf("zmx socket path %s is %d bytes, more than the 107 a unix socket can take", p, len(p)))
	}
	return nil
}

// InUse implements Host: in use means a socket at the session's path that
// accepts a connection (zmx's own definition; a refused one is stale).
func (z Zmx) InUse(ctx context.Context, hostPath, name string, env []string) (bool, error) {
	p := filepath.Join(z.SocketDir(env), z.fullName(name, env))
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

// Command implements Host. zmx types the quoted command into a login bash
// in the session; -d detaches the client once the command is sent.
func (Zmx) Command(hostPath, name, cwd string, argv, env []string) []string {
	return append([]string{hostPath, "run", name, "-d"}, argv...)
}

func (Zmx) Attach(name string) string { return "zmx attach " + name }

// Tmux is tmux on the user's default server.
type Tmux struct{}

func (Tmux) Name() string { return "tmux" }

// Check implements Host: tmux treats '.' and ':' in a target as separators
// and rewrites them in new names, so a name with them would not be found
// again under itself.
func (Tmux) Check(name string, env []string) error {
	if strings.ContainsAny(name, ".:") {
		return errs.E("move", errs.Invalid, name, fmt.Errorf("tmux session names cannot contain '.' or ':'"))
	}
	return nil
}

func tmuxCmd(ctx context.Context, hostPath string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, hostPath, args...)
	// The user's default server: the socket is found from TMUX_TMPDIR and
	// the uid, never from an outer $TMUX.
	cmd.Env = scrub(env)
	return cmd
}

// InUse implements Host with has-session on the user's default server;
// "=NAME" matches the name exactly, not as a prefix.
func (Tmux) InUse(ctx context.Context, hostPath, name string, env []string) (bool, error) {
	cmd := tmuxCmd(ctx, hostPath, env, "has-session", "-t", "="+name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return true, nil
	}
	if _, ok := err.(*exec.ExitError); ok {
		return false, nil // no such session, or no server at all
	}
	return false, err
}

// Command implements Host. tmux gives a new session the server's global
// environment, not the client's, so the argv runs under env -i with the
// agent's own environment spelled out, plus the two variables tmux sets
// for the pane (TMUX, TMUX_PANE): they say where the agent now lives.
func (Tmux) Command(hostPath, name, cwd string, argv, env []string) []string {
	cmd := []string{hostPath, "new-session", "-d", "-s", name, "-c", cwd, "--",
		"/bin/sh", "-c", `exec /usr/bin/env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"`, "sh"}
	cmd = append(cmd, env...)
	return append(cmd, argv...)
}

func (Tmux) Attach(name string) string { return "tmux attach -t " + name }

// TmuxSession asks tmux which session a pane belongs to.
func TmuxSession(ctx context.Context, hostPath, socket, pane string) (string, error) {
	args := []string{"display-message", "-p"}
	if socket != "" {
		args = append([]string{"-S", socket}, args...)
	}
	if pane != "" {
		args = append(args, "-t", pane)
	}
	args = append(args, "#{session_name}")
	out, err := exec.CommandContext(ctx, hostPath, args...).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func getenv(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if key, v, ok := strings.Cut(env[i], "="); ok && key == k {
			return v
		}
	}
	return ""
}
