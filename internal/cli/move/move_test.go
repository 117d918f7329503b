package move

import (
	"bytes"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/cli"

	daemonmove "github.com/9harness/9harness/internal/move"
)

func TestTmuxAttach(t *testing.T) {
	for _, tc := range []struct{ current, want string }{
		{"", "tmux attach -t work"},
		{"orig", "tmux attach -t work"},
		{"other:orig", "tmux -L other attach -t work"},
		{"/run/user/1000/tmux/s:orig", "tmux -S /run/user/1000/tmux/s attach -t work"},
		{"a:b:orig", "tmux -L a:b attach -t work"},
	} {
		if got := tmuxAttach(tc.current, "work"); got != tc.want {
			t.Errorf("tmuxAttach(%q) = %q, want %q", tc.current, got, tc.want)
		}
	}
}

// TestCheckSessionName: the client refuses exactly the names the daemon
// would (daemonmove.ValidName, and tmux's '.' and ':'), so that its early
// refusal never stops a move the daemon would make.
func TestCheckSessionName(t *testing.T) {
	names := []string{"rescued", "a-b_c.d", "x", strings.Repeat("n", 100), strings.Repeat("n", 101),
		"", ".", "..", "-x", "a b", "a/b", "a:b", "a.b", "é", "a\nb", "a\n", "under_score", "9"}
	for _, host := range []string{"zmx", "tmux"} {
		for _, n := range names {
			_, err := daemonmove.ValidName([]byte(n))
			daemonOK := err == nil && n != "a\n" // the daemon strips echo's newline; a typed name has none
			if host == "tmux" && strings.ContainsAny(n, ".:") {
				daemonOK = false
			}
			if got := checkSessionName(n, host) == nil; got != daemonOK {
				t.Errorf("%s name %q: client ok %v, daemon ok %v", host, n, got, daemonOK)
			}
		}
	}
}

// TestParseRequest: the operands as a move, and each bad one a usage
// error of one line.
func TestParseRequest(t *testing.T) {
	g := cli.NewGlobals("dev", nil)
	var errb bytes.Buffer
	r, code := parseRequest(g, []string{"build1:claude/345104", "rescued"}, true, &errb)
	want := request{hostName: "build1", agent: "claude/345104", file: "/active/claude/345104/tmux", host: "tmux", name: "rescued", attach: "tmux attach -t rescued"}
	if r == nil || *r != want || code != cli.ExitOK {
		t.Errorf("got %+v (%d), want %+v", r, code, want)
	}
	for _, tc := range []struct {
		ops  []string
		tmux bool
	}{{[]string{"claude/1"}, false}, {[]string{"claude", "x"}, false}, {[]string{"claude/0", "x"}, false},
		{[]string{"claude/1", "-x"}, false}, {[]string{"claude/1", "a.b"}, true}} {
		errb.Reset()
		r, code := parseRequest(g, tc.ops, tc.tmux, &errb)
		if r != nil || code != cli.ExitUsage || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q (tmux %v): %+v, exit %d, stderr %q", tc.ops, tc.tmux, r, code, errb.String())
		}
	}
}
