package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// defaultHostTimeout is how long ps waits for a host of a fleet.
const defaultHostTimeout = 5 * time.Second

// fleetFlags are ps's flags that make it list several machines.
type fleetFlags struct {
	all     bool          // this machine and every host of the hosts file
	hosts   string        // --hosts FILE
	timeout time.Duration // per host
}

// fleetHosts is the machines a fleet command reaches, in the order given:
// this one first with --all, then the hosts file's (with --all or
// --hosts), then each --ssh DEST. An --ssh DEST that the hosts file names
// takes that line's settings. A name given twice counts once.
func fleetHosts(g *globals, f fleetFlags, hostsChanged bool) ([]client.Host, error) {
	file := f.hosts
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
	if f.all {
		add(client.Host{Name: client.LocalHost})
	}
	if f.all || hostsChanged {
		for _, h := range listed {
			add(h)
		}
	}
	for _, d := range g.sshDests {
		h := client.Host{Name: d, SSH: &client.SSH{Dest: d}}
		for _, l := range listed {
			if l.Name == d {
				h = l
			}
		}
		add(h)
	}
	for i, h := range out {
		if h.SSH == nil {
			continue
		}
		s := withFlags(g, *h.SSH)
		if _, err := s.Argv(); err != nil {
			return nil, err
		}
		out[i].SSH = &s
	}
	return out, nil
}

// withFlags applies the command line's ssh settings to a remote host:
// its --ssh-opt ahead of the host's own (ssh takes an option's first
// value, so the command line wins), its --ssh-cmd where given or where
// the host names none.
func withFlags(g *globals, s client.SSH) client.SSH {
	s.Options = append(slices.Clone(g.sshOptions), s.Options...)
	if s.Command == "" || g.flags.Changed("ssh-cmd") {
		s.Command = g.sshCmd
	}
	if g.flags.Changed("ssh-forward") {
		s.NoForward = g.noForward
	}
	return s
}

// dialHost reaches one machine's daemon: this one's socket, or ssh. A
// remote host's ssh gives up connecting after timeout (ConnectTimeout,
// after the user's own options, so that theirs wins).
func dialHost(g *globals, h client.Host, timeout time.Duration) (*client.Client, error) {
	if h.SSH == nil {
		local := *g
		local.sshDest = ""
		return local.dial()
	}
	s := *h.SSH
	s.ConnectTimeout = timeout
	return client.DialSSH(s)
}

// fleetRow is one agent of a fleet: its host's name and its facts, as one
// JSON object with "host" first.
type fleetRow struct {
	Host string `json:"host"`
	client.Agent
}

// MarshalJSON puts "host" in front of the agent's own object (the Agent's
// MarshalJSON, promoted, would leave it out).
func (r fleetRow) MarshalJSON() ([]byte, error) {
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

// hostFailure is a host that did not answer, and why.
type hostFailure struct {
	host string
	err  error
}

// fleet keeps a session per host across queries (ps --watch), and knows
// which hosts are still busy with an earlier one.
type fleet struct {
	g       *globals
	timeout time.Duration
	hosts   []*fleetHost
}

type fleetHost struct {
	host client.Host
	mu   sync.Mutex
	c    *client.Client // nil: dial on the next query
	busy bool           // a query of it has not come back yet
}

func newFleet(g *globals, hosts []client.Host, timeout time.Duration) *fleet {
	f := &fleet{g: g, timeout: timeout}
	for _, h := range hosts {
		f.hosts = append(f.hosts, &fleetHost{host: h})
	}
	return f
}

// query lists the agents of every host in parallel, each within the
// timeout. A host that does not answer in time is a failure; its query
// goes on aside and is not asked again until it has ended.
func (f *fleet) query(harnesses []string) ([]fleetRow, []hostFailure) {
	type result struct {
		host   string
		agents []client.Agent
		err    error
	}
	results := make(chan result, len(f.hosts))
	pending := map[string]bool{}
	var failed []hostFailure
	for _, fh := range f.hosts {
		fh.mu.Lock()
		busy := fh.busy
		fh.busy = true
		c := fh.c
		fh.mu.Unlock()
		if busy {
			failed = append(failed, hostFailure{fh.host.Name, fmt.Errorf("still no answer (more than %v)", f.timeout)})
			continue
		}
		pending[fh.host.Name] = true
		go func(fh *fleetHost, c *client.Client) {
			var r result
			r.host = fh.host.Name
			if c == nil {
				c, r.err = dialHost(f.g, fh.host, f.timeout)
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
	var rows []fleetRow
	deadline := time.NewTimer(f.timeout)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.host)
			if r.err != nil {
				failed = append(failed, hostFailure{r.host, hostError(r.err)})
				continue
			}
			for _, a := range r.agents {
				rows = append(rows, fleetRow{Host: r.host, Agent: a})
			}
		case <-deadline.C:
			for h := range pending {
				failed = append(failed, hostFailure{h, fmt.Errorf("no answer within %v", f.timeout)})
			}
			pending = nil
		}
	}
	slices.SortFunc(failed, func(a, b hostFailure) int { return strings.Compare(a.host, b.host) })
	return rows, failed
}

// close ends every session that is not busy, in parallel (each waits for
// its ssh to exit). A busy one is left to the process's exit: its ssh gives
// up at ConnectTimeout.
func (f *fleet) close() {
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

// sortFleet orders the rows by host, then as --sort says (harness, then
// pid, by default); reverse reverses the whole order.
func sortFleet(rows []fleetRow, key string, reverse bool) {
	by := psSortKeys[key]
	if by == nil {
		by = psSortKeys["harness"]
	}
	slices.SortStableFunc(rows, func(a, b fleetRow) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), by(a.Agent, b.Agent),
			cmp.Compare(a.Harness, b.Harness), cmp.Compare(a.PID, b.PID))
	})
	if reverse {
		slices.Reverse(rows)
	}
}

