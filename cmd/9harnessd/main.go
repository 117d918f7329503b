// Command 9harnessd serves a read-only 9P2000.L view of AI coding-agent
// harness state (Claude Code, Codex, omp, pi, hermes, dsh) over a unix socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/move"
	"github.com/9harness/9harness/internal/sockpath"
	"github.com/9harness/9harness/internal/tree"
	buildversion "github.com/9harness/9harness/internal/version"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `usage: 9harnessd [flags]

9harnessd serves the on-disk state of your AI coding agents (Claude Code,
Codex, omp, pi, hermes, dsh) as a read-only 9P2000.L file tree on a unix
socket. Only processes of your own uid are answered; credential-shaped
files are never listed or read; symlinks are never followed.

Who may do what (decided from the kernel's SO_PEERCRED, never from 9P):
  read    the daemon's own uid, plus --allow-uid and --allow-group grants
  move    nobody, unless --allow-move; then only the daemon's own uid
          (and, with --polkit, only if polkitd agrees too)
Refusals and moves are recorded in the journal (journalctl -t 9harnessd).

Where it listens (first that applies):
  --fd N            serve the one connection already open on descriptor N
  --unix PATH       listen on PATH
  --name NAME       listen on $XDG_RUNTIME_DIR/9p/NAME
  (systemd)         sockets handed over by socket activation (LISTEN_FDS)
  (default)         %s

Flags:
`

const footer = `
Look at it:
  9harness ls /                 list the tree (9harness -s PATH for another socket)
  diodls -s SOCKET -a / /       the same with diod's independent client

The tree: /pid /uptime /claude/{projects,history,skills} /codex/{sessions,
session-index,history} /omp /pi /hermes /dsh /skills/{claude,codex,omp}.
A harness whose directory does not exist is simply absent.
`

// rootFlags collects --root NAME=PATH.
type rootFlags map[string]string

