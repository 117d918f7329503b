package top

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// The columns, in order.
const (
	colHost = iota
	colHarness
	colPID
	colState
	colSince
	colReach
	colTokens
	colLimits
	colDir
	colTitle
	nCols
)

var colNames = [nCols]string{"HOST", "HARNESS", "PID", "STATE", "SINCE", "REACH", "TOKENS", "LIMITS", "DIR", "TITLE"}

// dropOrder is the columns left out, in turn, while the table does not
// fit; HARNESS, PID, STATE and TITLE always stay.
var dropOrder = []int{colLimits, colTokens, colSince, colReach, colDir, colHost}

var (
	styleWaiting = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("3"))
	styleWorking = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleDown    = lipgloss.NewStyle().Faint(true)
	styleSel     = lipgloss.NewStyle().Reverse(true)
	styleHead    = lipgloss.NewStyle().Bold(true)
)

// cells is an agent's row as text, control characters shown as ?.
func (m *model) cells(k key, a client.Agent, now time.Time) [nCols]string {
	host := k.host
	if h := m.hosts[k.host]; h != nil && !h.up {
		host += " (down"
		if !h.seen.IsZero() {
			host += ", seen " + h.seen.Format("15:04:05")
		}
		host += ")"
	}
	state := a.State
	if state == "" {
		state = "-"
	}
	if a.Waiting != "" {
		state += ": " + a.Waiting
	}
	since := ""
	if t, err := time.Parse(time.RFC3339, a.Since); err == nil {
		since = fleet.Age(t.Unix(), now)
	}
	tokens := ""
	if n, ok := a.Tokens["context"]; ok {
		tokens = fleet.CompactCount(n)
	}
	reach := a.Reach
	switch {
	case a.Zmx != "":
		reach = "zmx:" + a.Zmx
	case a.Tmux != "":
		reach = "tmux:" + a.Tmux
	}
	dir := a.Cwd
	if k.host == client.LocalHost {
		dir = fleet.ShortHome(dir, m.cfg.Home)
	}
	title := a.Title
	if title == "" && slices.Contains(a.Pending, "title") {
		title = "(pending)"
	}
	r := [nCols]string{host, a.Harness, strconv.Itoa(a.PID), state, since, reach, tokens, fleet.LimitCell(a.Limits), dir, title}
	for i, v := range r {
		if v == "" {
			v = "-"
		}
		r[i] = fleet.Printable(v)
	}
	return r
}

// layout gives each column its width within the terminal's: columns are
// left out in dropOrder until the rest fit with TITLE at 16 cells and
// DIR at 12; then DIR, then TITLE give up width.
func (m *model) layout(rows [][nCols]string, width int) (w [nCols]int, show [nCols]bool) {
	for i := range show {
		show[i] = true
	}
	show[colHost] = len(m.hostOrder) > 1 || (len(m.hostOrder) == 1 && m.hostOrder[0] != client.LocalHost)
	for i, n := range colNames {
		w[i] = fleet.TextWidth(n)
	}
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], fleet.TextWidth(c))
		}
	}
	w[colState] = min(w[colState], 40)
	total := func(w [nCols]int) int {
		n := 0
		for i, x := range w {
			if show[i] {
				n += x + 1
			}
		}
		return n - 1
	}
	floor := w
	floor[colTitle] = min(floor[colTitle], 16)
	floor[colDir] = min(floor[colDir], 12)
	floor[colState] = min(floor[colState], 12)
	for _, c := range dropOrder {
		if total(floor) <= width {
			break
		}
		show[c] = false
	}
	over := total(w) - width
	for _, c := range []int{colDir, colTitle, colState} {
		if over <= 0 {
			break
		}
		if show[c] && w[c] > floor[c] {
			cut := min(over, w[c]-floor[c])
			w[c] -= cut
			over -= cut
		}
	}
	return w, show
}

