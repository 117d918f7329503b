// Package move is the one write in the tree: it moves a running agent into
// a new zmx or tmux session of a given name by stopping it and resuming the
// same session there, with the agent's own directory and environment.
//
// It is built like the feature that can lose someone's work that it is:
// every refusal comes before the first signal (the order below), the agent
// is pinned with a pidfd and its start time re-checked before it is
// signalled, nothing an agent controls picks a binary the daemon runs, the
// agent's environment never appears in any argv or file (the session runs
// a fixed launcher that fetches it over a connection back to the daemon,
// which gives it only to that launcher), and every attempt is
// one or two journal entries whose outcome is the one the client gets.
//
//  1. the peer may move (EPERM)
//  2. the name is valid (EINVAL)
//  3. the agent is in the namespaces of the daemon's proc helper (EPERM)
//  4. the target: the host's limits, the tmux server (EINVAL, EPERM)
//  5. the host binary is on the daemon's own PATH, and the launcher's
//     program is still the daemon's own executable (EPERM)
//  6. the session resolved, the harness can resume it, and its binary is
//     the agent's own executable or on the daemon's resume path (EPERM)
//  7. no live session of that name exists (EEXIST)
//  8. the relaunch is offered on the move's own socket (EIO)
//  9. the agent is pinned and is still the same process (ENOENT)
//  10. SIGTERM, SIGKILL after 5 s, give up at 12 s (EIO)
//  11. relaunch inside the new session, outside the daemon's cgroup
//  12. wait until a new process of the harness in that session resolves to
//     the same session by a route other than its argv, and stays alive 2 s
//     (EIO with the command that resumes by hand)
package move

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// Bounds of the signal ladder and of the wait for the new session.
const (
	TermGrace   = 5 * time.Second
	GiveUp      = 12 * time.Second
	SessionWait = 20 * time.Second
	// CheckTimeout bounds the question asked of the host before the first
	// signal (is the name in use?): a wedged tmux server refuses the move
	// instead of holding it, and the daemon's shutdown, forever.
	CheckTimeout = 10 * time.Second
	// LaunchTimeout bounds the host command that creates the session (zmx
	// run -d, tmux new-session -d, or the start of the transient unit).
	LaunchTimeout = 30 * time.Second
)

// Launcher starts the host command that creates the session, somewhere
// that outlives the daemon. env is the host command's own environment
// (Host.Env), never the agent's.
type Launcher interface {
	Launch(ctx context.Context, argv []string, cwd string, env []string, unit, description string) error
}

// StayAlive is how long the relaunched process must live, resolved to the
// same session, before the move is reported done: a harness that cannot
// resume (Claude's "No conversation found") exits within it.
const StayAlive = 2 * time.Second

// Default size of the new session when the agent's terminal cannot be read.
const DefaultCols, DefaultRows = 200, 50

// Mover performs moves. It is safe for concurrent use.
type Mover struct {
	Policy   *authz.Policy
	Audit    audit.Sink
	Procs    *proc.Table
	UID      uint32
	Launcher Launcher
	// HostPath is where tmux and zmx are found (the daemon's own PATH, or
	// --host-path); ResumePath where a resume binary is found when the
	// agent's executable does not name its harness (--resume-path, default
	// the daemon's PATH). Never the agent's PATH.
	HostPath, ResumePath string
	// Handoff gives each relaunch to its launcher alone; Self is the
	// launcher's argv prefix (this daemon's executable and --exec-env).
	Handoff Handoff
	Self    []string
	// Sandbox judges a tmux server before a move asks it anything or lands
	// on it (judgeTmux): the daemon's judgement of its own peers. Nil: no
	// tmux server is trusted.
	Sandbox Judge
	// Term, Kill, SessionWait and StayAlive override the bounds (tests); zero = the defaults.
	Term, Kill, SessionWait, StayAlive time.Duration

	mu       sync.Mutex
	busy     map[string]bool
	wg       sync.WaitGroup
	inflight atomic.Int32
}

// InFlight is the number of moves being performed.
func (m *Mover) InFlight() int { return int(m.inflight.Load()) }

