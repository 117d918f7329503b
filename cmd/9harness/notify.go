package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// agentWatch is how wait and ps --notify learn that agents changed: each
// Next returns the live agents as they are once something may have
// changed (the first call at once). eventWatch (events.go) blocks on
// /active/events and then reads the table; tablePoll polls the table, for
// a daemon that has no events file.
type agentWatch interface {
	Next(ctx context.Context) ([]client.Agent, error)
	Close()
}

// pollInterval is how often a poll reads the table: one read of one file
// each, so a quarter second costs the daemon little and a wait returns
// within about that much of the change.
const pollInterval = 250 * time.Millisecond

// tablePoll reads /active/table every interval. A connection that is lost
// (a daemon restarted, or socket-activated again) is dialled again once
// per read; an answer from the daemon (an errno) is returned.
type tablePoll struct {
	g         *cli.Globals
	c         *client.Client
	every     time.Duration
	harnesses []string
	started   bool
}

func newTablePoll(g *cli.Globals, c *client.Client, every time.Duration, harnesses []string) *tablePoll {
	return &tablePoll{g: g, c: c, every: every, harnesses: harnesses}
}

func (p *tablePoll) Next(ctx context.Context) ([]client.Agent, error) {
	if p.started {
		t := time.NewTimer(p.every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	p.started = true
	type result struct {
		c      *client.Client // the connection to keep; nil: dial again
		agents []client.Agent
		err    error
	}
	done := make(chan result, 1)
	// The read runs aside, so that a deadline or a signal is obeyed even
	// while a daemon is slow to answer.
	go func(c *client.Client) {
		if c == nil {
			var err error
			if c, err = p.g.Dial(); err != nil {
				done <- result{err: err}
				return
			}
		}
		a, err := c.Agents(p.harnesses...)
		if err != nil && !client.IsWireErrno(err) {
			// The connection is gone: the next read dials again.
			c.Close()
			c = nil
		}
		done <- result{c, a, err}
	}(p.c)
	p.c = nil
	select {
	case <-ctx.Done():
		// The read finishes aside; its connection is not kept.
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	case r := <-done:
		p.c = r.c
		if r.err != nil {
			return nil, fleet.Describe(r.err)
		}
		return r.agents, nil
	}
}

func (p *tablePoll) Close() {
	if p.c != nil {
		p.c.Close()
	}
}

// agentKey names one agent for as long as it lives: a pid that is reused
// is another agent, with another start time.
type agentKey struct {
	harness string
	pid     int
	started int64
}

func keyOf(a client.Agent) agentKey { return agentKey{a.Harness, a.PID, a.Started} }

// waitNotices tracks which agents are waiting, to announce each wait once.
type waitNotices struct {
	waiting map[agentKey]aWait
}

// aWait is one wait: what it is for, and when it began ("" where the
// harness does not say).
type aWait struct{ what, since string }

// changes returns the agents that started waiting since the last call (at
// the first call, every waiting agent), in the table's order. An agent
// still waiting for the same thing is not returned again; one that waits
// for something else (a second permission, asked before the poll saw it
// work) is, and so is one that worked or went idle and waits again. A wait
// whose start is unchanged is the same wait even if what it is for is now
// told better: Claude's registry says "permission prompt" a moment before
// its transcript names the tool ("approve Bash"), and one prompt is one
// notice.
func (n *waitNotices) changes(agents []client.Agent) []client.Agent {
	now := map[agentKey]aWait{}
	var out []client.Agent
	for _, a := range agents {
		if a.State != "waiting" {
			continue
		}
		k := keyOf(a)
		now[k] = aWait{a.Waiting, a.Since}
		w, ok := n.waiting[k]
		if !ok || (w.what != a.Waiting && (a.Since == "" || w.since != a.Since)) {
			out = append(out, a)
		}
	}
	n.waiting = now
	return out
}

// notifyCmdEnv is the environment of --notify's command: the caller's, less
// any HARNESS_ variable of its own, and the agent's facts, made printable
// (a title is text anyone who can name a session chose).
func notifyCmdEnv(base []string, a client.Agent, host string) []string {
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "HARNESS_") {
			env = append(env, kv)
		}
	}
	for _, kv := range [][2]string{
		{"HARNESS_NAME", a.Harness},
		{"HARNESS_PID", strconv.Itoa(a.PID)},
		{"HARNESS_STATE", a.State},
		{"HARNESS_WAITING", a.Waiting},
		{"HARNESS_CWD", a.Cwd},
		{"HARNESS_TITLE", a.Title},
		{"HARNESS_HOST", host},
	} {
		env = append(env, kv[0]+"="+fleet.Printable(kv[1]))
	}
	return env
}

