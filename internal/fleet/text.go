package fleet

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rivo/uniseg"
	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/harness/render"
)

// LimitCell is the LIMITS cell: the tightest window, its length and the
// share used, as "5h 82%" (a week is 7d); "" when none is recorded.
func LimitCell(l client.Limits) string {
	_, w, ok := l.Tightest()
	if !ok {
		return ""
	}
	pct := strconv.FormatFloat(math.Round(w.UsedPercent), 'f', 0, 64) + "%"
	if w.WindowMinutes <= 0 {
		return pct
	}
	return windowSpan(w.WindowMinutes) + " " + pct
}

// windowSpan writes a window's length in its largest whole unit: 300
// minutes is 5h, 10080 is 7d. Codex may record a minute short (299,
// 10079): within a minute of a unit counts as that unit.
func windowSpan(m int64) string {
	for _, u := range []struct {
		min  int64
		unit string
	}{{1440, "d"}, {60, "h"}} {
		if m >= u.min-1 {
			n := (m + 1) / u.min
			if r := m - n*u.min; r >= -1 && r <= 1 {
				return strconv.FormatInt(n, 10) + u.unit
			}
		}
	}
	return strconv.FormatInt(m, 10) + "m"
}

// CompactCount writes a count in at most four characters, as a
// statusline does: 812, 9.8k, 41k, 1.2M, 12M. It rounds to the nearest.
func CompactCount(n int64) string {
	switch {
	case n < 0:
		return ""
	case n < 1000:
		return strconv.FormatInt(n, 10)
	}
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e3, "k"}, {1e6, "M"}, {1e9, "G"}} {
		v := float64(n) / u.div
		if s := strconv.FormatFloat(v, 'f', 1, 64); v < 9.95 {
			return strings.TrimSuffix(s, ".0") + u.unit
		}
		if r := math.Round(v); r < 1000 {
			return strconv.FormatFloat(r, 'f', 0, 64) + u.unit
		}
	}
	return strconv.FormatFloat(math.Round(float64(n)/1e12), 'f', 0, 64) + "T"
}

// RouteWord is the first word of a via note, "registry (2 leases on this
// pid; ...)": the route by which the session was found.
func RouteWord(via string) string {
	via = strings.TrimLeftFunc(via, unicode.IsSpace)
	if i := strings.IndexFunc(via, unicode.IsSpace); i >= 0 {
		return via[:i]
	}
	return via
}

// Age is the time since started: 45s, 12m, 3h, 2d.
func Age(started int64, now time.Time) string {
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

// ShortHome writes home as ~.
func ShortHome(p, home string) string {
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

// Printable keeps a value from steering the terminal (a title is
// whatever the harness stored): render.Printable, the daemon's rule for
// messages, for every value the client prints.
func Printable(s string) string { return render.Printable(s) }

// TextWidth is the cells s takes on a terminal, by grapheme cluster:
// emoji and East Asian wide characters take 2, combining marks and the
// rest of a joined emoji sequence nothing.
func TextWidth(s string) int {
	if plainASCII(s) {
		return len(s) // a cluster and a cell per byte
	}
	return uniseg.StringWidth(s)
}

// plainASCII reports whether s is printable ASCII only: one grapheme
// cluster and one cell per byte, nothing for printable to replace. Most of
// a table is; uniseg's cluster breaking costs more than the rest of the
// table's rendering.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// clusters splits s into grapheme clusters (what a terminal draws as one
// character) and their widths.
func clusters(s string) (cs []string, ws []int) {
	state := -1
	for s != "" {
		var c string
		var w int
		c, s, w, state = uniseg.FirstGraphemeClusterInString(s, state)
		cs, ws = append(cs, c), append(ws, w)
	}
	return cs, ws
}

// Ellipsis marks a cut: … where the locale's characters are UTF-8, else
// top's +, so that a C or POSIX locale gets only ASCII from 9harness.
var Ellipsis = sync.OnceValue(func() string { return cutMark(os.Getenv) })

func cutMark(getenv func(string) string) string {
	if utf8Locale(getenv) {
		return "…"
	}
	return "+"
}

// utf8Locale tells whether the locale's character type is UTF-8: the first
// of LC_ALL, LC_CTYPE and LANG that is set decides, as setlocale(3) does;
// none set is the C locale.
func utf8Locale(getenv func(string) string) bool {
	for _, v := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if l := getenv(v); l != "" {
			l = strings.ToLower(l)
			return strings.Contains(l, "utf-8") || strings.Contains(l, "utf8")
		}
	}
	return false
}

// ClipEnd fits s into w cells, ending it with … when it is cut; a
// grapheme cluster is never split.
func ClipEnd(s string, w int) string {
	if TextWidth(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	cs, ws := clusters(s)
	var b strings.Builder
	n := 0
	for i, c := range cs {
		if n+ws[i] > w-1 {
			break
		}
		b.WriteString(c)
		n += ws[i]
	}
	return strings.TrimRight(b.String(), " ") + Ellipsis()
}

// ClipFront fits s into w cells keeping its end (a path's last
// components say the most), starting it with … when it is cut.
func ClipFront(s string, w int) string {
	if TextWidth(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	cs, ws := clusters(s)
	n, i := 0, len(cs)
	for i > 0 && n+ws[i-1] <= w-1 {
		i--
		n += ws[i]
	}
	return Ellipsis() + strings.Join(cs[i:], "")
}

// TermSize is the terminal's columns and rows (f nil: none); 80x24 when
// unknown. COLUMNS and LINES, where set to a number, win over the
// terminal, as procps's ps and GNU ls let them.
func TermSize(f *os.File) (cols, rows int) {
	cols, rows = 80, 24
	if f != nil {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			cols, rows = int(ws.Col), int(ws.Row)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		cols = n
	}
	if n, err := strconv.Atoi(os.Getenv("LINES")); err == nil && n > 0 {
		rows = n
	}
	return cols, rows
}