// Bound is the longest one authorized move can take, to its last journal
// entry: each step has a bound of its own (the check of the name, the
// signal ladder, the launch, the wait for the new session and its last
// probe, 5 s). A daemon told to stop waits this long for the moves in
// flight, because a move cut short after its SIGTERM leaves the agent
// stopped, not resumed, and no journal entry saying how to resume it. (A
// polkitd that does not answer holds a move before anything is touched;
// the daemon stops after Bound regardless.)
func (m *Mover) Bound() time.Duration {
	_, kill, wait := m.bounds()
	return CheckTimeout + kill + LaunchTimeout + CheckTimeout + wait + m.stay() + 5*time.Second
}

// Request is one write of a name into an agent's zmx or tmux file.
type Request struct {
	Peer    authz.Subject
	PeerCmd string // the peer's command name, for the audit
	Harness harness.Harness
	Env     harness.Env
	Proc    proc.Proc // the agent's identity: pid and start time
	Host    Host
	Value   []byte // what the client wrote
}

// Wait blocks until every move in flight has finished, or ctx is done.
func (m *Mover) Wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// ValidName checks a session name: 1 to 100 bytes of [A-Za-z0-9._-], not
// "." or "..", not starting with '-' (a host would take it for a flag). One
// trailing newline (from echo) is accepted and stripped.
func ValidName(b []byte) (string, error) {
	s := string(b)
	s = strings.TrimSuffix(s, "\n")
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return "", errs.E("move", errs.Invalid, s, errors.New("a session name is 1 to 100 characters of [A-Za-z0-9._-], not . or .."))
	}
	if s[0] == '-' {
		return "", errs.E("move", errs.Invalid, s, errors.New("a session name cannot start with '-': the host would take it for a flag"))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", errs.E("move", errs.Invalid, s, fmt.Errorf("byte %q is not allowed in a session name ([A-Za-z0-9._-])", c))
		}
	}
	return s, nil
}

// SplitTarget splits what a client wrote into a tmux file into the server
// part and the name, at the last ':' (a socket path may hold ':', a name
// may not). Without ':' the server part is "".
func SplitTarget(b []byte) (server string, name []byte) {
	if i := bytes.LastIndexByte(b, ':'); i >= 0 {
		return string(b[:i]), b[i+1:]
	}
	return "", b
}

// Move performs one move and returns when it has completed or failed. It
// runs on ctx, which must not be the client's connection: a move, once
// started, completes whether or not the client stays.
func (m *Mover) Move(ctx context.Context, r Request) error {
	m.wg.Add(1)
	m.inflight.Add(1)
	defer m.wg.Done()
	defer m.inflight.Add(-1)
	rec := &record{m: m, r: r}

	// 1. Authorization.
	if d := m.Policy.Decide(ctx, r.Peer, authz.Move); !d.Allow {
		return rec.refuse(errs.Permission, d.Reason)
	}
	// 2. The name (and, for tmux, a server part to check below).
	server, value := "", r.Value
	if r.Host.Name() == "tmux" {
		server, value = SplitTarget(r.Value)
	}
	name, err := ValidName(value)
	if err != nil {
		return rec.refuse(errs.Invalid, reason(err))
	}
	rec.target = name
	release, ok := m.claim(r.Proc)
	if !ok {
		return rec.refuse(errs.Busy, "another move of this agent is in progress")
	}
	defer release()
	// A tmux server is judged as the daemon's peers are: a server in a
	// sandbox is refused at step 4, before the first signal.
	if tm, ok := r.Host.(Tmux); ok && tm.Sandbox == nil {
		tm.Sandbox = m.Sandbox
		r.Host = tm
	}
	p := &plan{name: name}
	if err := m.checkAgent(r, rec, p); err != nil {
		return err
	}
	if err := m.place(r, rec, p, server); err != nil {
		return err
	}
	if err := m.resumeCommand(r, rec, p); err != nil {
		return err
	}
	// 7. The name is unused.
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	used, err := r.Host.InUse(cctx, p.hostPath, p.hostEnv, p.t)
	cancel()
	if err != nil {
		return rec.refuse(errs.IO, "could not tell whether the name is in use: "+err.Error())
	} else if used {
		return rec.refuse(errs.Exist, fmt.Sprintf("a %s session named %s already exists", r.Host.Name(), name))
	}
	return m.perform(ctx, r, rec, p)
}

