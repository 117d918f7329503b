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

	type read struct {
		host   string
		agents []client.Agent
		err    error
	}
	reads := make(chan read, len(hosts))
	type hostState struct {
		c       *client.Client
		agents  []client.Agent
		seen    bool // a table was read, or the host failed: it was looked at
		down    bool
		reading bool // a read is out
		dirty   bool // a change came while it was
	}
	state := map[string]*hostState{}
	for _, h := range hosts {
		state[h.Name] = &hostState{}
	}
	startRead := func(host string, st *hostState) {
		if st.reading {
			st.dirty = true
			return
		}
		st.reading, st.dirty = true, false
		go func(c *client.Client) {
			a, err := c.Agents(harnesses...)
			reads <- read{host, a, err}
		}(st.c)
	}
	done := ctx.Done()
	if once {
		done = nil // the look ends when every host was looked at
	}
	states := strings.Join(spec.states, " or ")
	end := func() int {
		for _, st := range state {
			if st.down {
				fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s on the hosts that answered\n", states)
				return cli.ExitPartial
			}
		}
		fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s\n", states)
		return cli.ExitTimeout
	}
	for {
		select {
		case <-done:
			return end()
		case n := <-news:
			st := state[n.Host]
			switch {
			case n.Err != nil:
				fmt.Fprintf(stderr, "9harness wait: %s: %s\n", fleet.Printable(n.Host), fleet.Printable(n.Err.Error()))
				st.c, st.agents, st.down, st.seen = nil, nil, true, true
			case n.C != nil:
				st.c, st.down = n.C, false
				startRead(n.Host, st)
			case st.c != nil:
				startRead(n.Host, st)
			}
		case r := <-reads:
			st := state[r.host]
			st.reading = false
			if r.err == nil && !st.down {
				st.agents, st.seen = r.agents, true
			}
			// A failed read is the stream's end too: followHost reports it.
			if st.dirty && st.c != nil {
				startRead(r.host, st)
			}
		}
		type match struct {
			host  string
			agent client.Agent
		}
		var matched []match
		allSeen := true
		for _, h := range hosts {
			st := state[h.Name]
			allSeen = allSeen && st.seen
			for _, a := range st.agents {
				if slices.Contains(spec.states, a.State) {
					matched = append(matched, match{h.Name, a})
				}
			}
		}
		if len(matched) > 0 {
			if quiet {
				return cli.ExitOK
			}
			slices.SortFunc(matched, func(a, b match) int {
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
		if once && allSeen {
			return end()
		}
	}
}
