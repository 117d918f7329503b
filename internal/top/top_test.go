package top

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

func testModel(hosts ...string) *model {
	var hs []client.Host
	for _, h := range hosts {
		hs = append(hs, client.Host{Name: h})
	}
	m := newModel(Config{Hosts: hs, Home: "/home/u"}, nil)
	for _, h := range hosts {
		m.hostUp(h, time.Now())
	}
	return m
}

// TestWaitingFirstSelectionStays: waiting agents sort first, and the
// selection follows its agent when the rows move under it.
func TestWaitingFirstSelectionStays(t *testing.T) {
	m := testModel("-")
	m.put("-", client.Agent{Harness: "claude", PID: 1, State: "working"})
	m.put("-", client.Agent{Harness: "codex", PID: 2, State: "idle"})
	m.put("-", client.Agent{Harness: "pi", PID: 3, State: "working"})
	m.resort()
	if got := m.visible[0]; got.pid != 2 {
		t.Fatalf("first row %v, want the idle codex/2 before the working ones", got)
	}
	m.move(2) // pi/3
	if m.sel.pid != 3 {
		t.Fatalf("selected %v, want pi/3", m.sel)
	}
	m.put("-", client.Agent{Harness: "claude", PID: 1, State: "waiting", Waiting: "approve Bash"})
	m.resort()
	if m.visible[0].pid != 1 {
		t.Errorf("the waiting agent is not first: %v", m.visible)
	}
	if m.sel.pid != 3 || m.visible[m.cursor].pid != 3 {
		t.Errorf("the selection left pi/3: sel %v, cursor on %v", m.sel, m.visible[m.cursor])
	}
}

// TestFilterAndHarnessKeys: / keeps the rows with the text in any
// column; h cycles the harnesses shown; s cycles the sort.
func TestFilterAndHarnessKeys(t *testing.T) {
	m := testModel("-")
	m.put("-", client.Agent{Harness: "claude", PID: 1, Cwd: "/home/u/src/alpha", Title: "fix the build"})
	m.put("-", client.Agent{Harness: "codex", PID: 2, Cwd: "/home/u/src/beta"})
	m.resort()
	m.filter.SetValue("alpha")
	m.resort()
	if len(m.visible) != 1 || m.visible[0].pid != 1 {
		t.Errorf("filter alpha: %v", m.visible)
	}
	m.filter.SetValue("")
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("h")})
	if m.harness != "claude" || len(m.visible) != 1 {
		t.Errorf("h: harness %q, rows %v", m.harness, m.visible)
	}
	// Keys that arrive together are each obeyed.
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("hh")})
	if m.harness != "" || len(m.visible) != 2 {
		t.Errorf("h twice more: harness %q, want all again (codex, then all)", m.harness)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s")})
	if sortKeys[m.sortKey] != "host" {
		t.Errorf("s: sort %q", sortKeys[m.sortKey])
	}
}

// TestEventsDriveReads: an exit removes the row without a read; a line
// for a filtered-out harness reads nothing; a host going down keeps its
// rows and marks them.
func TestEventsDriveReads(t *testing.T) {
	m := testModel("b1", "b2")
	m.cfg.Harnesses = []string{"claude"}
	m.hosts["b1"].c = &client.Client{} // never used: no read is made below
	m.put("b1", client.Agent{Harness: "claude", PID: 7, State: "idle"})
	m.put("b2", client.Agent{Harness: "claude", PID: 8, State: "idle"})
	m.resort()
	if cmd := m.onNews(fleet.News{Host: "b1", Line: "2026-12-01T21:40:03Z codex 9 waiting"}); cmd != nil {
		t.Error("a filtered-out harness's line made a read")
	}
	if cmd := m.onNews(fleet.News{Host: "b1", Line: "2026-12-01T21:40:03Z claude 7 exit"}); cmd != nil {
		t.Error("an exit made a read")
	}
	if _, ok := m.agents[key{"b1", "claude", 7}]; ok {
		t.Error("the exited agent's row is still there")
	}
	if m.counts.Rows.Load() != 0 || m.counts.Tables.Load() != 0 {
		t.Errorf("reads counted: %d tables, %d rows", m.counts.Tables.Load(), m.counts.Rows.Load())
	}
	m.onNews(fleet.News{Host: "b2", Err: errors.New("no answer within 5s")})
	m.width = 200
	v := m.View()
	if !strings.Contains(v, "b2 1 DOWN") || !strings.Contains(v, "b2 (down, seen ") {
		t.Errorf("the down host is not marked:\n%s", v)
	}
	if _, ok := m.agents[key{"b2", "claude", 8}]; !ok {
		t.Error("the down host's row was dropped")
	}
}

