// Package move is the one write in the tree: it moves a running agent into
// a new zmx or tmux session of a given name by stopping it and resuming the
// same session there, with the agent's own directory and environment.
//
// It is built like the feature that can lose someone's work that it is:
// every refusal comes before the first signal (the order below), the agent
// is pinned with a pidfd and its start time re-checked before it is
// signalled, the relaunch argv is fixed per harness with the client's name
// passed as one argument, and every attempt is one or two journal entries.
//
//  1. the peer may move (EPERM)
//  2. the name is valid for the host (EINVAL)
//  3. no live session of that name exists (EEXIST)
//  4. the agent's session resolved and its harness can resume (EPERM)
//  5. the host and the resume command resolve on the agent's PATH (EPERM)
//  6. the agent is pinned and is still the same process (ENOENT)
//  7. SIGTERM, SIGKILL after 5 s, give up at 12 s (EIO)
//  8. relaunch inside the new session, outside the daemon's cgroup
//  9. wait until the session exists and runs that harness with that session (EIO)
package move

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// that outlives the daemon.
type Launcher interface {
	Launch(ctx context.Context, argv []string, cwd string, env []string, unit string) error
}

// Mover performs moves. It is safe for concurrent use.
type Mover struct {
	Policy   *authz.Policy
	Audit    audit.Sink
	Procs    *proc.Table
	UID      uint32
	Launcher Launcher
	// Term, Kill and SessionWait override the bounds (tests); zero = the defaults.
	Term, Kill, SessionWait time.Duration

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
	return CheckTimeout + kill + LaunchTimeout + wait + 5*time.Second
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

// ValidName checks a session name: non-empty, [A-Za-z0-9._-], not "." or
// "..". One trailing newline (from echo) is accepted and stripped.
func ValidName(b []byte) (string, error) {
	s := string(b)
	s = strings.TrimSuffix(s, "\n")
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return "", errs.E("move", errs.Invalid, s, errors.New("a session name is 1 to 100 characters of [A-Za-z0-9._-], not . or .."))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", errs.E("move", errs.Invalid, s, fmt.Errorf("byte %q is not allowed in a session name ([A-Za-z0-9._-])", c))
		}
	}
	return s, nil
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
	// 2. The name.
	name, err := ValidName(r.Value)
	if err != nil {
		return rec.refuse(errs.Invalid, err.Error())
	}
	rec.target = name
	// One move per agent at a time.
	key := strconv.Itoa(r.Proc.PID) + "@" + strconv.FormatUint(r.Proc.Start, 10)
	m.mu.Lock()
	if m.busy == nil {
		m.busy = map[string]bool{}
	}
	if m.busy[key] {
		m.mu.Unlock()
		return rec.refuse(errs.Busy, "another move of this agent is in progress")
	}
	m.busy[key] = true
	m.mu.Unlock()
	defer func() { m.mu.Lock(); delete(m.busy, key); m.mu.Unlock() }()

	// The agent as it is now: its facts, its environment, its directory.
	if !m.Procs.Alive(r.Proc.PID, r.Proc.Start) {
		return rec.refuse(errs.NotExist, "the agent is gone (or its pid was reused)")
	}
	agent := r.Harness.Resolve(r.Env, r.Proc)
	rec.agent = agent
	env, err := m.Procs.Environ(r.Proc.PID)
	if err != nil {
		return rec.refuse(errs.NotExist, "the agent's environment could not be read: "+err.Error())
	}
	if err := r.Host.Check(name, env); err != nil {
		return rec.refuse(errs.Invalid, err.Error())
	}
	// 4. The session resolved and the harness can resume it.
	argv, err := r.Harness.Resume(agent, r.Env)
	if err != nil {
		return rec.refuse(errs.Permission, err.Error())
	}
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "-d") && r.Host.Name() == "zmx" {
			// zmx run removes any argument beginning with -d.
			return rec.refuse(errs.Permission, fmt.Sprintf("argument %q would be taken by zmx as its -d flag", a))
		}
	}
	rec.resume = argv
	// 5. The host and the resume command on the agent's own PATH.
	path := getenv(env, "PATH")
	hostPath, err := lookPath(r.Host.Name(), path)
	if err != nil {
		return rec.refuse(errs.Permission, fmt.Sprintf("%s is not on the agent's PATH (%s)", r.Host.Name(), path))
	}
	if _, err := lookPath(argv[0], path); err != nil {
		return rec.refuse(errs.Permission, fmt.Sprintf("%s is not on the agent's PATH (%s)", argv[0], path))
	}
	// 3. The name is unused (checked after the host resolved: the check
	// needs the host binary for tmux).
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	used, err := r.Host.InUse(cctx, hostPath, name, env)
	cancel()
	if err != nil {
		return rec.refuse(errs.IO, "could not tell whether the name is in use: "+err.Error())
	} else if used {
		return rec.refuse(errs.Exist, fmt.Sprintf("a %s session named %s already exists", r.Host.Name(), name))
	}
	// 6. Pin the agent and re-check that it is the same process.
	pidfd, err := unix.PidfdOpen(r.Proc.PID, 0)
	if err != nil {
		return rec.refuse(errs.NotExist, "the agent is gone: "+err.Error())
	}
	defer unix.Close(pidfd)
	if !m.Procs.Alive(r.Proc.PID, r.Proc.Start) {
		return rec.refuse(errs.NotExist, "the pid now names another process")
	}
	cwd := agent.Cwd
	if cwd == "" {
		return rec.refuse(errs.NotExist, "the agent's directory could not be read")
	}
	clean := scrub(env)

	// Past this point the agent is being stopped.
	rec.started()
	if err := m.stop(pidfd); err != nil {
		return rec.fail(errs.IO, err.Error())
	}
	unit := "9harness-move-" + name + "-" + strconv.Itoa(r.Proc.PID)
	if err := m.Launcher.Launch(ctx, r.Host.Command(hostPath, name, cwd, argv, clean), cwd, clean, unit); err != nil {
		return rec.fail(errs.IO, fmt.Sprintf("starting the %s session failed: %v", r.Host.Name(), err))
	}
	newPID, err := m.waitNew(ctx, r, name, agent.Session)
	if err != nil {
		return rec.fail(errs.IO, err.Error())
	}
	rec.done(newPID)
	return nil
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

