package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/rivo/uniseg"

	"github.com/9harness/9harness/internal/client"
)

// psEnv is a daemon on a fixture home with two real agents: a Claude-shaped
// one inside zmx session "work" and a Codex-shaped one, both working in a
// directory under the fixture home whose name is long enough to need
// shortening on a narrow terminal.
type psEnv struct {
	home, cwd     string
	d             *daemon
	claude, codex *fakeAgent
	uid           int    // the agents' and the daemon's; 0 is this process's
	sock          string // where an owned environment's daemon listens
}

const (
	psClaudeSID = "4d5e6f7a-8b9c-4d0e-8f1a-2b3c4d5e6f7a"
	psCodexSID  = "019e7777-2222-7333-8444-555566667777"
)

func newPsEnv(t *testing.T) *psEnv {
	t.Helper()
	e := &psEnv{home: fixtureHome(t)}
	e.cwd = filepath.Join(e.home, "src", "a-project-directory-with-a-rather-long-name")
	must(t, os.MkdirAll(e.cwd, 0o755))
	e.claude = startFake(t, "claude", e.home, e.cwd, "FAKE_SESSION="+psClaudeSID, "ZMX_SESSION=work")
	e.codex = startFake(t, "codex", e.home, e.cwd, "FAKE_SESSION="+psCodexSID)
	waitRegistry(t, e.home, e.claude.pid())
	e.d = startDaemon(t, e.home)
	c := e.d.client()
	eventually(t, func() bool {
		s1, _ := readField(c, e.dir("claude", e.claude)+"/session")
		s2, _ := readField(c, e.dir("codex", e.codex)+"/session")
		return s1 == psClaudeSID && s2 == psCodexSID
	}, "both agents resolved under /active")
	return e
}

func (e *psEnv) dir(h string, a *fakeAgent) string {
	return "/active/" + h + "/" + strconv.Itoa(a.pid())
}

// ps runs the client with a plain pipe for its output and HOME set to the
// fixture home.
func (e *psEnv) ps(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return run9harness(t, []string{"HOME=" + e.home}, append([]string{"-s", e.d.sock}, args...)...)
}

func run9harness(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin("9harness"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("9harness %q: %v", args, err)
	}
	return o.String(), e.String(), code
}

// psRowOf finds the row of pid in a table: its fields, split on blanks.
func psRowOf(lines []string, pid int) []string {
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			return f
		}
	}
	return nil
}

var agePattern = regexp.MustCompile(`^[0-9]+[smhd]$`)

// TestPsTable: one row per agent under the header, with its harness, pid,
// age, turn state, tokens, limits, status, directory (HOME shortened to
// ~), reach, zmx session, route and title; sorted by harness then pid; piped, nothing is
// shortened.
func TestPsTable(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	out, errs, code := e.ps(t, "ps")
	if code != 0 || errs != "" {
		t.Fatalf("ps: exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "HARNESS PID AGE STATE TOKENS LIMITS STATUS CWD REACH ZMX/TMUX VIA TITLE" {
		t.Fatalf("header %q", lines[0])
	}
	cwd := "~/src/" + filepath.Base(e.cwd)
	// Reach is the kernel's word on the terminal the test runs in (none
	// under CI: detached): the row shows what the tree says.
	reach := func(h string, a *fakeAgent) string {
		r, err := readField(e.d.client(), e.dir(h, a)+"/reach")
		if err != nil {
			return "-"
		}
		return r
	}
	// The fake codex's rollout has no turn in it: its state is what the
	// tree says, - when absent.
	codexState, err := readField(e.d.client(), e.dir("codex", e.codex)+"/state")
	if err != nil {
		codexState = "-"
	}
	for _, tc := range []struct {
		h     string
		a     *fakeAgent
		want  []string // STATE TOKENS LIMITS STATUS CWD REACH ZMX/TMUX VIA
		title string
	}{
		{"claude", e.claude, []string{"working", "-", "-", "busy", cwd, reach("claude", e.claude), "zmx:work", "registry"}, "fake claude " + strconv.Itoa(e.claude.pid())},
		{"codex", e.codex, []string{codexState, "-", "-", "-", cwd, reach("codex", e.codex), "-", "fd"}, "-"},
	} {
		n := 0
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && f[1] == strconv.Itoa(tc.a.pid()) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s %d has %d rows, want 1:\n%s", tc.h, tc.a.pid(), n, out)
		}
		f := psRowOf(lines, tc.a.pid())
		if len(f) < 12 {
			t.Errorf("%s row %q", tc.h, f)
			continue
		}
		if f[0] != tc.h || !agePattern.MatchString(f[2]) || strings.Join(f[3:11], " ") != strings.Join(tc.want, " ") || strings.Join(f[11:], " ") != tc.title {
			t.Errorf("%s row %q, want %s PID AGE %q %q", tc.h, f, tc.h, tc.want, tc.title)
		}
	}
	if strings.Contains(out, "…") {
		t.Errorf("piped output was shortened:\n%s", out)
	}
	// Sorted by harness, then pid.
	var keys []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		pid, _ := strconv.Atoi(f[1])
		keys = append(keys, fmt.Sprintf("%-8s %10d", f[0], pid))
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("rows not sorted by harness, then pid:\n%s", out)
	}
	// Without HOME to shorten with, the directory is whole.
	out, _, _ = run9harness(t, nil, "-s", e.d.sock, "ps")
	if f := psRowOf(strings.Split(out, "\n"), e.codex.pid()); len(f) < 8 || f[7] != e.cwd {
		t.Errorf("without HOME, codex row %q, want cwd %s", f, e.cwd)
	}
}

