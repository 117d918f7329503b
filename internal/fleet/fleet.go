// Package fleet reaches the daemons of several machines at once: this
// one's socket and each host of the hosts file through ssh. It lists
// their agents in parallel (ps --all), follows each host's /active/events
// with reconnection (events --all, wait --all, notify --all, top), and
// holds the text helpers the tables of ps and top share.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// DefaultTimeout is how long a fleet command waits for a host.
const DefaultTimeout = 5 * time.Second

// Flags are a command's flags that make it reach several machines.
type Flags struct {
	All     bool          // this machine and every host of the hosts file
	Hosts   string        // --hosts FILE
	Timeout time.Duration // per host
}

// Dialer is how hosts are reached: this machine's daemon, and the
// command line's ssh settings, which apply to every remote host.
type Dialer struct {
	Local      func() (*client.Client, error) // this machine's daemon
	SSHDests   []string                       // every --ssh, in order
	SSHOptions []string                       // --ssh-opt
	SSHCmd     string                         // --ssh-cmd
	SSHCmdSet  bool                           // --ssh-cmd was given
	NoForward  bool                           // --ssh-forward=no
	ForwardSet bool                           // --ssh-forward was given
}

// Hosts is the machines a fleet command reaches, in the order given:
// this one first with --all, then the hosts file's (with --all or
// --hosts), then each --ssh DEST. An --ssh DEST that the hosts file names
// takes that line's settings. A name given twice counts once.
func (d *Dialer) Hosts(f Flags, hostsChanged bool) ([]client.Host, error) {
	file := f.Hosts
	if !hostsChanged {
		file = client.HostsFile()
	}
	var listed []client.Host
	if file != "" {
		var err error
		listed, err = client.ReadHosts(file, !hostsChanged)
		if err != nil {
			return nil, err
		}
	}
	var out []client.Host
	seen := map[string]bool{}
	add := func(h client.Host) {
		if !seen[h.Name] {
			seen[h.Name] = true
			out = append(out, h)
		}
	}
	if f.All {
		add(client.Host{Name: client.LocalHost})
	}
	if f.All || hostsChanged {
		for _, h := range listed {
			add(h)
		}
	}
	for _, dest := range d.SSHDests {
		h := client.Host{Name: dest, SSH: &client.SSH{Dest: dest}}
		for _, l := range listed {
			if l.Name == dest {
				h = l
			}
		}
		add(h)
	}
	for i, h := range out {
		if h.SSH == nil {
			continue
		}
		s := d.WithFlags(*h.SSH)
		if _, err := s.Argv(); err != nil {
			return nil, err
		}
		out[i].SSH = &s
	}
	return out, nil
}

// WithFlags applies the command line's ssh settings to a remote host:
// its --ssh-opt ahead of the host's own (ssh takes an option's first
// value, so the command line wins), its --ssh-cmd where given or where
// the host names none.
func (d *Dialer) WithFlags(s client.SSH) client.SSH {
	s.Options = append(slices.Clone(d.SSHOptions), s.Options...)
	if s.Command == "" || d.SSHCmdSet {
		s.Command = d.SSHCmd
	}
	if d.ForwardSet {
		s.NoForward = d.NoForward
	}
	return s
}

// Dial reaches one machine's daemon: this one's socket, or ssh. A
// remote host's ssh gives up connecting after timeout (ConnectTimeout,
// after the user's own options, so that theirs wins), and the whole dial
// when ctx ends.
func (d *Dialer) Dial(ctx context.Context, h client.Host, timeout time.Duration) (*client.Client, error) {
	if h.SSH == nil {
		return d.Local()
	}
	s := *h.SSH
	s.ConnectTimeout = timeout
	return client.DialSSH(ctx, s)
}

// Row is one agent of a fleet: its host's name and its facts, as one
// JSON object with "host" first.
type Row struct {
	Host string `json:"host"`
	client.Agent
}

