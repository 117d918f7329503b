package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/confine"
	"github.com/9harness/9harness/internal/dbsnap"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/idle"
	"github.com/9harness/9harness/internal/move"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/prochelper"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/sockpath"
	"github.com/9harness/9harness/internal/tree"
	"golang.org/x/sys/unix"
)

// Config is everything the daemon is told at start.
type Config struct {
	Unix     string            // listen on this path
	Name     string            // or post under $XDG_RUNTIME_DIR/9p/NAME
	FD       int               // or serve the one connection on this descriptor (-1: none)
	Roots    map[string]string // harness name -> root directory
	MaxConns int
	MaxMsize uint32
	Logf     Logf
	// IdleTimeout closes a connection of a uid other than the owner's
	// after that long with no request in flight and no frame (0: the
	// default, DefaultIdleTimeout; negative: never).
	IdleTimeout time.Duration
	// MaxBytes is the daemon's byte ceiling (0: DefaultMaxBytes), and
	// MaxBytesPerUID each other subject's below it (0:
	// DefaultMaxBytesPerUID): see budget.go.
	MaxBytes, MaxBytesPerUID int64

	// CrossMounts names the roots whose --root asked for mounts beneath
	// them to be served (NAME=PATH,xdev); no other root crosses a mount.
	CrossMounts map[string]bool

	AllowUIDs   []uint32 // --allow-uid: may read
	AllowGroups []uint32 // --allow-group: members may read
	AllowMove   bool     // --allow-move
	Polkit      bool     // --polkit: ask polkitd before any move
	Audit       string   // "auto" (journal if reachable, else stderr), "journal", "stderr"
	ProcRoot    string   // "" = /proc
	// IdleExit, if positive, stops the daemon after that long with no
	// connection and no move in flight: under socket activation systemd
	// starts it again on the next connection, so an idle user pays nothing.
	IdleExit time.Duration
	// ProcHelper, if set, is the socket of a proc helper (package
	// prochelper) that reads /proc/<pid>/{cwd,environ,fd} and peers' real
	// credentials for a daemon confined to a user namespace.
	ProcHelper string
	// ServeProcHelper makes this process the proc helper instead of the
	// daemon: it answers on --unix PATH or on the socket systemd hands over.
	ServeProcHelper bool
	// HostPath is where a move (and the tmux file's lookup of the
	// agent's session) finds tmux and zmx, ResumePath where a move
	// finds a resume binary the agent's executable does not name; "" =
	// the daemon's own PATH. Never the agent's.
	HostPath, ResumePath string
	// Listening, if set, is called with the socket path once the daemon
	// accepts connections on a socket it created.
	Listening func(path string)
}

// moves adapts the mover to the tree's write hook.
type moves struct {
	m    *move.Mover
	envs map[string]harness.Env
}

func (mv moves) Move(ctx context.Context, w tree.Writer, h string, p proc.Proc, host string, value []byte) error {
	hs, ok := move.Hosts()[host]
	hr := harness.ByName(h)
	if !ok || hr == nil {
		return fmt.Errorf("move: unknown host %q or harness %q", host, h)
	}
	return mv.m.Move(ctx, move.Request{Peer: w.Subject, PeerCmd: w.Comm, Harness: hr, Env: mv.envs[h], Proc: p, Host: hs, Value: value})
}

// pidDomain names the daemon's pid namespace the way Claude's registry
// does ("linux:<machine-id>:pid:[4026531836]"), so a record written in
// another namespace, or on another machine sharing the home, is not
// believed.
func pidDomain() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	id, _ := os.ReadFile("/etc/machine-id")
	return "linux:" + strings.TrimSpace(string(id)) + ":" + ns
}

func auditSink(kind string) (audit.Sink, error) {
	switch kind {
	case "", "auto":
		sink, _ := audit.Default(os.Stderr)
		return sink, nil
	case "journal":
		return audit.Journal{}, nil
	case "stderr":
		return &audit.Logfmt{W: os.Stderr}, nil
	}
	return nil, fmt.Errorf("--audit %q: want auto, journal or stderr", kind)
}

