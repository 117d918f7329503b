// Command 9harness is the client of 9harnessd: it lists, reads and stats the
// tree over the daemon's unix socket, or over ssh (--ssh) through a
// `9harness relay` on the remote host, which is also this command.
package main

import (
	"io"
	"os"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/cli/complete"
	"github.com/9harness/9harness/internal/cli/events"
	"github.com/9harness/9harness/internal/cli/mount"
	"github.com/9harness/9harness/internal/cli/move"
	"github.com/9harness/9harness/internal/cli/notify"
	"github.com/9harness/9harness/internal/cli/ps"
	"github.com/9harness/9harness/internal/cli/read"
	"github.com/9harness/9harness/internal/cli/relay"
	"github.com/9harness/9harness/internal/cli/topcmd"
	"github.com/9harness/9harness/internal/cli/wait"
	buildversion "github.com/9harness/9harness/internal/version"
)

var version = "dev"

const usage = `usage: 9harness [-s SOCKET] COMMAND [ARGS]
       9harness --ssh DEST [--ssh-opt OPTION]... [--ssh-cmd CMD] [-s SOCKET]
                COMMAND [ARGS]
       9harness [-s SOCKET] relay

Read the 9harnessd tree: the on-disk state of your AI coding agents, on this
machine or, through ssh, on another. Flags go anywhere: before the command
or after it, among its operands, up to a "--" (what follows it is an
operand even if it starts with -); short flags combine (ls -la). -h on its
own is help; inside a group it is ls's human-readable sizes (ls -lh), and
a usage error for every other command.

Commands:
  ps [--json] [--watch] [--harness NAME]... [--all]
                    list the live agents, one row each: harness, pid, age,
                    state, tokens, status, directory, zmx or tmux
                    session, title; with --all, of this machine and every
                    host of ~/.config/9harness/hosts, with a HOST column
  top [--all] [--harness NAME]... [--once]
                    a full-screen live view of every agent, updated as
                    it changes, with keys to filter, sort, attach, move
  wait [--state STATE] [--timeout D] [--all] [AGENT...]
                    wait until an agent needs you (waiting or idle), or is
                    in STATE, and print it; with --all, any agent of
                    this machine and every host, each line host first
  events [--harness NAME]... [--json] [--all]
                    print each change as it happens: an agent appears,
                    exits, works, waits, goes idle or is moved; with
                    --all, every host's, each line host first
  notify [--config FILE] [--test] [--all]
                    deliver each agent that starts waiting, goes idle
                    or exits to ntfy, a webhook, the desktop or a
                    command, once each, as the config says (9harness
                    help notify)
  move [--tmux] HARNESS/PID NAME
                    stop an agent and resume the same session inside a new
                    zmx (or tmux) session NAME, to attach to from anywhere;
                    needs a daemon started with --allow-move; as
                    HOST:HARNESS/PID, the agent on that host
  mount [-f] DIR    mount the tree on DIR through FUSE, for any program to read
                    (9harness help mount); not with --ssh
  umount DIR        unmount it
  ls [-l] PATH...   list directories (a file lists as itself)
  cat PATH...       write files to standard output
  stat PATH...      print type, mode, size, mtime and qid of each path
  relay [-s SOCKET] join standard input and output to the daemon's socket,
                    byte for byte, until either side closes: the far end of
                    --ssh, run by ssh on the remote host. Its errors go to
                    standard error only. The daemon sees the relay's uid,
                    over ssh the uid ssh logged in as, and serves it exactly
                    as it would a local client.
  version           print the version (also: 9harness --version)
  help [COMMAND]    this text, or one command's (also: 9harness COMMAND --help)

Flags:
  -s, --socket SOCKET
                    the daemon's socket (default %s);
                    with --ssh, the daemon's socket on the remote host
  --aname NAME      the tree to attach (default /): 9harnessd serves one
                    tree and ignores it; another 9P2000.L server, such as
                    diod, serves each export by its path: -s SOCK --aname DIR
  --version         print the version
  -h, --help        this text

Remote:
  --ssh DEST        read the tree on DEST: run
                      ssh -T -o BatchMode=yes DEST 9harness relay
                    (with no forwarding of any kind) and speak 9P over its
                    standard input and output. DEST is whatever ssh accepts:
                    [user@]host, a Host of ~/.ssh/config, ssh://user@host:port.
                    ssh never prompts (use a key or an agent); if it fails,
                    the error is its exit status and its last line.
                    ps, wait and events take it more than once: all of
                    those hosts at once.
  --ssh-opt OPTION
                    pass -o OPTION to ssh; repeatable; ssh_config(5) syntax:
                    Port=2222, IdentityFile=~/.ssh/work, ProxyJump=bastion.
                    They precede 9harness's own options, so they win.
  --ssh-cmd CMD     the remote command (default "9harness relay"), for a
                    9harness off the remote PATH: '~/go/bin/9harness relay'.
                    With -s, " -s SOCKET" is appended to it.
  --ssh-forward yes|no
                    (default yes) once a host has answered through the
                    relay, and only where your ssh already keeps a master
                    for it (ControlMaster with ControlPersist), forward the
                    remote daemon's socket through that master, beside its
                    control socket, and use the forward from then on: no
                    ssh, shell or relay is started per call. The host
                    checks its socket first (relay --where). no: always the
                    relay. A hosts-file line takes forward=no.

Examples:
  9harness ps
  9harness ps --watch --harness claude
  9harness ps --json | jq -r '.[] | select(.status == "idle") | .pid'
  9harness move claude/345104 rescued && zmx attach rescued
  9harness ls /active/claude
  9harness ls -l /claude/projects
  9harness cat /claude/history | tail
  9harness --ssh alice@build1 ps
  9harness --ssh build1 --ssh-opt Port=2222 cat /codex/history | tail

  # or forward the remote socket and use it as a local one:
  ssh -N -L "$XDG_RUNTIME_DIR/build1.sock:/run/user/1000/9p/harness" alice@build1 &
  9harness -s "$XDG_RUNTIME_DIR/build1.sock" ls /

Exit status, the same for every command:
  0    success
  1    an error, or a refusal with nothing changed (a move: the agent
       untouched); one line on standard error says why
  2    a usage error: a bad flag, operand or combination
  3    partial: some hosts or agents did not answer (the rest is printed)
  4    a move failed after the agent was stopped; the line says how to
       resume it by hand
  124  a timeout ran out

Shell completions for bash, zsh and fish complete commands, flags, tree
paths, agents (HARNESS/PID) and ssh hosts.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// commands is every command but help and version, which are the
// dispatcher's own.
var commands = []cli.Command{
	{Name: "ps", Help: ps.Help, Run: cli.NoStdin(ps.Run)},
	{Name: "top", Help: topcmd.Help, Run: cli.NoStdin(topcmd.Run)},
	{Name: "wait", Help: wait.Help, Run: cli.NoStdin(wait.Run)},
	{Name: "events", Help: events.Help, Run: cli.NoStdin(events.Run)},
	{Name: "notify", Help: notify.Help, Run: cli.NoStdin(notify.Run)},
	{Name: "move", Help: move.Help, Run: cli.NoStdin(move.Run)},
	{Name: "ls", Help: read.LsHelp, Run: cli.NoStdin(read.Run)},
	{Name: "cat", Help: read.CatHelp, Run: cli.NoStdin(read.Run)},
	{Name: "stat", Help: read.StatHelp, Run: cli.NoStdin(read.Run)},
	{Name: "mount", Help: mount.Help, Run: cli.NoStdin(mount.Run)},
	{Name: "umount", Help: mount.UmountHelp, Run: cli.NoStdin(mount.RunUmount)},
	{Name: "relay", Help: relay.Help, Run: relay.Run},
	// For the shell completions; not in the help.
	{Name: "__complete", Run: func(g *cli.Globals, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return complete.Run(g, usage, args, stdout, stderr)
	}},
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p := cli.Program{Usage: usage, Version: buildversion.String(version), Commands: commands}
	return p.Run(args, stdin, stdout, stderr)
}
