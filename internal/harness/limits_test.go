package harness

import (
	"testing"
)

// TestCodexLimits: the newest token_count's rate_limits are the limits
// file, one line per window; older rollouts' resets_in_seconds count from
// the event's timestamp; a rollout whose windows are null (a provider
// that sends no rate-limit headers) has no limits file.
func TestCodexLimits(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"rate-limits.jsonl", "primary 82.5 300 2026-12-01T17:10:00Z\nsecondary 21 10080 2026-12-06T23:33:20Z"},
		{"rate-limits-old.jsonl", "primary 4 299 2025-09-10T08:30:05Z\nsecondary 40 10079 2025-09-17T08:00:05Z"},
		{"complete.jsonl", ""},
		{"started-tool-in-flight.jsonl", ""},
	} {
		f := newFx(t)
		rel := "sessions/2026/12/01/rollout-2026-12-01T13-10-00-01a231bc-0000-7000-8000-000000000001.jsonl"
		f.fixture("codex", tc.file, ".codex/"+rel, at(900))
		var a Agent
		codexFill(f.env(".codex"), &a, rel)
		if got := a.Limits.String(); got != tc.want {
			t.Errorf("%s: limits\n%s\nwant\n%s", tc.file, got, tc.want)
		}
		if tc.want == "" && a.Limits != nil {
			t.Errorf("%s: limits %v, want none", tc.file, a.Limits)
		}
		if tc.file == "rate-limits.jsonl" && a.Tokens.String() != "context 1200\ninput 200\noutput 80\ncache_read 1000\ncache_write 0" {
			t.Errorf("%s: tokens %q", tc.file, a.Tokens.String())
		}
	}
}

// TestCodexLimitsShapes: the windows Codex may write, each as the file
// shows it, never estimated.
func TestCodexLimitsShapes(t *testing.T) {
	tc := func(rl string) string {
		ln := `{"timestamp":"2026-12-01T13:10:07.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":` + rl + `}}`
		return codexLimits(nil, [][]byte{[]byte(ln)}).String()
	}
	for _, c := range []struct{ rl, want string }{
		{`null`, ""},
		{`{"limit_id":"codex","primary":null,"secondary":null}`, ""},
		{`{"primary":{"used_percent":19.0}}`, "primary 19 - -"},
		{`{"primary":{"used_percent":12.4,"window_minutes":10080,"resets_at":1796600000},"secondary":null}`, "primary 12.4 10080 2026-12-06T23:33:20Z"},
		{`{"limit_id":"codex_other","primary":{"used_percent":50}}`, ""},
		{`{"primary":{"window_minutes":300}}`, ""},
	} {
		if got := tc(c.rl); got != c.want {
			t.Errorf("%s: %q, want %q", c.rl, got, c.want)
		}
	}
	// Of several events, the newest decides.
	older := []byte(`{"timestamp":"2026-12-01T13:10:07.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":30,"window_minutes":300,"resets_at":1796145000}}}}`)
	newer := []byte(`{"timestamp":"2026-12-01T13:10:08.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":31,"window_minutes":300,"resets_at":1796145000}}}}`)
	if got := codexLimits([][]byte{older}, [][]byte{newer}).String(); got != "primary 31 300 2026-12-01T17:10:00Z" {
		t.Errorf("newest: %q", got)
	}
}
