package ps

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

var psNow = time.Unix(1_800_000_000, 0)

// psAgents are agents whose titles hold emoji, CJK, a combining mark and
// a ZWJ sequence, and whose via notes are long, as the daemon writes them.
func psAgents() []client.Agent {
	return []client.Agent{
		{Harness: "claude", PID: 345104, Started: psNow.Add(-3 * time.Hour).Unix(), Status: "busy",
			State: "waiting", Waiting: "approve Bash", Tokens: client.Tokens{"context": 41_234, "input": 12},
			Cwd: "/home/u/src/a-project-directory-with-a-rather-long-name", Zmx: "work", Reach: "zmx",
			Via:   "registry (transcript under another project dir)",
			Title: "🚀 ship the release ✅ then 日本語のタイトルを直す and the rest"},
		{Harness: "codex", PID: 61034, Started: psNow.Add(-90 * time.Second).Unix(),
			State: "working", Tokens: client.Tokens{"context": 1_234_567},
			Limits: client.Limits{"primary": {UsedPercent: 82.4, WindowMinutes: 299, ResetsAt: "2026-12-01T17:10:00Z"}, "secondary": {UsedPercent: 21, WindowMinutes: 10080, ResetsAt: "2026-12-06T23:33:20Z"}},
			Cwd:    "/home/u/src/x", Via: "fd", Reach: "detached",
			Title: "修复构建 👨‍👩‍👧 family cafe\u0301 🇫🇷 ❤️ and a long tail of words"},
		{Harness: "hermes", PID: 155574, Started: psNow.Add(-50 * time.Hour).Unix(), Status: "idle", State: "idle",
			Cwd: "/home/u", Via: "registry (2 leases on this pid; the most recently updated)", Reach: "tty"},
		{Harness: "omp", PID: 71500, Cwd: "/srv/build/tree", Tmux: "rescued", Via: "dir", Reach: "tmux",
			Title: "Wire the retry queue"},
	}
}

// psColumns is the headers a table shows, and where (in cells) TITLE
// starts.
func psColumns(header string) (cols []string, titleAt int) {
	i := strings.Index(header, "TITLE")
	return strings.Fields(header), fleet.TextWidth(header[:i])
}

// TestPsLayout: at each width every line fits, columns go in
// psDropOrder only, TITLE keeps 24 cells from 80 columns up, a waiting
// agent's STATE is whole from 80 up, and with no width nothing is cut or
// left out.
func TestPsLayout(t *testing.T) {
	agents := psAgents()
	for _, wide := range []bool{false, true} {
		for _, tc := range []struct {
			width int
			gone  []string // the columns left out
		}{
			{60, []string{"VIA", "STATUS", "LIMITS", "AGE", "TOKENS", "ZMX/TMUX", "REACH", "CWD"}},
			// From 80 columns up STATE keeps what the agent waits for
			// ("waiting: approve Bash") before AGE, TOKENS, ZMX/TMUX
			// and REACH.
			{80, []string{"VIA", "STATUS", "LIMITS", "AGE", "TOKENS", "ZMX/TMUX", "REACH"}},
			{100, []string{"VIA", "STATUS", "LIMITS", "AGE", "TOKENS", "ZMX/TMUX"}},
			{120, []string{"VIA", "STATUS", "LIMITS"}},
			{220, nil},
			{0, nil},
		} {
			name := strconv.Itoa(tc.width)
			if wide {
				name += "/wide"
			}
			lines := psTable(agents, psNow, "/home/u", psLayout{width: tc.width, wide: wide})
			if len(lines) != len(agents)+1 {
				t.Fatalf("%s: %d lines, want %d", name, len(lines), len(agents)+1)
			}
			text := strings.Join(lines, "\n")
			cols, titleAt := psColumns(lines[0])
			var gone []string
			for _, c := range psDropOrder {
				if !slices.Contains(cols, psHeader[c]) {
					gone = append(gone, psHeader[c])
				}
			}
			if !slices.Equal(gone, tc.gone) {
				t.Errorf("%s: columns left out %q, want %q:\n%s", name, gone, tc.gone, text)
			}
			for i, l := range lines {
				if tc.width > 0 && fleet.TextWidth(l) > tc.width {
					t.Errorf("%s: line %d is %d cells wide:\n%s", name, i, fleet.TextWidth(l), text)
				}
				if i == 0 {
					continue
				}
				a := agents[i-1]
				if f := strings.Fields(l); len(f) < 2 || f[0] != a.Harness || f[1] != strconv.Itoa(a.PID) {
					t.Errorf("%s: row %d %q is not %s %d", name, i, l, a.Harness, a.PID)
				}
				title := psRow(a, psNow, "", wide)[colTitle]
				got := fleet.TextWidth(l) - titleAt
				want := fleet.TextWidth(title)
				if tc.width > 0 && want > 24 {
					// A wide character that does not fit TITLE's last
					// cell leaves it empty.
					want = 23
				}
				if got < want {
					t.Errorf("%s: %s's TITLE has %d cells, want %d or more:\n%s", name, a.Harness, got, want, text)
				}
			}
			if tc.width >= 80 && !strings.Contains(lines[1], " waiting: approve Bash ") {
				t.Errorf("%s: the waiting agent's STATE is not whole:\n%s", name, text)
			}
			if tc.width == 0 || tc.width == 220 && !wide {
				if strings.Contains(text, fleet.Ellipsis()) {
					t.Errorf("%s: something was cut:\n%s", name, text)
				}
				for _, a := range agents {
					if !strings.Contains(text, a.Title) {
						t.Errorf("%s: title %q not whole:\n%s", name, a.Title, text)
					}
				}
			}
			// The route word, or with -v the whole note.
			if slices.Contains(cols, "VIA") {
				note := agents[2].Via
				if wide != strings.Contains(text, note) && tc.width == 0 {
					t.Errorf("%s: whole via note shown %v, want %v:\n%s", name, !wide, wide, text)
				}
				if !wide && strings.Contains(text, "(2 leases") {
					t.Errorf("%s: the via note is shown without -v:\n%s", name, text)
				}
			}
		}
	}
}

