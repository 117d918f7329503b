package ps

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// The columns, left to right.
const (
	colHarness = iota
	colPID
	colAge
	colState
	colTokens
	colLimits
	colStatus
	colCwd
	colReach
	colHost
	colVia
	colTitle
	nCols
)

var psHeader = [nCols]string{"HARNESS", "PID", "AGE", "STATE", "TOKENS", "LIMITS", "STATUS", "CWD", "REACH", "ZMX/TMUX", "VIA", "TITLE"}

// psDropOrder is the order in which whole columns are left out when the
// table cannot fit a terminal even with every column at its floor: the
// least use for telling agents apart or acting on one goes first. VIA is
// a diagnostic; STATUS is what the harness publishes, which STATE says
// for every harness; LIMITS is the account's, the same for each of its
// agents; AGE rarely decides anything; TOKENS says when a context fills
// up, not whether the agent wants you; ZMX/TMUX says where to attach,
// which move's HARNESS/PID also reaches; REACH says whether anyone can
// answer the agent at all (detached: nobody); CWD with TITLE says which
// agent is which; STATE says whether an agent needs you, the question
// most people ask of the table. HARNESS and PID (the agent's name) and
// TITLE are never left out. A new column takes its place in this list by
// the same measure.
var psDropOrder = []int{colVia, colStatus, colLimits, colAge, colTokens, colHost, colReach, colCwd, colState}

// psFloors are the widths that decide whether a column must be left out:
// a column is dropped (in psDropOrder) only while the table cannot fit
// with these at their floors: VIA's route word (10 cells), CWD's end (12),
// STATE's "waiting…" (8), TITLE's 24. From psWholeState columns up, STATE's
// floor is its whole width, up to stateMax: what a waiting agent waits for
// ("waiting: approve Bash") outranks AGE, TOKENS and ZMX/TMUX there;
// below, it comes down to 8 a cell per column.
var psFloors = []struct{ col, min int }{
	{colVia, 10}, {colCwd, 12}, {colState, 8}, {colTitle, 24},
}

const (
	psWholeState = 80
	stateMax     = 32
)

// psShrink is who gives up width, in order, and down to what: VIA first
// (only -v's note shrinks), then CWD (its end, which it keeps, names the
// project), then TITLE down to 24 cells, and only then STATE, so that
// what a waiting agent waits for ("waiting: approve Bash", which says
// what to do) stays whole as long as TITLE can give. The last apply only
// when the columns that stay cannot fit at their floors.
var psShrink = []struct{ col, min int }{
	{colVia, 10}, {colCwd, 12}, {colTitle, 24}, {colState, 8},
	{colCwd, 6}, {colTitle, 5},
}

const colGap = "  "

// psLayout is how the table is drawn.
type psLayout struct {
	width    int  // fit every line into this many cells; 0: do not fit
	wide     bool // VIA's whole note, not its first word
	noHeader bool
}

// psTable renders the agents as lines: a header and a row per agent.
func psTable(agents []client.Agent, now time.Time, home string, lay psLayout) []string {
	rows := make([][nCols]string, 1, len(agents)+1)
	rows[0] = psHeader
	for _, a := range agents {
		rows = append(rows, psRow(a, now, home, lay.wide))
	}
	cells := cellWidths(rows)
	w, show := psWidths(cells, lay.width, idleColumns(rows[1:], lay.width))
	last := colTitle
	if lay.noHeader {
		rows, cells = rows[1:], cells[1:]
	}
	// The lines are written into one buffer, and are slices of it; a line
	// of printable ASCII takes a byte per cell.
	size := 0
	for i, x := range w {
		if show[i] {
			size += x + len(colGap)
		}
	}
	buf := make([]byte, 0, size*len(rows))
	ends := make([]int, len(rows))
	for r := range rows {
		start := len(buf)
		first := true
		for i, cell := range &rows[r] {
			if !show[i] {
				continue
			}
			if !first {
				buf = append(buf, colGap...)
			}
			first = false
			cw := cells[r][i]
			if cw > w[i] {
				if i == colCwd {
					cell = fleet.ClipFront(cell, w[i])
				} else {
					cell = fleet.ClipEnd(cell, w[i])
				}
				cw = fleet.TextWidth(cell)
			}
			pad := max(w[i]-cw, 0)
			switch {
			case i == colPID || i == colAge || i == colTokens || i == colLimits:
				buf = appendSpaces(buf, pad)
				buf = append(buf, cell...)
			case i == last:
				buf = append(buf, cell...)
			default:
				buf = append(buf, cell...)
				buf = appendSpaces(buf, pad)
			}
		}
		buf = buf[:start+len(bytes.TrimRight(buf[start:], " "))]
		ends[r] = len(buf)
	}
	all := string(buf)
	out := make([]string, len(rows))
	start := 0
	for r, end := range ends {
		line := all[start:end]
		start = end
		if lay.width > 0 {
			// What the columns cannot give up is cut at the edge.
			line = fleet.ClipEnd(line, lay.width)
		}
		out[r] = line
	}
	return out
}