// TestPsJSON: --json gives every fact the tree has, as the tree says it,
// and leaves out exactly the facts the tree does not have.
func TestPsJSON(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	out, errs, code := e.ps(t, "ps", "--json")
	if code != 0 || errs != "" {
		t.Fatalf("ps --json: exit %d, stderr %q", code, errs)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("ps --json is not a JSON array: %v\n%s", err, out)
	}
	c := e.d.client()
	for _, tc := range []struct {
		h string
		a *fakeAgent
	}{{"claude", e.claude}, {"codex", e.codex}} {
		var obj map[string]any
		for _, o := range got {
			if o["harness"] == tc.h && o["pid"] == float64(tc.a.pid()) {
				obj = o
			}
		}
		if obj == nil {
			t.Errorf("no %s %d in:\n%s", tc.h, tc.a.pid(), out)
			continue
		}
		dir := e.dir(tc.h, tc.a)
		// What the tree says, read independently.
		want := map[string]string{"harness": tc.h}
		for _, name := range listNames(t, c, dir) {
			switch name {
			case "resume", "messages":
				// The agent's own files only: resume's kept flags'
				// values can hold keys, and ps --json output gets
				// pasted; messages is read from a transcript or a
				// database, which a listing never does.
				continue
			case "transcript":
				want[name] = dir + "/transcript"
			case "agents":
				want[name] = strings.Join(listNames(t, c, dir+"/agents"), ",")
			default:
				v, err := readField(c, dir+"/"+name)
				must(t, err)
				want[name] = v
			}
		}
		have := map[string]string{}
		for k, v := range obj {
			switch v := v.(type) {
			case float64:
				have[k] = strconv.FormatFloat(v, 'f', -1, 64)
			case string:
				have[k] = v
			case []any:
				var s []string
				for _, x := range v {
					s = append(s, fmt.Sprint(x))
				}
				have[k] = strings.Join(s, ",")
			default:
				t.Errorf("%s %s: unexpected JSON type %T", tc.h, k, v)
			}
		}
		for k, v := range want {
			if hv, ok := have[k]; !ok || hv != v {
				t.Errorf("%s %s: JSON %q (present %v), tree %q", tc.h, k, hv, ok, v)
			}
		}
		// The keys scripts can name, beside the tree's own, for one
		// release: state_via is state.via, started_at is started in
		// RFC 3339.
		if v, ok := have["state_via"]; ok && v != want["state.via"] {
			t.Errorf("%s: state_via %q, state.via %q", tc.h, v, want["state.via"])
		}
		if v := have["started_at"]; want["started"] != "" {
			n, _ := strconv.ParseInt(want["started"], 10, 64)
			if w := time.Unix(n, 0).UTC().Format(time.RFC3339); v != w {
				t.Errorf("%s: started_at %q, want %q (started %s)", tc.h, v, w, want["started"])
			}
		}
		for k := range have {
			if _, ok := want[k]; !ok && k != "state_via" && k != "started_at" {
				t.Errorf("%s: JSON has %s = %q, which the tree does not", tc.h, k, have[k])
			}
		}
		for _, k := range []string{"pid", "ppid", "started", "cwd", "via", "zmx", "tmux", "session", "transcript"} {
			if _, ok := have[k]; !ok {
				t.Errorf("%s: JSON lacks %s", tc.h, k)
			}
		}
	}
	// Codex publishes no status: absent in the tree, absent in JSON; its
	// zmx is there, and empty.
	for _, o := range got {
		if o["pid"] == float64(e.codex.pid()) {
			if _, ok := o["status"]; ok {
				t.Errorf("codex has a status in JSON: %v", o)
			}
			if z, ok := o["zmx"]; !ok || z != "" {
				t.Errorf("codex zmx in JSON: %v %v, want present and empty", z, ok)
			}
		}
	}
	if _, _, err := c.Stat(e.dir("codex", e.codex) + "/status"); !isErrno(err, linux.ENOENT) {
		t.Errorf("codex status in the tree: %v", err)
	}
	// No agents at all is an empty array, not null.
	empty := startDaemon(t, e.home, "--proc", emptyProc(t))
	out, _, code = run9harness(t, nil, "-s", empty.sock, "ps", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("ps --json with no agents: exit %d, %q", code, out)
	}
}