// plan is what the checks before the first signal settle.
type plan struct {
	name     string        // the new session's
	agent    harness.Agent // the agent, resolved
	env      []string      // the agent's environment, as read
	clean    []string      // and as the relaunch gets it
	t        Target        // where the move lands
	hostPath string        // the host's binary, from the daemon's configuration
	hostEnv  []string      // the host command's environment
	argv     []string      // the resume command
	bin      string        // the binary it execs
}

// claim makes the move of one agent the only one in progress; release
// ends it. It fails while another move of the same agent is under way.
func (m *Mover) claim(p proc.Proc) (release func(), ok bool) {
	key := strconv.Itoa(p.PID) + "@" + strconv.FormatUint(p.Start, 10)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.busy == nil {
		m.busy = map[string]bool{}
	}
	if m.busy[key] {
		return nil, false
	}
	m.busy[key] = true
	return func() { m.mu.Lock(); delete(m.busy, key); m.mu.Unlock() }, true
}

// checkAgent checks that the agent is alive and not sandboxed (step 3),
// and reads what its relaunch needs: its session, its environment, its
// directory. A refusal is recorded and returned.
func (m *Mover) checkAgent(r Request, rec *record, p *plan) error {
	if !m.Procs.Alive(r.Proc.PID, r.Proc.Start) {
		return rec.refuse(errs.NotExist, "the agent is gone (or its pid was reused)")
	}
	// 3. A sandboxed agent is not moved out of its sandbox (rule 9): its
	// executable, directory and environment mean something else outside,
	// and a move would lift every restriction the kernel holds it to.
	// The same judgement as for peers (proc.Confinement.Restriction).
	if sb, err := m.Procs.Sandboxed(r.Proc); err != nil {
		if errors.Is(err, proc.ErrGone) {
			return rec.refuse(errs.NotExist, "the agent is gone (or its pid was reused)")
		}
		return rec.refuse(errs.Permission, "the agent's confinement could not be compared with the daemon's reference: "+err.Error())
	} else if sb != "" {
		return rec.refuse(errs.Permission, "the agent "+sb.Phrase("the daemon's reference")+": a sandboxed agent is not moved out of its sandbox")
	}
	p.agent = r.Harness.Resolve(r.Env, r.Proc)
	rec.agent = p.agent
	env, err := m.Procs.MoveEnviron(r.Proc.PID)
	if err != nil {
		return rec.refuse(errs.NotExist, "the agent's environment could not be read: "+err.Error())
	}
	p.env = env
	p.clean, rec.dropped = sanitize(scrub(env))
	if n := envSize(p.clean); n > MaxLaunch {
		return rec.refuse(errs.Invalid, fmt.Sprintf("the agent's environment is %d bytes, more than the %d a relaunch passes on", n, MaxLaunch))
	}
	if p.agent.Cwd == "" {
		return rec.refuse(errs.NotExist, "the agent's directory could not be read")
	}
	return nil
}

// place settles where the move lands, within the host's limits (step 4),
// at the agent's terminal size where it can be read, and the host binary
// from the daemon's own configuration (step 5). A refusal is recorded and
// returned.
func (m *Mover) place(r Request, rec *record, p *plan, server string) error {
	// 4. Where the move lands, and the host's limits.
	t, err := r.Host.Place(server, p.name, p.env, p.agent.TmuxSocket, m.UID)
	if err != nil {
		return rec.refuse(errs.KindOf(err), reason(err))
	}
	t.Cwd = p.agent.Cwd
	t.Cols, t.Rows = DefaultCols, DefaultRows
	if c, rows, err := m.Procs.TTYSize(r.Proc.PID); err == nil && c > 0 && rows > 0 && c <= 10000 && rows <= 10000 {
		t.Cols, t.Rows = c, rows
	}
	rec.t = t
	p.t = t
	if err := r.Host.Check(t); err != nil {
		return rec.refuse(errs.Invalid, reason(err))
	}
	// 5. The host binary, from the daemon's own configuration.
	if p.hostPath, err = lookPath(r.Host.Name(), m.HostPath); err != nil {
		return rec.refuse(errs.Permission, fmt.Sprintf("%s is not on the daemon's host path (%s): set PATH in the unit or --host-path", r.Host.Name(), m.HostPath))
	}
	p.hostEnv = r.Host.Env(t, m.HostPath)
	if err := m.launcherIsSelf(); err != nil {
		return rec.refuse(errs.Permission, err.Error())
	}
	return nil
}

