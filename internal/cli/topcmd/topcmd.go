// Package topcmd is 9harness top's command line: its flags and hosts made
// into a top.Config for internal/top, the live view, which knows no flags.
package topcmd

import (
	"fmt"
	"io"
	"os"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/9harness/9harness/internal/top"
)

// Help is top --help.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST]... top [--all] [--hosts FILE]
           [--timeout D] [--harness NAME]... [--once]

A full-screen live view of the agents, one row each: HOST (with several
machines), HARNESS, PID, STATE (with what a waiting agent waits for),
SINCE (how long it has been in that state), REACH (zmx:NAME, tmux:NAME,
tty or detached), TOKENS (its context), LIMITS (the fullest subscription
window), DIR and TITLE. Waiting agents come first. The header counts the
agents per state and per host.

It follows each host's /active/events, as events --all does: a change
redraws the row it names (one agent's directory is read), a host that
comes up has its table read once, and while nothing changes nothing is
read. A host that does not answer within --timeout, or whose stream ends,
stays in the view with its rows greyed, marked DOWN with the time it was
last seen, and is dialled again by itself (1 s, 2 s ... 30 s apart); the
local daemon restarting (socket activation) is the same. With --all,
--hosts FILE or several --ssh, every host of the fleet (see 9harness help
ps for the hosts file).

Keys:
  up/down, j/k, pgup/pgdown, home/end
                move the selection; it stays on its agent as rows move
  /             filter: only the rows with this text in any column
                (enter keeps it, esc clears it)
  s             cycle the sort: state, host, harness, pid, since, tokens,
                cwd, title
  h             cycle the harness shown: each harness with agents, then all
  enter         the agent's details: every fact, its sub-agents and the
                last messages of its transcript (the user's and the
                model's turns, a tool call as one line, control characters
                shown as ?); esc goes back
  a             attach to its session: zmx attach, tmux attach on the
                agent's own tmux server, through ssh -t for another host;
                the view comes back when you detach (tmux's last line,
                such as [detached], in its status line)
  m             move it into a new zmx session (tab: tmux) NAME, as
                9harness move does; the daemon's refusal is shown
  y             copy the command that resumes its session, where the
                daemon serves one, to the clipboard (OSC 52); it is also
                printed when top exits
  q, Ctrl-C     quit; SIGTERM and SIGHUP too. The terminal is restored
  Ctrl-Z        suspend (fg resumes)

No key reaches an agent, and top writes nothing to the tree (a move is
9harness move's write).

Colour only on a colour terminal, never with NO_COLOR; without colour,
states are told apart by their words, waiting rows in bold, the selection
in reverse video and a down host's rows faint.

Options:
  --all              this machine and every host of the hosts file (and
                     each --ssh DEST)
  --hosts FILE       the hosts of FILE
  --timeout D        how long a host may be silent before it is marked
                     down: 5s (the default), 1m, or seconds (3)
  --harness NAME     only the agents of harness NAME; repeatable, or a
                     comma separated list
  --once             print one frame (every row) and exit: for scripts;
                     off a terminal, 80 columns or COLUMNS
  --count-reads      show in the header how many tables and rows the view
                     has read (for tests and benchmarks)
  -h, --help         this text

Exit status: 0 when quit; 1 when the terminal cannot be used; 2 for a
usage error; with --once, 3 when some hosts did not answer and 1 when
none did.

Examples:
  9harness top
  9harness top --all --timeout 3s
  9harness top --harness claude,codex
  9harness top --once | head
`

// Run is 9harness top.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	fs := g.FlagSet("top")
	ff := cli.AddFleetFlags(fs)
	fs.Func("timeout", "", func(v string) error {
		d, err := cli.ParseTimeout(v)
		ff.Timeout = d
		return err
	})
	var harnesses []string
	cli.AddHarnessFlag(fs, &harnesses)
	once := fs.Bool("once", false, "")
	counts := fs.Bool("count-reads", false, "")
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "9harness top: unexpected argument %q (try '9harness top --help')\n", rest[0])
		return cli.ExitUsage
	}
	if ff.Timeout <= 0 {
		fmt.Fprintln(stderr, "9harness top: --timeout must be above 0")
		return cli.ExitUsage
	}
	hosts, status := topHosts(g, *ff, fs.Changed("hosts"), stderr)
	if hosts == nil {
		return status
	}
	out, isFile := stdout.(*os.File)
	if !*once && (!isFile || !cli.IsTerminal(out) || !cli.IsTerminal(os.Stdin)) {
		fmt.Fprintln(stderr, "9harness top: standard input and output must be a terminal (--once prints one frame anywhere)")
		return cli.ExitUsage
	}
	hostsFile := ""
	if fs.Changed("hosts") {
		hostsFile = ff.Hosts
	}
	self, err := os.Executable()
	if err != nil {
		self = "9harness"
	}
	return top.Run(top.Config{
		Dialer:    g.Dialer(),
		Hosts:     hosts,
		Timeout:   ff.Timeout,
		Harnesses: harnesses,
		Once:      *once,
		Counts:    *counts,
		Home:      os.Getenv("HOME"),
		MoveArgv:  func(agent, name string, tmux bool) []string { return moveArgv(g, self, hostsFile, agent, name, tmux) },
		In:        os.Stdin,
		Out:       out,
		Stderr:    stderr,
	})
}

// topHosts is the hosts top shows: the fleet's with --all, --hosts or
// several --ssh, else the one machine (this one, or --ssh's). A problem
// is printed, with its status (hosts nil).
func topHosts(g *cli.Globals, ff fleet.Flags, hostsChanged bool, stderr io.Writer) ([]client.Host, int) {
	if ff.All || hostsChanged || len(g.SSHDests) > 1 {
		return cli.FleetHosts(g, ff, hostsChanged, stderr)
	}
	s, status := g.Check(stderr)
	if status != cli.ExitOK {
		return nil, status
	}
	h := client.Host{Name: client.LocalHost}
	if s != nil {
		h = client.Host{Name: s.Dest, SSH: s}
	}
	return []client.Host{h}, cli.ExitOK
}

// moveArgv is 9harness move of agent into session name, with the
// command line's own ways to reach the daemons.
func moveArgv(g *cli.Globals, self, hostsFile, agent, name string, tmux bool) []string {
	argv := []string{self}
	if g.Flags.Changed("socket") {
		argv = append(argv, "-s", g.Sock)
	}
	if host, _ := fleet.SplitHostAgent(agent); host != "" {
		// The host's ssh takes the command line's settings.
		for _, o := range g.SSHOptions {
			argv = append(argv, "--ssh-opt", o)
		}
		if g.Flags.Changed("ssh-cmd") {
			argv = append(argv, "--ssh-cmd", g.SSHCmd)
		}
	}
	argv = append(argv, "move")
	if hostsFile != "" {
		argv = append(argv, "--hosts", hostsFile)
	}
	if tmux {
		argv = append(argv, "--tmux")
	}
	return append(argv, "--", agent, name)
}