// TestPsHarnessFilter: --harness keeps only those harnesses' agents,
// repeated or as a comma list; an unknown one is one line and exit 1.
func TestPsHarnessFilter(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	for _, tc := range []struct {
		args   []string
		claude bool
	}{
		{[]string{"--harness", "codex"}, false},
		{[]string{"--harness=codex,claude"}, true},
		{[]string{"--harness", "claude", "--harness", "codex"}, true},
	} {
		out, errs, code := e.ps(t, append([]string{"ps"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("ps %q: exit %d %s", tc.args, code, errs)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		for _, l := range lines[1:] {
			if h := strings.Fields(l)[0]; h != "codex" && (!tc.claude || h != "claude") {
				t.Errorf("ps %q lists a %s agent:\n%s", tc.args, h, out)
			}
		}
		if psRowOf(lines, e.codex.pid()) == nil {
			t.Errorf("ps %q lacks the codex agent:\n%s", tc.args, out)
		}
		if (psRowOf(lines, e.claude.pid()) != nil) != tc.claude {
			t.Errorf("ps %q: claude listed %v, want %v:\n%s", tc.args, !tc.claude, tc.claude, out)
		}
	}
	out, _, _ := e.ps(t, "ps", "--json", "--harness", "codex")
	var got []map[string]any
	must(t, json.Unmarshal([]byte(out), &got))
	for _, o := range got {
		if o["harness"] != "codex" {
			t.Errorf("--json --harness codex lists %v", o)
		}
	}
	out, errs, code := e.ps(t, "ps", "--harness", "nosuch")
	if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `"nosuch"`) {
		t.Errorf("unknown harness: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// psTmux is a private tmux server for running the client on a terminal:
// its own socket in the test's directory, no configuration file, killed
// at the end through that socket.
type psTmux struct {
	t    *testing.T
	sock string
}

func newPsTmux(t *testing.T) *psTmux {
	t.Helper()
	require(t, "tmux")
	p := &psTmux{t: t, sock: filepath.Join(shortDir(t, "pt"), "s")}
	t.Cleanup(func() { exec.Command("tmux", "-S", p.sock, "kill-server").Run() })
	return p
}

func (p *psTmux) run(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", p.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows, wrapped lines joined: a line longer than
// the pane comes back longer than the pane.
func (p *psTmux) screen(target string) []string {
	p.t.Helper()
	return p.capture(target, "-J")
}

// rows is what the pane shows, one screen row per line: a line that
// wrapped takes two.
func (p *psTmux) rows(target string) []string {
	p.t.Helper()
	return p.capture(target)
}

func (p *psTmux) capture(target string, flags ...string) []string {
	p.t.Helper()
	args := append(append([]string{"capture-pane", "-p"}, flags...), "-t", target)
	lines := strings.Split(strings.TrimRight(p.run(args...), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// Titles for the terminal test: emoji (🚀 and ✅ take two cells, as the
// hand-written width table did not know), CJK, and a combining mark.
const (
	psClaudeTitle = "🚀 ship the release ✅ then fix 日本語のタイトル and the cafe\u0301 menu, all of it today"
	psCodexTitle  = "修复构建 ✅ 🚀 and the flaky 测试 in the retry queue that fails on Mondays"
)

// setTitles gives the agents the emoji titles, as a user renaming the
// session would: a custom-title line appended to the Claude transcript,
// a thread name in Codex's session index.
func (e *psEnv) setTitles(t *testing.T) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.home, ".claude", "projects", "*", psClaudeSID+".jsonl"))
	if len(m) != 1 {
		t.Fatalf("the fake claude's transcript: %q", m)
	}
	line, _ := json.Marshal(map[string]string{"type": "custom-title", "customTitle": psClaudeTitle, "sessionId": psClaudeSID})
	f, err := os.OpenFile(m[0], os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write(append(line, '\n'))
	must(t, err)
	must(t, f.Close())
	line, _ = json.Marshal(map[string]string{"id": psCodexSID, "thread_name": psCodexTitle, "updated_at": time.Now().UTC().Format(time.RFC3339)})
	must(t, os.WriteFile(filepath.Join(e.home, ".codex", "session_index.jsonl"), append(line, '\n'), 0o644))
	c := e.d.client()
	eventually(t, func() bool {
		t1, _ := readField(c, e.dir("claude", e.claude)+"/title")
		t2, _ := readField(c, e.dir("codex", e.codex)+"/title")
		return t1 == psClaudeTitle && t2 == psCodexTitle
	}, "the emoji titles under /active")
}

// TestPsTerminalWidth: in a real tmux the table fits the pane: no row
// wraps (each agent is on one screen row, as wide as the pane at most,
// emoji and CJK counted as two cells), TITLE keeps 24 cells at 80 and 120
// columns, and on a wide pane nothing is cut.
func TestPsTerminalWidth(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setTitles(t)
	// The widest STATE: what a waiting agent waits for.
	e.setClaudeStatus(t, "waiting", "approve Bash")
	tm := newPsTmux(t)
	for _, width := range []int{60, 80, 100, 120, 200} {
		name := "w" + strconv.Itoa(width)
		script := fmt.Sprintf("HOME=%s %s -s %s ps; echo \"[exit $?]\"; exec sleep 600", e.home, bin("9harness"), e.d.sock)
		tm.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(width), "-y", "1000", "/bin/sh", "-c", script)
		var lines []string
		eventually(t, func() bool {
			lines = tm.rows(name)
			return contains(lines, "[exit 0]")
		}, "ps to finish in a "+name+" pane")
		table := lines[:slices.Index(lines, "[exit 0]")]
		screen := strings.Join(table, "\n")
		t.Logf("%d columns:\n%s", width, screen)
		if len(table) < 3 || !strings.HasPrefix(table[0], "HARNESS") {
			t.Fatalf("%d columns: no table:\n%s", width, screen)
		}
		// A row that wrapped takes two screen rows, which tmux joins
		// again with -J. (The daemon lists every agent of the uid, so
		// other tests' agents may have rows too.)
		joined := tm.screen(name)
		if j := joined[:slices.Index(joined, "[exit 0]")]; len(j) != len(table) {
			t.Errorf("%d columns: %d screen rows hold %d lines: a row wrapped:\n%s", width, len(table), len(j), screen)
		}
		for _, l := range table {
			if n := uniseg.StringWidth(l); n > width {
				t.Errorf("%d columns: a row of %d cells: %q", width, n, l)
			}
		}
		// TITLE is the last column: its cells are the row's past the
		// header's TITLE.
		at := strings.Index(table[0], "TITLE")
		if at < 0 {
			t.Fatalf("%d columns: no TITLE column:\n%s", width, screen)
		}
		at = uniseg.StringWidth(table[0][:at])
		for _, r := range []struct {
			h     string
			a     *fakeAgent
			title string
		}{{"claude", e.claude, psClaudeTitle}, {"codex", e.codex, psCodexTitle}} {
			var rows []string
			for _, l := range table {
				if f := strings.Fields(l); len(f) > 1 && f[1] == strconv.Itoa(r.a.pid()) {
					rows = append(rows, l)
				}
			}
			if len(rows) != 1 || !strings.HasPrefix(rows[0], r.h+" ") {
				t.Errorf("%d columns: %s %d has rows %q, want one:\n%s", width, r.h, r.a.pid(), rows, screen)
				continue
			}
			shown := cellsFrom(rows[0], at)
			cells := uniseg.StringWidth(shown)
			// The first 10 characters are whole at any width.
			if prefix := string([]rune(r.title)[:10]); !strings.HasPrefix(shown, prefix) {
				t.Errorf("%d columns: TITLE %q does not start with %q", width, shown, prefix)
			}
			switch {
			case width >= 200:
				if shown != r.title {
					t.Errorf("%d columns: TITLE %q, want it whole: %q", width, shown, r.title)
				}
			case width >= 80:
				// TITLE keeps at least 24 cells (other tests' agents may
				// widen the other columns, never past that) and fills
				// what it has.
				room := width - at
				if room < 24 {
					t.Errorf("%d columns: TITLE has %d cells, want 24:\n%s", width, room, screen)
				}
				if want := clipTitle(r.title, room); shown != want {
					t.Errorf("%d columns: TITLE %q (%d cells), want %q in its %d", width, shown, cells, want, room)
				}
			}
			// STATE stays longest of the columns that may go, and what
			// a waiting agent waits for shows whole from 80 columns up;
			// "waiting" at least below.
			if r.h == "claude" {
				switch {
				case width >= 80 && !strings.Contains(rows[0], " waiting: approve Bash "):
					t.Errorf("%d columns: the claude row lacks its whole STATE: %q", width, rows[0])
				case !strings.Contains(rows[0], " waiting"):
					t.Errorf("%d columns: the claude row lacks STATE: %q", width, rows[0])
				}
			}
		}
		if width < 200 && !strings.Contains(screen, "…") {
			t.Errorf("%d columns: nothing was cut:\n%s", width, screen)
		}
	}
}

// TestPsColumnsAndLocale: on a 200-column pane, COLUMNS=60 makes ps fit 60
// columns, as procps's ps does; under LC_ALL=C a cut is marked with +, and
// nothing but the agents' own text (here the titles) is beyond ASCII.
func TestPsColumnsAndLocale(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setClaudeStatus(t, "waiting", "approve Bash")
	tm := newPsTmux(t)
	for _, tc := range []struct{ name, env, cut, notCut string }{
		{"utf8", "COLUMNS=60 LANG=C.UTF-8", "…", "+"},
		{"c", "COLUMNS=60 LC_ALL=C", "+", "…"},
	} {
		script := fmt.Sprintf("HOME=%s %s %s -s %s ps; echo \"[exit $?]\"; exec sleep 600", e.home, tc.env, bin("9harness"), e.d.sock)
		tm.run("new-session", "-d", "-s", tc.name, "-x", "200", "-y", "1000", "/bin/sh", "-c", script)
		var lines []string
		eventually(t, func() bool {
			lines = tm.rows(tc.name)
			return contains(lines, "[exit 0]")
		}, "ps to finish in the "+tc.name+" pane")
		table := lines[:slices.Index(lines, "[exit 0]")]
		screen := strings.Join(table, "\n")
		t.Logf("%s:\n%s", tc.env, screen)
		if len(table) < 3 || !strings.HasPrefix(table[0], "HARNESS") {
			t.Fatalf("%s: no table:\n%s", tc.env, screen)
		}
		for _, l := range table {
			if n := uniseg.StringWidth(l); n > 60 {
				t.Errorf("%s: a row of %d cells on a 200-column pane: %q", tc.env, n, l)
			}
		}
		if !strings.Contains(screen, tc.cut) || strings.Contains(screen, tc.notCut) && tc.notCut == "…" {
			t.Errorf("%s: cuts are not marked %q (and never %q):\n%s", tc.env, tc.cut, tc.notCut, screen)
		}
	}
}

// cellsFrom is what s shows from cell at on.
// clipTitle is a title cut into room cells as the table's last column
// is: whole grapheme clusters up to room-1 cells, the spaces they end
// with trimmed, then "…".
func clipTitle(title string, room int) string {
	if uniseg.StringWidth(title) <= room {
		return title
	}
	state, n, rest := -1, 0, title
	for rest != "" {
		_, next, w, st := uniseg.FirstGraphemeClusterInString(rest, state)
		if n+w > room-1 {
			break
		}
		rest, state, n = next, st, n+w
	}
	return strings.TrimRight(title[:len(title)-len(rest)], " ") + "…"
}

func cellsFrom(s string, at int) string {
	state, n := -1, 0
	for s != "" && n < at {
		var w int
		_, s, w, state = uniseg.FirstGraphemeClusterInString(s, state)
		n += w
	}
	return s
}

// TestPsOutputs: -q prints what move takes, --format a line per agent
// from the template, --no-header and --sort/--reverse shape the table,
// and a write error is one line on stderr with exit 1. The daemon lists
// every agent of the uid, so only this test's agents' lines are compared.
func TestPsOutputs(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	cl, cx := strconv.Itoa(e.claude.pid()), strconv.Itoa(e.codex.pid())
	ours := func(out string) string {
		var keep []string
		for _, l := range strings.SplitAfter(out, "\n") {
			if strings.Contains(l, cl) || strings.Contains(l, cx) {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "")
	}
	quiet := regexp.MustCompile(`^([a-z]+/[0-9]+\n)*$`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-q"}, "claude/" + cl + "\ncodex/" + cx + "\n"},
		{[]string{"--quiet", "--reverse"}, "codex/" + cx + "\nclaude/" + cl + "\n"},
		{[]string{"-q", "--harness", "codex"}, "codex/" + cx + "\n"},
		{[]string{"--format", "{{.harness}} {{.pid}} {{.via}} [{{.status}}] {{.zmx}}"},
			"claude " + cl + " registry [busy] work\ncodex " + cx + " fd [] \n"},
		{[]string{"--format={{.session}} {{.pid}}", "-r"}, psCodexSID + " " + cx + "\n" + psClaudeSID + " " + cl + "\n"},
	} {
		out, errs, code := e.ps(t, append([]string{"ps"}, tc.args...)...)
		if code != 0 || errs != "" || ours(out) != tc.want {
			t.Errorf("ps %q: exit %d, stderr %q, stdout %q, want %q", tc.args, code, errs, out, tc.want)
		}
		if !strings.HasPrefix(tc.args[0], "--format") && !quiet.MatchString(out) {
			t.Errorf("ps %q: %q is not HARNESS/PID lines", tc.args, out)
		}
	}
	// --sort pid orders by pid; --no-header drops the header.
	out, _, _ := e.ps(t, "ps", "--sort", "pid", "--no-header")
	var pids []int
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		pid, err := strconv.Atoi(strings.Fields(l)[1])
		if err != nil {
			t.Fatalf("ps --sort pid --no-header: line %q:\n%s", l, out)
		}
		pids = append(pids, pid)
	}
	if !sort.IntsAreSorted(pids) || !slices.Contains(pids, e.claude.pid()) || !slices.Contains(pids, e.codex.pid()) {
		t.Errorf("ps --sort pid --no-header:\n%s", out)
	}
	// A bad template is a usage error, before the daemon is asked.
	_, errs, code := e.ps(t, "ps", "--format", "{{.nosuch}}")
	if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "nosuch") {
		t.Errorf("ps --format '{{.nosuch}}': exit %d, stderr %q", code, errs)
	}
	// ps > /dev/full: the write fails, and says so.
	for _, args := range [][]string{{"ps"}, {"ps", "--json"}, {"ps", "-q"}} {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		must(t, err)
		cmd := exec.Command(bin("9harness"), append([]string{"-s", e.d.sock}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.home}
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &stderr
		err = cmd.Run()
		full.Close()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 1 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "write error: no space left on device") {
			t.Errorf("9harness %q > /dev/full: %v, stderr %q; want exit 1 and the write error", args, err, stderr.String())
		}
	}
}

// TestPsWatch: --watch redraws the table in place every second with the
// cursor hidden; Ctrl-C ends it with status 0, the cursor shown again and
// the shell's prompt back.
func TestPsWatch(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	tm := newPsTmux(t)
	tm.run("new-session", "-d", "-s", "w", "-x", "120", "-y", "1000",
		"/usr/bin/env", "-i", "HOME="+e.home, "PATH=/usr/bin:/bin", "PS1=ps-test$ ", "TERM=xterm-256color", "/bin/sh")
	eventually(t, func() bool { return contains(tm.screen("w"), "ps-test$") }, "the shell's prompt")
	tm.run("send-keys", "-t", "w", "-l", bin("9harness")+" -s "+e.d.sock+" ps --watch")
	tm.run("send-keys", "-t", "w", "Enter")
	pid := strconv.Itoa(e.claude.pid())
	var first []string
	eventually(t, func() bool {
		first = tm.screen("w")
		return len(first) > 3 && strings.HasPrefix(first[0], "Every 1s: 9harness ps") &&
			strings.HasPrefix(first[2], "HARNESS") && psRowOf(first, e.claude.pid()) != nil
	}, "the first frame")
	if f := tm.run("display-message", "-p", "-t", "w", "#{cursor_flag}"); strings.TrimSpace(f) != "0" {
		t.Errorf("the cursor is shown while watching (cursor_flag %q)", f)
	}
	// A later frame: the clock in the top line moved, the table is still
	// there, in the same place.
	var later []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(300 * time.Millisecond)
		later = tm.screen("w")
		if later[0] != first[0] || time.Now().After(deadline) {
			break
		}
	}
	if later[0] == first[0] {
		t.Errorf("no redraw in 5 s: %q", later[0])
	}
	if !strings.HasPrefix(later[2], "HARNESS") || psRowOf(later, e.claude.pid()) == nil {
		t.Errorf("the redrawn frame lacks the table:\n%s", strings.Join(later, "\n"))
	}
	if n := strings.Count(strings.Join(later, "\n"), "HARNESS"); n != 1 {
		t.Errorf("%d headers on the screen: frames are not drawn in place:\n%s", n, strings.Join(later, "\n"))
	}
	tm.run("send-keys", "-t", "w", "C-c")
	eventually(t, func() bool {
		s := tm.screen("w")
		return strings.TrimSpace(s[len(s)-1]) == "ps-test$"
	}, "the prompt after Ctrl-C")
	if f := tm.run("display-message", "-p", "-t", "w", "#{cursor_flag}"); strings.TrimSpace(f) != "1" {
		t.Errorf("the cursor is still hidden after Ctrl-C (cursor_flag %q)", f)
	}
	tm.run("send-keys", "-t", "w", "-l", "echo rc=$?")
	tm.run("send-keys", "-t", "w", "Enter")
	eventually(t, func() bool { return contains(tm.screen("w"), "rc=0") }, "the exit status 0")
	// The last frame stays on the screen, above the prompt.
	if psRowOf(tm.screen("w"), e.claude.pid()) == nil {
		t.Errorf("the table is gone after Ctrl-C (pid %s)", pid)
	}
	// -n sets the period.
	tm.run("send-keys", "-t", "w", "-l", "clear; "+bin("9harness")+" -s "+e.d.sock+" ps --watch -n 2")
	tm.run("send-keys", "-t", "w", "Enter")
	eventually(t, func() bool {
		s := tm.screen("w")
		return len(s) > 3 && strings.HasPrefix(s[0], "Every 2s: 9harness ps") && psRowOf(s, e.claude.pid()) != nil
	}, "a frame of ps --watch -n 2")
	tm.run("send-keys", "-t", "w", "C-c")
	eventually(t, func() bool {
		s := tm.screen("w")
		return strings.TrimSpace(s[len(s)-1]) == "ps-test$"
	}, "the prompt after Ctrl-C")
	// --watch refuses a pipe; -n is --watch's, and has a floor.
	for _, args := range [][]string{{"ps", "--watch"}, {"ps", "-n", "2"}, {"ps", "--watch", "-n", "0.1"}} {
		_, errs, code := e.ps(t, args...)
		if code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, %q", args, code, errs)
		}
	}
}

// TestPsMoveHelp: ps and move explain themselves like Unix tools
// (synopsis, options, examples) on standard output with status 0, and
// both say in one line, with status 1, that the daemon is unreachable.
func TestPsMoveHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"ps", "--help"}, {"ps", "-h"}, {"help", "ps"}, {"move", "--help"}, {"help", "move"}} {
		out, errs, code := run9harness(t, nil, args...)
		if code != 0 || errs != "" {
			t.Errorf("9harness %q: exit %d, stderr %q", args, code, errs)
		}
		want := []string{"usage: 9harness", "Options:", "Examples:"}
		if contains(args, "move") {
			want = append(want, "move [--tmux] HARNESS/PID NAME", "--allow-move", "attach with:")
		} else {
			want = append(want, "ps [-qrv] [--json | --format TEMPLATE]", "HARNESS", "TITLE", "VIA, STATUS, LIMITS, AGE, TOKENS, ZMX/TMUX, REACH, CWD, STATE")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("9harness %q lacks %q:\n%s", args, w, out)
			}
		}
	}
	out, _, code := run9harness(t, nil, "--help")
	for _, w := range []string{"\n  ps [", "move [--tmux] HARNESS/PID NAME", "help [COMMAND]", "\n  relay ", "--ssh DEST"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("9harness --help (exit %d) lacks %q", code, w)
		}
	}
	for _, args := range [][]string{{"ps"}, {"ps", "--json"}, {"move", "claude/1", "x"}} {
		out, errs, code := run9harness(t, nil, append([]string{"-s", "/nonexistent/sock"}, args...)...)
		if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "cannot reach the daemon at /nonexistent/sock") {
			t.Errorf("9harness %q with no daemon: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	for _, args := range [][]string{{"ps", "extra"}, {"ps", "--nosuch"}, {"move", "claude/1"}, {"move", "claude", "x"}, {"move", "claude/x1", "x"}, {"help", "nosuch"}} {
		_, errs, code := run9harness(t, nil, append([]string{"-s", "/nonexistent/sock"}, args...)...)
		if code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("9harness %q: exit %d, stderr %q, want one line and exit 2", args, code, errs)
		}
	}
}

