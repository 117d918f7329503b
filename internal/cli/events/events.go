// Package events is `9harness events`: each change of the live agents
// as it happens, from one daemon's /active/events or from every host's
// at once.
package events

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/fleet"
)

// Help is the text of `9harness events --help`.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST] events [--harness NAME]... [--json]
       9harness [--ssh DEST]... events --all | --hosts FILE [--harness NAME]... [--json]

Print each change of the live agents as it happens, one line each, from
now until interrupted:

  TIME HARNESS PID EVENT [WHAT]

  2026-12-01T21:40:03Z claude 345104 waiting approve Bash

TIME is RFC 3339, UTC. EVENT is appear (an agent started), exit (it
ended), working, waiting (it needs you; WHAT is what it waits for, where
the harness says), idle (its turn is over), or moved (WHAT is where to).
A reader that falls behind loses the oldest lines; the daemon then says
how many, in a line TIME - - lost N.

It reads the daemon's /active/events, which any program can read too
(cat on a mount prints the same lines).

With --all (this machine and every host of the hosts file, see 9harness
help ps), --hosts FILE or several --ssh, it follows every host's stream
at once, each through its own ssh connection, and puts the host's name
(- for this machine) in front of each line; --json adds "host". A host
that does not answer within 5 s, or whose stream ends, is one line on
standard error; it is dialled again after 1 s, then 2 s, 4 s ... up to
30 s between attempts, and a line says when it is back. What changed on
it meanwhile is not seen. The other hosts' lines go on all along.

Options:
  --harness NAME     only the lines of harness NAME; repeatable, or a comma
                     separated list
  --json             one JSON object per line: time, harness, pid (a
                     number), event and what
  --all              this machine and every host of the hosts file
  --hosts FILE       the hosts of FILE (with --all: instead of
                     ~/.config/9harness/hosts)
  -h, --help         this text

Exit status: 0 when interrupted; 1 when the daemon cannot be reached, or
the connection is lost, with one line on standard error; 2 for a usage
error; 3 (with several hosts) when interrupted after a host had failed.
`

// Run is `9harness events`.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	var (
		harnesses []string
		asJSON    bool
	)
	fs := g.FlagSet("events")
	cli.AddHarnessFlag(fs, &harnesses)
	fs.BoolVar(&asJSON, "json", false, "")
	ff := cli.AddFleetFlags(fs)
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if !cli.NoOperands("events", rest, stderr) {
		return cli.ExitUsage
	}
	if ff.All || fs.Changed("hosts") || len(g.SSHDests) > 1 {
		return runFleetEvents(g, *ff, fs.Changed("hosts"), harnesses, asJSON, stdout, stderr)
	}
	c, status := g.Connect(stderr)
	if c == nil {
		return status
	}
	defer c.Close()
	r, err := fleet.OpenEvents(c)
	if err != nil {
		fmt.Fprintf(stderr, "9harness events: %v\n", err)
		return cli.ExitError
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	out := cli.NewErrWriter(stdout)
	for sc.Scan() {
		e, ok := fleet.ParseEvent(sc.Text())
		if !ok {
			continue // not a line of this client's format
		}
		if len(harnesses) > 0 && e.PID != 0 && !slices.Contains(harnesses, e.Harness) {
			continue
		}
		if asJSON {
			b, _ := json.Marshal(e)
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, fleet.Printable(sc.Text()))
		}
		if out.Report(stderr, "events") {
			return cli.ExitError
		}
	}
	err = sc.Err()
	if err == nil {
		err = errors.New("the daemon ended the stream")
	}
	fmt.Fprintf(stderr, "9harness events: %v\n", fleet.Describe(err))
	return cli.ExitError
}
