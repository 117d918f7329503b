package main

import "testing"

func TestParseEvent(t *testing.T) {
	for _, c := range []struct {
		in   string
		want eventLine
		ok   bool
	}{
		{"2026-12-01T21:40:03Z claude 345104 waiting approve Bash", eventLine{"2026-12-01T21:40:03Z", "claude", 345104, "waiting", "approve Bash"}, true},
		{"2026-12-01T21:40:03Z codex 7 exit", eventLine{"2026-12-01T21:40:03Z", "codex", 7, "exit", ""}, true},
		{"2026-12-01T21:40:03Z - - lost 12", eventLine{"2026-12-01T21:40:03Z", "-", 0, "lost", "12"}, true},
		{"2026-12-01T21:40:03Z claude x idle", eventLine{}, false},
		{"garbage", eventLine{}, false},
	} {
		got, ok := parseEvent(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("parseEvent(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
