package fleet

import (
	"errors"
	"testing"

	"github.com/9harness/9harness/internal/client"
)

func TestSplitHostAgent(t *testing.T) {
	for _, tc := range []struct{ in, host, agent string }{
		{"claude/1", "", "claude/1"},
		{"b1:claude/1", "b1", "claude/1"},
		{"u@b1:2222:claude/1", "u@b1:2222", "claude/1"},
		{"[::1]:22:codex/7", "[::1]:22", "codex/7"},
		{"-:claude/1", "-", "claude/1"},
	} {
		h, a := SplitHostAgent(tc.in)
		if h != tc.host || a != tc.agent {
			t.Errorf("SplitHostAgent(%q) = %q, %q; want %q, %q", tc.in, h, a, tc.host, tc.agent)
		}
	}
}

func TestHostError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&client.CommandError{Name: "ssh h", Err: errors.New("exit status 255"), Stderr: "warning\nssh: connect to host h port 22: Connection refused\n"},
			"ssh: connect to host h port 22: Connection refused (ssh exit status 255)"},
		{&client.CommandError{Name: "ssh h", Err: errors.New("exit status 1")}, "ssh h: exit status 1"},
		{errors.New("no answer within 5s"), "no answer within 5s"},
	} {
		if got := HostError(tc.err).Error(); got != tc.want {
			t.Errorf("HostError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestParseEvent(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Event
		ok   bool
	}{
		{"2026-12-01T21:40:03Z claude 345104 waiting approve Bash", Event{"2026-12-01T21:40:03Z", "claude", 345104, "waiting", "approve Bash"}, true},
		{"2026-12-01T21:40:03Z codex 7 exit", Event{"2026-12-01T21:40:03Z", "codex", 7, "exit", ""}, true},
		{"2026-12-01T21:40:03Z - - lost 12", Event{"2026-12-01T21:40:03Z", "-", 0, "lost", "12"}, true},
		{"2026-12-01T21:40:03Z claude x idle", Event{}, false},
		{"garbage", Event{}, false},
	} {
		got, ok := ParseEvent(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseEvent(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
