// Command 9harness is the client of 9harnessd: it lists, reads and stats the
// tree over the daemon's unix socket, or over ssh (--ssh) through a
// `9harness relay` on the remote host, which is also this command.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/sockpath"
	buildversion "github.com/9harness/9harness/internal/version"
)

var version = "dev"

const usage = `usage: 9harness [-s SOCKET] COMMAND [ARGS]
       9harness --ssh DEST [--ssh-opt OPTION]... [--ssh-cmd CMD] [-s SOCKET]
                COMMAND [ARGS]
       9harness [-s SOCKET] relay

Read the 9harnessd tree: the on-disk state of your AI coding agents, on this
machine or, through ssh, on another. Flags come before the command.

Commands:
  ps [--json] [--watch] [--harness NAME]...
                    list the live agents, one row each: harness, pid, age,
                    status, directory, zmx or tmux session, title
  move [--tmux] HARNESS/PID NAME
                    stop an agent and resume the same session inside a new
                    zmx (or tmux) session NAME, to attach to from anywhere;
                    needs a daemon started with --allow-move
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
  help [COMMAND]    this text, or one command's (also: 9harness COMMAND --help)

Flags:
  -s SOCKET         the daemon's socket (default %s);
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
  --ssh-opt OPTION  pass -o OPTION to ssh; repeatable; ssh_config(5) syntax:
                    Port=2222, IdentityFile=~/.ssh/work, ProxyJump=bastion.
                    They precede 9harness's own options, so they win.
  --ssh-cmd CMD     the remote command (default "9harness relay"), for a
                    9harness off the remote PATH: '~/go/bin/9harness relay'.
                    With -s, " -s SOCKET" is appended to it.

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
  ssh -N -L /tmp/build1.sock:/run/user/1000/9p/harness alice@build1 &
  9harness -s /tmp/build1.sock ls /

Exit status: 0 on success; 1 when the daemon cannot be reached or an
operation fails, with one line on standard error saying why; 2 for a usage
error.
`

const lsHelp = `usage: 9harness [-s SOCKET | --ssh DEST] ls [-l] [PATH...]

List each directory of the tree (default /); a directory's name ends in /.
A file lists as itself.

Options:
  -l          long listing: mode, size, mtime and name
  -h, --help  this text

Examples:
  9harness ls /active/claude
  9harness ls -l /claude/projects
`

const catHelp = `usage: 9harness [-s SOCKET | --ssh DEST] cat PATH...

Write each file of the tree to standard output, in order.

Examples:
  9harness cat /active/claude/345104/title
  9harness cat /codex/history | tail
`

const statHelp = `usage: 9harness [-s SOCKET | --ssh DEST] stat PATH...

Print the type, mode, size, mtime and qid of each path of the tree.

Example:
  9harness stat /claude/history
`

const relayHelp = `usage: 9harness [-s SOCKET] relay

Join standard input and output to the daemon's socket (the default one, or
-s SOCKET), byte for byte, until either side closes. It is the far end of
9harness --ssh DEST, which runs "ssh DEST 9harness relay"; it is not for
reading the tree yourself. Its errors go to standard error only.
`

// sshOpts collects repeated --ssh-opt flags.
type sshOpts []string