// activated returns the first listening socket systemd handed over, as
// sd_listen_fds(3) says: LISTEN_PID names this process, LISTEN_FDS counts
// the descriptors from 3. The variables are unset, so nothing this daemon
// starts believes the sockets are its own. Read here rather than with
// go-systemd's activation package, which links crypto/tls into the daemon
// for its TLS listeners: about 300 KiB more resident in every daemon.
func activated() (net.Listener, error) {
	pid, nfds := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	n, err := listenFDs(pid, nfds, os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	for fd := listenFDsStart; fd < listenFDsStart+n; fd++ {
		unix.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "LISTEN_FD_"+strconv.Itoa(fd))
		l, err := net.FileListener(f)
		f.Close()
		if err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("socket activation: LISTEN_FDS carried no listening socket")
}

// listenFDsStart is SD_LISTEN_FDS_START, the first descriptor passed.
const listenFDsStart = 3

// listenFDs checks LISTEN_PID and LISTEN_FDS as handed to process self
// and returns how many descriptors were passed.
func listenFDs(pid, nfds string, self int) (int, error) {
	if p, err := strconv.Atoi(pid); err != nil || p != self {
		return 0, fmt.Errorf("LISTEN_PID %q is not this process (%d)", pid, self)
	}
	n, err := strconv.Atoi(nfds)
	if err != nil || n <= 0 || n > 1<<16 {
		return 0, fmt.Errorf("LISTEN_FDS %q is not a count of descriptors", nfds)
	}
	return n, nil
}

// runProcHelper serves the proc helper on --unix PATH or on the first
// socket systemd hands over. It has no default path: it is started by its
// own socket unit, or by hand for a test.
func runProcHelper(ctx context.Context, cfg Config) error {
	var l net.Listener
	switch {
	case cfg.Unix != "":
		var err error
		if l, err = ListenUnix(cfg.Unix, 0o600); err != nil {
			return err
		}
	case os.Getenv("LISTEN_FDS") != "":
		var err error
		if l, err = activated(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--serve-proc-helper needs --unix PATH or a socket from systemd")
	}
	procRoot := cfg.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	h := &prochelper.Server{Procs: proc.New(procRoot), UID: uint32(os.Getuid()), Logf: prochelper.Logf(cfg.Logf)}
	if cfg.Logf != nil {
		cfg.Logf("9harnessd proc helper: serving %s for uid %d", l.Addr(), os.Getuid())
	}
	return h.Serve(ctx, l, cfg.IdleExit)
}

// Run serves until ctx is done. Where it listens is decided in this order:
// --fd, then --unix or --name, then sockets handed over by systemd
// (LISTEN_FDS), then the default path.
func Run(ctx context.Context, cfg Config) error {
	if cfg.ServeProcHelper {
		return runProcHelper(ctx, cfg)
	}
	var pins saferoot.Pinner
	defer pins.Close()
	roots := pinRoots(cfg, &pins)
	procRoot := cfg.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	procs := proc.New(procRoot)
	var helper *prochelper.Client
	if cfg.ProcHelper != "" {
		helper = prochelper.Dial(cfg.ProcHelper)
		defer helper.Close()
		procs.SetGuarded(helper)
	}
	bytes, pools := bytePools(cfg)
	// Work shared by all peers (database snapshots, decoded logs) is
	// charged below the daemon's pool, outside the owner's reserve.
	envs := sharedEnvs(roots, procs, pools.shared, cfg.Logf)
	// Host binaries (tmux, zmx) come from the daemon's own configuration,
	// never from an agent's environment (rule 7).
	hostPath := cfg.HostPath
	if hostPath == "" {
		hostPath = os.Getenv("PATH")
	}
	// A tmux server is judged as a peer of the daemon is, before a tmux
	// client is run against it (rule 9): a client obeys its server.
	tmuxJudge := move.Judge(prochelper.Sandbox(helper, uint32(os.Getuid()), nil))
	if confine.ABI() == 0 && cfg.Logf != nil {
		cfg.Logf("the kernel has no Landlock: the tmux clients the daemon runs are not confined, and run only against a tmux server judged in the reference's namespaces")
	}
	active := &tree.ActiveConfig{Procs: procs, UID: uint32(os.Getuid()), Envs: envs, Self: os.Getpid(),
		Sessions: move.TmuxSessions{Procs: procs, UID: uint32(os.Getuid()), HostPath: hostPath, Sandbox: tmuxJudge}}
	policy := &authz.Policy{Owner: uint32(os.Getuid()), AllowUIDs: cfg.AllowUIDs, AllowGroups: cfg.AllowGroups, AllowMove: cfg.AllowMove}
	if cfg.Polkit {
		policy.Polkit = &authz.Polkit{}
	}
	sink, err := auditSink(cfg.Audit)
	if err != nil {
		return err
	}
	var mover *move.Mover
	if cfg.AllowMove {
		if mover, err = newMover(cfg, policy, sink, procs, hostPath, helper, tmuxJudge); err != nil {
			return err
		}
		active.Mover = moves{m: mover, envs: envs}
	}
	s := newTreeServer(cfg, roots, active, bytes, pools, helper)
	if mover != nil {
		// A move's launcher is judged as every peer is.
		mover.Handoff.Sandbox = s.Sandbox
	}
	s.Policy = policy
	s.Audit = &audit.Limiter{Sink: sink, Rate: 5, Burst: 20}
	if mover != nil {
		defer s.finishMoves(mover)
	}
	if cfg.IdleExit > 0 && cfg.FD < 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		s.exitWhenIdle(ctx, cancel, cfg.IdleExit, mover)
	}
	return s.serveAsConfigured(ctx, cfg)
}

// bytePools is the daemon's pool of bytes, the root of every
// connection's (budget.go), with the runtime's soft memory limit set by
// it, and the pools of the subjects below it; work shared by all peers is
// charged to it too.
func bytePools(cfg Config) (*budget.Pool, *pools) {
	maxBytes := cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	bytes := budget.New("the daemon", maxBytes)
	setMemoryLimit(maxBytes)
	return bytes, newPools(bytes, cfg.MaxBytesPerUID, uint32(os.Getuid()))
}

// pinRoots resolves each root once, now, so that it cannot be redirected
// after: its directory ($HOME for the default roots) is opened and held,
// and the root is looked up there by name with no link followed and no
// mount crossed. A root that is a link or a mount point now, or one given
// by --root, is resolved now and said so; one that cannot be opened is
// not served, and said so.
func pinRoots(cfg Config, pins *saferoot.Pinner) map[string]*saferoot.Root {
	roots := make(map[string]*saferoot.Root, len(cfg.Roots))
	userHome, _ := os.UserHomeDir()
	for name, p := range cfg.Roots {
		var opts []saferoot.Option
		if cfg.CrossMounts[name] {
			opts = append(opts, saferoot.CrossMounts())
		}
		r, res, err := pins.Pin(p, opts...)
		roots[name] = r
		if cfg.Logf == nil {
			continue
		}
		explicit := userHome == "" || p != harness.DefaultRoot(name, userHome, os.Getenv("XDG_DATA_HOME"))
		switch {
		case err != nil:
			cfg.Logf("root %s: %s: not served", name, errs.Plain(err))
		case explicit || res.Link || res.Mount:
			x := ""
			if cfg.CrossMounts[name] {
				x = "; mounts beneath it are served (xdev)"
			}
			cfg.Logf("root %s: %s%s", name, res, x)
		}
	}
	return roots
}

// sharedEnvs is each harness's Env. They share what every peer's reads
// share, charged to pool: one record of the mover's relaunches (which
// /active reads), one snapshot per database, the token counts read whole
// from each unchanged transcript.
func sharedEnvs(roots map[string]*saferoot.Root, procs *proc.Table, pool *budget.Pool, logf Logf) map[string]harness.Env {
	home, _ := os.UserHomeDir()
	relaunches := &harness.Relaunches{}
	dbs := &dbsnap.Cache{Budget: pool}
	// The tokens read whole from each unchanged transcript, and the
	// derivations a read of many agents leaves for later: work shared by
	// all peers, with a ceiling of its own within it.
	counts := &harness.Counts{Budget: pool.Child("token counts and derivations queued for later", DefaultCountsBytes), Logf: logf}
	envs := make(map[string]harness.Env, len(roots))
	for name, r := range roots {
		envs[name] = harness.Env{Procs: procs, Root: r, Home: home, TmpDir: os.TempDir(), PIDDomain: pidDomain(), Relaunches: relaunches, DBs: dbs, Counts: counts, Budget: pool}
	}
	return envs
}

// newMover is the mover of --allow-move: it relaunches through the user's
// systemd manager when there is one (outside the daemon's cgroup), and
// its launcher is this daemon's own executable.
func newMover(cfg Config, policy *authz.Policy, sink audit.Sink, procs *proc.Table, hostPath string, helper *prochelper.Client, tmuxJudge move.Judge) (*move.Mover, error) {
	var launcher move.Launcher = move.Detached{}
	if um := move.UserManager(); um != nil {
		launcher = um
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--allow-move: the daemon's own executable (the move's launcher): %w", err)
	}
	return &move.Mover{Policy: policy, Audit: sink, Procs: procs, UID: uint32(os.Getuid()), Launcher: launcher,
		HostPath: hostPath, ResumePath: cfg.ResumePath, Self: []string{self, "--exec-env"},
		Handoff: move.Handoff{Dir: move.DefaultLaunchDir(), PeerExe: prochelper.PeerExe(helper), Logf: cfg.Logf},
		Sandbox: tmuxJudge}, nil
}