// TestPsLayoutPriority: width is taken from VIA first, then CWD, then
// TITLE down to 24 cells, then STATE; a narrow terminal drops columns in psDropOrder, one at a
// time, never one out of turn; TITLE keeps 24 cells down to 42 columns
// (HARNESS, PID and TITLE).
func TestPsLayoutPriority(t *testing.T) {
	a := psAgents()[0]
	a.Title = strings.Repeat("🚀", 40) // 80 cells
	rows := [][nCols]string{psHeader, psRow(a, psNow, "/home/u", true)}
	var natural [nCols]int
	for _, r := range rows {
		for i, c := range r {
			natural[i] = max(natural[i], fleet.TextWidth(c))
		}
	}
	gone := 0
	for width := 250; width >= 30; width-- {
		w, show := psWidths(cellWidths(rows), width, [nCols]bool{})
		total, shown := 0, 0
		for i := range w {
			if show[i] {
				total += w[i]
				shown++
			}
		}
		if total += 2 * (shown - 1); total > width && width >= 42 {
			t.Errorf("%d: the columns take %d cells", width, total)
		}
		// Dropped columns are a prefix of psDropOrder, and it only grows
		// as the terminal narrows.
		n := 0
		for n < len(psDropOrder) && !show[psDropOrder[n]] {
			n++
		}
		for _, c := range psDropOrder[n:] {
			if !show[c] {
				t.Errorf("%d: %s left out before %s", width, psHeader[c], psHeader[psDropOrder[n]])
			}
		}
		if n < gone {
			t.Errorf("%d: a column came back on a narrower terminal", width)
		}
		gone = n
		for _, c := range []int{colHarness, colPID, colTitle} {
			if !show[c] {
				t.Errorf("%d: %s left out", width, psHeader[c])
			}
		}
		// Who gives first: while TITLE is short of whole, CWD and VIA are
		// at their floors or gone; while CWD is, VIA is; while STATE is
		// short of whole, TITLE is at 24 and CWD and VIA at their floors.
		if w[colTitle] < natural[colTitle] {
			for c, floor := range map[int]int{colCwd: 12, colVia: 10} {
				if show[c] && w[c] > floor {
					t.Errorf("%d: TITLE has %d cells while %s keeps %d", width, w[colTitle], psHeader[c], w[c])
				}
			}
		}
		if show[colCwd] && w[colCwd] < natural[colCwd] && show[colVia] && w[colVia] > 10 {
			t.Errorf("%d: CWD has %d cells while VIA keeps %d", width, w[colCwd], w[colVia])
		}
		if show[colState] && w[colState] < natural[colState] {
			for c, floor := range map[int]int{colCwd: 12, colVia: 10, colTitle: 24} {
				if show[c] && w[c] > floor {
					t.Errorf("%d: STATE has %d cells while %s keeps %d", width, w[colState], psHeader[c], w[c])
				}
			}
		}
		if width >= 42 && w[colTitle] < 24 {
			t.Errorf("%d: TITLE has %d cells, want 24", width, w[colTitle])
		}
		for _, l := range psTable([]client.Agent{a}, psNow, "/home/u", psLayout{width: width, wide: true}) {
			if fleet.TextWidth(l) > width {
				t.Errorf("%d: a line of %d cells: %q", width, fleet.TextWidth(l), l)
			}
		}
	}
	if gone != len(psDropOrder) {
		t.Errorf("at 30 columns %d columns left out, want all %d", gone, len(psDropOrder))
	}
}

