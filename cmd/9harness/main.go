// Command 9harness is the client of 9harnessd: it lists, reads and stats the
// tree over the daemon's unix socket.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/sockpath"
)

var version = "dev"

const usage = `usage: 9harness [-s SOCKET] COMMAND [ARGS]

Read the 9harnessd tree: the on-disk state of your AI coding agents.

Commands:
  ls [-l] PATH...   list directories (a file lists as itself)
  cat PATH...       write files to standard output
  stat PATH...      print type, mode, size, mtime and qid of each path

Flags:
  -s SOCKET         the daemon's socket (default %s)
  --version         print the version

Examples:
  9harness ls /
  9harness ls -l /claude/projects
  9harness cat /claude/history | tail
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("9harness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("s", sockpath.Default(), "the daemon's `SOCKET`")
	showVersion := fs.Bool("version", false, "print the version")
	fs.Usage = func() { fmt.Fprintf(stderr, usage, sockpath.Default()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "9harness", version)
		return 0
	}
	if fs.NArg() == 0 {
		fs.Usage()
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

	c, err := client.Dial(*sock)
	if errors.Is(err, client.ErrUnanswered) {
		fmt.Fprintf(stderr, "9harness: %s: %v\n", *sock, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "9harness: cannot reach the daemon at %s: %v\n  (start it with 9harnessd, or systemctl --user start 9harness.socket)\n", *sock, unwrapSyscall(err))
		return 1
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
			fmt.Fprintf(stderr, "9harness %s %s: %v\n", cmd, p, describe(err))
			status = 1
		}
	}
	return status
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
