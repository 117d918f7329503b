package topcmd

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/cli"
)

func globals(t *testing.T, args ...string) *cli.Globals {
	g := cli.NewGlobals("test", map[string]string{"top": Help})
	g.Cmd = "top"
	if err := g.Flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestMoveArgv: top's move is 9harness move with the command line's own
// socket, and for another host's agent its ssh settings and hosts file.
func TestMoveArgv(t *testing.T) {
	g := globals(t, "-s", "/s", "--ssh-opt", "Port=2", "--ssh-cmd", "x relay")
	for _, tc := range []struct {
		agent, hosts string
		tmux         bool
		want         []string
	}{
		{"claude/1", "", false, []string{"9h", "-s", "/s", "move", "--", "claude/1", "n"}},
		{"b1:claude/1", "/h", true, []string{"9h", "-s", "/s", "--ssh-opt", "Port=2", "--ssh-cmd", "x relay", "move", "--hosts", "/h", "--tmux", "--", "b1:claude/1", "n"}},
	} {
		if got := moveArgv(g, "9h", tc.hosts, tc.agent, "n", tc.tmux); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.agent, got, tc.want)
		}
	}
}

// TestTopUsage: a bad command line is one line on stderr and exit 2,
// and so is top off a terminal without --once.
func TestTopUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--timeout", "0"}, {"--timeout", "x"}, {}} {
		var out, errs bytes.Buffer
		code := Run(globals(t, "-s", "/nonexistent/sock"), args, &out, &errs)
		if code != cli.ExitUsage || out.Len() != 0 || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("top %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out.String(), errs.String())
		}
	}
}