// TestPsTableMatchesWalk: /active/table's rows are what every agent's
// own files say, for live fakes and for the committed fixture process
// table (all its harnesses and routes).
func TestPsTableMatchesWalk(t *testing.T) {
	t.Parallel()
	same := func(t *testing.T, c *client.Client, min int) {
		t.Helper()
		var tab, walk []client.Agent
		// A live agent may write between the two reads: retry a little.
		for try := 0; try < 5; try++ {
			var err error
			tab, err = c.Table()
			must(t, err)
			walk, err = c.AgentsWalk()
			must(t, err)
			if reflect.DeepEqual(tab, walk) {
				break
			}
		}
		if !reflect.DeepEqual(tab, walk) {
			t.Fatalf("table:\n%+v\nfiles:\n%+v", tab, walk)
		}
		if len(tab) < min {
			t.Fatalf("table has %d agents, want at least %d: %+v", len(tab), min, tab)
		}
	}
	t.Run("fakes", func(t *testing.T) {
		// A daemon that lists only this test's agents: another agent
		// starting or ending between the two reads would part them.
		e := newOwnedPsEnv(t)
		e.codex = e.startFake(t, "codex", "FAKE_SESSION="+psCodexSID)
		c := e.d.client()
		eventually(t, func() bool {
			s, _ := readField(c, e.dir("codex", e.codex)+"/session")
			return s == psCodexSID
		}, "the codex agent resolved under /active")
		same(t, c, 2)
	})
	t.Run("fixture", func(t *testing.T) {
		home := fixtureHome(t)
		fixtureTimeline(t, home)
		fixturePIDDomain(t, home)
		procs, pids := copyProcTable(t, "../testdata/proc", home)
		d := startFixtureDaemon(t, home, procs, pids)
		same(t, d.client(), 5)
	})
}

