package events

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/fleet"
)

// fleetEvent is a line of a fleet's events, as --json prints it: the
// host first.
type fleetEvent struct {
	Host string `json:"host"`
	fleet.Event
}

// runFleetEvents is events over several machines: each line prefixed
// with its host's name (- for this machine). A host that fails is one
// line on standard error, and is dialled again, with a backoff, until it
// answers ("back" on standard error then); the other hosts' lines go on
// meanwhile. Interrupted, it exits 0, or cli.ExitPartial when a host failed
// on the way (its lines of that time are missing).
func runFleetEvents(g *cli.Globals, ff fleet.Flags, hostsChanged bool, harnesses []string, asJSON bool, stdout, stderr io.Writer) int {
	hosts, status := cli.FleetHosts(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	news := fleet.Follow(ctx, g.Dialer(), hosts, ff.Timeout)
	out := cli.NewErrWriter(stdout)
	down := map[string]bool{}
	failed := false
	for {
		var n fleet.News
		select {
		case <-ctx.Done():
			if failed {
				return cli.ExitPartial
			}
			return cli.ExitOK
		case n = <-news:
		}
		host := fleet.Printable(n.Host)
		switch {
		case n.Err != nil:
			fmt.Fprintf(stderr, "9harness events: %s: %s\n", host, fleet.Printable(n.Err.Error()))
			down[n.Host], failed = true, true
			continue
		case n.C != nil:
			if down[n.Host] {
				fmt.Fprintf(stderr, "9harness events: %s: back (its changes meanwhile were not seen)\n", host)
				delete(down, n.Host)
			}
			continue
		}
		e, ok := fleet.ParseEvent(n.Line)
		if !ok || len(harnesses) > 0 && e.PID != 0 && !slices.Contains(harnesses, e.Harness) {
			continue
		}
		if asJSON {
			b, _ := json.Marshal(fleetEvent{Host: n.Host, Event: e})
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, host+" "+fleet.Printable(n.Line))
		}
		if out.Report(stderr, "events") {
			return cli.ExitError
		}
	}
}