// fleetTable is the ps table with a HOST column first. This machine's
// working directories show $HOME as ~; a remote one's are as they are.
func fleetTable(rows []fleetRow, now time.Time, home string, lay psLayout) []string {
	hostW := textWidth("HOST")
	agents := make([]client.Agent, len(rows))
	for i, r := range rows {
		hostW = max(hostW, textWidth(printable(r.Host)))
		agents[i] = r.Agent
		if r.Host == client.LocalHost {
			agents[i].Cwd = shortHome(r.Cwd, home)
		}
	}
	if lay.width > 0 {
		lay.width = max(lay.width-hostW-len(colGap), 1)
	}
	lines := psTable(agents, now, "", lay)
	hosts := make([]string, 0, len(lines))
	if !lay.noHeader {
		hosts = append(hosts, "HOST")
	}
	for _, r := range rows {
		hosts = append(hosts, printable(r.Host))
	}
	for i, l := range lines {
		h := hosts[i]
		lines[i] = h + strings.Repeat(" ", hostW-textWidth(h)) + colGap + l
	}
	return lines
}

// runFleetPs is ps over several machines: one table (or JSON array) of
// them all; a host that fails is one line on stderr, and the status is
// exitPartial.
func runFleetPs(g *globals, o psOptions, ff fleetFlags, hostsChanged bool, term *os.File, stdout, stderr io.Writer) int {
	if g.flags.Changed("aname") {
		fmt.Fprintln(stderr, "9harness ps: --aname is for ls, cat and stat on a local socket")
		return exitUsage
	}
	hosts, err := fleetHosts(g, ff, hostsChanged)
	if err != nil {
		fmt.Fprintf(stderr, "9harness ps: %v\n", err)
		return exitUsage
	}
	if len(hosts) == 0 {
		fmt.Fprintln(stderr, "9harness ps: no hosts: the hosts file lists none, and no --ssh DEST was given")
		return exitUsage
	}
	home := os.Getenv("HOME")
	f := newFleet(g, hosts, ff.timeout)
	if o.watch {
		return watchFleet(f, o, home, term)
	}
	rows, failed := f.query(o.harnesses)
	rows = o.keepRows(rows)
	// The sessions end after the output is written: each waits for its
	// ssh to exit, which the reader need not wait for.
	defer f.close()
	for _, h := range failed {
		fmt.Fprintf(stderr, "9harness ps: %s: %s\n", printable(h.host), printable(h.err.Error()))
	}
	sortFleet(rows, o.sortKey, o.reverse)
	if rows == nil {
		rows = []fleetRow{}
	}
	agents := make([]client.Agent, len(rows))
	for i, r := range rows {
		agents[i] = r.Agent
	}
	status := psListing{
		agents: agents,
		json:   rows,
		name:   func(i int) string { return fleetAgentName(rows[i]) },
		host:   func(i int) string { return printable(rows[i].Host) },
		table:  func(lay psLayout) []string { return fleetTable(rows, time.Now(), home, lay) },
	}.print(o, term, stdout, stderr)
	if status != exitOK {
		return status
	}
	switch {
	case len(failed) == 0:
		return exitOK
	case len(failed) == len(hosts):
		return exitError
	}
	return exitPartial
}

