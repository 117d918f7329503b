package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/client"
)

const psHelp = `usage: 9harness [-s SOCKET | --ssh DEST] ps [--json] [--watch] [--harness NAME]...

List the live AI coding agents, one row per agent, sorted by harness, then
pid, as the daemon's /active tree shows them:

  HARNESS   claude, codex, omp, pi, hermes or dsh
  PID       the agent's process id
  AGE       how long it has run: 45s, 12m, 3h, 2d
  STATUS    what the harness itself publishes (Claude: busy, idle, ...)
  CWD       its working directory, your $HOME shown as ~ (not with --ssh)
  ZMX/TMUX  the zmx or tmux session it runs in, as zmx:NAME or tmux:NAME
  VIA       how its session was found: registry, fd, dir, transcript, none
  TITLE     the session's title, where the harness records one

A fact the daemon does not know is shown as -. On a terminal the table is
fitted to its width, shortening TITLE first, then CWD, then VIA (each
marked with …); written to a pipe or a file, nothing is shortened
(9harness ps | cat shows every row whole).

Options:
  --json          print one JSON array with an object per agent, every fact
                  the tree has: harness, pid, ppid, started (unix seconds),
                  cwd, name, title, session, model, via, status, zmx, tmux,
                  transcript (the transcript's path in the tree) and agents
                  (the names of its sub-agents). A fact the daemon does not
                  know is left out; zmx and tmux are always there, "" when
                  the agent is in no such session.
  --harness NAME  only the agents of harness NAME; repeatable, or a comma
                  separated list (--harness claude,codex)
  --watch         redraw the table every second, like watch(1), until
                  Ctrl-C; standard output must be a terminal
  -h, --help      this text

Examples:
  9harness ps
  9harness ps --harness codex
  9harness ps --watch --harness claude
  9harness --ssh build1 ps
  9harness ps --json | jq -r '.[] | "\(.harness)/\(.pid) \(.session)"'
  9harness ps --json | jq -r '.[] | select(.zmx == "" and .tmux == "") | .cwd'
`

type psOptions struct {
	json, watch bool
	harnesses   []string
}

func runPs(g *globals, args []string, stdout, stderr io.Writer) int {
	var o psOptions
	fs := flag.NewFlagSet("ps", flag.ContinueOnError)
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.watch, "watch", false, "")
	fs.Func("harness", "", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.harnesses = append(o.harnesses, h)
			}
		}
		return nil
	})
	rest, status, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "9harness ps: unexpected argument %q (try 9harness ps --help)\n", rest[0])
		return 2
	}
	if o.json && o.watch {
		fmt.Fprintln(stderr, "9harness ps: --json and --watch do not go together")
		return 2
	}
	term, _ := stdout.(*os.File)
	if term != nil && !isTerminal(term) {
		term = nil
	}
	if o.watch && term == nil {
		fmt.Fprintln(stderr, "9harness ps: --watch redraws a terminal, and standard output is not one")
		return 2
	}
	home := ""
	if !g.remote() {
		home = os.Getenv("HOME")
	}
	c, status := g.connect(stderr)
	if c == nil {
		return status
	}
	if o.watch {
		return watchPs(g, c, o, home, term)
	}
	defer c.Close()
	agents, err := c.Agents(o.harnesses...)
	if err != nil {
		fmt.Fprintf(stderr, "9harness ps: %v\n", describe(err))
		return 1
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(agents); err != nil {
			fmt.Fprintf(stderr, "9harness ps: %v\n", err)
			return 1
		}
		return 0
	}
	width := 0
	if term != nil {
		width, _ = termSize(term)
	}
	var b strings.Builder
	for _, l := range psTable(agents, time.Now(), home, width) {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return 1
	}
	return 0
}

// The columns, and which of them give way on a narrow terminal: first
// TITLE, then CWD, then VIA, each down to its minimum width.
const (
	colHarness = iota
	colPID
	colAge
	colStatus
	colCwd
	colHost
	colVia
	colTitle
	nCols
)

var psHeader = [nCols]string{"HARNESS", "PID", "AGE", "STATUS", "CWD", "ZMX/TMUX", "VIA", "TITLE"}

var shrinkOrder = []struct{ col, min int }{{colTitle, 5}, {colCwd, 6}, {colVia, 4}}

const colGap = "  "