// MarshalJSON puts "host" in front of the agent's own object (the Agent's
// MarshalJSON, promoted, would leave it out).
func (r Row) MarshalJSON() ([]byte, error) {
	host, err := json.Marshal(r.Host)
	if err != nil {
		return nil, err
	}
	agent, err := json.Marshal(r.Agent)
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"host":`), host...)
	if len(agent) > 2 {
		out = append(out, ',')
	}
	return append(out, agent[1:]...), nil
}

// Failure is a host that did not answer, and why.
type Failure struct {
	Host string
	Err  error
}

// Fleet keeps a session per host across queries (ps --watch), and knows
// which hosts are still busy with an earlier one.
type Fleet struct {
	d       *Dialer
	timeout time.Duration
	hosts   []*host

	// Progress, if set, is told during a Query, each time a host has
	// answered (or failed) while others have not: the rows so far, and
	// the hosts still waited for, sorted.
	Progress func(rows []Row, waiting []string)
}

type host struct {
	host client.Host
	mu   sync.Mutex
	c    *client.Client // nil: dial on the next query
	busy bool           // a query of it has not come back yet
}

// New is a fleet of hosts, each asked within timeout.
func New(d *Dialer, hosts []client.Host, timeout time.Duration) *Fleet {
	f := &Fleet{d: d, timeout: timeout}
	for _, h := range hosts {
		f.hosts = append(f.hosts, &host{host: h})
	}
	return f
}

// Len is the number of hosts.
func (f *Fleet) Len() int { return len(f.hosts) }

// Query lists the agents of every host in parallel, each within the
// timeout. A host that does not answer in time is a failure; its query
// goes on aside and is not asked again until it has ended.
func (f *Fleet) Query(harnesses []string) ([]Row, []Failure) {
	type result struct {
		host   string
		agents []client.Agent
		err    error
	}
	results := make(chan result, len(f.hosts))
	pending := map[string]bool{}
	var failed []Failure
	for _, fh := range f.hosts {
		fh.mu.Lock()
		busy := fh.busy
		fh.busy = true
		c := fh.c
		fh.mu.Unlock()
		if busy {
			failed = append(failed, Failure{fh.host.Name, fmt.Errorf("still no answer (more than %v)", f.timeout)})
			continue
		}
		pending[fh.host.Name] = true
		go func(fh *host, c *client.Client) {
			var r result
			r.host = fh.host.Name
			if c == nil {
				// Not given up at the timeout: a host slow to set up
				// answers a later query (ps --watch).
				c, r.err = f.d.Dial(context.Background(), fh.host, f.timeout)
			}
			if r.err == nil {
				r.agents, r.err = c.Agents(harnesses...)
				if r.err != nil && !client.IsWireErrno(r.err) {
					if te := c.TransportError(); te != nil {
						r.err = te
					}
					c.Close()
					c = nil
				}
			}
			fh.mu.Lock()
			fh.c, fh.busy = c, false
			fh.mu.Unlock()
			results <- r
		}(fh, c)
	}
	var rows []Row
	deadline := time.NewTimer(f.timeout)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.host)
			if r.err != nil {
				failed = append(failed, Failure{r.host, HostError(r.err)})
			} else {
				for _, a := range r.agents {
					rows = append(rows, Row{Host: r.host, Agent: a})
				}
			}
			if f.Progress != nil && len(pending) > 0 {
				f.Progress(slices.Clone(rows), slices.Sorted(maps.Keys(pending)))
			}
		case <-deadline.C:
			for h := range pending {
				failed = append(failed, Failure{h, fmt.Errorf("no answer within %v", f.timeout)})
			}
			pending = nil
		}
	}
	slices.SortFunc(failed, func(a, b Failure) int { return strings.Compare(a.Host, b.Host) })
	return rows, failed
}

// Close ends every session that is not busy, in parallel (each waits for
// its ssh to exit). A busy one is left to the process's exit: its ssh gives
// up at ConnectTimeout.
func (f *Fleet) Close() {
	var wg sync.WaitGroup
	for _, fh := range f.hosts {
		fh.mu.Lock()
		c := fh.c
		if !fh.busy {
			fh.c = nil
		} else {
			c = nil
		}
		fh.mu.Unlock()
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// AgentName is the name move takes: HOST:HARNESS/PID, or HARNESS/PID
// on this machine.
func AgentName(r Row) string {
	name := Printable(r.Harness) + "/" + strconv.Itoa(r.PID)
	if r.Host != client.LocalHost {
		name = Printable(r.Host) + ":" + name
	}
	return name
}

// SplitHostAgent reads HOST:HARNESS/PID into the host and the rest; no
// host (no ':' before the first '/') is "".
func SplitHostAgent(s string) (host, agent string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", s
	}
	// A HARNESS/PID has no ':'; a host may ([::1]:22, build1:2222).
	return s[:i], s[i+1:]
}

// HostError is why a host failed, for a line that already names it: ssh's
// (or the remote relay's) last words and its status, not ssh's command.
func HostError(err error) error {
	var ce *client.CommandError
	if errors.As(err, &ce) && ce.LastLine() != "" {
		status := "exited"
		if ce.Err != nil {
			status = ce.Err.Error()
		}
		return fmt.Errorf("%s (ssh %s)", ce.LastLine(), status)
	}
	return Describe(err)
}

// Describe turns a wire errno into the sentence strerror gives.
func Describe(err error) error {
	if e, ok := client.Errno(err); ok {
		return e
	}
	return err
}
