package top

import (
	"cmp"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// key names an agent of the fleet; the selection follows it.
type key struct {
	host, harness string
	pid           int
}

// hostState is what the view knows of a host.
type hostState struct {
	name     string
	c        *client.Client // its session while it is up
	up       bool
	seen     time.Time // last news from it
	err      error     // why it is down
	reading  bool      // a table read is out
	dirty    bool      // a change came while it was
	dest     *client.SSH
	answered bool // it has been up once
	tableGen int  // the model's gen when its table read went out
}

// The sort orders s cycles through.
var sortKeys = []string{"state", "host", "harness", "pid", "since", "tokens", "cwd", "title"}

type model struct {
	cfg    Config
	news   <-chan fleet.News
	counts *Counts

	hosts     map[string]*hostState
	hostOrder []string
	agents    map[key]client.Agent
	// gen counts the row reads and exits in the order they came; rowGen
	// is each agent's newest. A table read that went out before an
	// agent's newest row read or exit is older news for that agent.
	gen     int
	rowGen  map[key]int
	visible []key
	sel     key
	cursor  int
	offset  int

	width, height int
	sortKey       int
	harness       string // the h key's harness; "" all

	filter    textinput.Model
	filtering bool

	moving    bool
	moveInput textinput.Model
	moveTmux  bool
	moveKey   key

	details   bool
	detailKey key
	detail    []string

	status      string
	printOnExit string
	quitting    bool
	once        bool // one frame of every row, no status or keys
}

// Messages.
type (
	newsMsg  fleet.News
	tableMsg struct {
		host   string
		agents []client.Agent
		err    error
	}
	rowMsg struct {
		k   key
		seq int
		a   client.Agent
		err error
	}
	statusMsg string
	detailMsg struct {
		k     key
		lines []string
	}
	tickMsg time.Time
	// pendingMsg asks for a host's table again: its last one left facts
	// the view shows pending (pendingAgain).
	pendingMsg string
)

// pendingAgain is how long after a table with a title or model pending
// the view reads the table again. The daemon derives them after the read
// and says nothing when done; once no row is pending no more reads are
// made, so an idle view still reads nothing.
const pendingAgain = 2 * time.Second

func newModel(cfg Config, news <-chan fleet.News) *model {
	m := &model{
		cfg:    cfg,
		news:   news,
		counts: &Counts{},
		hosts:  map[string]*hostState{},
		agents: map[key]client.Agent{},
		rowGen: map[key]int{},
		width:  80, height: 24,
	}
	for _, h := range cfg.Hosts {
		m.hosts[h.Name] = &hostState{name: h.Name, dest: h.SSH}
		m.hostOrder = append(m.hostOrder, h.Name)
	}
	m.filter = textinput.New()
	m.filter.Prompt = "/"
	m.moveInput = textinput.New()
	m.moveInput.CharLimit = 64
	return m
}

func (m *model) Init() tea.Cmd {
	return tea.Batch(m.waitNews(), tick())
}

// tick redraws the ages once a second; it reads nothing.
func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func (m *model) waitNews() tea.Cmd {
	if m.news == nil {
		return nil
	}
	return func() tea.Msg { return newsMsg(<-m.news) }
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.scroll()
		return m, nil
	case tickMsg:
		return m, tick()
	case newsMsg:
		return m, tea.Batch(m.onNews(fleet.News(msg)), m.waitNews())
	case tableMsg:
		return m, m.onTable(msg)
	case pendingMsg:
		if h := m.hosts[string(msg)]; h != nil && h.up && h.c != nil && m.pendingOn(h.name) {
			return m, m.readTable(h)
		}
		return m, nil
	case rowMsg:
		m.onRow(msg)
		return m, nil
	case statusMsg:
		m.status = string(msg)
		return m, nil
	case detailMsg:
		if m.details && msg.k == m.detailKey {
			m.detail = msg.lines
		}
		return m, nil
	case attachedMsg:
		m.status = fleet.Printable(lastLines(msg.out, 1))
		if msg.err != nil {
			m.status = "attach: " + strings.TrimSuffix(fleet.Printable(msg.err.Error())+": "+m.status, ": ")
		}
		return m, nil
	case copiedMsg:
		return m, m.onCopied(string(msg))
	case tea.KeyMsg:
		return m.onKey(msg)
	}
	if m.filtering {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		return m, cmd
	}
	return m, nil
}

