// Package relay is 9harness relay, the far end of --ssh: standard input
// and output joined to this machine's daemon socket.
package relay

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/sockpath"
)

// Help is relay --help.
const Help = `usage: 9harness [-s SOCKET] relay [--where]

Join standard input and output to the daemon's socket (the default one, or
-s SOCKET), byte for byte, until either side closes. It is the far end of
9harness --ssh DEST, which runs "ssh DEST 9harness relay"; it is not for
reading the tree yourself. Its errors go to standard error only.

Options:
  -s, --socket SOCKET
              the daemon's socket
  --where     print the socket's absolute path, after checking that ssh may
              forward it: every directory above it is yours or root's and
              writable by nobody else (or sticky), and its server is yours
              or root's. The client asks this once per host before it
              forwards the socket through your ssh master (see
              9harness --help, "Remote").
  -h, --help  this text
`

// Run is the remote end of --ssh: standard input and output joined to
// the daemon's socket. See client.Relay for why the daemon rightly sees
// the relay's own uid (the ssh user's) and nothing more.
func Run(g *cli.Globals, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := g.FlagSet("relay")
	where := fs.Bool("where", false, "")
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if !g.LocalOnly(stderr, "relay serves this machine's daemon; it takes no --ssh (for a hop, use --ssh-opt ProxyJump=HOST)") {
		return cli.ExitUsage
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "9harness relay: unexpected argument %q (try '9harness relay --help')\n", rest[0])
		return cli.ExitUsage
	}
	if *where {
		// Checked, and then proven to answer 9P: a session, not a
		// bare connect, so the daemon has judged this peer before it
		// hangs up.
		p, conn, err := sockpath.Forwardable(g.Sock, 5*time.Second)
		if err == nil {
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			var c *client.Client
			if c, err = client.New(conn); err == nil {
				c.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "9harness relay --where: %v\n", err)
			return cli.ExitError
		}
		fmt.Fprintln(stdout, p)
		return cli.ExitOK
	}
	if f, ok := stdout.(*os.File); ok && cli.IsTerminal(f) {
		fmt.Fprintln(stderr, "9harness relay: standard output is a terminal; relay carries 9P for ssh (9harness --ssh HOST ...), not for reading")
		return cli.ExitUsage
	}
	// A reader that hangs up is the end of the relay, not a fatal signal.
	signal.Ignore(syscall.SIGPIPE)
	// A byte pump gains nothing from a second P: one goroutine copies each
	// way, mostly blocked. With one, the scheduler starts and wakes fewer
	// threads, which is most of what a relay costs its host beyond its
	// start: 6 ms of CPU less per relay in a listing of ten hosts on 2 CPUs.
	runtime.GOMAXPROCS(1)
	if err := client.Relay(g.Sock, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "9harness relay: %v\n", err)
		return cli.ExitError
	}
	return cli.ExitOK
}
