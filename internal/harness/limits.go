package harness

import (
	"bytes"
	"encoding/json"
	"math"
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

// codexWindow is a rate_limits window of a token_count: resets_at (unix
// seconds) in current builds, resets_in_seconds (from the event) in older
// ones.
type codexWindow struct {
	UsedPercent     *float64 `json:"used_percent"`
	WindowMinutes   *int64   `json:"window_minutes"`
	ResetsAt        *int64   `json:"resets_at"`
	ResetsInSeconds *int64   `json:"resets_in_seconds"`
}

type codexLimitsLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type       string `json:"type"`
		RateLimits *struct {
			LimitID   *string      `json:"limit_id"`
			Primary   *codexWindow `json:"primary"`
			Secondary *codexWindow `json:"secondary"`
		} `json:"rate_limits"`
	} `json:"payload"`
}

// codexLimits are the windows of the newest token_count event of the
// rollout's lines (tail, then head: the halves codexFill read once for
// the state and the tokens too) that carries the account's rate_limits
// (limit_id "codex", or none in older builds). Codex copies the newest
// limits it has into every token_count, so the newest event is the
// harness's current word; its null windows (a provider that sends no
// rate-limit headers) are absent, as is everything when no event has any.
func codexLimits(head, tail [][]byte) Limits {
	for _, part := range [][][]byte{tail, head} {
		for i := len(part) - 1; i >= 0; i-- {
			ln := part[i]
			if !bytes.Contains(ln, []byte(`"token_count"`)) || !bytes.Contains(ln, []byte(`"rate_limits"`)) {
				continue
			}
			var l codexLimitsLine
			if json.Unmarshal(ln, &l) != nil || l.Type != "event_msg" || l.Payload.Type != "token_count" {
				continue
			}
			rl := l.Payload.RateLimits
			if rl == nil || (rl.LimitID != nil && *rl.LimitID != "codex") {
				continue
			}
			at := lineTime(l.Timestamp)
			var out Limits
			for _, w := range []struct {
				name string
				w    *codexWindow
			}{{"primary", rl.Primary}, {"secondary", rl.Secondary}} {
				if lim, ok := w.w.limit(w.name, at); ok {
					out = append(out, lim)
				}
			}
			return out
		}
	}
	return nil
}

// limit is w as a Limit; at is its event's time, which resets_in_seconds
// counts from (unknown without it).
func (w *codexWindow) limit(name string, at time.Time) (Limit, bool) {
	if w == nil || w.UsedPercent == nil || math.IsNaN(*w.UsedPercent) || math.IsInf(*w.UsedPercent, 0) {
		return Limit{}, false
	}
	l := Limit{Name: name, UsedPercent: *w.UsedPercent}
	if w.WindowMinutes != nil && *w.WindowMinutes > 0 {
		l.WindowMinutes = i64(*w.WindowMinutes)
	}
	switch {
	case w.ResetsAt != nil && *w.ResetsAt > 0:
		l.ResetsAt = time.Unix(*w.ResetsAt, 0).UTC()
	case w.ResetsInSeconds != nil && *w.ResetsInSeconds >= 0 && !at.IsZero():
		l.ResetsAt = at.Add(time.Duration(*w.ResetsInSeconds) * time.Second).UTC().Truncate(time.Second)
	}
	return l, true
}