// TestPsIdleColumns: on a terminal, TOKENS with no count in any row and
// STATUS that only repeats STATE in every row give their room away; one
// row that says more keeps the column; a pipe keeps both.
func TestPsIdleColumns(t *testing.T) {
	a := psAgents()[0]
	a.State, a.Waiting, a.Status, a.Tokens = "waiting", "approve Bash", "waiting", nil
	b := psAgents()[1]
	b.State, b.Status, b.Tokens = "working", "busy", nil
	header := func(agents []client.Agent, width int) string {
		return psTable(agents, psNow, "/home/u", psLayout{width: width})[0]
	}
	if h := header([]client.Agent{a, b}, 200); strings.Contains(h, "TOKENS") || strings.Contains(h, "STATUS") {
		t.Errorf("idle TOKENS and STATUS kept: %q", h)
	}
	if h := header([]client.Agent{a, b}, 0); !strings.Contains(h, "TOKENS") || !strings.Contains(h, "STATUS") {
		t.Errorf("a pipe lost TOKENS or STATUS: %q", h)
	}
	b.Status, b.Tokens = "compacting", client.Tokens{"context": 41000}
	if h := header([]client.Agent{a, b}, 200); !strings.Contains(h, "TOKENS") || !strings.Contains(h, "STATUS") {
		t.Errorf("a row with a count and a status of its own, yet: %q", h)
	}
}

func TestPsNoHeader(t *testing.T) {
	lines := psTable(psAgents(), psNow, "", psLayout{noHeader: true})
	if len(lines) != len(psAgents()) || strings.HasPrefix(lines[0], "HARNESS") {
		t.Errorf("--no-header:\n%s", strings.Join(lines, "\n"))
	}
}

func TestPsSort(t *testing.T) {
	names := func(as []client.Agent) string {
		var s []string
		for _, a := range as {
			s = append(s, a.Harness+"/"+strconv.Itoa(a.PID))
		}
		return strings.Join(s, " ")
	}
	extra := client.Agent{Harness: "claude", PID: 4189, Started: psNow.Add(-time.Hour).Unix(), Cwd: "/a", Title: "add a retry", Status: "idle"}
	for _, tc := range []struct {
		key     string
		reverse bool
		want    string
	}{
		{"", false, "claude/4189 claude/345104 codex/61034 hermes/155574 omp/71500"},
		{"harness", true, "omp/71500 hermes/155574 codex/61034 claude/345104 claude/4189"},
		{"pid", false, "claude/4189 codex/61034 omp/71500 hermes/155574 claude/345104"},
		{"age", false, "codex/61034 claude/4189 claude/345104 hermes/155574 omp/71500"}, // omp's start is unknown
		{"age", true, "omp/71500 hermes/155574 claude/345104 claude/4189 codex/61034"},
		{"cwd", false, "claude/4189 hermes/155574 claude/345104 codex/61034 omp/71500"},
		{"title", false, "omp/71500 claude/4189 codex/61034 claude/345104 hermes/155574"}, // ASCII before emoji and CJK; none last
		{"status", false, "claude/345104 claude/4189 hermes/155574 codex/61034 omp/71500"},
		{"state", false, "claude/345104 hermes/155574 codex/61034 claude/4189 omp/71500"}, // waiting, idle, working, unknown
		{"state", true, "omp/71500 claude/4189 codex/61034 hermes/155574 claude/345104"},
		{"tokens", false, "codex/61034 claude/345104 claude/4189 hermes/155574 omp/71500"}, // the largest context first
	} {
		as := append(psAgents(), extra)
		sortAgents(as, tc.key, tc.reverse)
		if got := names(as); got != tc.want {
			t.Errorf("--sort %q reverse %v:\n got %s\nwant %s", tc.key, tc.reverse, got, tc.want)
		}
	}
}