func appendSpaces(b []byte, n int) []byte {
	for range n {
		b = append(b, ' ')
	}
	return b
}

// cellWidths is the width of each cell of rows.
func cellWidths(rows [][nCols]string) [][nCols]int {
	out := make([][nCols]int, len(rows))
	for r, row := range rows {
		for i, cell := range row {
			out[r][i] = fleet.TextWidth(cell)
		}
	}
	return out
}

// psWidths gives each column its width and says which are shown, from
// the widths of the cells of every row (cellWidths). With width 0 every
// column is shown whole; else columns are dropped in psDropOrder until
// the rest fit at their floors, then VIA, CWD and TITLE give up width in
// psShrink's order until the table fits.
func psWidths(cells [][nCols]int, width int, idle [nCols]bool) (w [nCols]int, show [nCols]bool) {
	for i := range show {
		show[i] = !idle[i]
	}
	for _, r := range cells {
		for i, cw := range r {
			w[i] = max(w[i], cw)
		}
	}
	if width <= 0 {
		return w, show
	}
	total := func(w [nCols]int) int {
		n, cols := 0, 0
		for i, x := range w {
			if show[i] {
				n += x
				cols++
			}
		}
		return n + len(colGap)*(cols-1)
	}
	floor := w
	for _, s := range psFloors {
		floor[s.col] = min(floor[s.col], s.min)
	}
	// Below psWholeState, STATE's floor gives a cell per column lost, so
	// that a narrower terminal never shows a column a wider one left out.
	floor[colState] = max(min(w[colState], stateMax)-max(psWholeState-width, 0), floor[colState])
	for _, c := range psDropOrder {
		if total(floor) <= width {
			break
		}
		show[c] = false
	}
	over := total(w) - width
	for _, s := range psShrink {
		if over <= 0 {
			break
		}
		if show[s.col] && w[s.col] > s.min {
			cut := min(over, w[s.col]-s.min)
			w[s.col] -= cut
			over -= cut
		}
	}
	return w, show
}

// idleColumns are the columns that say nothing on a terminal of width
// cells (0: not fitted, none is): TOKENS and LIMITS when no row has a
// count, STATUS when every row's only repeats its STATE (Claude's busy,
// idle and waiting are working, idle and waiting), REACH when every row's
// is unknown or only repeats its ZMX/TMUX. They give their room to the
// rest; a pipe, a file and --no-trunc still get every column.
func idleColumns(rows [][nCols]string, width int) (idle [nCols]bool) {
	if width <= 0 || len(rows) == 0 {
		return idle
	}
	idle[colTokens], idle[colLimits], idle[colStatus], idle[colReach] = true, true, true, true
	for _, r := range rows {
		if r[colTokens] != "-" {
			idle[colTokens] = false
		}
		if r[colLimits] != "-" {
			idle[colLimits] = false
		}
		if !repeatsHost(r[colReach], r[colHost]) {
			idle[colReach] = false
		}
		if !repeatsState(r[colStatus], r[colState]) {
			idle[colStatus] = false
		}
	}
	return idle
}

// repeatsHost tells whether a REACH cell says no more than the ZMX/TMUX
// cell beside it.
func repeatsHost(reach, host string) bool {
	switch reach {
	case "-":
		return true
	case "zmx", "tmux":
		return strings.HasPrefix(host, reach+":")
	}
	return false
}

// repeatsState tells whether a STATUS cell says no more than the STATE
// cell beside it.
func repeatsState(status, state string) bool {
	word, _, _ := strings.Cut(state, ":")
	switch status {
	case "-", word:
		return true
	case "busy":
		return word == "working"
	}
	return false
}

// psPending is the cell of a fact the daemon had not derived yet when it
// made the table (client.Agent.Pending).
const psPending = "(pending)"

func psRow(a client.Agent, now time.Time, home string, wide bool) [nCols]string {
	var host []string
	if a.Zmx != "" {
		host = append(host, "zmx:"+a.Zmx)
	}
	if a.Tmux != "" {
		host = append(host, "tmux:"+a.Tmux)
	}
	if f := strings.Fields(a.Attach); len(f) > 0 {
		// A session its harness hosts: "claude attach ID" as attach:ID.
		host = append(host, "attach:"+f[len(f)-1])
	}
	via := a.Via
	if !wide {
		via = fleet.RouteWord(via)
	}
	state := a.State
	if state != "" && a.Waiting != "" {
		state += ": " + a.Waiting
	}
	var tokens string
	if n, ok := a.Tokens["context"]; ok {
		tokens = fleet.CompactCount(n)
	}
	title := a.Title
	if title == "" && slices.Contains(a.Pending, "title") {
		title = psPending
	}
	r := [nCols]string{
		a.Harness,
		strconv.Itoa(a.PID),
		fleet.Age(a.Started, now),
		state,
		tokens,
		fleet.LimitCell(a.Limits),
		a.Status,
		fleet.ShortHome(a.Cwd, home),
		a.Reach,
		strings.Join(host, ","),
		via,
		title,
	}
	for i, v := range r {
		if v == "" {
			v = "-"
		}
		r[i] = fleet.Printable(v)
	}
	return r
}