// onNews is a host's news: it came up (read its table), a line of its
// events (read the agent it names), or it went down (keep its rows,
// marked).
func (m *model) onNews(n fleet.News) tea.Cmd {
	h := m.hosts[n.Host]
	if h == nil {
		return nil
	}
	now := time.Now()
	switch {
	case n.Err != nil:
		m.hostDown(n.Host, n.Err, now)
		return nil
	case n.C != nil:
		h.c = n.C
		m.hostUp(n.Host, now)
		return m.readTable(h)
	}
	h.seen = now
	e, ok := fleet.ParseEvent(n.Line)
	if !ok || h.c == nil {
		return nil
	}
	if e.PID == 0 {
		// Lines were lost: only the table says what is true now.
		return m.readTable(h)
	}
	if len(m.cfg.Harnesses) > 0 && !slices.Contains(m.cfg.Harnesses, e.Harness) {
		return nil
	}
	k := key{n.Host, e.Harness, e.PID}
	if e.Event == "exit" {
		m.gen++
		m.rowGen[k] = m.gen // a read still out is older news
		delete(m.agents, k)
		m.resort()
		return nil
	}
	return m.readRow(h, k)
}

func (m *model) hostUp(name string, now time.Time) {
	h := m.hosts[name]
	h.up, h.err, h.seen, h.answered = true, nil, now, true
}

func (m *model) hostDown(name string, err error, now time.Time) {
	h := m.hosts[name]
	if h == nil {
		return
	}
	if h.up {
		h.seen = now
	}
	h.up, h.err, h.c = false, err, nil
	m.resort()
}

func (m *model) readTable(h *hostState) tea.Cmd {
	if h.reading {
		h.dirty = true
		return nil
	}
	h.reading, h.dirty, h.tableGen = true, false, m.gen
	c, host, harnesses := h.c, h.name, m.cfg.Harnesses
	m.counts.Tables.Add(1)
	return func() tea.Msg {
		a, err := c.Agents(harnesses...)
		return tableMsg{host, a, err}
	}
}

func (m *model) onTable(t tableMsg) tea.Cmd {
	h := m.hosts[t.host]
	h.reading = false
	if t.err == nil && h.up {
		// An agent read or gone since the table went out keeps what its
		// row says: the table is older news for it.
		newer := func(k key) bool { return m.rowGen[k] > h.tableGen }
		for k := range m.agents {
			if k.host == t.host && !newer(k) {
				delete(m.agents, k)
			}
		}
		for _, a := range t.agents {
			if !newer(key{t.host, a.Harness, a.PID}) {
				m.put(t.host, a)
			}
		}
		m.resort()
	}
	if h.dirty && h.c != nil {
		return m.readTable(h)
	}
	if m.pendingOn(t.host) {
		return tea.Tick(pendingAgain, func(time.Time) tea.Msg { return pendingMsg(t.host) })
	}
	return nil
}

// pendingOn says whether a row of host has a title or model the daemon
// had not derived when it made the table (client.Agent.Pending); pending
// token sums are not drawn (the context is), so they ask for no read.
func (m *model) pendingOn(host string) bool {
	for k, a := range m.agents {
		if k.host == host && slices.ContainsFunc(a.Pending, func(f string) bool { return f == "title" || f == "model" }) {
			return true
		}
	}
	return false
}

func (m *model) readRow(h *hostState, k key) tea.Cmd {
	m.gen++
	m.rowGen[k] = m.gen
	seq, c := m.gen, h.c
	m.counts.Rows.Add(1)
	return func() tea.Msg {
		a, err := c.Agent(k.harness, k.pid)
		return rowMsg{k, seq, a, err}
	}
}