// TestPsFormat: the template sees every field --json can show, by its
// JSON name, made printable; an unknown field or a syntax error is
// refused before anything runs.
func TestPsFormat(t *testing.T) {
	full := client.Agent{Harness: "h", PID: 1, PPID: 1, Started: 1, Cwd: "c", Name: "n", Title: "t", Session: "s",
		Model: "m", Via: "v", Status: "s", State: "waiting", Waiting: "w", Since: "2026-12-01T00:00:00Z", StateVia: "r",
		Zmx: "z", Tmux: "x", Transcript: "t", Agents: []string{"a"}, Tokens: client.Tokens{"input": 1},
		Limits: client.Limits{"primary": {UsedPercent: 1}}, Reach: "tty", Attach: "claude attach 3d289299", Pending: []string{"title"}}
	b, _ := json.Marshal(full)
	var keys map[string]any
	json.Unmarshal(b, &keys)
	fields := psFields(client.Agent{})
	for k := range keys {
		if _, ok := fields[k]; !ok {
			t.Errorf("--json has %q, --format does not", k)
		}
	}
	// --json has state_via and started_at beside state.via and started.
	for _, k := range []string{"state.via", "state_via", "started", "started_at"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("--json lacks %q", k)
		}
	}
	if keys["started_at"] != "1970-01-01T00:00:01Z" || keys["state_via"] != "r" {
		t.Errorf("--json started_at %v, state_via %v", keys["started_at"], keys["state_via"])
	}
	if len(fields) != len(keys) {
		t.Errorf("--format has %d fields, --json %d", len(fields), len(keys))
	}
	for _, tc := range []struct{ tmpl, want string }{
		{"{{.harness}}/{{.pid}} {{.title}}", "claude/345104 🚀 ship the release ✅ then 日本語のタイトルを直す and the rest"},
		{"{{.status}}|{{.model}}|{{.ppid}}|{{len .agents}}", "busy||0|0"},
		{`{{printf "%-8s" .harness}}{{.zmx}}`, "claude  work"},
		{"{{.state}}|{{.waiting}}|{{.state_via}}|{{.since}}", "waiting|approve Bash||"},
		// Every count is there, 0 when the harness does not say.
		{"{{.tokens.context}} {{.tokens.input}} {{.tokens.output}} {{.tokens.cache_read}} {{.tokens.cache_write}}", "41234 12 0 0 0"},
		// Both windows are there, 0 and "" when not recorded.
		{"{{.limits.primary.used_percent}}|{{.limits.secondary.window_minutes}}|{{.limits.primary.resets_at}}|{{.reach}}", "0|0||zmx"},
	} {
		tm, err := psTemplate(tc.tmpl)
		if err != nil {
			t.Fatalf("%q: %v", tc.tmpl, err)
		}
		var out bytes.Buffer
		if err := tm.Execute(&out, psFields(psAgents()[0])); err != nil || out.String() != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.tmpl, out.String(), err, tc.want)
		}
	}
	var out bytes.Buffer
	tm, _ := psTemplate("{{.title}}")
	tm.Execute(&out, psFields(client.Agent{Title: "a\nb\x1b[2J"}))
	if out.String() != "a b?[2J" {
		t.Errorf("a title with a newline and an escape: %q", out.String())
	}
	for _, bad := range []string{"{{.nosuch}}", "{{.pid", "{{template \"x\"}}", "{{.harness.x}}", "{{.tokens.nosuch}}"} {
		if _, err := psTemplate(bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
}

// TestPsFormatDocker: --format as docker users type it: json, a table
// with \t, the json function, and --no-headers.
func TestPsFormatDocker(t *testing.T) {
	l := psListing{agents: psAgents()[:2], host: func(int) string { return "-" }}
	for _, tc := range []struct {
		args []string
		want []string // lines, each a prefix
	}{
		{[]string{"--format", "json"}, []string{`{"agents":`, `{"agents":`}},
		{[]string{"--format", `{{.harness}}\t{{.pid}}`}, []string{"claude\t345104", "codex\t61034"}},
		{[]string{"--format", `table {{.harness}}\t{{.pid}}`}, []string{"HARNESS   PID", "claude    345104", "codex     61034"}},
		{[]string{"--format", `table {{.harness}}\t{{.pid}}`, "--no-headers"}, []string{"claude    345104", "codex     61034"}},
		{[]string{"--format", `{{json .tokens}}`}, []string{`{"cache_read":0,`, `{"cache_read":0,`}},
		{[]string{"--format", `{{upper .harness}}`}, []string{"CLAUDE", "CODEX"}},
	} {
		g := newGlobals()
		var o psOptions
		fs := g.FlagSet("ps")
		fs.BoolVar(&o.noHeader, "no-headers", false, "")
		fs.Func("format", "", o.setFormat)
		var out, errs bytes.Buffer
		if _, _, ok := g.ParseFlags(fs, tc.args, true, &out, &errs); !ok {
			t.Fatalf("%q: %s", tc.args, errs.String())
		}
		if code := l.print(o, nil, &out, &errs); code != cli.ExitOK {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errs.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("%q: %d lines, want %d:\n%s", tc.args, len(lines), len(tc.want), out.String())
		}
		for i, w := range tc.want {
			if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q: line %d is %q, want it to start %q\n%s", tc.args, i, lines[min(i, len(lines)-1)], w, out.String())
			}
		}
	}
}

