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
// then, host first; on ctx's end (--timeout) exitTimeout, or exitPartial
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
	news := fleet.Follow(fctx, g.Dialer(), hosts, ff.Timeout)

	fw := newFleetWaiter(hosts, harnesses)
	done := ctx.Done()
	if once {
		done = nil // the look ends when every host was looked at
	}
	states := strings.Join(spec.states, " or ")
	for {
		select {
		case <-done:
			return fw.timedOut(states, stderr)
		case n := <-news:
			fw.news(n, stderr)
		case r := <-fw.reads:
			fw.got(r)
		}
		matched, allSeen := fw.matches(hosts, spec.states)
		if len(matched) > 0 {
			return printFleetMatches(matched, quiet, stdout, stderr)
		}
		if once && allSeen {
			return fw.timedOut(states, stderr)
		}
	}
}

// fleetWaiter is what wait --all knows of each host: its connection and
// its last table.
type fleetWaiter struct {
	harnesses []string
	reads     chan hostRead
	state     map[string]*hostState
}

// hostRead is one read of a host's table.
type hostRead struct {
	host   string
	agents []client.Agent
	err    error
}

// hostState is a host of wait --all.
type hostState struct {
	c       *client.Client
	agents  []client.Agent
	seen    bool // a table was read, or the host failed: it was looked at
	down    bool
	reading bool // a read is out
	dirty   bool // a change came while it was
}

func newFleetWaiter(hosts []client.Host, harnesses []string) *fleetWaiter {
	fw := &fleetWaiter{harnesses: harnesses, reads: make(chan hostRead, len(hosts)), state: map[string]*hostState{}}
	for _, h := range hosts {
		fw.state[h.Name] = &hostState{}
	}
	return fw
}

// read reads host's table in the background, once at a time: a change
// that comes while a read is out asks for another after it.
func (fw *fleetWaiter) read(host string, st *hostState) {
	if st.reading {
		st.dirty = true
		return
	}
	st.reading, st.dirty = true, false
	go func(c *client.Client) {
		a, err := c.Agents(fw.harnesses...)
		fw.reads <- hostRead{host, a, err}
	}(st.c)
}

// news takes a host's news: down (one line), up, or a change.
func (fw *fleetWaiter) news(n fleet.News, stderr io.Writer) {
	st := fw.state[n.Host]
	switch {
	case n.Err != nil:
		fmt.Fprintf(stderr, "9harness wait: %s: %s\n", fleet.Printable(n.Host), fleet.Printable(n.Err.Error()))
		st.c, st.agents, st.down, st.seen = nil, nil, true, true
	case n.C != nil:
		st.c, st.down = n.C, false
		fw.read(n.Host, st)
	case st.c != nil:
		fw.read(n.Host, st)
	}
}

// got takes a table that was read.
func (fw *fleetWaiter) got(r hostRead) {
	st := fw.state[r.host]
	st.reading = false
	if r.err == nil && !st.down {
		st.agents, st.seen = r.agents, true
	}
	// A failed read is the stream's end too: followHost reports it.
	if st.dirty && st.c != nil {
		fw.read(r.host, st)
	}
}

// fleetMatch is an agent in the state, on its host.
type fleetMatch struct {
	host  string
	agent client.Agent
}

// matches is every agent in one of states on the hosts' last tables, and
// whether every host was looked at.
func (fw *fleetWaiter) matches(hosts []client.Host, states []string) (matched []fleetMatch, allSeen bool) {
	allSeen = true
	for _, h := range hosts {
		st := fw.state[h.Name]
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
func (fw *fleetWaiter) timedOut(states string, stderr io.Writer) int {
	for _, st := range fw.state {
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
