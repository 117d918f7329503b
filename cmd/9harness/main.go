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
)

var version = "dev"

const usage = `usage: 9harness [-s SOCKET] COMMAND [ARGS]
       9harness --ssh DEST [--ssh-opt OPTION]... [--ssh-cmd CMD] [-s SOCKET]
                COMMAND [ARGS]
       9harness [-s SOCKET] relay

Read the 9harnessd tree: the on-disk state of your AI coding agents, on this
machine or, through ssh, on another. Flags come before the command.

Commands:
  ls [-l] PATH...   list directories (a file lists as itself)
  cat PATH...       write files to standard output
  stat PATH...      print type, mode, size, mtime and qid of each path
  relay [-s SOCKET] join standard input and output to the daemon's socket,
                    byte for byte, until either side closes: the far end of
                    --ssh, run by ssh on the remote host. Its errors go to
                    standard error only. The daemon sees the relay's uid,
                    over ssh the uid ssh logged in as, and serves it exactly
                    as it would a local client.

Flags:
  -s SOCKET         the daemon's socket (default %s);
                    with --ssh, the daemon's socket on the remote host
  --version         print the version

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
  9harness ls /
  9harness ls -l /claude/projects
  9harness cat /claude/history | tail
  9harness --ssh alice@build1 ls /active/claude
  9harness --ssh build1 --ssh-opt Port=2222 cat /codex/history | tail

  # or forward the remote socket and use it as a local one:
  ssh -N -L /tmp/build1.sock:/run/user/1000/9p/harness alice@build1 &
  9harness -s /tmp/build1.sock ls /
`

// sshOpts collects repeated --ssh-opt flags.
type sshOpts []string

func (o *sshOpts) String() string     { return strings.Join(*o, " ") }
func (o *sshOpts) Set(v string) error { *o = append(*o, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("9harness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("s", sockpath.Default(), "the daemon's `SOCKET`")
	sshDest := fs.String("ssh", "", "reach the daemon on `DEST` through ssh")
	var sshOptions sshOpts
	fs.Var(&sshOptions, "ssh-opt", "pass -o `OPTION` to ssh (repeatable)")
	sshCmd := fs.String("ssh-cmd", client.DefaultRelayCommand, "the remote `COMMAND`")
	showVersion := fs.Bool("version", false, "print the version")
	fs.Usage = func() { fmt.Fprintf(stderr, usage, sockpath.Default()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *showVersion {
		fmt.Fprintln(stdout, "9harness", version)
		return 0
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *sshDest == "" && (set["ssh-opt"] || set["ssh-cmd"]) {
		fmt.Fprintln(stderr, "9harness: --ssh-opt and --ssh-cmd need --ssh DEST")
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var long bool
	switch cmd {
	case "ls":
		lf := flag.NewFlagSet("ls", flag.ContinueOnError)
		lf.SetOutput(stderr)
		lf.BoolVar(&long, "l", false, "long listing")
		if err := lf.Parse(rest); err != nil {
			return 2
		}
		rest = lf.Args()
	case "cat", "stat":
	case "relay":
		if *sshDest != "" {
			fmt.Fprintln(stderr, "9harness: relay serves this machine's daemon; it takes no --ssh (for a hop, use --ssh-opt ProxyJump=HOST)")
			return 2
		}
		return relay(*sock, rest, stdin, stdout, stderr)
	case "help":
		fs.Usage()
		return 0
	default:
		fmt.Fprintf(stderr, "9harness: unknown command %q (try 9harness --help)\n", cmd)
		return 2
	}
	if len(rest) == 0 {
		if cmd != "ls" {
			fmt.Fprintf(stderr, "9harness %s: no path given\n", cmd)
			return 2
		}
		rest = []string{"/"}
	}

	var c *client.Client
	var err error
	if *sshDest != "" {
		s := client.SSH{Dest: *sshDest, Options: sshOptions, Command: *sshCmd}
		if set["s"] {
			s.Socket = *sock
		}
		if _, err := s.Argv(); err != nil {
			fmt.Fprintf(stderr, "9harness: %v\n", err)
			return 2
		}
		c, err = client.DialSSH(s)
		if err != nil {
			fmt.Fprintf(stderr, "9harness: %v\n", err)
			return 1
		}
	} else {
		c, err = client.Dial(*sock)
		if errors.Is(err, client.ErrUnanswered) {
			fmt.Fprintf(stderr, "9harness: %s: %v\n", *sock, err)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "9harness: cannot reach the daemon at %s: %v\n  (start it with 9harnessd, or systemctl --user start 9harness.socket)\n", *sock, unwrapSyscall(err))
			return 1
		}
	}
	defer c.Close()

	status := 0
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
	rf.SetOutput(stderr)
	rf.StringVar(&sock, "s", sock, "the daemon's `SOCKET`")
	rf.Usage = func() {
		fmt.Fprintf(stderr, "usage: 9harness relay [-s SOCKET]   (a transport: ssh HOST 9harness relay; see 9harness --help)\n")
	}
	if err := rf.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if rf.NArg() != 0 {
		fmt.Fprintf(stderr, "9harness relay: unexpected argument %q\n", rf.Arg(0))
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
	_, err = io.CopyBuffer(w, r, make([]byte, client.Msize-64))
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