func (m *model) onRow(r rowMsg) {
	if r.seq != m.rowGen[r.k] {
		return // a newer read is out
	}
	switch {
	case errors.Is(r.err, client.ErrGone):
		delete(m.agents, r.k)
	case r.err != nil:
		return // the host's stream says when it is down
	default:
		m.put(r.k.host, r.a)
	}
	m.resort()
}

func (m *model) put(host string, a client.Agent) {
	m.agents[key{host, a.Harness, a.PID}] = a
}

// row is an agent with its host, for sorting and drawing.
func (m *model) agent(k key) client.Agent { return m.agents[k] }

// resort orders and filters the rows, and keeps the selection on its
// agent (or, when it is gone, at the same place).
func (m *model) resort() {
	m.visible = m.visible[:0]
	q := strings.ToLower(m.filter.Value())
	for k, a := range m.agents {
		if m.harness != "" && a.Harness != m.harness {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(joinCells(m.cells(k, a, time.Now()))), q) {
			continue
		}
		m.visible = append(m.visible, k)
	}
	by := sortKeys[m.sortKey]
	slices.SortFunc(m.visible, func(x, y key) int {
		a, b := m.agents[x], m.agents[y]
		var c int
		switch by {
		case "state":
			c = cmp.Compare(stateRank(a.State), stateRank(b.State))
		case "host":
			c = strings.Compare(x.host, y.host)
		case "harness":
			c = strings.Compare(a.Harness, b.Harness)
		case "pid":
			c = cmp.Compare(a.PID, b.PID)
		case "since":
			c = strings.Compare(a.Since, b.Since)
		case "tokens":
			c = -cmp.Compare(a.Tokens["context"], b.Tokens["context"])
		case "cwd":
			c = strings.Compare(a.Cwd, b.Cwd)
		case "title":
			c = strings.Compare(a.Title, b.Title)
		}
		return cmp.Or(c, strings.Compare(x.host, y.host), strings.Compare(x.harness, y.harness), cmp.Compare(x.pid, y.pid))
	})
	found := false
	for i, k := range m.visible {
		if k == m.sel {
			m.cursor, found = i, true
		}
	}
	if !found {
		m.cursor = min(m.cursor, len(m.visible)-1)
		m.cursor = max(m.cursor, 0)
		if len(m.visible) > 0 {
			m.sel = m.visible[m.cursor]
		}
	}
	m.scroll()
}

// stateRank puts waiting agents first: they need someone.
func stateRank(s string) int {
	switch s {
	case "waiting":
		return 0
	case "idle":
		return 1
	case "working":
		return 2
	}
	return 3
}

// listRows is how many agent rows fit.
func (m *model) listRows() int {
	if m.once {
		return len(m.visible)
	}
	return max(m.height-5, 1)
}

func (m *model) scroll() {
	n := m.listRows()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+n {
		m.offset = m.cursor - n + 1
	}
	m.offset = max(min(m.offset, len(m.visible)-n), 0)
}

func (m *model) move(d int) {
	if len(m.visible) == 0 {
		return
	}
	m.cursor = max(min(m.cursor+d, len(m.visible)-1), 0)
	m.sel = m.visible[m.cursor]
	m.scroll()
}

func (m *model) selected() (key, bool) {
	if len(m.visible) == 0 {
		return key{}, false
	}
	return m.sel, true
}

func (m *model) onKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !m.filtering && !m.moving && !k.Paste {
		// Keys typed faster than the view reads them come as one: each
		// is a key of its own.
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			_, cmd := m.onKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			cmds = append(cmds, cmd)
		}
		return m, tea.Batch(cmds...)
	}
	if k.String() == "ctrl+c" {
		m.quitting = true
		return m, tea.Quit
	}
	if k.String() == "ctrl+z" {
		return m, tea.Suspend
	}
	switch {
	case m.filtering:
		return m.onFilterKey(k)
	case m.moving:
		return m.onMoveKey(k)
	case m.details:
		switch k.String() {
		case "esc", "enter", "q", "backspace":
			m.details = false
		case "a":
			return m, m.attach(m.detailKey)
		}
		return m, nil
	}
	return m.onListKey(k)
}