// resumeCommand settles the command that resumes the agent's session
// (step 6): the session resolved, the harness can resume it, its binary
// is one nothing the agent controls chose, and the host command that runs
// it is one the host reads as meant. A refusal is recorded and returned.
func (m *Mover) resumeCommand(r Request, rec *record, p *plan) error {
	argv, kept, dropFlags, err := harness.ResumeArgv(r.Harness, p.agent, r.Env)
	if err != nil {
		return rec.refuse(errs.Permission, reason(err))
	}
	rec.kept, rec.dropFlags = kept, dropFlags
	if len(argv) == 0 {
		return rec.refuse(errs.Permission, r.Harness.Name()+" has no resume command")
	}
	rec.resume = argv
	bin, route, err := m.resumeBinary(r.Harness.Name(), argv[0], r.Proc.PID)
	if err != nil {
		return rec.refuse(errs.Permission, err.Error())
	}
	rec.binRoute = route
	for _, a := range argv {
		if len(a) > MaxArgString || strings.IndexByte(a, 0) >= 0 {
			return rec.refuse(errs.Invalid, "an argument of the resume command is too long for exec")
		}
	}
	launcher := placeholderArgv(m.Self, m.Handoff.Dir)
	if err := checkCommand(r.Host, r.Host.Command(p.hostPath, p.t, launcher), p.name); err != nil {
		return rec.refuse(errs.Invalid, err.Error())
	}
	p.argv, p.bin = argv, bin
	return nil
}

// perform offers the relaunch (step 8), pins the agent (step 9), stops it
// (step 10), relaunches it in the new session (step 11) and waits for it
// there (step 12). From the first signal on, a failure is recorded as the
// move's failure, no longer as a refusal.
func (m *Mover) perform(ctx context.Context, r Request, rec *record, p *plan) error {
	// 8. The relaunch, offered to its launcher alone; dropped when the
	// move ends, fetched or not.
	offer, err := m.Handoff.Offer(Launch{Path: p.bin, Argv: p.argv, Env: p.clean, Cwd: p.agent.Cwd})
	if err != nil {
		return rec.refuse(errs.IO, "offering the relaunch: "+err.Error())
	}
	defer offer.Close()
	hostArgv := r.Host.Command(p.hostPath, p.t, offer.Argv(m.Self))
	if err := checkCommand(r.Host, hostArgv, p.name); err != nil {
		return rec.refuse(errs.Invalid, err.Error())
	}
	// 9. Pin the agent and re-check that it is the same process.
	pidfd, err := unix.PidfdOpen(r.Proc.PID, 0)
	if err != nil {
		return rec.refuse(errs.NotExist, "the agent is gone: "+err.Error())
	}
	defer unix.Close(pidfd)
	if !m.Procs.Alive(r.Proc.PID, r.Proc.Start) {
		return rec.refuse(errs.NotExist, "the pid now names another process")
	}

	// Past this point the agent is being stopped.
	rec.started()
	if err := m.stop(pidfd); err != nil {
		return rec.fail(errs.IO, err.Error())
	}
	unit := "9harness-move-" + p.name + "-" + strconv.Itoa(r.Proc.PID)
	desc := fmt.Sprintf("9harness move of %s session %s into %s session %s", r.Harness.Name(), p.agent.Session, r.Host.Name(), p.name)
	if err := m.launch(ctx, r.Host, p.hostPath, p.hostEnv, p.t, hostArgv, unit, desc); err != nil {
		return rec.fail(errs.IO, fmt.Sprintf("starting the %s session failed: %v", r.Host.Name(), err))
	}
	newPID, via, err := m.waitNew(ctx, r, p, offer)
	if err != nil {
		return rec.fail(errs.IO, err.Error())
	}
	rec.done(newPID, via)
	return nil
}

