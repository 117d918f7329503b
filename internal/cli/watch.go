package cli

import (
	"bufio"
	"context"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// eventStream is /active/events read on a connection of its own: each
// line read is a signal on changed. It ends (err set, changed closed)
// when the connection does.
type eventStream struct {
	c       *client.Client
	changed chan struct{}
	err     error
}

func startEventStream(g *Globals) (*eventStream, error) {
	c, err := g.Dial()
	if err != nil {
		return nil, err
	}
	r, err := fleet.OpenEvents(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &eventStream{c: c, changed: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case s.changed <- struct{}{}:
			default: // one signal stands for any number of lines
			}
		}
		s.err = sc.Err()
		close(s.changed)
	}()
	return s, nil
}

func (s *eventStream) close() { s.c.Close() }

// EventWatch is the AgentWatch that follows /active/events: the table is
// read once, and again after each change the daemon reports. The stream
// is opened before the first table is read, so a change between the two
// is not missed. Without a stream (an older daemon, or a lost connection)
// it polls, and tries the stream again at the next change.
type EventWatch struct {
	g       *Globals
	table   *TablePoll
	stream  *eventStream
	started bool
}

func (w *EventWatch) Next(ctx context.Context) ([]client.Agent, error) {
	if w.started {
		if err := w.await(ctx); err != nil {
			return nil, err
		}
	}
	w.started = true
	if w.stream == nil {
		w.stream, _ = startEventStream(w.g) // nil: poll
	}
	return w.table.Next(ctx)
}

// await returns once something may have changed.
func (w *EventWatch) await(ctx context.Context) error {
	if w.stream == nil {
		t := time.NewTimer(pollInterval)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case _, ok := <-w.stream.changed:
		if !ok {
			// The stream ended: read the table now, and open it again.
			w.stream.close()
			w.stream = nil
		}
		return nil
	}
}

func (w *EventWatch) Close() {
	if w.stream != nil {
		w.stream.close()
	}
	w.table.Close()
}

// AgentWatch is how wait and ps --notify learn that agents changed: each
// Next returns the live agents as they are once something may have
// changed (the first call at once). EventWatch blocks on
// /active/events and then reads the table; TablePoll polls the table, for
// a daemon that has no events file.
type AgentWatch interface {
	Next(ctx context.Context) ([]client.Agent, error)
	Close()
}

// TablePoll reads /active/table every interval. A connection that is lost
// (a daemon restarted, or socket-activated again) is dialled again once
// per read; an answer from the daemon (an errno) is returned.
type TablePoll struct {
	g         *Globals
	c         *client.Client
	every     time.Duration
	harnesses []string
	started   bool
}

func NewTablePoll(g *Globals, c *client.Client, every time.Duration, harnesses []string) *TablePoll {
	return &TablePoll{g: g, c: c, every: every, harnesses: harnesses}
}

func (p *TablePoll) Next(ctx context.Context) ([]client.Agent, error) {
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

func (p *TablePoll) Close() {
	if p.c != nil {
		p.c.Close()
	}
}

// AgentKey names one agent for as long as it lives: a pid that is reused
// is another agent, with another start time.
type AgentKey struct {
	Harness string
	PID     int
	Started int64
}

func KeyOf(a client.Agent) AgentKey { return AgentKey{a.Harness, a.PID, a.Started} }

func NewEventWatch(g *Globals, c *client.Client, harnesses []string) *EventWatch {
	return &EventWatch{g: g, table: NewTablePoll(g, c, 0, harnesses)}
}

// pollInterval is how often a poll reads the table: one read of one file
// each, so a quarter second costs the daemon little and a wait returns
// within about that much of the change.
const pollInterval = 250 * time.Millisecond
