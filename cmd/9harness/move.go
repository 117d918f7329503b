package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/client"
)

const moveHelp = `usage: 9harness [-s SOCKET | --ssh DEST] move [--tmux] HARNESS/PID NAME

Move a running agent into a new terminal session that you can attach to
from anywhere: the agent is stopped (SIGTERM; SIGKILL after 5 s) and the
same session is resumed, in the same directory with the same environment,
inside a new detached zmx session NAME, or tmux session NAME with --tmux.

It first prints how to attach, because the terminal you type in may be the
one being moved, and then waits for the move to finish:

  attach with: zmx attach NAME
  moved claude/345104 into zmx session NAME

HARNESS/PID is an agent as 9harness ps lists it (claude/345104). NAME is
letters, digits, '.', '_' and '-' (no '.' for tmux). The move is the write
of NAME into the tree's /active/HARNESS/PID/zmx (or tmux) file; the daemon
refuses it, before the agent is touched, unless it was started with
--allow-move and can resume the agent's session. Every attempt is in the
daemon's journal: journalctl -t 9harnessd.

Options:
  --tmux      a new session on your default tmux server, not zmx
  -h, --help  this text

Exit status: 0 once the agent runs in the new session; 1 when the move was
refused or failed, with one line saying why; 2 for a usage error.

Examples:
  9harness ps --harness claude
  9harness move claude/345104 rescued && zmx attach rescued
  9harness move --tmux codex/2211 review
  9harness --ssh build1 move claude/345104 overnight
`

func runMove(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	useTmux := fs.Bool("tmux", false, "")
	ops, status, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if len(ops) != 2 {
		fmt.Fprintln(stderr, "9harness move: expected HARNESS/PID NAME, like: 9harness move claude/345104 rescued (try 9harness move --help)")
		return 2
	}
	harness, pid, ok := parseAgent(ops[0])
	if !ok {
		fmt.Fprintf(stderr, "9harness move: %q is not HARNESS/PID, like claude/345104 (9harness ps lists them)\n", ops[0])
		return 2
	}
	name := ops[1]
	host, attach := "zmx", "zmx attach "+client.ShellQuote(name)
	if *useTmux {
		host, attach = "tmux", "tmux attach -t "+client.ShellQuote(name)
	}
	agent := harness + "/" + strconv.Itoa(pid)
	file := client.AgentDir(harness, pid) + "/" + host

	c, status := g.connect(stderr)
	if c == nil {
		return status
	}
	defer c.Close()
	// What the tree already says: the agent is there, and moves are on
	// (the file is writable only then).
	if _, a, err := c.Stat(file); err != nil {
		fmt.Fprintf(stderr, "9harness move: %s\n", moveError(err, c, agent, host, name))
		return 1
	} else if a.Mode.Permissions()&0o200 == 0 {
		fmt.Fprintf(stderr, "9harness move: %s\n", moveError(linux.EROFS, c, agent, host, name))
		return 1
	}
	// Before the agent is stopped: this very terminal may be the one that
	// goes away.
	fmt.Fprintf(stdout, "attach with: %s\n", attach)
	if err := c.WriteFile(file, []byte(name)); err != nil {
		fmt.Fprintf(stderr, "9harness move: %s\n", moveError(err, c, agent, host, name))
		return 1
	}
	fmt.Fprintf(stdout, "moved %s into %s session %s\n", agent, host, name)
	return 0
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
	var e linux.Errno
	if !errors.As(err, &e) {
		if te := c.TransportError(); te != nil {
			err = te
		}
		return fmt.Sprintf("lost the daemon during the move (%v): journalctl -t 9harnessd says whether it happened", err)
	}
	switch e {
	case linux.EROFS:
		return "moves are off: start the daemon with --allow-move (systemctl --user edit 9harness.service, see README)"
	case linux.EPERM, linux.EACCES:
		return "refused: not allowed, or the agent's session cannot be resumed (journalctl -t 9harnessd says why)"
	case linux.EINVAL:
		chars := "letters, digits, '.', '_' and '-'"
		if host == "tmux" {
			chars = "letters, digits, '_' and '-'"
		}
		return fmt.Sprintf("%s is not a valid session name: use %s", shownName(name), chars)
	case linux.EEXIST:
		return fmt.Sprintf("a %s session named %s already exists", host, shownName(name))
	case linux.ENOENT:
		return fmt.Sprintf("no such agent: %s is not running (9harness ps lists them)", agent)
	case linux.EBUSY:
		return "this agent is already being moved"
	case linux.EIO:
		return "the move failed after the agent was stopped: journalctl -t 9harnessd shows how to resume it by hand"
	}
	return fmt.Sprintf("the move failed: %v", syscall.Errno(e))
}

// shownName is the name as typed, quoted when it would not read as one
// word.
func shownName(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' || r == '\'' }) {
		return strconv.Quote(s)
	}
	return s
}
