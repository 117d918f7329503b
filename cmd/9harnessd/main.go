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
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/sockpath"
	"github.com/9harness/9harness/internal/tree"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `usage: 9harnessd [flags]

9harnessd serves the on-disk state of your AI coding agents (Claude Code,
Codex, omp, pi, hermes, dsh) as a read-only 9P2000.L file tree on a unix
socket. Only processes of your own uid are answered; credential-shaped
files are never listed or read; symlinks are never followed.

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
	if !ok || path == "" {
		return fmt.Errorf("want NAME=PATH, got %q", v)
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
	r[name] = abs
	return nil
}

func main() {
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
	fs.Var(roots, "root", "pin a harness root: `NAME=PATH` (repeatable; default $HOME/.NAME)")
	maxConns := fs.Int("max-conns", daemon.DefaultMaxConns, "refuse connections beyond `N` at once")
	msize := fs.Uint("msize", daemon.DefaultMaxMsize, "largest 9P message size granted, in `bytes` (4096..4194304)")
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
		fmt.Fprintln(os.Stdout, "9harnessd", version)
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
	if *msize < 4096 || *msize > 4<<20 {
		return nil, fmt.Errorf("--msize %d: must be between 4096 and 4194304", *msize)
	}
	if *maxConns < 1 {
		return nil, fmt.Errorf("--max-conns %d: must be at least 1", *maxConns)
	}
	home, err := os.UserHomeDir()
	if err != nil && len(roots) < len(tree.Harnesses) {
		return nil, fmt.Errorf("no home directory for the default roots (%v); pass --root NAME=PATH", err)
	}
	all := tree.DefaultRoots(home)
	for k, v := range roots {
		all[k] = v
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
		Listening: func(path string) {
			if *quiet {
				return
			}
			logf("9harnessd %s: serving %s (read-only)", version, path)
			for _, h := range tree.Harnesses {
				logf("  %-6s %s", h, all[h])
			}
			logf("look at it:  9harness -s %s ls /", path)
		},
	}
	return cfg, nil
}