// newTreeServer is the server of the owner's tree and the grantees', under
// the daemon's byte pool, judging peers through the proc helper if any.
func newTreeServer(cfg Config, roots map[string]*saferoot.Root, active *tree.ActiveConfig, bytes *budget.Pool, pools *pools, helper *prochelper.Client) *Server {
	s := &Server{
		Root:        tree.New(tree.Config{Roots: roots, PID: os.Getpid(), Start: time.Now(), Active: active}),
		GranteeRoot: tree.New(tree.Config{Roots: roots, PID: os.Getpid(), Start: time.Now(), Active: active, Grantee: true}),
		UID:         uint32(os.Getuid()),
		GID:         uint32(os.Getgid()),
		MaxConns:    cfg.MaxConns,
		IdleTimeout: cfg.IdleTimeout,
		MaxMsize:    cfg.MaxMsize,
		Logf:        cfg.Logf,

		Budget:         bytes,
		MaxBytesPerUID: cfg.MaxBytesPerUID,
		pools:          pools,
	}
	if u, err := user.Current(); err == nil {
		s.Owner = u.Username
	}
	s.ProcRoot = cfg.ProcRoot
	if helper != nil {
		s.PeerCreds = helper.Peer
	}
	// A line per sandboxed connection, which a sandbox can flood.
	s.Sandbox = prochelper.Sandbox(helper, s.UID, prochelper.Logf(limitLogf(cfg.Logf, refusalInterval)))
	return s
}

