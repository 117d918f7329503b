package wait

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// fleetWaitLine is how wait --all prints an agent in the state: its host
// first.
func fleetWaitLine(host string, a client.Agent) string {
	return fleet.Printable(host) + " " + waitLine(a)
}

// runFleetWait is wait over several machines, for any agent of any of
// them: each host's table is read when it comes up, and again after each
// line of its events. It returns 0, printing every agent in the state
// then, host first; on ctx's end (--timeout) cli.ExitTimeout, or cli.ExitPartial
// when a host was down then (the answer is not the whole fleet's). A host
// that fails is one line on standard error, and is dialled again as
// events --all does; once says to look at every host once (--timeout 0).
func runFleetWait(ctx context.Context, g *cli.Globals, ff fleet.Flags, hostsChanged bool, spec waitSpec, harnesses []string, once, quiet bool, stdout, stderr io.Writer) int {
	hosts, status := cli.FleetHosts(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return status
	}
	// --timeout 0 looks once: the look itself is bounded by the hosts'
	// own timeout, not cut short.
	look := ctx
	if once {
		look = context.Background()
	}
	fctx, cancel := context.WithCancel(look)
	defer cancel()
	tables := cli.NewFleetTables(fctx, g, hosts, ff.Timeout, harnesses)
	fw := fleetWaiter{}
	for _, h := range hosts {
		fw[h.Name] = &hostState{}
	}
	done := ctx.Done()
	if once {
		done = nil // the look ends when every host was looked at
	}
	states := strings.Join(spec.states, " or ")
	for {
		t, ok := tables.Next(done)
		if !ok {
			return fw.timedOut(states, stderr)
		}
		fw.take(t, stderr)
		matched, allSeen := fw.matches(hosts, spec.states)
		if len(matched) > 0 {
			return printFleetMatches(matched, quiet, stdout, stderr)
		}
		if once && allSeen {
			return fw.timedOut(states, stderr)
		}
	}
}

// fleetWaiter is what wait --all knows of each host, by name.
type fleetWaiter map[string]*hostState

// hostState is a host of wait --all.
type hostState struct {
	agents []client.Agent
	seen   bool // a table was read, or the host failed: it was looked at
	down   bool
}

// take takes a host's news: down (one line), back, or its table.
func (fw fleetWaiter) take(t cli.HostTable, stderr io.Writer) {
	st := fw[t.Host]
	switch {
	case t.Err != nil:
		fmt.Fprintf(stderr, "9harness wait: %s: %s\n", fleet.Printable(t.Host), fleet.Printable(t.Err.Error()))
		st.agents, st.down, st.seen = nil, true, true
	case t.Back:
		st.down = false
	default:
		st.agents, st.seen = t.Agents, true
	}
}

// fleetMatch is an agent in the state, on its host.
type fleetMatch struct {
	host  string
	agent client.Agent
}

// matches is every agent in one of states on the hosts' last tables, and
// whether every host was looked at.
func (fw fleetWaiter) matches(hosts []client.Host, states []string) (matched []fleetMatch, allSeen bool) {
	allSeen = true
	for _, h := range hosts {
		st := fw[h.Name]
		allSeen = allSeen && st.seen
		for _, a := range st.agents {
			if slices.Contains(states, a.State) {
				matched = append(matched, fleetMatch{h.Name, a})
			}
		}
	}
	return matched, allSeen
}

// timedOut is the end of a wait that found no agent in states: partial
// when a host was down.
func (fw fleetWaiter) timedOut(states string, stderr io.Writer) int {
	for _, st := range fw {
		if st.down {
			fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s on the hosts that answered\n", states)
			return cli.ExitPartial
		}
	}
	fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s\n", states)
	return cli.ExitTimeout
}

// printFleetMatches prints the agents in the state, by host, harness and
// pid, host first.
func printFleetMatches(matched []fleetMatch, quiet bool, stdout, stderr io.Writer) int {
	if quiet {
		return cli.ExitOK
	}
	slices.SortFunc(matched, func(a, b fleetMatch) int {
		if c := strings.Compare(a.host, b.host); c != 0 {
			return c
		}
		if c := strings.Compare(a.agent.Harness, b.agent.Harness); c != 0 {
			return c
		}
		return a.agent.PID - b.agent.PID
	})
	out := cli.NewErrWriter(stdout)
	for _, m := range matched {
		fmt.Fprintln(out, fleetWaitLine(m.host, m.agent))
	}
	if out.Report(stderr, "wait") {
		return cli.ExitError
	}
	return cli.ExitOK
}
