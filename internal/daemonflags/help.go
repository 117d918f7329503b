package daemonflags

import (
	"fmt"
	"strings"

	"github.com/9harness/9harness/internal/authz"
	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/sockpath"
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

// Help is the text of 9harnessd --help: usage, filled in.
func Help() string {
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
