// Package move is `9harness move`: the client side of a move, the write
// of a session's name into an agent's zmx or tmux file, with the line
// that attaches to the new session and the daemon's reason when it
// refuses or fails.
package move

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// Help is the text of `9harness move --help`.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST] move [--tmux] HARNESS/PID NAME
       9harness move [--tmux] [--hosts FILE] HOST:HARNESS/PID NAME

Move a running agent into a new terminal session that you can attach to
from anywhere: the agent is stopped (SIGTERM; SIGKILL after 5 s) and the
same session is resumed, in the same directory with the same environment,
inside a new detached zmx session NAME, or tmux session NAME with --tmux.

It prints how to attach once the daemon has accepted the move (a refusal
comes back at once, and prints no attach line), or at once if this terminal
hangs up meanwhile, and then waits for the move to finish:

  attach with: zmx attach NAME
  moved claude/345104 into zmx session NAME

When the daemon refuses or the move fails, it prints the daemon's own
reason (the same words as its journal).

HARNESS/PID is an agent as 9harness ps lists it (claude/345104); with
HOST: in front (build1:claude/345104, as ps -q --all prints it), the agent
on that host: a host of the hosts file (9harness help ps), else an ssh
destination; the move is that host's daemon's to allow, do and audit, and
its reason for a refusal is printed here, and the attach line runs the
attach there through ssh. NAME is
letters, digits, '.', '_' and '-' (no '.' for tmux). The move is the write
of NAME into the tree's /active/HARNESS/PID/zmx (or tmux) file; the daemon
refuses it, before the agent is touched, unless it was started with
--allow-move and can resume the agent's session. Every attempt is in the
daemon's journal: journalctl -t 9harnessd.

Options:
  --tmux      a new session on your default tmux server, not zmx
  --hosts FILE
              the hosts file that names HOST (default
              ~/.config/9harness/hosts)
  -h, --help  this text

Exit status: 0 once the agent runs in the new session; 1 when the move was
refused and nothing was changed (the agent runs as before), with one line
saying why; 2 for a usage error; 4 when the move failed after the agent
was stopped: the line says how to resume it by hand.

Examples:
  9harness ps --harness claude
  9harness move claude/345104 rescued && zmx attach rescued
  9harness move --tmux codex/2211 review
  9harness --ssh build1 move claude/345104 overnight
  9harness move build1:claude/345104 overnight
