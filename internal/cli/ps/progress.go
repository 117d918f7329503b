package ps

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// slowAfter is how long ps over several hosts waits before it shows what
// it has: most listings take less, and are printed at once.
const slowAfter = 500 * time.Millisecond

// progress draws, on a terminal, what a slow ps over several hosts has so
// far: the table of the hosts that answered (this machine's rows, which
// come first, at the top) and a line naming the hosts still waited for.
// Each drawing replaces the last, and stop erases it, leaving the
// terminal to the listing.
type progress struct {
	term    *os.File
	o       psOptions
	home    string
	timeout time.Duration
	start   time.Time

	mu      sync.Mutex
	rows    []fleet.Row
	waiting []string

	drawn int // lines drawn above the cursor
	stopc chan struct{}
	done  chan struct{}
}

// startProgress follows f's queries on term until stop.
func startProgress(f *fleet.Fleet, hosts []client.Host, timeout time.Duration, o psOptions, home string, term *os.File) *progress {
	p := &progress{term: term, o: o, home: home, timeout: timeout, start: time.Now(),
		stopc: make(chan struct{}), done: make(chan struct{})}
	for _, h := range hosts {
		p.waiting = append(p.waiting, h.Name)
	}
	slices.Sort(p.waiting)
	f.Progress = p.update
	go p.loop()
	return p
}

func (p *progress) update(rows []fleet.Row, waiting []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rows, p.waiting = p.o.keepRows(rows), waiting
}

// loop draws every quarter second once the listing is slow, until stop.
func (p *progress) loop() {
	defer close(p.done)
	tick := time.NewTicker(slowAfter / 2)
	defer tick.Stop()
	for {
		select {
		case <-p.stopc:
			io.WriteString(p.term, p.erase())
			return
		case now := <-tick.C:
			if now.Sub(p.start) >= slowAfter {
				p.draw(now)
			}
		}
	}
}

// stop erases what was drawn, and draws no more.
func (p *progress) stop() {
	close(p.stopc)
	<-p.done
}

// draw replaces the last drawing with the rows so far (the table output
// only) and the waiting line; rows that would not fit the screen are left
// out, since what scrolls off cannot be erased.
func (p *progress) draw(now time.Time) {
	p.mu.Lock()
	rows, waiting := slices.Clone(p.rows), p.waiting
	p.mu.Unlock()
	cols, height := fleet.TermSize(p.term)
	if cols <= 1 || height <= 1 {
		return
	}
	var lines []string
	if len(rows) > 0 && !p.o.json && !p.o.quiet && p.o.format == nil {
		sortFleet(rows, p.o.sortKey, p.o.reverse)
		lines = fleetTable(rows, now, p.home, p.o.layout(cols))
	}
	if len(lines)+1 >= height {
		lines = nil
	}
	names := make([]string, len(waiting))
	for i, h := range waiting {
		names[i] = fleet.Printable(h)
	}
	lines = append(lines, fmt.Sprintf("waiting for %s (%ds of %v)", strings.Join(names, ", "), int(now.Sub(p.start).Seconds()), p.timeout))
	var b strings.Builder
	b.WriteString(p.erase())
	for _, l := range lines {
		// One column short of the edge: a line that fills it would wrap
		// on some terminals, and the erase would count it wrong.
		b.WriteString(fleet.ClipEnd(l, cols-1) + "\n")
	}
	io.WriteString(p.term, b.String())
	p.drawn = len(lines)
}

// erase is what takes the cursor back up over the last drawing and
// clears it.
func (p *progress) erase() string {
	if p.drawn == 0 {
		return ""
	}
	n := p.drawn
	p.drawn = 0
	return fmt.Sprintf("\x1b[%dA\r%s", n, clearBelow)
}