func (o *sshOpts) String() string     { return strings.Join(*o, " ") }
func (o *sshOpts) Set(v string) error { *o = append(*o, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// globals is how to reach the daemon: its socket, or ssh to a relay.
type globals struct {
	sock  string
	aname string      // what the local socket's session attaches
	ssh   *client.SSH // nil: the local socket
}

// dial reaches the daemon; the error is one line that says what to do.
func (g *globals) dial() (*client.Client, error) {
	if g.ssh != nil {
		return client.DialSSH(*g.ssh)
	}
	c, err := client.DialAname(g.sock, g.aname)
	if sockpath.IsUntrusted(err) {
		return nil, err // "refusing PATH: its directory is owned by uid N, ..."
	}
	if errors.Is(err, client.ErrUnanswered) {
		return nil, fmt.Errorf("%s: %v", g.sock, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach the daemon at %s: %v (start it with 9harnessd, or systemctl --user start 9harness.socket)", g.sock, unwrapSyscall(err))
	}
	return c, nil
}

// connect is dial for a command: on failure it prints the line and gives
// the exit status.
func (g *globals) connect(stderr io.Writer) (*client.Client, int) {
	c, err := g.dial()
	if err != nil {
		fmt.Fprintf(stderr, "9harness: %v\n", err)
		return nil, 1
	}
	return c, 0
}

// remote tells whether the tree is another machine's.
func (g *globals) remote() bool { return g.ssh != nil }

// helps is each command's full help, for COMMAND --help and help COMMAND.
var helps = map[string]string{
	"ps": psHelp, "move": moveHelp, "ls": lsHelp, "cat": catHelp, "stat": statHelp, "relay": relayHelp, "mount": mountHelp, "umount": mountHelp,
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("9harness", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	sock := fs.String("s", sockpath.Default(), "the daemon's `SOCKET`")
	sshDest := fs.String("ssh", "", "reach the daemon on `DEST` through ssh")
	var sshOptions sshOpts
	fs.Var(&sshOptions, "ssh-opt", "pass -o `OPTION` to ssh (repeatable)")
	sshCmd := fs.String("ssh-cmd", client.DefaultRelayCommand, "the remote `COMMAND`")
	aname := fs.String("aname", "/", "the tree to `ATTACH`")
	showVersion := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, usage, sockpath.Default())
			return 0
		}
		fmt.Fprintf(stderr, "9harness: %v (try 9harness --help)\n", err)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *showVersion {
		fmt.Fprintln(stdout, "9harness", buildversion.String(version))
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, usage, sockpath.Default())
		return 2
	}
	if *sshDest == "" && (set["ssh-opt"] || set["ssh-cmd"]) {
		fmt.Fprintln(stderr, "9harness: --ssh-opt and --ssh-cmd need --ssh DEST")
		return 2
	}
	if set["aname"] && (*sshDest != "" || fs.Arg(0) == "mount") {
		fmt.Fprintln(stderr, "9harness: --aname is for ls, cat and stat on a local socket, not with --ssh or mount")
		return 2
	}
	g := &globals{sock: *sock, aname: *aname}
	if *sshDest != "" {
		s := client.SSH{Dest: *sshDest, Options: sshOptions, Command: *sshCmd}
		if set["s"] {
			s.Socket = *sock
		}
		if _, err := s.Argv(); err != nil {
			fmt.Fprintf(stderr, "9harness: %v\n", err)
			return 2
		}
		g.ssh = &s
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "ps":
		return runPs(g, rest, stdout, stderr)
	case "move":
		return runMove(g, rest, stdout, stderr)
	case "ls", "cat", "stat":
		return runRead(g, cmd, rest, stdout, stderr)
	case "mount", "umount":
		if g.remote() {
			fmt.Fprintf(stderr, "9harness: %s works on this machine's daemon; it takes no --ssh (forward the remote socket with ssh -L and use -s)\n", cmd)
			return 2
		}
		if cmd == "mount" {
			return runMount(rest, stdout, stderr, *sock)
		}
		return runUmount(rest, stdout, stderr)
	case "relay":
		if g.remote() {
			fmt.Fprintln(stderr, "9harness: relay serves this machine's daemon; it takes no --ssh (for a hop, use --ssh-opt ProxyJump=HOST)")
			return 2
		}
		return relay(*sock, rest, stdin, stdout, stderr)
	case "help":
		if len(rest) == 0 {
			fmt.Fprintf(stdout, usage, sockpath.Default())
			return 0
		}
		if len(rest) == 1 && (rest[0] == "mount" || rest[0] == "umount") {
			return runMount([]string{"-h"}, stdout, stdout, *sock)
		}
		h, ok := helps[rest[0]]
		if !ok || len(rest) > 1 {
			fmt.Fprintf(stderr, "9harness help: no command %q (try 9harness --help)\n", strings.Join(rest, " "))
			return 2
		}
		io.WriteString(stdout, h)
		return 0
	default:
		fmt.Fprintf(stderr, "9harness: unknown command %q (try 9harness --help)\n", cmd)
		return 2
	}
}

// parseFlags parses a command's flags. With interspersed, flags may follow
// operands too (up to "--"). It returns the operands, or ok false with the
// exit status: 0 after printing help to stdout for -h/--help, 2 after one
// line on stderr for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (operands []string, status int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stdout, helps[fs.Name()])
			return nil, 0, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "9harness %s: %v (try 9harness %s --help)\n", fs.Name(), err, fs.Name())
			return nil, 2, false
		}
		left := fs.Args()
		if !interspersed || len(left) == 0 {
			return append(operands, left...), 0, true
		}
		if i := len(args) - len(left); i > 0 && args[i-1] == "--" {
			return append(operands, left...), 0, true
		}
		operands = append(operands, left[0])
		args = left[1:]
	}
}

