// Package read is 9harness ls, cat and stat: one operation on each path
// of the tree, over the local socket or --ssh.
package read

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// LsHelp is ls --help.
const LsHelp = `usage: 9harness [-s SOCKET | --ssh DEST] ls [-lah] [PATH...]

List each directory of the tree (default /); a directory's name ends in /.
A file lists as itself.

Options:
  -l, --long  long listing: mode, size, mtime and name
  --human-readable
              with -l, sizes as 1.5K, 23M, as -lh asks (-h on its own is
              help, as for every command)
  -a, --all   accepted for the habit of ls -la: nothing is hidden anyway
              (the tree has no dot files to hide)
  -h, --help  this text

Examples:
  9harness ls /active/claude
  9harness ls -l /claude/projects
`

// CatHelp is cat --help.
const CatHelp = `usage: 9harness [-s SOCKET | --ssh DEST] cat PATH...

Write each file of the tree to standard output, in order.

Options:
  -h, --help  this text

Examples:
  9harness cat /active/claude/345104/title
  9harness cat /codex/history | tail
`

// StatHelp is stat --help.
const StatHelp = `usage: 9harness [-s SOCKET | --ssh DEST] stat PATH...

Print the type, mode, size, mtime and qid of each path of the tree.

Options:
  -h, --help  this text

Example:
  9harness stat /claude/history
`

// Run is ls, cat or stat, as g.Cmd names: one operation per path.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	cmd := g.Cmd
	var o lsOpts
	fs := g.FlagSet(cmd)
	if cmd == "ls" {
		fs.BoolVarP(&o.long, "long", "l", false, "")
		// Only inside a group (-lh): -h alone is help.
		fs.BoolVar(&o.human, "human-readable", false, "")
		// ls hides nothing; -a is there for the hands that type ls -la.
		fs.BoolP("all", "a", false, "")
	}
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) == 0 {
		if cmd != "ls" {
			fmt.Fprintf(stderr, "9harness %s: no path given (try '9harness %s --help')\n", cmd, cmd)
			return cli.ExitUsage
		}
		rest = []string{"/"}
	}
	c, status := g.Connect(stderr)
	if c == nil {
		return status
	}
	defer c.Close()

	out := cli.NewErrWriter(stdout)
	status = cli.ExitOK
	for _, p := range rest {
		var err error
		switch cmd {
		case "ls":
			err = ls(c, p, o, out)
		case "cat":
			err = cat(c, p, out)
		case "stat":
			err = stat(c, p, out)
		}
		if out.Report(stderr, cmd) {
			// Nothing more can be written either.
			return cli.ExitError
		}
		if err != nil {
			if te := c.TransportError(); te != nil {
				// The transport is gone: no later path can succeed.
				fmt.Fprintf(stderr, "9harness %s: %s: %v\n", cmd, p, te)
				return cli.ExitError
			}
			fmt.Fprintf(stderr, "9harness %s: %s: %v\n", cmd, p, fleet.Describe(err))
			status = cli.ExitError
		}
	}
	return status
}

// lsOpts are ls's flags.
type lsOpts struct {
	long  bool // -l: mode, size, mtime
	human bool // -h in a group: sizes as 1.5K, 23M
}

func ls(c *client.Client, p string, o lsOpts, w io.Writer) error {
	q, a, err := c.Stat(p)
	if err != nil {
		return err
	}
	if !q.IsDir() {
		printEntry(w, lastName(p), q, a, o)
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
		if !o.long {
			name := fleet.Printable(e.Name)
			if e.QID.IsDir() {
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
		printEntry(w, e.Name, q, a, o)
	}
	return nil
}

func printEntry(w io.Writer, name string, q client.QID, a client.Attr, o lsOpts) {
	name = fleet.Printable(name) // a name is whatever the host's filesystem holds
	if q.IsDir() {
		name += "/"
	}
	if !o.long {
		fmt.Fprintln(w, name)
		return
	}
	mt := a.Mtime.Format("2006-01-02 15:04")
	size := strconv.FormatUint(a.Size, 10)
	if o.human {
		size = humanSize(a.Size)
	}
	fmt.Fprintf(w, "%s %10s %s %s\n", os.FileMode(a.Perm)|dirBit(q), size, mt, name)
}

// humanSize is a size as GNU ls -h prints it: powers of 1024, rounded up,
// one decimal below 10 of a unit.
func humanSize(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10)
	}
	v, unit := float64(n)/1024, 0
	for math.Ceil(v) >= 1024 && unit < 5 {
		v /= 1024
		unit++
	}
	suffix := string("KMGTPE"[unit])
	if r := math.Ceil(v*10) / 10; r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + suffix
	}
	return strconv.FormatFloat(math.Ceil(v), 'f', 0, 64) + suffix
}

func dirBit(q client.QID) os.FileMode {
	if q.IsDir() {
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
	if q.IsDir() {
		kind = "directory"
	}
	mt := a.Mtime.UTC().Format(time.RFC3339Nano)
	fmt.Fprintf(w, "path %s\ntype %s\nmode %04o\nsize %d\nmtime %s\nqid %016x.%d\n", p, kind, a.Perm, a.Size, mt, q.Path, q.Version)
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