`

// request is one move: the agent, the new session and how to attach to
// it.
type request struct {
	hostName string // HOST of HOST:HARNESS/PID; "" for none
	agent    string // as the lines name it: [HOST:]HARNESS/PID
	file     string // the agent's zmx or tmux file
	host     string // "zmx" or "tmux"
	name     string // the new session
	attach   string // the command that attaches to it
}

// Run is `9harness move`.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	fs := g.FlagSet("move")
	useTmux := fs.Bool("tmux", false, "")
	hostsFile := fs.String("hosts", "", "")
	ops, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	r, status := parseRequest(g, ops, *useTmux, stderr)
	if r == nil {
		return status
	}
	var c *client.Client
	dest := "" // the ssh destination of a remote agent's host
	if r.hostName != "" && r.hostName != client.LocalHost {
		// The host's own daemon decides and audits, as for a local peer.
		c, dest, status = cli.DialNamedHost(g, r.hostName, *hostsFile, fs.Changed("hosts"), stderr)
		r.agent = r.hostName + ":" + r.agent
	} else {
		c, status = g.Connect(stderr)
	}
	if c == nil {
		return status
	}
	defer c.Close()
	f, err := r.open(c, dest)
	if err != nil {
		fmt.Fprintf(stderr, "9harness move: %s\n", moveError(err, c, r.agent, r.host, r.name))
		return cli.ExitError
	}
	defer f.Close()
	return r.write(c, f, stdout, stderr)
}

// parseRequest reads the operands HARNESS/PID (or HOST:HARNESS/PID) and
// NAME; a bad one is a usage error, printed, and nil with the status.
func parseRequest(g *cli.Globals, ops []string, useTmux bool, stderr io.Writer) (*request, int) {
	if len(ops) != 2 {
		fmt.Fprintln(stderr, "9harness move: expected HARNESS/PID NAME, like: 9harness move claude/345104 rescued (try 9harness move --help)")
		return nil, cli.ExitUsage
	}
	hostName, agentName := fleet.SplitHostAgent(ops[0])
	if hostName != "" && g.Remote() {
		fmt.Fprintln(stderr, "9harness move: HOST:HARNESS/PID names its host; --ssh does not go with it")
		return nil, cli.ExitUsage
	}
	harness, pid, ok := parseAgent(agentName)
	if !ok {
		fmt.Fprintf(stderr, "9harness move: %q is not HARNESS/PID or HOST:HARNESS/PID, like claude/345104 (9harness ps lists them)\n", ops[0])
		return nil, cli.ExitUsage
	}
	r := &request{hostName: hostName, name: ops[1], host: "zmx", attach: "zmx attach " + client.ShellQuote(ops[1])}
	if useTmux {
		r.host, r.attach = "tmux", "tmux attach -t "+client.ShellQuote(r.name)
	}
	// Checked here as well as by the daemon: a name it would refuse is a
	// usage error, said before anything is printed or asked.
	if err := checkSessionName(r.name, r.host); err != nil {
		fmt.Fprintf(stderr, "9harness move: %v (try '9harness move --help')\n", err)
		return nil, cli.ExitUsage
	}
	r.agent = harness + "/" + strconv.Itoa(pid)
	r.file = client.AgentDir(harness, pid) + "/" + r.host
	return r, cli.ExitOK
}

// open opens the agent's file for the write, once the tree says the
// agent is there and moves are on (the file is writable only then), and
// completes the attach line: the agent's own tmux server, and ssh to
// dest, the host of a remote agent.
func (r *request) open(c *client.Client, dest string) (*client.File, error) {
	if _, a, err := c.Stat(r.file); err != nil {
		return nil, err
	} else if a.Perm&0o200 == 0 {
		return nil, syscall.EROFS
	}
	if r.host == "tmux" {
		// A move stays on the agent's own tmux server, which the tmux file
		// names as LABEL:SESSION when it is not the default one.
		if b, err := c.ReadFile(r.file); err == nil {
			r.attach = tmuxAttach(strings.TrimSpace(string(b)), r.name)
		}
	}
	if dest != "" {
		// The session is on that host: attach there.
		r.attach = "ssh -t " + client.ShellQuote(dest) + " " + r.attach
	}
	return openHostFile(c, r.file)
}

// write writes the session's name into f, the agent's opened file, and
// says how the move ended.
func (r *request) write(c *client.Client, f *client.File, stdout, stderr io.Writer) int {
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt([]byte(r.name), 0)
		done <- err
	}()
	// The attach line comes once the daemon has held the write a moment
	// (its refusals come back before that, and print none), or at once if
	// this terminal hangs up: it may be the one the agent is leaving.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	accepted := time.NewTimer(attachDelay)
	defer accepted.Stop()
	printed := false
	printAttach := func() {
		if !printed {
			fmt.Fprintf(stdout, "attach with: %s\n", r.attach)
			printed = true
		}
	}
	for {
		select {
		case <-accepted.C:
			printAttach()
		case sig := <-sigs:
			printAttach()
			fmt.Fprintf(stderr, "9harness move: %v: the move goes on in the daemon; journalctl -t 9harnessd says how it ended\n", sig)
			return 128 + int(sig.(syscall.Signal))
		case err := <-done:
			if err == nil {
				printAttach()
				fmt.Fprintf(stdout, "moved %s into %s session %s\n", r.agent, r.host, r.name)
				return cli.ExitOK
			}
			return r.failed(err, c, f, stderr)
		}
	}
}

// failed says why the daemon refused the write, or how the move failed:
// in the daemon's own words when it left them on f.
func (r *request) failed(err error, c *client.Client, f *client.File, stderr io.Writer) int {
	reason := readReason(f)
	switch {
	case strings.HasPrefix(reason, reasonFailed):
		fmt.Fprintf(stderr, "9harness move: the move failed after the agent was stopped: %s\n", strings.TrimPrefix(reason, reasonFailed))
		return cli.ExitMoveFailed
	case strings.HasPrefix(reason, reasonRefused):
		fmt.Fprintf(stderr, "9harness move: refused: %s\n", strings.TrimPrefix(reason, reasonRefused))
		return cli.ExitError
	}
	// A daemon that leaves no reason: say what the errno means.
	fmt.Fprintf(stderr, "9harness move: %s\n", moveError(err, c, r.agent, r.host, r.name))
	if client.IsErrno(err, syscall.EIO) {
		return cli.ExitMoveFailed
	}
	return cli.ExitError
}

// tmuxAttach is the line that attaches to session name on the server the
// agent's tmux file names: "SESSION" (the default server), "LABEL:SESSION"
// (tmux -L LABEL) or "/SOCKET:SESSION" (tmux -S SOCKET); split at the last
// ':', as the daemon does.
func tmuxAttach(current, name string) string {
	i := strings.LastIndexByte(current, ':')
	if i <= 0 {
		return "tmux attach -t " + client.ShellQuote(name)
	}
	flag, server := "-L", current[:i]
	if strings.HasPrefix(server, "/") {
		flag = "-S"
	}
	return "tmux " + flag + " " + client.ShellQuote(server) + " attach -t " + client.ShellQuote(name)
}

// attachDelay is how long the daemon holds a write before the client takes
// the move as accepted and prints the attach line. A refusal takes no
// disk or process work beyond a resolve; a move takes at least the agent's
// exit and the new process's first seconds.
const attachDelay = time.Second

// The first word of the reason the daemon leaves on the fid (package
// ninep's ReasonRefused, ReasonFailed).
const (
	reasonRefused = "refused: "
	reasonFailed  = "failed: "
)

// openHostFile opens the agent's zmx or tmux file read-write, so that a
// read after a failed write returns the daemon's reason; a daemon that
// takes only write-only opens of it is asked that way.
func openHostFile(c *client.Client, file string) (*client.File, error) {
	for _, mode := range []client.Mode{client.ReadWrite, client.WriteOnly} {
		f, err := c.OpenFile(file, mode)
		if err == nil {
			return f, nil
		}
		if !client.IsErrno(err, syscall.EROFS) || mode == client.WriteOnly {
			return nil, err
		}
	}
	return nil, syscall.EROFS
}

// readReason reads the reason a failed write left on f: one line, or ""
// when the daemon left none (f was opened write-only, or an old daemon).
func readReason(f *client.File) string {
	b := make([]byte, 4096)
	n := 0
	for n < len(b) {
		k, err := f.ReadAt(b[n:], int64(n))
		n += k
		if err != nil || k == 0 {
			break
		}
	}
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	if !strings.HasPrefix(line, reasonRefused) && !strings.HasPrefix(line, reasonFailed) {
		return ""
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, line)
}

// parseAgent reads HARNESS/PID (also as /active/HARNESS/PID).
func parseAgent(s string) (string, int, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, client.ActiveRoot+"/"), "/")
	h, p, ok := strings.Cut(s, "/")
	if !ok || h == "" || strings.Contains(p, "/") {
		return "", 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return "", 0, false
	}
	return h, pid, true
}

// moveError is what a refused or failed move means, in a sentence: the
// daemon answers with an errno, and each errno is one reason (see
// internal/move).
func moveError(err error, c *client.Client, agent, host, name string) string {
	e, ok := client.Errno(err)
	if !ok {
		if te := c.TransportError(); te != nil {
			err = te
		}
		return fmt.Sprintf("lost the daemon during the move (%v): journalctl -t 9harnessd says whether it happened", err)
	}
	switch e {
	case syscall.EROFS:
		return "moves are off: start the daemon with --allow-move: systemctl --user edit 9harness.service, add [Service] Environment=HARNESS_ARGS=--allow-move, then systemctl --user restart 9harness.service"
	case syscall.EPERM, syscall.EACCES:
		return "refused: not allowed, or the agent's session cannot be resumed (journalctl -t 9harnessd says why)"
	case syscall.EINVAL:
		chars := "letters, digits, '.', '_' and '-'"
		if host == "tmux" {
			chars = "letters, digits, '_' and '-'"
		}
		return fmt.Sprintf("%s is not a valid session name: use %s", shownName(name), chars)
	case syscall.EEXIST:
		return fmt.Sprintf("a %s session named %s already exists", host, shownName(name))
	case syscall.ENOENT:
		return fmt.Sprintf("no such agent: %s is not running (9harness ps lists them)", agent)
	case syscall.EBUSY:
		return "this agent is already being moved"
	case syscall.EIO:
		return "the move failed after the agent was stopped: journalctl -t 9harnessd shows how to resume it by hand"
	}
	return fmt.Sprintf("the move failed: %v", e)
}

// checkSessionName is the daemon's rule for a session name (move.ValidName,
// and tmux's Check: no '.' or ':'), kept here so that the client need not
// link the daemon's move package; a test holds the two to the same answers.
func checkSessionName(name, host string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s is not a valid session name: %s", shownName(name), why)
	}
	switch {
	case name == "" || name == "." || name == ".." || len(name) > 100:
		return bad("use 1 to 100 letters, digits, '.', '_' and '-', not . or ..")
	case name[0] == '-':
		return bad("it cannot start with '-' (the host would take it for a flag)")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return bad("use letters, digits, '.', '_' and '-'")
		}
	}
	if host == "tmux" && strings.ContainsAny(name, ".:") {
		return bad("tmux takes '.' in a name for a separator; use letters, digits, '_' and '-'")
	}
	return nil
}

// shownName is the name as typed, quoted when it would not read as one
// word.
func shownName(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' || r == '\'' }) {
		return strconv.Quote(s)
	}
	return s
}
