// Package daemonflags is 9harnessd's command line: its flags, their
// checks and its help, turned into the daemon.Config the daemon runs on.
// The command itself only prints what this package answers and calls
// daemon.Run.
package daemonflags

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/flagerr"
	"github.com/9harness/9harness/internal/tree"
	buildversion "github.com/9harness/9harness/internal/version"
)

// ErrHelp is Parse's answer to --help or -h: print Help on stdout.
var ErrHelp = pflag.ErrHelp

// ErrVersion is Parse's answer to --version: print the version on stdout.
var ErrVersion = errors.New("--version")

// UsageError is a command line that cannot be served as given. Its text
// names the flag as it was typed.
type UsageError struct{ error }

func (e UsageError) Unwrap() error { return e.error }

// options are the flags' values as parsed, before they are checked.
type options struct {
	unix, name               string
	fd                       int
	roots                    rootFlags
	maxConns                 int
	idleTimeout              time.Duration
	maxBytes, maxBytesPerUID byteSize
	msize                    uint
	allowUIDs, allowGroups   []string
	allowMove, polkit        bool
	audit                    string
	idleExit                 time.Duration
	procRoot, procHelper     string
	serveProcHelper          bool
	hostPath, resumePath     string
	quiet, version           bool
}

// Parse turns the command line into a Config whose Logf is logf, and
// whose Listening announces the socket through it with the daemon's
// version. It answers ErrHelp for --help, ErrVersion for --version, and a
// UsageError for a command line it cannot serve as given.
func Parse(args []string, version string, logf daemon.Logf) (*daemon.Config, error) {
	o := &options{roots: rootFlags{}}
	fs := o.flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, UsageError{errors.New(flagerr.Describe(err, args))}
	}
	if fs.NArg() > 0 {
		return nil, UsageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if o.version {
		return nil, ErrVersion
	}
	if err := o.check(fs.Changed("max-bytes-per-uid")); err != nil {
		return nil, UsageError{err}
	}
	return o.config(version, logf)
}

// flagSet declares every flag, with its default, into o. It prints
// nothing: Help is the only help, and errors are the caller's to word.
func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("9harnessd", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.unix, "unix", "", "")
	fs.StringVar(&o.name, "name", "", "")
	fs.IntVar(&o.fd, "fd", -1, "")
	fs.Var(o.roots, "root", "")
	fs.IntVar(&o.maxConns, "max-conns", daemon.DefaultMaxConns, "")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", daemon.DefaultIdleTimeout, "")
	o.maxBytes, o.maxBytesPerUID = byteSize(daemon.DefaultMaxBytes), byteSize(daemon.DefaultMaxBytesPerUID)
	fs.Var(&o.maxBytes, "max-bytes", "")
	fs.Var(&o.maxBytesPerUID, "max-bytes-per-uid", "")
	fs.UintVar(&o.msize, "msize", daemon.DefaultMaxMsize, "")
	fs.StringArrayVar(&o.allowUIDs, "allow-uid", nil, "")
	fs.StringArrayVar(&o.allowGroups, "allow-group", nil, "")
	fs.BoolVar(&o.allowMove, "allow-move", false, "")
	fs.BoolVar(&o.polkit, "polkit", false, "")
	fs.StringVar(&o.audit, "audit", "auto", "")
	fs.DurationVar(&o.idleExit, "idle-exit", 0, "")
	fs.StringVar(&o.procRoot, "proc", "/proc", "")
	fs.StringVar(&o.procHelper, "proc-helper", "", "")
	fs.BoolVar(&o.serveProcHelper, "serve-proc-helper", false, "")
	fs.StringVar(&o.hostPath, "host-path", "", "")
	fs.StringVar(&o.resumePath, "resume-path", "", "")
	fs.BoolVar(&o.quiet, "quiet", false, "")
	fs.BoolVar(&o.version, "version", false, "")
	return fs
}