func (m *model) View() string {
	if m.quitting {
		return ""
	}
	now := time.Now()
	if m.details {
		return m.detailView(now)
	}
	var b strings.Builder
	b.WriteString(clip(m.headerLine(), m.width) + "\n")
	b.WriteString(clip(m.hostsLine(), m.width) + "\n")
	rows := make([][nCols]string, len(m.visible))
	for i, k := range m.visible {
		rows[i] = m.cells(k, m.agents[k], now)
	}
	// A gutter marks the selection with > as well as reverse video:
	// without colour (NO_COLOR, a monochrome terminal) there is no
	// reverse video.
	blank, mark := "  ", "> "
	if m.once {
		blank, mark = "", "" // no selection
	}
	w, show := m.layout(rows, m.width-len(blank))
	b.WriteString(styleHead.Render(clip(blank+line(colNames, w, show), m.width)) + "\n")
	n := m.listRows()
	for i := m.offset; i < len(rows) && i < m.offset+n; i++ {
		gutter := blank
		if i == m.cursor {
			gutter = mark
		}
		l := clip(gutter+line(rows[i], w, show), m.width)
		k := m.visible[i]
		a := m.agents[k]
		switch {
		case i == m.cursor:
			l = styleSel.Render(l + strings.Repeat(" ", max(m.width-fleet.TextWidth(l), 0)))
		case m.hosts[k.host] != nil && !m.hosts[k.host].up:
			l = styleDown.Render(l)
		case a.State == "waiting":
			l = styleWaiting.Render(l)
		case a.State == "working":
			l = styleWorking.Render(l)
		}
		b.WriteString(l + "\n")
	}
	if len(rows) == 0 {
		b.WriteString("no agents\n")
	}
	if m.once {
		return b.String()
	}
	for i := max(len(rows), 1); i < n; i++ {
		b.WriteString("\n")
	}
	b.WriteString(clip(m.statusLine(), m.width) + "\n")
	b.WriteString(clip(m.footer(), m.width))
	return b.String()
}

// headerLine counts the agents by state.
func (m *model) headerLine() string {
	counts := map[string]int{}
	for _, a := range m.agents {
		s := a.State
		if s == "" {
			s = "unknown"
		}
		counts[s]++
	}
	parts := []string{"9harness top", strconv.Itoa(len(m.agents)) + " agents"}
	for _, s := range []string{"waiting", "idle", "working", "unknown"} {
		if counts[s] > 0 {
			parts = append(parts, strconv.Itoa(counts[s])+" "+s)
		}
	}
	if len(m.visible) != len(m.agents) {
		parts = append(parts, strconv.Itoa(len(m.visible))+" shown")
	}
	if m.cfg.Counts {
		parts = append(parts, "reads "+strconv.FormatInt(m.counts.Tables.Load(), 10)+" tables "+strconv.FormatInt(m.counts.Rows.Load(), 10)+" rows")
	}
	return strings.Join(parts, " · ")
}

// hostsLine counts the agents by host, and says which hosts are down.
func (m *model) hostsLine() string {
	per := map[string]int{}
	for k := range m.agents {
		per[k.host]++
	}
	var parts []string
	for _, name := range m.hostOrder {
		h := m.hosts[name]
		p := fleet.Printable(name) + " " + strconv.Itoa(per[name])
		switch {
		case !h.up && h.err != nil:
			p += " DOWN"
			if !h.seen.IsZero() {
				p += " (seen " + h.seen.Format("15:04:05") + ")"
			}
		case !h.up:
			p += " connecting"
		}
		parts = append(parts, p)
	}
	return "hosts: " + strings.Join(parts, ", ")
}

func (m *model) statusLine() string {
	switch {
	case m.filtering:
		return m.filter.View()
	case m.moving:
		host := "zmx"
		if m.moveTmux {
			host = "tmux"
		}
		return "move " + agentName(m.moveKey) + " into " + host + " session (tab: zmx/tmux, esc: cancel): " + m.moveInput.Value()
	case m.filter.Value() != "":
		return "filter: " + fleet.Printable(m.filter.Value()) + "  " + m.status
	}
	return m.status
}

func (m *model) footer() string {
	h := m.harness
	if h == "" {
		h = "all"
	}
	return "q quit  / filter  s sort:" + sortKeys[m.sortKey] + "  h harness:" + h + "  enter details  a attach  m move  y copy resume"
}

// line joins the shown cells, each padded to its width.
func line(r [nCols]string, w [nCols]int, show [nCols]bool) string {
	var parts []string
	for i, c := range r {
		if !show[i] {
			continue
		}
		if i == colDir {
			c = fleet.ClipFront(c, w[i])
		} else {
			c = fleet.ClipEnd(c, w[i])
		}
		if i == colPID || i == colTokens || i == colSince {
			c = strings.Repeat(" ", max(w[i]-fleet.TextWidth(c), 0)) + c
		} else if i != nCols-1 {
			c += strings.Repeat(" ", max(w[i]-fleet.TextWidth(c), 0))
		}
		parts = append(parts, c)
	}
	return strings.TrimRight(strings.Join(parts, " "), " ")
}

func clip(s string, w int) string { return fleet.ClipEnd(s, w) }