// walkCounter is a proxy in front of the daemon's socket that counts the
// Twalk messages clients send through it.
type walkCounter struct {
	sock  string
	walks atomic.Int64
}

func newWalkCounter(t *testing.T, target string) *walkCounter {
	t.Helper()
	w := &walkCounter{sock: filepath.Join(t.TempDir(), "proxy.sock")}
	l, err := net.Listen("unix", w.sock)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("unix", target)
			if err != nil {
				cc.Close()
				continue
			}
			go func() { io.Copy(cc, sc); cc.Close() }()
			go func() {
				defer sc.Close()
				hdr := make([]byte, 5)
				for {
					if _, err := io.ReadFull(cc, hdr); err != nil {
						return
					}
					size := binary.LittleEndian.Uint32(hdr)
					if hdr[4] == 110 { // Twalk
						w.walks.Add(1)
					}
					if _, err := sc.Write(hdr); err != nil {
						return
					}
					if _, err := io.CopyN(sc, cc, int64(size)-5); err != nil {
						return
					}
				}
			}()
		}
	}()
	return w
}

// TestPsUsesTable: ps, ps --json and ps --harness read the table: a few
// 9P walks in all, not a walk per agent and file.
func TestPsUsesTable(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	w := newWalkCounter(t, e.d.sock)
	for _, tc := range []struct {
		args []string
		max  int64
	}{
		{[]string{"ps", "--json"}, 1},
		{[]string{"ps"}, 1},
		{[]string{"ps", "--harness", "claude"}, 2}, // and /active, to know the harness
	} {
		w.walks.Store(0)
		out, errs, code := run9harness(t, []string{"HOME=" + e.home}, append([]string{"-s", w.sock}, tc.args...)...)
		if code != 0 || !strings.Contains(out, strconv.Itoa(e.claude.pid())) {
			t.Fatalf("%q: exit %d, %q %q", tc.args, code, out, errs)
		}
		if n := w.walks.Load(); n > tc.max {
			t.Errorf("%q sent %d walks, want at most %d (the table, not every agent's files)", tc.args, n, tc.max)
		}
	}
}

