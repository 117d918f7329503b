package cli

import (
	"context"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// FleetTables follows several hosts' events (fleet.Follow) and reads a
// host's table when it comes up and after each line of its events: one
// read at a time per host, and one more after it if lines came meanwhile.
// It is how wait --all and notify learn what each host's agents are.
type FleetTables struct {
	news      <-chan fleet.News
	reads     chan HostTable
	hosts     map[string]*tableHost
	harnesses []string
}

// HostTable is news of one host: it went down (Err), it answers again
// after being down (Back), or its table as read at At.
type HostTable struct {
	Host   string
	Agents []client.Agent
	At     time.Time
	Err    error
	Back   bool
}

// tableHost is what FleetTables keeps of a host.
type tableHost struct {
	c       *client.Client
	down    bool
	reading bool // a read is out
	dirty   bool // a line came while it was
}

// NewFleetTables follows hosts until ctx ends, each reached through g's
// dialer within timeout; a table holds the agents of harnesses (nil: all).
func NewFleetTables(ctx context.Context, g *Globals, hosts []client.Host, timeout time.Duration, harnesses []string) *FleetTables {
	t := &FleetTables{
		news:      fleet.Follow(ctx, g.Dialer(), hosts, timeout),
		reads:     make(chan HostTable, len(hosts)),
		hosts:     map[string]*tableHost{},
		harnesses: harnesses,
	}
	for _, h := range hosts {
		t.hosts[h.Name] = &tableHost{}
	}
	return t
}

// Next is the next news of a host; false once done is closed (a nil done:
// never). A read that fails is not news: the host's stream ends too, and
// that is reported as the host going down.
func (t *FleetTables) Next(done <-chan struct{}) (HostTable, bool) {
	for {
		select {
		case <-done:
			return HostTable{}, false
		case n := <-t.news:
			h := t.hosts[n.Host]
			switch {
			case n.Err != nil:
				h.c, h.down = nil, true
				return HostTable{Host: n.Host, Err: n.Err}, true
			case n.C != nil:
				back := h.down
				h.c, h.down = n.C, false
				t.read(n.Host, h)
				if back {
					return HostTable{Host: n.Host, Back: true}, true
				}
			case h.c != nil:
				t.read(n.Host, h)
			}
		case r := <-t.reads:
			h := t.hosts[r.Host]
			h.reading = false
			if h.dirty && h.c != nil {
				t.read(r.Host, h)
			}
			if r.Err == nil && !h.down {
				return r, true
			}
		}
	}
}

// read reads host's table in the background, unless a read is out
// already: then it asks for one more after it.
func (t *FleetTables) read(host string, h *tableHost) {
	if h.reading {
		h.dirty = true
		return
	}
	h.reading, h.dirty = true, false
	go func(c *client.Client) {
		a, err := c.Agents(t.harnesses...)
		t.reads <- HostTable{Host: host, Agents: a, At: time.Now(), Err: err}
	}(h.c)
}
