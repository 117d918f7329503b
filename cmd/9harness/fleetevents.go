package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// The backoff between a host's reconnections: a host that is down is
// asked again soon, and then less and less often.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// hostNews is what following a host says: a line of its /active/events,
// or that it came up (c set: its session, for reading its table) or went
// down (err set).
type hostNews struct {
	host string
	line string
	c    *client.Client
	err  error
}

// followHost keeps host h's /active/events open until ctx ends, and says
// on news when it is up, each line, and when it is down. An attempt that
// does not connect within timeout is reported down then (the attempt is
// waited for: ssh gives up by its ConnectTimeout); a down is said once
// per outage. After a failure it dials again, after minBackoff doubling
// up to maxBackoff, and after minBackoff again once a stream has lasted
// maxBackoff. What changed on the host while it was down is not seen: the
// daemon keeps no history.
func followHost(ctx context.Context, g *globals, h client.Host, timeout time.Duration, news chan<- hostNews) {
	send := func(n hostNews) bool {
		n.host = h.Name
		select {
		case news <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if h.SSH != nil {
		// A host whose network goes silent mid-stream is noticed by ssh's
		// keepalives, after about three timeouts.
		s := *h.SSH
		secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
		s.Options = append(slices.Clone(s.Options), "ServerAliveInterval="+secs, "ServerAliveCountMax=2")
		h.SSH = &s
	}
	type session struct {
		c   *client.Client
		r   *client.Reader
		err error
	}
	backoff := minBackoff
	down := false
	for {
		attempt := make(chan session, 1)
		go func() {
			c, err := dialHost(g, h, timeout)
			if err != nil {
				attempt <- session{err: hostError(err)}
				return
			}
			r, err := openEvents(c)
			if err != nil {
				c.Close()
				err = hostError(err)
			}
			attempt <- session{c: c, r: r, err: err}
		}()
		// An attempt ctx gives up on ends aside; its session is closed.
		abandon := func() {
			go func() {
				if s := <-attempt; s.c != nil {
					s.c.Close()
				}
			}()
		}
		var s session
		timer := time.NewTimer(timeout)
		select {
		case s = <-attempt:
		case <-timer.C:
			if !down {
				down = true
				if !send(hostNews{err: fmt.Errorf("no answer within %v", timeout)}) {
					abandon()
					return
				}
			}
			select {
			case s = <-attempt:
			case <-ctx.Done():
				abandon()
				return
			}
		case <-ctx.Done():
			timer.Stop()
			abandon()
			return
		}
		timer.Stop()
		if s.err == nil {
			down = false
			began := time.Now()
			s.err = streamHost(ctx, s.c, s.r, send)
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) >= maxBackoff {
				backoff = minBackoff
			}
		}
		if !down {
			down = true
			if !send(hostNews{err: s.err}) {
				return
			}
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// streamHost says the host is up and passes on each line of its stream
// until the stream or ctx ends; it closes the session, and says why the
// stream ended.
func streamHost(ctx context.Context, c *client.Client, r *client.Reader, send func(hostNews) bool) error {
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
		}
		c.Close() // ends a read that waits
	}()
	if !send(hostNews{c: c}) {
		return ctx.Err()
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if !send(hostNews{line: sc.Text()}) {
			return ctx.Err()
		}
	}
	err := sc.Err()
	if te := c.TransportError(); te != nil {
		err = te
	}
	if err == nil {
		return errors.New("the daemon ended the stream")
	}
	return hostError(err)
}

// follow starts following every host; the news of them all arrives on the
// channel it returns, until ctx ends.
func follow(ctx context.Context, g *globals, hosts []client.Host, timeout time.Duration) <-chan hostNews {
	news := make(chan hostNews, 64)
	for _, h := range hosts {
		go followHost(ctx, g, h, timeout, news)
	}
	return news
}

// fleetEvent is a line of a fleet's events, as --json prints it: the
// host first.
type fleetEvent struct {
	Host string `json:"host"`
	eventLine
}

// runFleetEvents is events over several machines: each line prefixed
// with its host's name (- for this machine). A host that fails is one
// line on standard error, and is dialled again, with a backoff, until it
// answers ("back" on standard error then); the other hosts' lines go on
// meanwhile. Interrupted, it exits 0, or exitPartial when a host failed
// on the way (its lines of that time are missing).
func runFleetEvents(g *globals, ff fleetFlags, hostsChanged bool, harnesses []string, asJSON bool, stdout, stderr io.Writer) int {
	hosts, status := fleetHostsFor(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	news := follow(ctx, g, hosts, ff.timeout)
	out := newErrWriter(stdout)
	down := map[string]bool{}
	failed := false
	for {
		var n hostNews
		select {
		case <-ctx.Done():
			if failed {
				return exitPartial
			}
			return exitOK
		case n = <-news:
		}
		host := printable(n.host)
		switch {
		case n.err != nil:
			fmt.Fprintf(stderr, "9harness events: %s: %s\n", host, printable(n.err.Error()))
			down[n.host], failed = true, true
			continue
		case n.c != nil:
			if down[n.host] {
				fmt.Fprintf(stderr, "9harness events: %s: back (its changes meanwhile were not seen)\n", host)
				delete(down, n.host)
			}
			continue
		}
		e, ok := parseEvent(n.line)
		if !ok || len(harnesses) > 0 && e.PID != 0 && !slices.Contains(harnesses, e.Harness) {
			continue
		}
		if asJSON {
			b, _ := json.Marshal(fleetEvent{Host: n.host, eventLine: e})
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, host+" "+printable(n.line))
		}
		if out.report(stderr, "events") {
			return exitError
		}
	}
}

// fleetHostsFor is fleetHosts for a command: a failure, or no hosts, is
// one line on stderr and the usage status (hosts nil).
func fleetHostsFor(g *globals, ff fleetFlags, hostsChanged bool, stderr io.Writer) ([]client.Host, int) {
	hosts, err := fleetHosts(g, ff, hostsChanged)
	if err != nil {
		fmt.Fprintf(stderr, "9harness %s: %v\n", g.cmd, err)
		return nil, exitUsage
	}
	if len(hosts) == 0 {
		fmt.Fprintf(stderr, "9harness %s: no hosts: the hosts file lists none, and no --ssh DEST was given\n", g.cmd)
		return nil, exitUsage
	}
	return hosts, exitOK
}

// fleetWaitLine is how wait --all prints an agent in the state: its host
// first.
func fleetWaitLine(host string, a client.Agent) string {
	return printable(host) + " " + waitLine(a)
}

// runFleetWait is wait over several machines, for any agent of any of
// them: each host's table is read when it comes up, and again after each
// line of its events. It returns 0, printing every agent in the state
// then, host first; on ctx's end (--timeout) exitTimeout, or exitPartial
// when a host was down then (the answer is not the whole fleet's). A host
// that fails is one line on standard error, and is dialled again as
// events --all does; once says to look at every host once (--timeout 0).
func runFleetWait(ctx context.Context, g *globals, ff fleetFlags, hostsChanged bool, spec waitSpec, harnesses []string, once, quiet bool, stdout, stderr io.Writer) int {
	hosts, status := fleetHostsFor(g, ff, hostsChanged, stderr)
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
	news := follow(fctx, g, hosts, ff.timeout)

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
				return exitPartial
			}
		}
		fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s\n", states)
		return exitTimeout
	}
	for {
		select {
		case <-done:
			return end()
		case n := <-news:
			st := state[n.host]
			switch {
			case n.err != nil:
				fmt.Fprintf(stderr, "9harness wait: %s: %s\n", printable(n.host), printable(n.err.Error()))
				st.c, st.agents, st.down, st.seen = nil, nil, true, true
			case n.c != nil:
				st.c, st.down = n.c, false
				startRead(n.host, st)
			case st.c != nil:
				startRead(n.host, st)
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
				return exitOK
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
			out := newErrWriter(stdout)
			for _, m := range matched {
				fmt.Fprintln(out, fleetWaitLine(m.host, m.agent))
			}
			if out.report(stderr, "wait") {
				return exitError
			}
			return exitOK
		}
		if once && allSeen {
			return end()
		}
	}
}