// TestLayoutFits: every line of a frame fits the terminal's width, at
// 80 and 200 columns, with long titles and directories.
func TestLayoutFits(t *testing.T) {
	for _, w := range []int{40, 80, 200} {
		m := testModel("-", "alice@build1")
		m.width, m.height = w, 24
		for i := range 30 {
			m.put("alice@build1", client.Agent{Harness: "claude", PID: 1000 + i, State: "waiting", Waiting: "approve a very long tool name here",
				Cwd: "/home/alice/src/" + strings.Repeat("deep/", 10), Title: "🚀 ship the release ✅ then 日本語のタイトル " + strings.Repeat("x", 80),
				Tokens: client.Tokens{"context": 41234}, Zmx: "work", Reach: "zmx"})
		}
		m.resort()
		for _, l := range strings.Split(m.View(), "\n") {
			if n := fleet.TextWidth(stripANSI(l)); n > w {
				t.Errorf("%d columns: a line of %d cells: %q", w, n, l)
			}
		}
	}
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && !(s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestMessageLines: a messages file's lines, made printable again and
// cut to the last n.
func TestMessageLines(t *testing.T) {
	got := messageLines([]byte("user: a\nassistant: b\x1b[31m\n\nassistant: c\n"), 2)
	if want := []string{"assistant: b?[31m", "assistant: c"}; !slices.Equal(got, want) {
		t.Errorf("messageLines: got %q, want %q", got, want)
	}
}

func TestTmuxArgv(t *testing.T) {
	for v, want := range map[string][]string{
		"work":            {"tmux", "attach", "-t", "work"},
		"lab:work":        {"tmux", "-L", "lab", "attach", "-t", "work"},
		"/tmp/t/sock:w:1": {"tmux", "-S", "/tmp/t/sock:w", "attach", "-t", "1"},
	} {
		if got := tmuxArgv(v); !slices.Equal(got, want) {
			t.Errorf("tmuxArgv(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestAttachRemote: another host's session is attached through ssh -t,
// the command quoted as one word for the remote shell.
func TestAttachRemote(t *testing.T) {
	m := testModel()
	m.hosts["b1"] = &hostState{name: "b1", up: true, dest: &client.SSH{Dest: "alice@b1", Options: []string{"Port=2222"}}}
	k := key{"b1", "claude", 5}
	argv, _ := m.attachArgv(k, client.Agent{Harness: "claude", PID: 5, Zmx: "my work"})
	want := []string{"ssh", "-t", "-o", "Port=2222", "alice@b1", "zmx attach 'my work'"}
	if !slices.Equal(argv, want) {
		t.Errorf("attach argv %q, want %q", argv, want)
	}
	if argv, why := m.attachArgv(k, client.Agent{Harness: "claude", PID: 5, Reach: "detached"}); argv != nil || !strings.Contains(why, "detached") {
		t.Errorf("a detached agent: %q %q", argv, why)
	}
}

// TestPendingReadAgain: a table whose rows have a title the daemon has not
// derived yet shows it as (pending) and asks for the table again later;
// a table with only token sums pending (the context is drawn) asks for
// nothing, so an idle view stays without reads.
func TestPendingReadAgain(t *testing.T) {
	m := testModel("b1")
	h := m.hosts["b1"]
	h.up, h.c = true, &client.Client{}
	cmd := m.onTable(tableMsg{host: "b1", agents: []client.Agent{{Harness: "claude", PID: 7, State: "idle", Pending: []string{"title", "tokens"}}}})
	if cmd == nil {
		t.Fatal("a pending title asked for no later read")
	}
	m.width = 200
	if v := m.View(); !strings.Contains(v, "(pending)") {
		t.Errorf("the pending title is not shown as (pending):\n%s", v)
	}
	if cmd := m.onTable(tableMsg{host: "b1", agents: []client.Agent{{Harness: "claude", PID: 7, State: "idle", Title: "t", Pending: []string{"tokens"}}}}); cmd != nil {
		t.Error("pending token sums alone asked for a read")
	}
	if _, cmd := m.Update(pendingMsg("b1")); cmd != nil {
		t.Error("a late pendingMsg read a table with nothing pending")
	}
}

// TestLastLinesOutcomeFirst: a move's status puts its last line, the
// outcome, first, so a narrow terminal's clipped status line shows it.
func TestLastLinesOutcomeFirst(t *testing.T) {
	out := "\nattach with: tmux -L x attach -t s\nmoved pi/12 into tmux session s\n"
	if got, want := lastLines(out, 2), "moved pi/12 into tmux session s | attach with: tmux -L x attach -t s"; got != want {
		t.Errorf("lastLines = %q, want %q", got, want)
	}
	if got := lastLines("a\nb\nc\n", 1); got != "c" {
		t.Errorf("lastLines(n=1) = %q, want c", got)
	}
}

// TestDetailsFitHeight: the details of an agent with every fact and a
// dozen messages fit 80x24 with its last messages kept, and show every
// fact on a terminal tall enough.
func TestDetailsFitHeight(t *testing.T) {
	a := client.Agent{Harness: "claude", PID: 7, PPID: 6, Started: time.Now().Unix() - 60, State: "idle", Since: "2026-12-06T14:00:00Z",
		StateVia: "registry", Status: "idle", Reach: "tmux", Tmux: "work:cl", Cwd: "/home/u/src/a", Session: "sess-1", Name: "n",
		Model: "m", Via: "registry", Tokens: client.Tokens{"context": 10}, Transcript: "/active/claude/7/transcript", Title: "the title"}
	var msgs []string
	for i := range 12 {
		msgs = append(msgs, "user: message "+strconv.Itoa(i))
	}
	for _, h := range []int{24, 50} {
		m := testModel("-")
		m.width, m.height = 80, h
		m.put("-", a)
		m.details, m.detailKey, m.detail = true, key{"-", "claude", 7}, msgs
		v := stripANSI(m.View())
		if n := strings.Count(v, "\n") + 1; n > h {
			t.Errorf("%d rows: the details have %d lines:\n%s", h, n, v)
		}
		for _, want := range []string{"claude/7 — the title", "session     sess-1", "last messages", "user: message 11", "esc back"} {
			if !strings.Contains(v, want) {
				t.Errorf("%d rows: no %q in the details:\n%s", h, want, v)
			}
		}
		if h == 50 && (!strings.Contains(v, "user: message 0") || !strings.Contains(v, "ppid")) {
			t.Errorf("50 rows: a fact or a message left out:\n%s", v)
		}
	}
}

// TestOlderTableKeepsNewerRows: a table read that went out before an
// agent's row read, or its exit, lands after them: the row keeps what
// its newer read said, and the exited agent stays gone.
func TestOlderTableKeepsNewerRows(t *testing.T) {
	m := testModel("-")
	h := m.hosts["-"]
	h.c = &client.Client{} // the commands below are never run
	m.put("-", client.Agent{Harness: "claude", PID: 7, State: "idle"})
	m.put("-", client.Agent{Harness: "pi", PID: 8, State: "idle"})
	m.resort()
	if m.readTable(h) == nil {
		t.Fatal("no table read")
	}
	m.onNews(fleet.News{Host: "-", Line: "2026-12-01T21:40:03Z claude 7 working"})
	m.onRow(rowMsg{key{"-", "claude", 7}, m.rowGen[key{"-", "claude", 7}], client.Agent{Harness: "claude", PID: 7, State: "working"}, nil})
	m.onNews(fleet.News{Host: "-", Line: "2026-12-01T21:40:04Z pi 8 exit"})
	m.onTable(tableMsg{"-", []client.Agent{{Harness: "claude", PID: 7, State: "idle"}, {Harness: "pi", PID: 8, State: "idle"}, {Harness: "codex", PID: 9, State: "idle"}}, nil})
	if got := m.agents[key{"-", "claude", 7}].State; got != "working" {
		t.Errorf("claude/7 is %q after an older table, want its newer row's working", got)
	}
	if _, ok := m.agents[key{"-", "pi", 8}]; ok {
		t.Error("the exited pi/8 came back with an older table")
	}
	if _, ok := m.agents[key{"-", "codex", 9}]; !ok {
		t.Error("the table's new agent codex/9 is missing")
	}
	// A table that went out after them is news for every row.
	m.readTable(h)
	m.onTable(tableMsg{"-", []client.Agent{{Harness: "claude", PID: 7, State: "idle"}}, nil})
	if got := m.agents[key{"-", "claude", 7}].State; got != "idle" || len(m.agents) != 1 {
		t.Errorf("after a newer table: claude/7 %q, %d agents; want idle, 1", got, len(m.agents))
	}
}
