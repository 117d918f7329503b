package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hugelgupf/p9/linux"
)

// psEnv is a daemon on a fixture home with two real agents: a Claude-shaped
// one inside zmx session "work" and a Codex-shaped one, both working in a
// directory under the fixture home whose name is long enough to need
// shortening on a narrow terminal.
type psEnv struct {
	home, cwd     string
	d             *daemon
	claude, codex *fakeAgent
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
// age, status, directory (HOME shortened to ~), zmx session, route and
// title; sorted by harness then pid; piped, nothing is shortened.
func TestPsTable(t *testing.T) {
	e := newPsEnv(t)
	out, errs, code := e.ps(t, "ps")
	if code != 0 || errs != "" {
		t.Fatalf("ps: exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "HARNESS PID AGE STATUS CWD ZMX/TMUX VIA TITLE" {
		t.Fatalf("header %q", lines[0])
	}
	cwd := "~/src/" + filepath.Base(e.cwd)
	for _, tc := range []struct {
		h     string
		a     *fakeAgent
		want  []string // STATUS CWD ZMX/TMUX VIA
		title string
	}{
		{"claude", e.claude, []string{"busy", cwd, "zmx:work", "registry"}, "fake claude " + strconv.Itoa(e.claude.pid())},
		{"codex", e.codex, []string{"-", cwd, "-", "fd"}, "-"},
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
		if len(f) < 8 {
			t.Errorf("%s row %q", tc.h, f)
			continue
		}
		if f[0] != tc.h || !agePattern.MatchString(f[2]) || strings.Join(f[3:7], " ") != strings.Join(tc.want, " ") || strings.Join(f[7:], " ") != tc.title {
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
	if f := psRowOf(strings.Split(out, "\n"), e.codex.pid()); len(f) < 5 || f[4] != e.cwd {
		t.Errorf("without HOME, codex row %q, want cwd %s", f, e.cwd)
	}
}

// TestPsJSON: --json gives every fact the tree has, as the tree says it,
// and leaves out exactly the facts the tree does not have.
func TestPsJSON(t *testing.T) {
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
		for k := range have {
			if _, ok := want[k]; !ok {
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
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `"nosuch"`) {
		t.Errorf("unknown harness: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// psTmux is a private tmux server for running the client on a terminal.
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
	cmd := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...)
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
	lines := strings.Split(strings.TrimRight(p.run("capture-pane", "-p", "-J", "-t", target), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// TestPsTerminalWidth: on a terminal the table fits its width, TITLE and
// CWD giving way first (marked with …); on a wide one nothing is cut.
func TestPsTerminalWidth(t *testing.T) {
	e := newPsEnv(t)
	tm := newPsTmux(t)
	for _, width := range []int{60, 200} {
		name := "w" + strconv.Itoa(width)
		script := fmt.Sprintf("HOME=%s %s -s %s ps; echo \"[exit $?]\"; exec sleep 600", e.home, bin("9harness"), e.d.sock)
		tm.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(width), "-y", "40", "/bin/sh", "-c", script)
		var lines []string
		eventually(t, func() bool {
			lines = tm.screen(name)
			return contains(lines, "[exit 0]")
		}, "ps to finish in a "+name+" pane")
		var table []string
		for _, l := range lines {
			if l == "[exit 0]" {
				break
			}
			table = append(table, l)
		}
		if len(table) < 3 || !strings.HasPrefix(table[0], "HARNESS") {
			t.Fatalf("%d columns: no table:\n%s", width, strings.Join(lines, "\n"))
		}
		for _, l := range table {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("%d columns: a line of %d: %q", width, n, l)
			}
		}
		screen := strings.Join(table, "\n")
		t.Logf("%d columns:\n%s", width, screen)
		cl, cx := psRowOf(table, e.claude.pid()), psRowOf(table, e.codex.pid())
		if cl == nil || cx == nil || cl[0] != "claude" || cx[0] != "codex" {
			t.Fatalf("%d columns: rows missing:\n%s", width, screen)
		}
		title := "fake claude " + strconv.Itoa(e.claude.pid())
		cwd := "~/src/" + filepath.Base(e.cwd)
		row := strings.Join(cl, " ")
		switch width {
		case 60:
			if !strings.Contains(row, "…") || strings.Contains(row, title) || strings.Contains(row, cwd) {
				t.Errorf("60 columns: the claude row keeps its whole title and directory: %q", row)
			}
			if !strings.Contains(row, "zmx:work") {
				t.Errorf("60 columns: the claude row lost its fixed columns: %q", row)
			}
		case 200:
			if !strings.HasSuffix(row, title) || !strings.Contains(row, cwd) || strings.Contains(row, "…") {
				t.Errorf("200 columns: the claude row was shortened: %q", row)
			}
		}
	}
}

// TestPsWatch: --watch redraws the table in place every second with the
// cursor hidden; Ctrl-C ends it with status 0, the cursor shown again and
// the shell's prompt back.
func TestPsWatch(t *testing.T) {
	e := newPsEnv(t)
	tm := newPsTmux(t)
	tm.run("new-session", "-d", "-s", "w", "-x", "120", "-y", "30",
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
	// --watch refuses a pipe.
	_, errs, code := e.ps(t, "ps", "--watch")
	if code != 2 || strings.Count(errs, "\n") != 1 {
		t.Errorf("--watch on a pipe: exit %d, %q", code, errs)
	}
}

// TestPsMoveHelp: ps and move explain themselves like Unix tools
// (synopsis, options, examples) on standard output with status 0, and
// both say in one line, with status 1, that the daemon is unreachable.
func TestPsMoveHelp(t *testing.T) {
	for _, args := range [][]string{{"ps", "--help"}, {"ps", "-h"}, {"help", "ps"}, {"move", "--help"}, {"help", "move"}} {
		out, errs, code := run9harness(t, nil, args...)
		if code != 0 || errs != "" {
			t.Errorf("9harness %q: exit %d, stderr %q", args, code, errs)
		}
		want := []string{"usage: 9harness", "Options:", "Examples:"}
		if contains(args, "move") {
			want = append(want, "move [--tmux] HARNESS/PID NAME", "--allow-move", "attach with:")
		} else {
			want = append(want, "ps [--json] [--watch] [--harness NAME]", "HARNESS", "TITLE")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("9harness %q lacks %q:\n%s", args, w, out)
			}
		}
	}
	out, _, code := run9harness(t, nil, "--help")
	for _, w := range []string{"ps [--json] [--watch] [--harness NAME]", "move [--tmux] HARNESS/PID NAME", "help [COMMAND]", "relay [-s SOCKET]", "--ssh DEST"} {
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