// notifyHost is HARNESS_HOST: the --ssh destination, or this machine's
// short name.
func notifyHost(g *cli.Globals) string {
	if g.Remote() {
		return g.SSHDest
	}
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	return h
}

// maxNotifying bounds the commands that run at once; more wait their turn.
const maxNotifying = 8

// notifier runs --notify's command for each agent that starts waiting.
type notifier struct {
	cmd    string
	host   string
	output io.Writer // the commands' standard output and error
	report func(string)
	slots  chan struct{}
	wg     sync.WaitGroup
}

func newNotifier(cmd, host string, output io.Writer, report func(string)) *notifier {
	return &notifier{cmd: cmd, host: host, output: output, report: report, slots: make(chan struct{}, maxNotifying)}
}

// run starts the command for a, without waiting for it: a slow command
// does not hold up the watch. The agent's facts are only in the
// environment: CMD is the one word the shell parses.
func (n *notifier) run(a client.Agent) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.slots <- struct{}{}
		defer func() { <-n.slots }()
		cmd := exec.Command("/bin/sh", "-c", n.cmd)
		cmd.Env = notifyCmdEnv(os.Environ(), a, n.host)
		cmd.Stdout, cmd.Stderr = n.output, n.output
		if err := cmd.Run(); err != nil {
			n.report(fmt.Sprintf("9harness ps: --notify for %s/%d: %v", fleet.Printable(a.Harness), a.PID, err))
		}
	}()
}

// notifyLoop follows the watch until ctx ends, running the command for each agent
// that starts waiting; failures go to report, each once in a row, and ""
// when the daemon answers again.
func notifyLoop(ctx context.Context, w agentWatch, n *notifier, report func(string)) {
	var seen waitNotices
	last := ""
	for {
		agents, err := w.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := "9harness ps: " + err.Error(); msg != last {
				report(msg)
				last = msg
			}
			continue
		}
		if last != "" {
			report("")
			last = ""
		}
		for _, a := range seen.changes(agents) {
			n.run(a)
		}
	}
}

// watchNotify is ps --watch --notify CMD: on a terminal the table is
// redrawn as by --watch while a second connection follows the agents that
// start waiting; off a terminal only the polling runs, until a signal.
func watchNotify(g *cli.Globals, c *client.Client, o psOptions, home string, term *os.File, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := notifyHost(g)
	if term != nil {
		var mu sync.Mutex
		note := ""
		report := func(s string) {
			mu.Lock()
			note = s
			mu.Unlock()
		}
		n := newNotifier(o.notify, host, io.Discard, report)
		w := newEventWatch(g, nil, o.harnesses)
		go func() {
			notifyLoop(ctx, w, n, report)
			w.Close()
		}()
		status := watchPs(g, c, o, home, term, func() string {
			mu.Lock()
			defer mu.Unlock()
			return note
		})
		cancel()
		return status
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		cancel()
	}()
	var mu sync.Mutex
	report := func(s string) {
		if s == "" {
			return // the daemon answers again: nothing to say
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stderr, s)
	}
	n := newNotifier(o.notify, host, stderr, report)
	w := newEventWatch(g, c, o.harnesses)
	defer w.Close()
	notifyLoop(ctx, w, n, report)
	// The commands already started finish: a notification is not cut off.
	n.wg.Wait()
	return cli.ExitOK
}