// TestPsUsage: bad flags and combinations are one line on stderr and
// exit 2, before any daemon is dialled.
func TestPsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"ps", "--sort", "nosuch"},
		{"ps", "--sort"},
		{"ps", "--format", "{{.nosuch}}"},
		{"ps", "--format", "{{.pid"},
		{"ps", "--json", "-q"},
		{"ps", "--json", "--format", "{{.pid}}"},
		{"ps", "-q", "--format={{.pid}}"},
		{"ps", "--watch", "-q"},
		{"ps", "--watch", "--json"},
		{"ps", "extra"},
		{"ps", "--notify", "true"}, // --notify needs --watch
		{"ps", "--watch", "--notify", " "},
		{"ps", "--watch", "--notify", "true", "-q"},
		{"ps", "--sort", "State"},
	} {
		var out, errs bytes.Buffer
		code := runPs(append([]string{"-s", "/nonexistent/sock"}, args[1:]...), &out, &errs)
		if code != cli.ExitUsage || out.Len() != 0 || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out.String(), errs.String())
		}
	}
	// Good flags reach the dial.
	for _, args := range [][]string{
		{"ps", "--sort", "age", "-r"},
		{"ps", "-qr", "--sort=title"},
		{"ps", "--format", "{{.harness}}/{{.pid}}", "--no-header"},
		{"ps", "-v", "--no-trunc", "--no-header"},
		{"ps", "--wide", "--reverse", "--quiet"},
		{"ps", "--sort", "state"},
		{"ps", "--sort=tokens", "-r"},
		// Off a terminal, --watch --notify runs without a table.
		{"ps", "--watch", "--notify", "true"},
	} {
		var out, errs bytes.Buffer
		code := runPs(append([]string{"-s", "/nonexistent/sock"}, args[1:]...), &out, &errs)
		if code != cli.ExitError || !strings.Contains(errs.String(), "cannot reach the daemon") {
			t.Errorf("%q: exit %d, stderr %q; want the dial to fail", args, code, errs.String())
		}
	}
}

// TestPsHelp: every ps flag is in ps --help, on a line of its own in the
// form the man page test reads, and the help gives the drop order.
func TestPsHelp(t *testing.T) {
	var out bytes.Buffer
	if code := runPs([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("ps --help: exit %d", code)
	}
	help := out.String()
	for _, f := range []string{"--json", "--format TEMPLATE", "-q, --quiet", "--sort KEY", "-r, --reverse", "-v, --wide",
		"--no-header", "--no-trunc", "--harness NAME", "--watch", "--notify CMD", "-h, --help"} {
		if !strings.Contains(help, "\n  "+f+" ") {
			t.Errorf("ps --help has no line for %s", f)
		}
	}
	var order []string
	for _, c := range psDropOrder {
		order = append(order, psHeader[c])
	}
	if !strings.Contains(help, strings.Join(order, ", ")) {
		t.Errorf("ps --help does not give the drop order %q", strings.Join(order, ", "))
	}
}

// TestPsPendingTitle: a title the daemon has not derived yet shows as
// (pending), not as the - of a title nobody knows.
func TestPsPendingTitle(t *testing.T) {
	now := time.Now()
	r := psRow(client.Agent{Harness: "claude", PID: 1, Pending: []string{"title", "model", "tokens"}}, now, "", false)
	if r[colTitle] != psPending {
		t.Errorf("pending title shows as %q, want %q", r[colTitle], psPending)
	}
	r = psRow(client.Agent{Harness: "claude", PID: 1}, now, "", false)
	if r[colTitle] != "-" {
		t.Errorf("unknown title shows as %q, want -", r[colTitle])
	}
}

// newGlobals is the global flags of a 9harness whose one command is ps.
func newGlobals() *cli.Globals {
	g := cli.NewGlobals("test", map[string]string{"ps": Help})
	g.Cmd = "ps"
	return g
}

// runPs is 9harness ps ARGS.
func runPs(args []string, stdout, stderr io.Writer) int {
	return Run(newGlobals(), args, stdout, stderr)
}
