package harness

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limit is one subscription window as the harness records it: the share
// of the window used, the window's length and when it resets. Only what
// the harness wrote is kept: a length or a reset it did not record is
// unknown (nil, zero), never estimated.
type Limit struct {
	Name          string  // the harness's name for the window: primary, secondary
	UsedPercent   float64 // 0–100
	WindowMinutes *int64
	ResetsAt      time.Time // zero when unknown
}

// Limits are an agent's windows, in the harness's order.
type Limits []Limit

// String is the limits file: one "NAME used_percent window_minutes
// resets_at" line per window, resets_at in RFC 3339 UTC; a field the
// harness did not record is "-". "" when no window is recorded.
func (l Limits) String() string {
	var b strings.Builder
	for _, w := range l {
		b.WriteString(w.Name)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(w.UsedPercent, 'f', -1, 64))
		b.WriteByte(' ')
		if w.WindowMinutes != nil {
			b.WriteString(strconv.FormatInt(*w.WindowMinutes, 10))
		} else {
			b.WriteByte('-')
		}
		b.WriteByte(' ')
		if !w.ResetsAt.IsZero() {
			b.WriteString(w.ResetsAt.UTC().Format(time.RFC3339))
		} else {
			b.WriteByte('-')
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (l Limits) clone() Limits {
	out := slices.Clone(l)
	for i, w := range out {
		if w.WindowMinutes != nil {
			out[i].WindowMinutes = i64(*w.WindowMinutes)
		}
	}
	return out
}
