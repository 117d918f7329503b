package ps

import (
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// Terminal control for --watch.
const (
	cursorHome  = "\x1b[H"
	clearScreen = "\x1b[2J"
	clearLine   = "\x1b[2K"
	clearBelow  = "\x1b[J"
	hideCursor  = "\x1b[?25l"
	showCursor  = "\x1b[?25h"
)

// watchPs redraws the table every second, as watch(1) does: the cursor
// goes home and each line is overwritten in place (no clear of the whole
// screen, so nothing flickers). A lost daemon is shown in the frame and
// dialled again on the next tick. Ctrl-C (or SIGTERM, SIGHUP) restores
// the cursor and exits 0. note, if set, is a line shown under the title
// (what went wrong with --notify).
func watchPs(g *cli.Globals, c *client.Client, o psOptions, home string, term *os.File, note func() string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	io.WriteString(term, hideCursor+cursorHome+clearScreen)
	title := "Every " + o.period().String() + ": 9harness ps"
	if len(o.harnesses) > 0 {
		title += " --harness " + strings.Join(o.harnesses, ",")
	}
	if o.notify != "" {
		title += " --notify …"
	}
	type result struct {
		agents []client.Agent
		err    error
	}
	tick := time.NewTicker(o.period())
	defer tick.Stop()
	var dialErr error
	for {
		// The read runs aside, so that Ctrl-C is obeyed even while a
		// daemon is slow to answer.
		done := make(chan result, 1)
		go func(c *client.Client) {
			if c == nil {
				done <- result{err: dialErr}
				return
			}
			a, err := c.Agents(o.harnesses...)
			done <- result{a, err}
		}(c)
		r, ok := awaitFrame(done, sigs, term)
		if !ok {
			return 0
		}
		cols, rows := fleet.TermSize(term)
		now := time.Now()
		lines := []string{title, ""}
		if note != nil {
			lines[1] = fleet.Printable(note())
		}
		if r.err != nil {
			lines = append(lines, "9harness ps: "+fleet.Printable(fleet.Describe(r.err).Error()))
			if c != nil && !client.IsWireErrno(r.err) {
				// The connection is gone: dial again on the next tick.
				c.Close()
				c = nil
			}
		} else {
			r.agents = o.keep(r.agents)
			sortAgents(r.agents, o.sortKey, o.reverse)
			lines = append(lines, psTable(r.agents, now, home, o.layout(cols))...)
		}
		drawFrame(term, lines, now, cols, rows)
		if !untilNext(sigs, term, tick.C) {
			if c != nil {
				c.Close()
			}
			return 0
		}
		if c == nil {
			c, dialErr = g.Dial()
		}
	}
}

// drawFrame draws one frame of a --watch over the last: lines[0] is the
// title, which gets the clock at the right edge; every line is cut at the
// edge, and the last row stays free for the cursor, so nothing scrolls.
func drawFrame(term io.Writer, lines []string, now time.Time, cols, rows int) {
	title := lines[0]
	clock := now.Format("15:04:05")
	if pad := cols - fleet.TextWidth(title) - len(clock); pad >= 1 {
		lines[0] = title + strings.Repeat(" ", pad) + clock
	}
	if len(lines) > rows-1 {
		lines = lines[:max(rows-1, 1)]
	}
	var b strings.Builder
	b.WriteString(cursorHome)
	for _, l := range lines {
		b.WriteString(clearLine + fleet.ClipEnd(l, cols) + "\n")
	}
	b.WriteString(clearBelow)
	io.WriteString(term, b.String())
}

// awaitFrame waits for a --watch's read of its next frame: an interrupt
// meanwhile ends the watch (false), the cursor given back; a resize waits
// on for the read.
func awaitFrame[T any](done <-chan T, sigs <-chan os.Signal, term io.Writer) (T, bool) {
	select {
	case v := <-done:
		return v, true
	case s := <-sigs:
		if s != syscall.SIGWINCH {
			endWatch(term)
			var zero T
			return zero, false
		}
		return <-done, true
	}
}

// untilNext waits for the next frame's time, redrawing at once on a
// resize; false when a signal ends the watch (the cursor is back then).
func untilNext(sigs <-chan os.Signal, term io.Writer, next <-chan time.Time) bool {
	select {
	case s := <-sigs:
		if s != syscall.SIGWINCH {
			endWatch(term)
			return false
		}
	case <-next:
	}
	return true
}

// endWatch leaves the terminal as a shell wants it: the cursor at the
// start of a clear line, shown.
func endWatch(term io.Writer) {
	io.WriteString(term, "\r"+clearLine+showCursor)
}