// launcherIsSelf checks that the launcher's program, by the path the host
// will run, is still this daemon's own executable. The handoff gives the
// relaunch to nothing else, so after an upgrade has replaced the file on
// disk the launcher would be refused after the agent was stopped; the move
// is refused now instead.
func (m *Mover) launcherIsSelf() error {
	if len(m.Self) == 0 {
		return errors.New("no launcher is configured")
	}
	self, err := peer.SelfExe()
	if err != nil {
		return fmt.Errorf("the daemon's own executable: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(m.Self[0], &st); err != nil || (peer.FileID{Dev: st.Dev, Ino: st.Ino}) != self {
		return fmt.Errorf("%s is no longer the daemon's own executable (replaced on disk since the daemon started, by an upgrade?), and a move's launcher must be: restart the daemon (systemctl --user restart 9harness.service)", m.Self[0])
	}
	return nil
}

// launch starts the session, trying again a few times when it does not
// exist after a failed attempt: a tmux server whose last pane was the
// agent exits as the agent does, and a client that reached it in that
// moment fails ("server exited unexpectedly") where the next one starts a
// new server on the same socket. The relaunch is offered until a
// launcher takes it, so a retry relaunches the same thing.
func (m *Mover) launch(ctx context.Context, h Host, hostPath string, hostEnv []string, t Target, argv []string, unit, desc string) error {
	// All the attempts share one bound (Bound counts it once).
	ctx, cancel := context.WithTimeout(ctx, LaunchTimeout+CheckTimeout)
	defer cancel()
	tm, isTmux := h.(Tmux)
	var err error
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		u := unit
		if i > 0 {
			u = unit + "-" + strconv.Itoa(i)
			time.Sleep(300 * time.Millisecond)
		}
		if isTmux {
			// A live server gets the session from a client of the server
			// that was judged, never from one that finds the path again
			// by itself.
			if done, err := tm.Create(ctx, hostPath, hostEnv, t, argv); done {
				return err
			}
		}
		if err = m.Launcher.Launch(ctx, argv, t.Cwd, hostEnv, u, desc); err == nil {
			if isTmux {
				// The server that tmux found or started at the path: one a
				// sandbox bound there since the check is not the move's.
				if terr := TrustedTmux(t.Socket, t.uid, tm.Sandbox); terr != nil && terr != errNoServer {
					return terr
				}
			}
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		used, uerr := h.InUse(cctx, hostPath, hostEnv, t)
		cancel()
		if uerr == nil && used {
			return nil // it was created after all: the wait decides
		}
	}
	return err
}

func nsName(d string) string {
	if d == "mnt" {
		return "mount"
	}
	return d
}

// checkCommand refuses a host command the host would misread or refuse:
// for zmx, an element after the name starting with -d (zmx run takes any
// such element as its own -d); for tmux, a command longer than one client
// message.
func checkCommand(h Host, argv []string, name string) error {
	switch h.Name() {
	case "zmx":
		after := false
		for _, a := range argv[1:] {
			if after && strings.HasPrefix(a, "-d") && a != "-d" {
				return fmt.Errorf("argument %q would be taken by zmx as its -d flag", a)
			}
			after = after || a == name
		}
	case "tmux":
		return checkTmuxLen(argv)
	}
	return nil
}

// resumeBinary picks the binary the relaunch execs. The agent's own
// executable, where its name identifies the harness: it is a process of
// the user in the user's own namespaces (checked before), so running its
// binary again widens nothing. Otherwise (pi and Codex run under node) the
// program is looked up on the daemon's resume path, never the agent's.
func (m *Mover) resumeBinary(harnessName, prog string, pid int) (bin, route string, err error) {
	exe, xerr := m.Procs.Exe(pid)
	if xerr == nil && exeIdentifies(harnessName, exe) && isExec(exe) {
		return exe, "the agent's own executable", nil
	}
	path := m.ResumePath
	if path == "" {
		path = m.HostPath
	}
	if p, err := lookPath(prog, path); err == nil && !strings.Contains(prog, "/") {
		return p, "the daemon's resume path", nil
	}
	why := "its executable could not be read"
	if xerr == nil {
		why = "its executable " + exe + " does not name " + harnessName
	}
	return "", "", fmt.Errorf("%s cannot be relaunched: %s, and %s is not on the daemon's resume path (%s; set --resume-path)", harnessName, why, prog, path)
}

// exeIdentifies says whether an executable's path names the harness:
// its base name is the harness's, or its Spec's OwnExecutable says it is
// the harness's own binary under another name.
func exeIdentifies(harnessName, exe string) bool {
	if filepath.Base(exe) == harnessName {
		return true
	}
	s, ok := harness.SpecOf(harnessName)
	return ok && s.OwnExecutable != nil && s.OwnExecutable(exe)
}

// verifiedRoute says whether the agent's session was resolved by a route
// other than its own argv (harness.Agent.Corroborated: the registry, an
// open fd, the guarded dir route, the daemon's own relaunch record).
func verifiedRoute(a harness.Agent) bool { return a.Corroborated() }

// namesFile says whether the relaunch argv names the session's file by
// its absolute path: then the process the launcher became resumes the
// file the daemon itself chose (pi and omp --session PATH), and the
// daemon's relaunch record is a route to its session.
func namesFile(argv []string) bool {
	for _, a := range argv[1:] {
		if filepath.IsAbs(a) && strings.HasSuffix(a, ".jsonl") {
			return true
		}
	}
	return false
}

func (m *Mover) bounds() (term, kill, wait time.Duration) {
	term, kill, wait = TermGrace, GiveUp, SessionWait
	if m.Term > 0 {
		term = m.Term
	}
	if m.Kill > 0 {
		kill = m.Kill
	}
	if m.SessionWait > 0 {
		wait = m.SessionWait
	}
	return
}

// stop sends SIGTERM through the pidfd, SIGKILL after the grace period,
// and gives up at the bound. Through the pidfd, a signal can only reach
// the pinned process, never a process that reused its pid.
func (m *Mover) stop(pidfd int) error {
	term, kill, _ := m.bounds()
	if err := unix.PidfdSendSignal(pidfd, unix.SIGTERM, nil, 0); err != nil {
		if err == unix.ESRCH {
			return nil // it exited on its own
		}
		return fmt.Errorf("SIGTERM: %w", err)
	}
	if exited(pidfd, term) {
		return nil
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	if exited(pidfd, kill-term) {
		return nil
	}
	return fmt.Errorf("the agent did not exit within %v of SIGTERM and SIGKILL; it is still running", kill)
}

// exited waits for the pidfd to become readable (the process exited).
func exited(pidfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// reason is the sentence of an error, without the operation and kind an
// errs.Error puts in front.
func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Err != nil {
		return e.Err.Error()
	}
	return err.Error()
}

func (m *Mover) stay() time.Duration {
	if m.StayAlive > 0 {
		return m.StayAlive
	}
	return StayAlive
}

// waitNew waits for the move's outcome: a new process of the same harness,
// inside the new session, that resolves to the same session by a route
// other than its own argv (verifiedRoute), and still does StayAlive
// later. The process the launcher became is noted in the relaunch record
// when the relaunch named the session's file or its id, so that a harness
// that shows nothing of its session (a quiet pi, a resumed gemini, which
// writes nothing until its next prompt) resolves by that route. It
// returns the pid and the route.
func (m *Mover) waitNew(ctx context.Context, r Request, p *plan, offer *Offer) (int, string, error) {
	_, _, wait := m.bounds()
	stay := m.stay()
	deadline := time.Now().Add(wait)
	type cand struct {
		p     proc.Proc
		since time.Time
	}
	seen := map[int]cand{}
	launched, launchedGone := 0, false
	ref, referr := m.Procs.Reference()
	elsewhere := ""
	for {
		if launched == 0 {
			launched = m.noteRelaunch(r, p, offer)
		}
		if launched != 0 && !launchedGone {
			if _, err := m.Procs.Stat(launched); err != nil {
				launchedGone = true
			}
		}
		found, err := harness.Scan(m.Procs, m.UID, nil)
		now := time.Now()
		live := map[int]bool{}
		if err == nil {
			for _, f := range found {
				if f.Harness != r.Harness.Name() || f.Proc.PID == r.Proc.PID {
					continue
				}
				via, ok, other := m.resumedHere(ctx, r, p, f.Proc, ref, referr)
				if other != "" {
					elsewhere = other
				}
				if !ok {
					continue
				}
				c, ok := seen[f.Proc.PID]
				if !ok || c.p.Start != f.Proc.Start {
					c = cand{p: f.Proc, since: now}
					seen[f.Proc.PID] = c
				}
				live[f.Proc.PID] = true
				if now.Sub(c.since) >= stay && m.Procs.Alive(c.p.PID, c.p.Start) {
					return c.p.PID, via, nil
				}
			}
		}
		for pid := range seen {
			if !live[pid] {
				delete(seen, pid) // it died or stopped resolving: start again
			}
		}
		if now.After(deadline) && len(seen) == 0 || now.After(deadline.Add(stay)) {
			return 0, "", m.neverResumed(r, p, offer, launched, launchedGone, elsewhere)
		}
		select {
		case <-ctx.Done():
			return 0, "", fmt.Errorf("stopped while waiting for the new session: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// noteRelaunch returns the pid of the process the launcher became, once
// it has taken the relaunch (0 before). When the relaunch names the
// session's file or its id, that process is noted in the relaunch record
// as resuming the session: a harness with no transcript file (opencode)
// by its session id.
func (m *Mover) noteRelaunch(r Request, p *plan, offer *Offer) int {
	launched := offer.Fetched()
	if launched != 0 && (namesFile(p.argv) || slices.Contains(p.argv[1:], p.agent.Session)) {
		if lp, err := m.Procs.Stat(launched); err == nil {
			r.Env.Relaunches.Note(lp.PID, lp.Start, cmp.Or(p.agent.Transcript, p.agent.Session))
		}
	}
	return launched
}

// resumedHere says whether q, a process of the moved agent's harness, is
// the session come back: resolved to the same session by a route other
// than its argv, in the reference's namespaces, inside the new session.
// It returns the route; elsewhere, when q resumed the session in another
// namespace, says so, for the failure's message.
func (m *Mover) resumedHere(ctx context.Context, r Request, p *plan, q proc.Proc, ref proc.NS, referr error) (via string, ok bool, elsewhere string) {
	a := r.Harness.Resolve(r.Env, q)
	if a.Session != p.agent.Session || !verifiedRoute(a) {
		return "", false, ""
	}
	// The agent comes back in the reference's namespaces or not at all: a
	// process in a sandbox is not the move done.
	if ns, err := m.Procs.Namespaces(q.PID); referr != nil || err != nil || ns.Differs(ref) != "" {
		if err == nil && referr == nil {
			elsewhere = fmt.Sprintf(" (pid %d resumed it in another %s namespace: not counted)", q.PID, nsName(ns.Differs(ref)))
		}
		return "", false, elsewhere
	}
	if !m.inSession(ctx, q.PID, r.Host, p.t, p.hostPath, p.hostEnv) {
		return "", false, ""
	}
	return a.Via, true, ""
}

// neverResumed is the failure of a move whose session did not come back
// in time, with what is known of why: the launcher never took the
// relaunch (or was refused it), the relaunched process exited, or the
// session came back in another namespace.
func (m *Mover) neverResumed(r Request, p *plan, offer *Offer, launched int, launchedGone bool, elsewhere string) error {
	_, _, wait := m.bounds()
	why := fmt.Sprintf("no %s process with session %s stayed alive %v in the %s session %s within %v", r.Harness.Name(), p.agent.Session, m.stay(), r.Host.Name(), p.t.Name, wait)
	switch {
	case launched == 0:
		why += " (the launcher never took the relaunch"
		if refusal := offer.Refused(); refusal != "" {
			why += "; refused: " + refusal
		}
		why += ")"
	case launchedGone:
		why += fmt.Sprintf(" (the relaunched process, pid %d, exited)", launched)
	}
	return errors.New(why + elsewhere)
}

// inSession tells whether pid lives in the named host session: zmx marks
// its children with ZMX_SESSION; for tmux the pid is a pane's process or
// a descendant of one, on the target's server.
func (m *Mover) inSession(ctx context.Context, pid int, h Host, t Target, hostPath string, hostEnv []string) bool {
	switch h := h.(type) {
	case Zmx:
		v, _ := m.Procs.Getenv(pid, "ZMX_SESSION")
		return v == t.zmxFull()
	case Tmux:
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		panes, err := h.panes(ctx, hostPath, hostEnv, t)
		if err != nil {
			return false
		}
		line := append([]int{pid}, m.Procs.Ancestry(pid)...)
		for _, p := range panes {
			if slices.Contains(line, p) {
				return true
			}
		}
	}
	return false
}

// lookPath finds a program on a PATH string of the daemon's configuration.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if isExec(name) {
			return name, nil
		}
		return "", os.ErrNotExist
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); isExec(p) {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
