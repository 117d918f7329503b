// Command 9harnessd serves a read-only 9P view (9P2000.L and plain 9P2000)
// of AI coding-agent harness state over a unix socket; the harnesses are
// those of internal/harness.
package main

import (
	"context"
	"errors"
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

	"github.com/spf13/pflag"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/move"
	"github.com/9harness/9harness/internal/sockpath"
	"github.com/9harness/9harness/internal/tree"
	buildversion "github.com/9harness/9harness/internal/version"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// Exit statuses, as 9harness's: 0 ok, 1 an error, 2 a usage error.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usage is the help; its verbs are the default socket, the harnesses'
// names and their directories in the tree, all derived, never listed here.
const usage = `usage: 9harnessd [flags]

9harnessd serves the on-disk state of your AI coding agents
(%[2]s)
as a read-only file tree on a unix socket, in 9P2000.L and in plain 9P2000
(the client picks by its version message). Only processes of your own uid
are answered; credential-shaped files are never listed or read; symlinks
are never followed.

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
  (default)         %[1]s

Flags:
  --unix PATH       listen on the unix socket at PATH
  --name NAME       listen on $XDG_RUNTIME_DIR/9p/NAME instead of .../harness
  --fd N            serve exactly one connection already open on
                    descriptor N
  --root NAME=PATH  anchor a harness root (repeatable; default $HOME/.NAME,
                    opencode's $XDG_DATA_HOME/opencode),
                    resolved once at start; mounts beneath a root are never
                    crossed, unless given as NAME=PATH,xdev. NAME is one of
                    %[2]s
  --max-conns N     serve at most N connections at once (default %[3]d);
                    more wait for a slot, yours first; other uids may hold
                    all but %[8]d of them, each uid at most %[9]d
  --idle-timeout DURATION
                    close a connection of another uid after DURATION with
                    no request in flight (default %[10]s; 0: never)
  --max-bytes SIZE  hold at most SIZE bytes for all peers together:
                    listings, walked names, open snapshots, read buffers
                    (default %[11]s; K, M, G suffixes); beyond it a
                    request gets ENOMEM, a walk EMFILE. Other uids may
                    hold all but %[12]s of it
  --max-bytes-per-uid SIZE
                    hold at most SIZE bytes for each uid but the owner's
                    (the owner's uid inside a sandbox counts as another),
                    and for each connection (default %[13]s)
  --msize BYTES     largest 9P message size granted, 4096..4194304
                    (default %[4]d)
  --allow-uid USER  also let USER (a name or uid) read the tree (repeatable)
  --allow-group GROUP
                    also let members of GROUP (a name or gid) read the tree
                    (repeatable)
  --allow-move      allow the daemon's own uid to move agents (the one
                    write; off by default)
  --polkit          also ask the system's polkitd (action
                    %[5]s) before any move
  --audit WHERE     where refusals and moves are recorded: auto (the
                    journal if reachable, else stderr; the default),
                    journal or stderr
  --idle-exit DURATION
                    exit after DURATION (such as 10m) with no connection and
                    no move in flight (default 0: never); systemd
                    reactivates on the next connection
  --proc DIR        the process table to read (default /proc; for tests)
  --proc-helper SOCK
                    read agents' cwd, environment and descriptors, and other
                    users' credentials, through the proc helper at SOCK (for
                    a daemon in a user namespace: see 9harness-proc.service)
  --serve-proc-helper
                    be the proc helper instead of the daemon, on --unix PATH
                    or the socket systemd hands over
  --host-path PATH  where a move finds tmux and zmx: a PATH-style list
                    (default: the daemon's own PATH; never the agent's)
  --resume-path PATH
                    where a move finds a harness's program when the agent's
                    executable does not name it (node-based pi, Codex): a
                    PATH-style list (default: the daemon's own PATH)
  --quiet           log only refusals and errors
  --version         print the version and exit
  -h, --help        this text

Look at it:
  9harness ls /                 list the tree (9harness -s PATH for another socket)
  diodls -s SOCKET -a / /       the same with diod's independent client

The tree:
  /pid /uptime      the daemon's pid and how long it has run
  /active/HARNESS/PID/
                    one directory per live agent: its facts (cwd, title,
                    status, zmx, tmux, ...) and the session it writes
%[6]s
A harness whose directory does not exist is simply absent.

The formats are those of the versions the real-CLI tier runs (test/realcli):
%[7]s.

Exit status: 0 on success (and after --help or --version); 1 when it cannot
serve (the socket cannot be made, a root cannot be opened); 2 for a usage
error, with one line on standard error.
`

// helpText fills usage in.
func helpText() string {
	names := harness.Names()
	var dirs strings.Builder
	line := "  /HARNESS/         each harness's state, as its root holds it:"
	for _, n := range names {
		if len(line)+len(n)+3 > 76 {
			dirs.WriteString(line + "\n")
			line = "                   "
		}
		line += " /" + n + "/"
	}
	dirs.WriteString(line + "\n  /skills/          the skills of the harnesses that have them")
	return fmt.Sprintf(usage, sockpath.Default(), strings.Join(names, ", "), daemon.DefaultMaxConns, daemon.DefaultMaxMsize, authz.PolkitAction, dirs.String(),
		verified(),
		daemon.DefaultOwnerReserve, daemon.DefaultMaxConnsPerUID, strings.TrimSuffix(daemon.DefaultIdleTimeout.String(), "0s"),
		byteSize(daemon.DefaultMaxBytes), byteSize(daemon.DefaultOwnerBytes), byteSize(daemon.DefaultMaxBytesPerUID))
}

// verified is the harnesses' CLIs at the versions the real-CLI tier runs
// (each Spec's Verified), as the help's sentence lists them, wrapped.
func verified() string {
	var parts []string
	for _, s := range harness.Specs() {
		if s.Verified != "" {
			parts = append(parts, s.Doc.Title+" "+s.Verified)
		}
	}
	var b strings.Builder
	line := ""
	for i, p := range parts {
		if i < len(parts)-1 {
			p += ","
		}
		if line != "" && len(line)+1+len(p) > 70 {
			b.WriteString(line + "\n")
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += p
	}
	return b.String() + line
}

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

func (r rootFlags) Type() string { return "NAME=PATH" }

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

// byteSize is a flag's number of bytes, with an optional K, M or G suffix
// (powers of 1024, as systemd's MemoryMax= reads them).
type byteSize int64

func (b byteSize) String() string {
	for _, u := range []struct {
		s string
		n int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

func (b *byteSize) Type() string { return "SIZE" }

func (b *byteSize) Set(v string) error {
	mult := int64(1)
	num := strings.TrimRight(v, "KkMmGg")
	switch strings.ToUpper(v[len(num):]) {
	case "":
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	default:
		return errors.New("want a number of bytes, with an optional K, M or G")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return errors.New("want a positive number of bytes, with an optional K, M or G")
	}
	*b = byteSize(n * mult)
	return nil
}

// idList is the values of --allow-uid or --allow-group, names or numbers,
// resolved after parsing.
type idList []string

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
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line that cannot be served as given.
type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 3 && args[0] == "--exec-env" {
		// The launcher a move runs in the new session (SOCKET HANDLE): it
		// never returns unless the relaunch cannot be fetched or exec'd.
		err := move.ExecEnv(args[1], args[2])
		fmt.Fprintf(stderr, "9harnessd --exec-env: %v\n", err)
		return 127
	}
	cfg, err := parse(args, stdout)
	var ue usageError
	switch {
	case errors.Is(err, pflag.ErrHelp):
		io.WriteString(stdout, helpText())
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "9harnessd: %v (try '9harnessd --help')\n", ue.error)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "9harnessd: %v\n", err)
		return exitError
	case cfg == nil: // --version
		return exitOK
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, *cfg); err != nil {
		fmt.Fprintf(stderr, "9harnessd: %v\n", err)
		return exitError
	}
	return exitOK
}

// flagError says what is wrong with a flag, naming it as it was typed.
func flagError(err error) error {
	var ne *pflag.NotExistError
	var ve *pflag.ValueRequiredError
	var ie *pflag.InvalidValueError
	switch {
	case errors.As(err, &ne):
		if group := ne.GetSpecifiedShortnames(); group != "" {
			return fmt.Errorf("unknown flag -%s", group) // 9harnessd has no short flags to combine
		}
		return fmt.Errorf("unknown flag --%s", ne.GetSpecifiedName())
	case errors.As(err, &ve):
		return fmt.Errorf("flag --%s needs a value", ve.GetFlag().Name)
	case errors.As(err, &ie):
		return fmt.Errorf("--%s %s: %v", ie.GetFlag().Name, ie.GetValue(), ie.Unwrap())
	}
	return err
}

// parse turns the command line into a Config. It returns (nil, nil) when it
// has answered the command itself (--version, on stdout), pflag.ErrHelp for
// --help, and a usageError for a command line it cannot serve as given.
func parse(args []string, stdout io.Writer) (*daemon.Config, error) {
	fs := pflag.NewFlagSet("9harnessd", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	roots := rootFlags{}
	unixPath := fs.String("unix", "", "")
	name := fs.String("name", "", "")
	fd := fs.Int("fd", -1, "")
	fs.Var(roots, "root", "")
	maxConns := fs.Int("max-conns", daemon.DefaultMaxConns, "")
	idleTimeout := fs.Duration("idle-timeout", daemon.DefaultIdleTimeout, "")
	maxBytes, maxBytesPerUID := byteSize(daemon.DefaultMaxBytes), byteSize(daemon.DefaultMaxBytesPerUID)
	fs.Var(&maxBytes, "max-bytes", "")
	fs.Var(&maxBytesPerUID, "max-bytes-per-uid", "")
	msize := fs.Uint("msize", daemon.DefaultMaxMsize, "")
	var allowUIDs, allowGroups []string
	fs.StringArrayVar(&allowUIDs, "allow-uid", nil, "")
	fs.StringArrayVar(&allowGroups, "allow-group", nil, "")
	allowMove := fs.Bool("allow-move", false, "")
	usePolkit := fs.Bool("polkit", false, "")
	auditTo := fs.String("audit", "auto", "")
	idleExit := fs.Duration("idle-exit", 0, "")
	procRoot := fs.String("proc", "/proc", "")
	procHelper := fs.String("proc-helper", "", "")
	serveProcHelper := fs.Bool("serve-proc-helper", false, "")
	hostPath := fs.String("host-path", "", "")
	resumePath := fs.String("resume-path", "", "")
	quiet := fs.Bool("quiet", false, "")
	showVersion := fs.Bool("version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{flagError(err)}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *showVersion {
		fmt.Fprintln(stdout, "9harnessd", buildversion.String(version))
		return nil, nil
	}
	switch *auditTo {
	case "auto", "journal", "stderr":
	default:
		return nil, usageError{fmt.Errorf("--audit %s: want auto, journal or stderr", *auditTo)}
	}
	n := 0
	for _, set := range []bool{*unixPath != "", *name != "", *fd >= 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, usageError{errors.New("--unix, --name and --fd are alternatives: give at most one")}
	}
	if *serveProcHelper && (*name != "" || *fd >= 0 || *procHelper != "" || *allowMove || len(allowUIDs)+len(allowGroups) > 0) {
		return nil, usageError{errors.New("--serve-proc-helper takes only --unix, --idle-exit, --proc and --quiet")}
	}
	if *msize < 4096 || *msize > 4<<20 {
		return nil, usageError{fmt.Errorf("--msize %d: must be between 4096 and 4194304", *msize)}
	}
	if *maxConns < 1 {
		return nil, usageError{fmt.Errorf("--max-conns %d: must be at least 1", *maxConns)}
	}
	if maxBytes < 16<<20 {
		return nil, usageError{fmt.Errorf("--max-bytes %s: must be at least 16M", maxBytes)}
	}
	if !fs.Changed("max-bytes-per-uid") {
		maxBytesPerUID = min(maxBytesPerUID, maxBytes)
	}
	if maxBytesPerUID > maxBytes {
		return nil, usageError{fmt.Errorf("--max-bytes-per-uid %s: must not be above --max-bytes (%s)", maxBytesPerUID, maxBytes)}
	}
	if *idleTimeout < 0 {
		return nil, usageError{fmt.Errorf("--idle-timeout %v: must not be negative", *idleTimeout)}
	}
	if *idleTimeout == 0 {
		*idleTimeout = -1 // the Config's "never"; its 0 is the default
	}
	uids, err := idList(allowUIDs).resolve(lookupUser)
	if err != nil {
		return nil, usageError{fmt.Errorf("--allow-uid: %w", err)}
	}
	gids, err := idList(allowGroups).resolve(lookupGroup)
	if err != nil {
		return nil, usageError{fmt.Errorf("--allow-group: %w", err)}
	}
	home, err := os.UserHomeDir()
	if err != nil && len(roots) < len(tree.Harnesses) {
		return nil, fmt.Errorf("no home directory for the default roots (%v); pass --root NAME=PATH", err)
	}
	all := tree.DefaultRoots(home, os.Getenv("XDG_DATA_HOME"))
	xdev := map[string]bool{}
	for k, v := range roots {
		all[k], xdev[k] = strings.CutSuffix(v, ",xdev")
	}
	logger := log.New(os.Stderr, "", 0)
	logf := logger.Printf
	cfg := &daemon.Config{
		Unix:        *unixPath,
		Name:        *name,
		FD:          *fd,
		Roots:       all,
		MaxConns:    *maxConns,
		IdleTimeout: *idleTimeout,

		MaxBytes:       int64(maxBytes),
		MaxBytesPerUID: int64(maxBytesPerUID),
		MaxMsize:       uint32(*msize),
		Logf:           logf,

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