// finishMoves waits, on the way out, for the moves in flight: each
// finishes within its own bound (Mover.Bound) before the daemon exits. A
// move cut short after its SIGTERM would leave the agent stopped and not
// resumed, with no journal entry naming the command that resumes it.
func (s *Server) finishMoves(mover *move.Mover) {
	if n := mover.InFlight(); n > 0 {
		s.logf("stopping: waiting up to %v for %d move(s) in flight", mover.Bound(), n)
	}
	wctx, cancel := context.WithTimeout(context.Background(), mover.Bound())
	defer cancel()
	mover.Wait(wctx)
	if n := mover.InFlight(); n > 0 {
		s.logf("stopping with %d move(s) still in flight after %v", n, mover.Bound())
	}
}

// exitWhenIdle calls cancel once the daemon has had no connection, and
// no move in flight, for d: under socket activation systemd starts it
// again on the next connection.
func (s *Server) exitWhenIdle(ctx context.Context, cancel context.CancelFunc, d time.Duration, mover *move.Mover) {
	s.mu.Lock()
	s.idle = time.Now()
	s.mu.Unlock()
	go idle.Watch(ctx, d, func() time.Time {
		if mover != nil && mover.InFlight() > 0 {
			return time.Time{} // a move in flight is not idle
		}
		return s.IdleSince()
	}, func() {
		s.logf("idle for %v: exiting (socket activation starts the daemon again on the next connection)", d)
		cancel()
	})
}

// serveAsConfigured serves where the Config says, in Run's order: the one
// connection on --fd, the socket of --unix or --name, the sockets systemd
// handed over, the default socket.
func (s *Server) serveAsConfigured(ctx context.Context, cfg Config) error {
	if cfg.FD >= 0 {
		f := os.NewFile(uintptr(cfg.FD), "fd"+fmt.Sprint(cfg.FD))
		if f == nil {
			return fmt.Errorf("--fd %d: not an open descriptor", cfg.FD)
		}
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--fd %d: %w", cfg.FD, err)
		}
		s.ServeConn(ctx, c)
		return nil
	}
	path := cfg.Unix
	if path == "" && cfg.Name != "" {
		var err error
		if path, err = sockpath.ForName(cfg.Name); err != nil {
			return err
		}
	}
	if path == "" && os.Getenv("LISTEN_FDS") != "" {
		l, err := activated()
		if err != nil {
			return err
		}
		s.logf("serving sockets handed over by systemd (%s)", l.Addr())
		return s.Serve(ctx, l)
	}
	if path == "" {
		path = sockpath.Default()
	}
	// With grants, other uids must be able to reach the socket at all: its
	// mode then admits everyone, and the kernel-attested gate decides.
	mode := os.FileMode(0o600)
	if len(cfg.AllowUIDs)+len(cfg.AllowGroups) > 0 {
		mode = 0o666
	}
	l, err := ListenUnix(path, mode)
	if err != nil {
		return err
	}
	// The listener unlinks the socket when it is closed, which Serve does
	// when ctx is done (SIGTERM, SIGINT).
	if cfg.Listening != nil {
		cfg.Listening(path)
	}
	return s.Serve(ctx, l)
}