// psTable renders the agents as lines: a header and a row per agent.
// width > 0 fits every line into that many columns.
func psTable(agents []client.Agent, now time.Time, home string, width int) []string {
	rows := [][nCols]string{psHeader}
	for _, a := range agents {
		rows = append(rows, psRow(a, now, home))
	}
	var w [nCols]int
	for _, r := range rows {
		for i, cell := range r {
			w[i] = max(w[i], textWidth(cell))
		}
	}
	if width > 0 {
		total := len(colGap) * (nCols - 1)
		for _, x := range w {
			total += x
		}
		for _, s := range shrinkOrder {
			if total <= width {
				break
			}
			if w[s.col] > s.min {
				cut := min(total-width, w[s.col]-s.min)
				w[s.col] -= cut
				total -= cut
			}
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r {
			if i > 0 {
				b.WriteString(colGap)
			}
			switch i {
			case colCwd:
				cell = clipFront(cell, w[i])
			default:
				cell = clipEnd(cell, w[i])
			}
			pad := strings.Repeat(" ", w[i]-textWidth(cell))
			switch {
			case i == colPID || i == colAge:
				b.WriteString(pad + cell)
			case i == nCols-1:
				b.WriteString(cell)
			default:
				b.WriteString(cell + pad)
			}
		}
		line := strings.TrimRight(b.String(), " ")
		if width > 0 {
			// What the columns cannot give up is cut at the edge.
			line = clipEnd(line, width)
		}
		out = append(out, line)
	}
	return out
}

func psRow(a client.Agent, now time.Time, home string) [nCols]string {
	var host []string
	if a.Zmx != "" {
		host = append(host, "zmx:"+a.Zmx)
	}
	if a.Tmux != "" {
		host = append(host, "tmux:"+a.Tmux)
	}
	r := [nCols]string{
		a.Harness,
		strconv.Itoa(a.PID),
		age(a.Started, now),
		a.Status,
		shortHome(a.Cwd, home),
		strings.Join(host, ","),
		a.Via,
		a.Title,
	}
	for i, v := range r {
		if v == "" {
			v = "-"
		}
		r[i] = printable(v)
	}
	return r
}

// age is the time since started: 45s, 12m, 3h, 2d.
func age(started int64, now time.Time) string {
	if started <= 0 {
		return ""
	}
	d := now.Sub(time.Unix(started, 0))
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// shortHome writes home as ~.
func shortHome(p, home string) string {
	home = filepath.Clean(home)
	if home == "" || home == "." || home == "/" || p == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if strings.HasPrefix(p, home+"/") {
		return "~" + p[len(home):]
	}
	return p
}

// printable keeps a value from steering the terminal: control characters
// (a title is whatever the harness stored) become '?', and whitespace a
// space.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '?'
		}
		return r
	}, s)
}

// runeWidth is the columns a rune takes on a terminal: 0 for combining
// marks, 2 for East Asian wide and fullwidth characters and most emoji,
// else 1.
func runeWidth(r rune) int {
	switch {
	case unicode.Is(unicode.Mn, r), unicode.Is(unicode.Me, r), r == 0x200b, r == 0x200d:
		return 0
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0x303e, r >= 0x3041 && r <= 0x33ff,
		r >= 0x3400 && r <= 0x4dbf, r >= 0x4e00 && r <= 0x9fff, r >= 0xa000 && r <= 0xa4cf,
		r >= 0xac00 && r <= 0xd7a3, r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60, r >= 0xffe0 && r <= 0xffe6, r >= 0x1f300 && r <= 0x1f64f,
		r >= 0x1f900 && r <= 0x1f9ff, r >= 0x20000 && r <= 0x3fffd:
		return 2
	}
	return 1
}

func textWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

const ellipsis = "…"

// clipEnd fits s into w columns, ending it with … when it is cut.
func clipEnd(s string, w int) string {
	if textWidth(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	n := 0
	for i, r := range s {
		if n+runeWidth(r) > w-1 {
			return s[:i] + ellipsis
		}
		n += runeWidth(r)
	}
	return s
}

// clipFront fits s into w columns keeping its end (a path's last
// components say the most), starting it with … when it is cut.
func clipFront(s string, w int) string {
	if textWidth(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	n := 0
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if n+runeWidth(r) > w-1 {
			return ellipsis + s[i:]
		}
		n += runeWidth(r)
		i -= size
	}
	return s
}

// termSize is the terminal's columns and rows; 80x24 when unknown.
func termSize(f *os.File) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80, 24
	}
	return int(ws.Col), int(ws.Row)
}

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
// the cursor and exits 0.
func watchPs(g *globals, c *client.Client, o psOptions, home string, term *os.File) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	io.WriteString(term, hideCursor+cursorHome+clearScreen)
	title := "Every 1s: 9harness ps"
	if len(o.harnesses) > 0 {
		title += " --harness " + strings.Join(o.harnesses, ",")
	}
	type result struct {
		agents []client.Agent
		err    error
	}
	tick := time.NewTicker(time.Second)
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
		var r result
		select {
		case r = <-done:
		case s := <-sigs:
			if s != syscall.SIGWINCH {
				io.WriteString(term, "\r"+clearLine+showCursor)
				return 0
			}
			r = <-done
		}
		cols, rows := termSize(term)
		now := time.Now()
		lines := []string{title, ""}
		if r.err != nil {
			lines = append(lines, "9harness ps: "+describe(r.err).Error())
			if c != nil && !client.IsWireErrno(r.err) {
				// The connection is gone: dial again on the next tick.
				c.Close()
				c = nil
			}
		} else {
			lines = append(lines, psTable(r.agents, now, home, cols)...)
		}
		clock := now.Format("15:04:05")
		if pad := cols - textWidth(title) - len(clock); pad >= 1 {
			lines[0] = title + strings.Repeat(" ", pad) + clock
		}
		// The last row stays free for the cursor: nothing scrolls.
		if len(lines) > rows-1 {
			lines = lines[:max(rows-1, 1)]
		}
		var b strings.Builder
		b.WriteString(cursorHome)
		for _, l := range lines {
			b.WriteString(clearLine + clipEnd(l, cols) + "\n")
		}
		b.WriteString(clearBelow)
		io.WriteString(term, b.String())

		select {
		case s := <-sigs:
			if s != syscall.SIGWINCH {
				io.WriteString(term, "\r"+clearLine+showCursor)
				if c != nil {
					c.Close()
				}
				return 0
			}
		case <-tick.C:
		}
		if c == nil {
			c, dialErr = g.dial()
		}
	}
}