// waitNew waits for a new process of the same harness with the same
// session, inside the new host session.
func (m *Mover) waitNew(ctx context.Context, r Request, name, session string) (int, error) {
	_, _, wait := m.bounds()
	deadline := time.Now().Add(wait)
	for {
		found, err := harness.Scan(m.Procs, m.UID, nil)
		if err == nil {
			for _, f := range found {
				if f.Harness != r.Harness.Name() || f.Proc.PID == r.Proc.PID {
					continue
				}
				if !m.inSession(f.Proc.PID, r.Host, name) {
					continue
				}
				a := r.Harness.Resolve(r.Env, f.Proc)
				if a.Session == session {
					return f.Proc.PID, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no %s process with session %s appeared in the %s session %s within %v", r.Harness.Name(), session, r.Host.Name(), name, wait)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("stopped while waiting for the new session: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inSession tells whether pid lives in the named host session: zmx marks
// its children with ZMX_SESSION; tmux is asked about the pane.
func (m *Mover) inSession(pid int, h Host, name string) bool {
	env, err := m.Procs.Environ(pid)
	if err != nil {
		return false
	}
	switch h.(type) {
	case Zmx:
		return getenv(env, "ZMX_SESSION") == Zmx{}.fullName(name, env)
	case Tmux:
		sock, _, _ := strings.Cut(getenv(env, "TMUX"), ",")
		tm, err := lookPath("tmux", getenv(env, "PATH"))
		if sock == "" || err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := TmuxSession(ctx, tm, sock, getenv(env, "TMUX_PANE"))
		return err == nil && got == name
	}
	return false
}

// Scrubbed are the variables a moved agent does not keep: those of the
// session host it leaves and systemd's activation variables.
func scrub(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "ZMX_SESSION", k == "TMUX", k == "TMUX_PANE", k == "STY", strings.HasPrefix(k, "ZELLIJ"),
			strings.HasPrefix(k, "LISTEN_"), k == "NOTIFY_SOCKET":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lookPath finds a program on a PATH string (the agent's, not ours).
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