// fleetAgentName is the name move takes: HOST:HARNESS/PID, or HARNESS/PID
// on this machine.
func fleetAgentName(r fleetRow) string {
	name := printable(r.Harness) + "/" + strconv.Itoa(r.PID)
	if r.Host != client.LocalHost {
		name = printable(r.Host) + ":" + name
	}
	return name
}

// watchFleet redraws the fleet's table every second, as watchPs does for
// one machine; the hosts that did not answer are listed under the title.
func watchFleet(f *fleet, o psOptions, home string, term *os.File) int {
	defer f.close()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	io.WriteString(term, hideCursor+cursorHome+clearScreen)
	title := "Every " + o.period().String() + ": 9harness ps (" + strconv.Itoa(len(f.hosts)) + " hosts)"
	type answer struct {
		rows   []fleetRow
		failed []hostFailure
	}
	for {
		done := make(chan answer, 1)
		go func() {
			rows, failed := f.query(o.harnesses)
			done <- answer{o.keepRows(rows), failed}
		}()
		a, ok := awaitFrame(done, sigs, term)
		if !ok {
			return exitOK
		}
		cols, rows := termSize(term)
		now := time.Now()
		lines := []string{title}
		for _, h := range a.failed {
			lines = append(lines, printable(h.host)+": "+printable(h.err.Error()))
		}
		lines = append(lines, "")
		sortFleet(a.rows, o.sortKey, o.reverse)
		lay := psLayout{width: cols, wide: o.wide, noHeader: o.noHeader}
		if o.noTrunc {
			lay.width = 0
		}
		lines = append(lines, fleetTable(a.rows, now, home, lay)...)
		drawFrame(term, lines, now, cols, rows)
		select {
		case s := <-sigs:
			if s != syscall.SIGWINCH {
				io.WriteString(term, "\r"+clearLine+showCursor)
				return exitOK
			}
		case <-time.After(o.period()):
		}
	}
}

// splitHostAgent reads HOST:HARNESS/PID into the host and the rest; no
// host (no ':' before the first '/') is "".
func splitHostAgent(s string) (host, agent string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", s
	}
	// A HARNESS/PID has no ':'; a host may ([::1]:22, build1:2222).
	return s[:i], s[i+1:]
}

// dialNamedHost reaches the host a command names (HOST:HARNESS/PID): the
// hosts file's line of that name, or else the name as an ssh destination
// ([user@]host[:port]); also its ssh destination. A failure is printed;
// the status says which.
func dialNamedHost(g *globals, name, file string, fileChanged bool, stderr io.Writer) (*client.Client, string, int) {
	fail := func(status int, err error) (*client.Client, string, int) {
		fmt.Fprintf(stderr, "9harness %s: %v\n", g.cmd, err)
		return nil, "", status
	}
	if !fileChanged {
		file = client.HostsFile()
	}
	var h *client.Host
	if file != "" {
		listed, err := client.ReadHosts(file, !fileChanged)
		if err != nil {
			return fail(exitUsage, err)
		}
		for i := range listed {
			if listed[i].Name == name {
				h = &listed[i]
			}
		}
	}
	if h == nil {
		s, err := client.ParseDest(name)
		if err != nil {
			return fail(exitUsage, err)
		}
		h = &client.Host{Name: name, SSH: &s}
	}
	c, err := client.DialSSH(withFlags(g, *h.SSH))
	if err != nil {
		return fail(exitError, fmt.Errorf("%s: %v", name, err))
	}
	return c, h.SSH.Dest, exitOK
}

// hostError is why a host failed, for a line that already names it: ssh's
// (or the remote relay's) last words and its status, not ssh's command.
func hostError(err error) error {
	var ce *client.CommandError
	if errors.As(err, &ce) && ce.LastLine() != "" {
		status := "exited"
		if ce.Err != nil {
			status = ce.Err.Error()
		}
		return fmt.Errorf("%s (ssh %s)", ce.LastLine(), status)
	}
	return describe(err)
}