func (r rootFlags) String() string {
	var s []string
	for k, v := range r {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func (r rootFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	path, xdev := strings.CutSuffix(path, ",xdev")
	if !ok || path == "" {
		return fmt.Errorf("want NAME=PATH or NAME=PATH,xdev, got %q", v)
	}
	known := false
	for _, h := range tree.Harnesses {
		known = known || h == name
	}
	if !known {
		return fmt.Errorf("unknown harness %q (known: %s)", name, strings.Join(tree.Harnesses, ", "))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if xdev {
		abs += ",xdev" // split off again in parse
	}
	r[name] = abs
	return nil
}

// idList collects repeatable --allow-uid/--allow-group values, names or
// numbers, resolved after parsing.
type idList []string

func (l *idList) String() string     { return strings.Join(*l, ",") }
func (l *idList) Set(v string) error { *l = append(*l, v); return nil }

func (l idList) resolve(lookup func(string) (string, error)) ([]uint32, error) {
	var out []uint32
	for _, v := range l {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil {
			out = append(out, uint32(n))
			continue
		}
		id, err := lookup(v)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: id %q is not a number", v, id)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

func lookupUser(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func lookupGroup(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}

// clientPath names the client the way the user can run it: the 9harness
// beside this daemon (make run leaves both in bin/), else the one on PATH.
func clientPath() string {
	if exe, err := os.Executable(); err == nil {
		sib := filepath.Join(filepath.Dir(exe), "9harness")
		if fi, err := os.Stat(sib); err == nil && fi.Mode()&0o111 != 0 {
			if p, err := exec.LookPath("9harness"); err == nil && p == sib {
				return "9harness"
			}
			if wd, err := os.Getwd(); err == nil {
				if rel, err := filepath.Rel(wd, sib); err == nil && !strings.HasPrefix(rel, "..") {
					return rel
				}
			}
			return sib
		}
	}
	return "9harness"
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "--exec-env" {
		// The launcher a move runs in the new session: it never returns
		// unless the relaunch cannot be exec'd.
		err := move.ExecEnv(os.Args[2])
		fmt.Fprintf(os.Stderr, "9harnessd --exec-env: %v\n", err)
		os.Exit(127)
	}
	cfg, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "9harnessd: %v\n", err)
		os.Exit(2)
	}
	if cfg == nil { // --version
		return
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, *cfg); err != nil {
		fmt.Fprintf(os.Stderr, "9harnessd: %v\n", err)
		os.Exit(1)
	}
}

// parse turns the command line into a Config. It returns (nil, nil) when it
// has answered the command itself (--version).
func parse(args []string, stderr io.Writer) (*daemon.Config, error) {
	fs := flag.NewFlagSet("9harnessd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roots := rootFlags{}
	unixPath := fs.String("unix", "", "listen on the unix socket at `PATH`")
	name := fs.String("name", "", "listen on $XDG_RUNTIME_DIR/9p/`NAME` instead of .../harness")
	fd := fs.Int("fd", -1, "serve exactly one connection already open on descriptor `N`")
	fs.Var(roots, "root", "pin a harness root: `NAME=PATH` (repeatable; default $HOME/.NAME), resolved once at start; mounts beneath a root are never crossed, unless given as NAME=PATH,xdev")
	maxConns := fs.Int("max-conns", daemon.DefaultMaxConns, "refuse connections beyond `N` at once")
	msize := fs.Uint("msize", daemon.DefaultMaxMsize, "largest 9P message size granted, in `bytes` (4096..4194304)")
	var allowUIDs, allowGroups idList
	fs.Var(&allowUIDs, "allow-uid", "also let `USER` (a name or uid) read the tree (repeatable)")
	fs.Var(&allowGroups, "allow-group", "also let members of `GROUP` (a name or gid) read the tree (repeatable)")
	allowMove := fs.Bool("allow-move", false, "allow the daemon's own uid to move agents (the one write; off by default)")
	usePolkit := fs.Bool("polkit", false, "also ask the system's polkitd (action "+authz.PolkitAction+") before any move")
	auditTo := fs.String("audit", "auto", "where refusals and moves are recorded: `auto` (the journal if reachable, else stderr), journal, stderr")
	idleExit := fs.Duration("idle-exit", 0, "exit after `DURATION` with no connection and no move in flight (0: never); systemd reactivates on the next connection")
	procRoot := fs.String("proc", "/proc", "the process table to read (`DIR`; for tests)")
	procHelper := fs.String("proc-helper", "", "read agents' cwd, environment and descriptors, and other users' credentials, through the proc helper at `SOCK` (for a daemon in a user namespace: see 9harness-proc.service)")
	serveProcHelper := fs.Bool("serve-proc-helper", false, "be the proc helper instead of the daemon, on --unix PATH or the socket systemd hands over")
	hostPath := fs.String("host-path", "", "where a move finds tmux and zmx: a `PATH`-style list (default: the daemon's own PATH; never the agent's)")
	resumePath := fs.String("resume-path", "", "where a move finds a harness's program when the agent's executable does not name it (node-based pi, Codex): a `PATH`-style list (default: the daemon's own PATH)")
	quiet := fs.Bool("quiet", false, "log only refusals and errors")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, usage, sockpath.Default())
		fs.PrintDefaults()
		fmt.Fprint(stderr, footer)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *showVersion {
		fmt.Fprintln(os.Stdout, "9harnessd", buildversion.String(version))
		return nil, nil
	}
	n := 0
	for _, set := range []bool{*unixPath != "", *name != "", *fd >= 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("--unix, --name and --fd are alternatives: give at most one")
	}
	if *serveProcHelper && (*name != "" || *fd >= 0 || *procHelper != "" || *allowMove || len(allowUIDs)+len(allowGroups) > 0) {
		return nil, errors.New("--serve-proc-helper takes only --unix, --idle-exit, --proc and --quiet")
	}
	if *msize < 4096 || *msize > 4<<20 {
		return nil, fmt.Errorf("--msize %d: must be between 4096 and 4194304", *msize)
	}
	if *maxConns < 1 {
		return nil, fmt.Errorf("--max-conns %d: must be at least 1", *maxConns)
	}
	uids, err := allowUIDs.resolve(lookupUser)
	if err != nil {
		return nil, fmt.Errorf("--allow-uid: %w", err)
	}
	gids, err := allowGroups.resolve(lookupGroup)
	if err != nil {
		return nil, fmt.Errorf("--allow-group: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil && len(roots) < len(tree.Harnesses) {
		return nil, fmt.Errorf("no home directory for the default roots (%v); pass --root NAME=PATH", err)
	}
	all := tree.DefaultRoots(home)
	xdev := map[string]bool{}
	for k, v := range roots {
		all[k], xdev[k] = strings.CutSuffix(v, ",xdev")
	}
	logger := log.New(os.Stderr, "", 0)
	logf := logger.Printf
	cfg := &daemon.Config{
		Unix:     *unixPath,
		Name:     *name,
		FD:       *fd,
		Roots:    all,
		MaxConns: *maxConns,
		MaxMsize: uint32(*msize),
		Logf:     logf,

		AllowUIDs:   uids,
		AllowGroups: gids,
		AllowMove:   *allowMove,
		Polkit:      *usePolkit,
		Audit:       *auditTo,
		ProcRoot:    *procRoot,
		IdleExit:    *idleExit,

		HostPath:   *hostPath,
		ResumePath: *resumePath,

		ProcHelper:      *procHelper,
		ServeProcHelper: *serveProcHelper,
		Listening: func(path string) {
			if *quiet {
				return
			}
			mode := "read-only"
			if *allowMove {
				mode = "moves allowed for uid " + strconv.Itoa(os.Getuid())
			}
			logf("9harnessd %s: serving %s (%s)", buildversion.String(version), path, mode)
			for _, h := range tree.Harnesses {
				logf("  %-6s %s", h, all[h])
			}
			logf("look at it:  %s -s %s ls /", clientPath(), path)
		},
	}
	cfg.CrossMounts = xdev
	return cfg, nil
}