// check refuses the flags that contradict each other or are out of range,
// and settles the two defaults that depend on other flags: the per-uid
// byte ceiling, at most --max-bytes unless given, and an --idle-timeout
// of 0, "never", which is negative in the Config (whose 0 is the default).
func (o *options) check(perUIDGiven bool) error {
	switch o.audit {
	case "auto", "journal", "stderr":
	default:
		return fmt.Errorf("--audit %s: want auto, journal or stderr", o.audit)
	}
	n := 0
	for _, set := range []bool{o.unix != "", o.name != "", o.fd >= 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("--unix, --name and --fd are alternatives: give at most one")
	}
	if o.serveProcHelper && (o.name != "" || o.fd >= 0 || o.procHelper != "" || o.allowMove || len(o.allowUIDs)+len(o.allowGroups) > 0) {
		return errors.New("--serve-proc-helper takes only --unix, --idle-exit, --proc and --quiet")
	}
	if o.msize < 4096 || o.msize > 4<<20 {
		return fmt.Errorf("--msize %d: must be between 4096 and 4194304", o.msize)
	}
	if o.maxConns < 1 {
		return fmt.Errorf("--max-conns %d: must be at least 1", o.maxConns)
	}
	if o.maxBytes < 16<<20 {
		return fmt.Errorf("--max-bytes %s: must be at least 16M", o.maxBytes)
	}
	if !perUIDGiven {
		o.maxBytesPerUID = min(o.maxBytesPerUID, o.maxBytes)
	}
	if o.maxBytesPerUID > o.maxBytes {
		return fmt.Errorf("--max-bytes-per-uid %s: must not be above --max-bytes (%s)", o.maxBytesPerUID, o.maxBytes)
	}
	if o.idleTimeout < 0 {
		return fmt.Errorf("--idle-timeout %v: must not be negative", o.idleTimeout)
	}
	if o.idleTimeout == 0 {
		o.idleTimeout = -1
	}
	return nil
}

// config resolves what the flags name (users, groups, the default roots
// under the home directory) into the daemon's Config.
func (o *options) config(version string, logf daemon.Logf) (*daemon.Config, error) {
	uids, err := idList(o.allowUIDs).resolve(lookupUser)
	if err != nil {
		return nil, UsageError{fmt.Errorf("--allow-uid: %w", err)}
	}
	gids, err := idList(o.allowGroups).resolve(lookupGroup)
	if err != nil {
		return nil, UsageError{fmt.Errorf("--allow-group: %w", err)}
	}
	roots, xdev, err := o.rootDirs()
	if err != nil {
		return nil, err
	}
	return &daemon.Config{
		Unix:        o.unix,
		Name:        o.name,
		FD:          o.fd,
		Roots:       roots,
		MaxConns:    o.maxConns,
		IdleTimeout: o.idleTimeout,

		MaxBytes:       int64(o.maxBytes),
		MaxBytesPerUID: int64(o.maxBytesPerUID),
		MaxMsize:       uint32(o.msize),
		Logf:           logf,

		CrossMounts: xdev,

		AllowUIDs:   uids,
		AllowGroups: gids,
		AllowMove:   o.allowMove,
		Polkit:      o.polkit,
		Audit:       o.audit,
		ProcRoot:    o.procRoot,
		IdleExit:    o.idleExit,

		HostPath:   o.hostPath,
		ResumePath: o.resumePath,

		ProcHelper:      o.procHelper,
		ServeProcHelper: o.serveProcHelper,
		Listening:       o.listening(version, logf, roots),
	}, nil
}

// rootDirs is every harness's root: the --root given, else its default
// under the home directory; and the roots given as NAME=PATH,xdev.
func (o *options) rootDirs() (map[string]string, map[string]bool, error) {
	home, err := os.UserHomeDir()
	if err != nil && len(o.roots) < len(tree.Harnesses) {
		return nil, nil, fmt.Errorf("no home directory for the default roots (%v); pass --root NAME=PATH", err)
	}
	all := tree.DefaultRoots(home, os.Getenv("XDG_DATA_HOME"))
	xdev := map[string]bool{}
	for k, v := range o.roots {
		all[k], xdev[k] = strings.CutSuffix(v, ",xdev")
	}
	return all, xdev, nil
}

// listening is the Config's announcement of the socket once it is served
// (nothing with --quiet): the version, whether moves are allowed, each
// root, and the command that looks at it.
func (o *options) listening(version string, logf daemon.Logf, roots map[string]string) func(path string) {
	return func(path string) {
		if o.quiet || logf == nil {
			return
		}
		mode := "read-only"
		if o.allowMove {
			mode = "moves allowed for uid " + strconv.Itoa(os.Getuid())
		}
		logf("9harnessd %s: serving %s (%s)", buildversion.String(version), path, mode)
		for _, h := range tree.Harnesses {
			logf("  %-6s %s", h, roots[h])
		}
		logf("look at it:  %s -s %s ls /", clientPath(), path)
	}
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