// TestPsTableTmux: with a real tmux server, the table's tmux value for
// agents in its panes (asked once per server, list-panes -a) is what each
// agent's own tmux file says (asked per pane, display-message).
func TestPsTableTmux(t *testing.T) {
	t.Parallel()
	tm := require(t, "tmux")
	home := fixtureHome(t)
	dir, err := os.MkdirTemp("/tmp", "h9tab")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o700))
	sleep, err := exec.LookPath("sleep")
	must(t, err)
	b, err := os.ReadFile(sleep)
	must(t, err)
	claude := filepath.Join(dir, "claude")
	writeExe(t, claude, b)
	sock := filepath.Join(dir, "s")
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tm, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TERM=xterm"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tmux("new-session", "-d", "-s", "alpha", claude+" 600")
	t.Cleanup(func() { exec.Command(tm, "-S", sock, "kill-server").Run() })
	tmux("new-session", "-d", "-s", "beta", claude+" 600")
	tmux("new-window", "-t", "beta", claude+" 600")
	var pids []int
	for _, f := range strings.Fields(tmux("list-panes", "-a", "-F", "#{pane_pid}")) {
		n, err := strconv.Atoi(f)
		must(t, err)
		pids = append(pids, n)
	}
	if len(pids) != 3 {
		t.Fatalf("panes: %v", pids)
	}
	d := startDaemon(t, home)
	c := d.client()
	var tab []client.Agent
	eventually(t, func() bool {
		tab, err = c.Table()
		n := 0
		for _, a := range tab {
			if slices.Contains(pids, a.PID) && a.Tmux != "" {
				n++
			}
		}
		return err == nil && n == 3
	}, "the three tmux agents in the table with their sessions")
	for _, a := range tab {
		if !slices.Contains(pids, a.PID) {
			continue
		}
		file, err := readField(c, client.AgentDir(a.Harness, a.PID)+"/tmux")
		must(t, err)
		if a.Tmux != file || !strings.HasSuffix(a.Tmux, "alpha") && !strings.HasSuffix(a.Tmux, "beta") {
			t.Errorf("pid %d: table tmux %q, file %q", a.PID, a.Tmux, file)
		}
	}
}
