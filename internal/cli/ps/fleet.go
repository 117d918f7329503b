package ps

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// sortFleet orders the rows by host, then as --sort says (harness, then
// pid, by default); reverse reverses the whole order.
func sortFleet(rows []fleet.Row, key string, reverse bool) {
	by := psSortKeys[key]
	if by == nil {
		by = psSortKeys["harness"]
	}
	slices.SortStableFunc(rows, func(a, b fleet.Row) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), by(a.Agent, b.Agent),
			cmp.Compare(a.Harness, b.Harness), cmp.Compare(a.PID, b.PID))
	})
	if reverse {
		slices.Reverse(rows)
	}
}

// fleetTable is the ps table with a HOST column first. This machine's
// working directories show $HOME as ~; a remote one's are as they are.
func fleetTable(rows []fleet.Row, now time.Time, home string, lay psLayout) []string {
	hostW := fleet.TextWidth("HOST")
	agents := make([]client.Agent, len(rows))
	for i, r := range rows {
		hostW = max(hostW, fleet.TextWidth(fleet.Printable(r.Host)))
		agents[i] = r.Agent
		if r.Host == client.LocalHost {
			agents[i].Cwd = fleet.ShortHome(r.Cwd, home)
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
		hosts = append(hosts, fleet.Printable(r.Host))
	}
	for i, l := range lines {
		h := hosts[i]
		lines[i] = h + strings.Repeat(" ", hostW-fleet.TextWidth(h)) + colGap + l
	}
	return lines
}

// runFleetPs is ps over several machines: one table (or JSON array) of
// them all; a host that fails is one line on stderr, and the status is
// exitPartial.
func runFleetPs(g *cli.Globals, o psOptions, ff fleet.Flags, hostsChanged bool, term *os.File, stdout, stderr io.Writer) int {
	if g.Flags.Changed("aname") {
		fmt.Fprintln(stderr, "9harness ps: --aname is for ls, cat and stat on a local socket")
		return cli.ExitUsage
	}
	hosts, status := cli.FleetHosts(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return status
	}
	home := os.Getenv("HOME")
	f := fleet.New(g.Dialer(), hosts, ff.Timeout)
	if o.watch {
		return watchFleet(f, o, home, term)
	}
	var p *progress
	if term != nil && len(hosts) > 1 {
		p = startProgress(f, hosts, ff.Timeout, o, home, term)
	}
	rows, failed := f.Query(o.harnesses)
	if p != nil {
		p.stop()
	}
	rows = o.keepRows(rows)
	// The sessions end after the output is written: each waits for its
	// ssh to exit, which the reader need not wait for.
	defer f.Close()
	for _, h := range failed {
		fmt.Fprintf(stderr, "9harness ps: %s: %s\n", fleet.Printable(h.Host), fleet.Printable(h.Err.Error()))
	}
	sortFleet(rows, o.sortKey, o.reverse)
	if rows == nil {
		rows = []fleet.Row{}
	}
	agents := make([]client.Agent, len(rows))
	for i, r := range rows {
		agents[i] = r.Agent
	}
	status = psListing{
		agents: agents,
		json:   rows,
		name:   func(i int) string { return fleet.AgentName(rows[i]) },
		host:   func(i int) string { return fleet.Printable(rows[i].Host) },
		table:  func(lay psLayout) []string { return fleetTable(rows, time.Now(), home, lay) },
	}.print(o, term, stdout, stderr)
	if status != cli.ExitOK {
		return status
	}
	switch {
	case len(failed) == 0:
		return cli.ExitOK
	case len(failed) == len(hosts):
		return cli.ExitError
	}
	return cli.ExitPartial
}

// watchFleet redraws the fleet's table every second, as watchPs does for
// one machine; the hosts that did not answer are listed under the title.
func watchFleet(f *fleet.Fleet, o psOptions, home string, term *os.File) int {
	defer f.Close()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	io.WriteString(term, hideCursor+cursorHome+clearScreen)
	title := "Every " + o.period().String() + ": 9harness ps (" + strconv.Itoa(f.Len()) + " hosts)"
	type answer struct {
		rows   []fleet.Row
		failed []fleet.Failure
	}
	for {
		done := make(chan answer, 1)
		go func() {
			rows, failed := f.Query(o.harnesses)
			done <- answer{o.keepRows(rows), failed}
		}()
		a, ok := awaitFrame(done, sigs, term)
		if !ok {
			return cli.ExitOK
		}
		cols, rows := fleet.TermSize(term)
		now := time.Now()
		lines := []string{title}
		for _, h := range a.failed {
			lines = append(lines, fleet.Printable(h.Host)+": "+fleet.Printable(h.Err.Error()))
		}
		lines = append(lines, "")
		sortFleet(a.rows, o.sortKey, o.reverse)
		lines = append(lines, fleetTable(a.rows, now, home, o.layout(cols))...)
		drawFrame(term, lines, now, cols, rows)
		if !untilNext(sigs, term, time.After(o.period())) {
			return cli.ExitOK
		}
	}
}
