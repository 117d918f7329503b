package realcli

import (
	"net/http"
	"strconv"
	"time"
)

// LimitWindow is one subscription window as Codex's service reports it
// in response headers: the share used, the window's length in minutes
// and when it resets.
type LimitWindow struct {
	UsedPercent   float64
	WindowMinutes int64
	ResetsAt      time.Time
}

// SetCodexLimits makes every later Responses answer carry Codex's
// rate-limit headers for the primary and secondary windows, in the
// formats Codex parses (codex-rs/codex-api/src/rate_limits.rs): the
// percent a float, the minutes an integer, the reset unix seconds.
func (m *Mock) SetCodexLimits(primary, secondary LimitWindow) {
	h := http.Header{}
	for _, w := range []struct {
		name string
		w    LimitWindow
	}{{"primary", primary}, {"secondary", secondary}} {
		p := "x-codex-" + w.name + "-"
		h.Set(p+"used-percent", strconv.FormatFloat(w.w.UsedPercent, 'f', -1, 64))
		h.Set(p+"window-minutes", strconv.FormatInt(w.w.WindowMinutes, 10))
		h.Set(p+"reset-at", strconv.FormatInt(w.w.ResetsAt.Unix(), 10))
	}
	m.mu.Lock()
	m.limitHeaders = h
	m.mu.Unlock()
}

// sendLimitHeaders adds the headers SetCodexLimits chose to w's.
func (m *Mock) sendLimitHeaders(w http.ResponseWriter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.limitHeaders {
		w.Header()[k] = append([]string(nil), v...)
	}
}