// runRead is ls, cat and stat: one operation per path.
func runRead(g *globals, cmd string, args []string, stdout, stderr io.Writer) int {
	var long bool
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	if cmd == "ls" {
		fs.BoolVar(&long, "l", false, "long listing")
	}
	rest, status, ok := parseFlags(fs, args, false, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) == 0 {
		if cmd != "ls" {
			fmt.Fprintf(stderr, "9harness %s: no path given (try 9harness %s --help)\n", cmd, cmd)
			return 2
		}
		rest = []string{"/"}
	}
	c, status := g.connect(stderr)
	if c == nil {
		return status
	}
	defer c.Close()

	status = 0
	for _, p := range rest {
		var err error
		switch cmd {
		case "ls":
			err = ls(c, p, long, stdout)
		case "cat":
			err = cat(c, p, stdout)
		case "stat":
			err = stat(c, p, stdout)
		}
		if err != nil {
			if te := c.TransportError(); te != nil {
				// The transport is gone: no later path can succeed.
				fmt.Fprintf(stderr, "9harness %s %s: %v\n", cmd, p, te)
				return 1
			}
			fmt.Fprintf(stderr, "9harness %s %s: %v\n", cmd, p, describe(err))
			status = 1
		}
	}
	return status
}

// relay is the remote end of --ssh: standard input and output joined to
// the daemon's socket. See client.Relay for why the daemon rightly sees
// the relay's own uid (the ssh user's) and nothing more.
func relay(sock string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	rf := flag.NewFlagSet("relay", flag.ContinueOnError)
	rf.StringVar(&sock, "s", sock, "the daemon's `SOCKET`")
	rest, status, ok := parseFlags(rf, args, false, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "9harness relay: unexpected argument %q\n", rest[0])
		return 2
	}
	if f, ok := stdout.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(stderr, "9harness relay: standard output is a terminal; relay carries 9P for ssh (9harness --ssh HOST ...), not for reading")
		return 2
	}
	// A reader that hangs up is the end of the relay, not a fatal signal.
	signal.Ignore(syscall.SIGPIPE)
	if err := client.Relay(sock, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "9harness relay: %v\n", err)
		return 1
	}
	return 0
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func ls(c *client.Client, p string, long bool, w io.Writer) error {
	q, a, err := c.Stat(p)
	if err != nil {
		return err
	}
	if q.Type&p9.TypeDir == 0 {
		printEntry(w, lastName(p), q, a, long)
		return nil
	}
	ents, err := c.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue // other 9P2000.L servers (diod) list them; 9harnessd does not
		}
		if !long {
			name := e.Name
			if e.QID.Type&p9.TypeDir != 0 {
				name += "/"
			}
			fmt.Fprintln(w, name)
			continue
		}
		q, a, err := c.Stat(joinPath(p, e.Name))
		if err != nil {
			// Gone between the listing and the stat: the tree is live.
			continue
		}
		printEntry(w, e.Name, q, a, true)
	}
	return nil
}

func printEntry(w io.Writer, name string, q p9.QID, a p9.Attr, long bool) {
	if q.Type&p9.TypeDir != 0 {
		name += "/"
	}
	if !long {
		fmt.Fprintln(w, name)
		return
	}
	mt := time.Unix(int64(a.MTimeSeconds), 0).Format("2006-01-02 15:04")
	fmt.Fprintf(w, "%s %10d %s %s\n", os.FileMode(a.Mode.Permissions())|dirBit(q), a.Size, mt, name)
}

func dirBit(q p9.QID) os.FileMode {
	if q.Type&p9.TypeDir != 0 {
		return os.ModeDir
	}
	return 0
}

func cat(c *client.Client, p string, w io.Writer) error {
	r, err := c.Open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	// The buffer sets the size of each Tread, so it must be what the
	// writer uses: io.CopyBuffer hands the copy to w.ReadFrom when w has
	// one (an *os.File does), and that reads in 32 KiB pieces, one round
	// trip each (measured: 0.5 GB/s instead of 3.4 at 1 MiB msize). The
	// struct hides ReadFrom.
	_, err = io.CopyBuffer(struct{ io.Writer }{w}, r, make([]byte, client.Msize-64))
	return err
}

func stat(c *client.Client, p string, w io.Writer) error {
	q, a, err := c.Stat(p)
	if err != nil {
		return err
	}
	kind := "file"
	if q.Type&p9.TypeDir != 0 {
		kind = "directory"
	}
	mt := time.Unix(int64(a.MTimeSeconds), int64(a.MTimeNanoSeconds)).UTC().Format(time.RFC3339Nano)
	fmt.Fprintf(w, "path %s\ntype %s\nmode %04o\nsize %d\nmtime %s\nqid %016x.%d\n", p, kind, uint32(a.Mode.Permissions()), a.Size, mt, q.Path, q.Version)
	return nil
}

func joinPath(dir, name string) string {
	if dir == "" || dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

func lastName(p string) string {
	parts := client.Split(p)
	if len(parts) == 0 {
		return "/"
	}
	return parts[len(parts)-1]
}

// describe turns a wire errno into the sentence strerror gives.
func describe(err error) error {
	var e linux.Errno
	if errors.As(err, &e) {
		return syscall.Errno(e)
	}
	return err
}

func unwrapSyscall(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}
