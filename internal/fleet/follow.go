package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// EventsPath is the daemon's stream of changes.
const EventsPath = client.ActiveRoot + "/events"

// Event is one line of /active/events, as events --json prints it.
type Event struct {
	Time    string `json:"time"`
	Harness string `json:"harness"`
	PID     int    `json:"pid"`
	Event   string `json:"event"`
	What    string `json:"what,omitempty"`
}

// ParseEvent reads TIME HARNESS PID EVENT [WHAT]; a lost line has "-" for
// harness and pid (pid 0).
func ParseEvent(s string) (Event, bool) {
	f := strings.SplitN(s, " ", 5)
	if len(f) < 4 {
		return Event{}, false
	}
	e := Event{Time: f[0], Harness: f[1], Event: f[3]}
	if f[2] != "-" {
		pid, err := strconv.Atoi(f[2])
		if err != nil {
			return Event{}, false
		}
		e.PID = pid
	}
	if len(f) == 5 {
		e.What = f[4]
	}
	return e, true
}

// OpenEvents opens the stream, saying plainly when the daemon has none.
func OpenEvents(c *client.Client) (*client.Reader, error) {
	r, err := c.Open(EventsPath)
	if client.IsErrno(err, syscall.ENOENT) {
		return nil, fmt.Errorf("the daemon has no %s (is it older than this client?)", EventsPath)
	}
	if err != nil {
		return nil, Describe(err)
	}
	return r, nil
}

// The backoff between a host's reconnections: a host that is down is
// asked again soon, and then less and less often.
const (
	MinBackoff = time.Second
	MaxBackoff = 30 * time.Second
)

// News is what following a host says: a line of its /active/events,
// or that it came up (C set: its session, for reading its table) or went
// down (Err set).
type News struct {
	Host string
	Line string
	C    *client.Client
	Err  error
}

// FollowHost keeps host h's /active/events open until ctx ends, and says
// on news when it is up, each line, and when it is down. An attempt that
// does not connect within timeout is reported down then (the attempt is
// waited for: ssh gives up by its ConnectTimeout); a down is said once
// per outage. After a failure it dials again, after MinBackoff doubling
// up to MaxBackoff, and after MinBackoff again once a stream has lasted
// MaxBackoff. What changed on the host while it was down is not seen: the
// daemon keeps no history.
func FollowHost(ctx context.Context, d *Dialer, h client.Host, timeout time.Duration, news chan<- News) {
	send := func(n News) bool {
		n.Host = h.Name
		select {
		case news <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	h = keepAlive(h, timeout)
	backoff := MinBackoff
	down := false
	for {
		attempt := dialEvents(ctx, d, h, timeout)
		// An attempt ctx gives up on ends aside; its session is closed.
		abandon := func() {
			go func() {
				if s := <-attempt; s.c != nil {
					s.c.Close()
				}
			}()
		}
		var s eventSession
		timer := time.NewTimer(timeout)
		select {
		case s = <-attempt:
		case <-timer.C:
			if !down {
				down = true
				if !send(News{Err: fmt.Errorf("no answer within %v", timeout)}) {
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
			if time.Since(began) >= MaxBackoff {
				backoff = MinBackoff
			}
		}
		if !down {
			down = true
			if !send(News{Err: s.err}) {
				return
			}
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// keepAlive is h with ssh's keepalives on, so that a host whose network
// goes silent mid-stream is noticed after about three timeouts.
func keepAlive(h client.Host, timeout time.Duration) client.Host {
	if h.SSH != nil {
		s := *h.SSH
		secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
		s.Options = append(slices.Clone(s.Options), "ServerAliveInterval="+secs, "ServerAliveCountMax=2")
		h.SSH = &s
	}
	return h
}

// eventSession is a session with its events stream open, or why there
// is none.
type eventSession struct {
	c   *client.Client
	r   *client.Reader
	err error
}

// dialEvents dials h and opens its events stream in the background, until
// ctx ends; the outcome arrives on the channel.
func dialEvents(ctx context.Context, d *Dialer, h client.Host, timeout time.Duration) <-chan eventSession {
	attempt := make(chan eventSession, 1)
	go func() {
		c, err := d.Dial(ctx, h, timeout)
		if err != nil {
			attempt <- eventSession{err: HostError(err)}
			return
		}
		stop := context.AfterFunc(ctx, c.Hangup) // a hung host's open
		r, err := OpenEvents(c)
		stop()
		if err != nil {
			c.Close()
			err = HostError(err)
		}
		attempt <- eventSession{c: c, r: r, err: err}
	}()
	return attempt
}

// streamHost says the host is up and passes on each line of its stream
// until the stream or ctx ends; it closes the session, and says why the
// stream ended.
func streamHost(ctx context.Context, c *client.Client, r *client.Reader, send func(News) bool) error {
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
		}
		c.Close() // ends a read that waits
	}()
	if !send(News{C: c}) {
		return ctx.Err()
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if !send(News{Line: sc.Text()}) {
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
	return HostError(err)
}

// Follow starts following every host; the news of them all arrives on the
// channel it returns, until ctx ends.
func Follow(ctx context.Context, d *Dialer, hosts []client.Host, timeout time.Duration) <-chan News {
	news := make(chan News, 64)
	for _, h := range hosts {
		go FollowHost(ctx, d, h, timeout, news)
	}
	return news
}