// onFilterKey edits the filter: enter keeps it, esc clears it.
func (m *model) onFilterKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "enter":
		m.filtering = false
		m.filter.Blur()
	case "esc":
		m.filtering = false
		m.filter.Blur()
		m.filter.SetValue("")
	default:
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(k)
		m.resort()
		return m, cmd
	}
	m.resort()
	return m, nil
}

// onListKey is a key of the table itself.
func (m *model) onListKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "q":
		m.quitting = true
		return m, tea.Quit
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "pgup":
		m.move(-m.listRows())
	case "pgdown", " ":
		m.move(m.listRows())
	case "home", "g":
		m.move(-len(m.visible))
	case "end", "G":
		m.move(len(m.visible))
	case "/":
		m.filtering = true
		m.filter.Focus()
		return m, textinput.Blink
	case "esc":
		m.filter.SetValue("")
		m.resort()
	case "s":
		m.sortKey = (m.sortKey + 1) % len(sortKeys)
		m.resort()
	case "h":
		m.harness = m.nextHarness()
		m.resort()
	case "enter":
		if k, ok := m.selected(); ok {
			m.details, m.detailKey, m.detail = true, k, nil
			return m, m.readDetail(k)
		}
	case "a":
		if k, ok := m.selected(); ok {
			return m, m.attach(k)
		}
	case "m":
		if k, ok := m.selected(); ok {
			m.moving, m.moveKey, m.moveTmux = true, k, false
			m.moveInput.SetValue("")
			m.moveInput.Focus()
			return m, textinput.Blink
		}
	case "y":
		if k, ok := m.selected(); ok {
			return m, m.copyResume(k)
		}
	}
	return m, nil
}

// nextHarness cycles the h key through the harnesses that have agents.
func (m *model) nextHarness() string {
	var names []string
	for k := range m.agents {
		if !slices.Contains(names, k.harness) {
			names = append(names, k.harness)
		}
	}
	slices.Sort(names)
	i := slices.Index(names, m.harness)
	if i+1 < len(names) {
		return names[i+1]
	}
	return ""
}

func (m *model) onMoveKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.moving = false
		return m, nil
	case "tab":
		m.moveTmux = !m.moveTmux
		return m, nil
	case "enter":
		m.moving = false
		name := strings.TrimSpace(m.moveInput.Value())
		if name == "" || m.cfg.MoveArgv == nil {
			return m, nil
		}
		agent := agentName(m.moveKey)
		argv := m.cfg.MoveArgv(agent, name, m.moveTmux)
		m.status = "moving " + agent + " …"
		return m, func() tea.Msg {
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			text := lastLines(string(out), 2)
			if err != nil && text == "" {
				text = err.Error()
			}
			return statusMsg(fleet.Printable(text))
		}
	}
	var cmd tea.Cmd
	m.moveInput, cmd = m.moveInput.Update(k)
	return m, cmd
}

// agentName is the name 9harness move takes.
func agentName(k key) string {
	return fleet.AgentName(fleet.Row{Host: k.host, Agent: client.Agent{Harness: k.harness, PID: k.pid}})
}

// lastLines is the last n non-empty lines of s, the last first, joined
// by " | ": a move's outcome is its last line, and a status line clipped
// to a narrow terminal must still show it.
func lastLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	slices.Reverse(out)
	return strings.Join(out, " | ")
}

// onCopied puts the resume command on the clipboard and keeps it for
// the exit.
func (m *model) onCopied(s string) tea.Cmd {
	m.printOnExit = s
	m.status = "copied (and printed on exit): " + fleet.Printable(s)
	out := m.cfg.Out
	return func() tea.Msg {
		if out != nil {
			out.WriteString(osc52(s))
		}
		return nil
	}
}

func joinCells(c [nCols]string) string { return strings.Join(c[:], " ") }
