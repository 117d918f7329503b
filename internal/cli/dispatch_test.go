package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestProgram: the dispatcher answers --help, help [COMMAND], --version
// and version itself, hands a command its operands with the global flags
// already parsed, and refuses what it does not know with exit 2 and one
// line.
func TestProgram(t *testing.T) {
	var got []string
	var sock string
	p := Program{
		Usage:   "usage: x (socket %s)\n",
		Version: "1.2",
		Commands: []Command{
			{Name: "echo", Help: "echo's help\n", Run: NoStdin(func(g *Globals, args []string, stdout, stderr io.Writer) int {
				got, sock = args, g.Sock
				return 7
			})},
			{Name: "hidden", Run: func(*Globals, []string, io.Reader, io.Writer, io.Writer) int { return 0 }},
		},
	}
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string // what stdout is, what stderr holds
	}{
		{[]string{"--help"}, ExitOK, "usage: x (socket ", ""},
		{[]string{"help"}, ExitOK, "usage: x (socket ", ""},
		{[]string{"help", "echo"}, ExitOK, "echo's help\n", ""},
		{[]string{"help", "version"}, ExitOK, VersionHelp, ""},
		{[]string{"--version"}, ExitOK, "9harness 1.2\n", ""},
		{[]string{"version"}, ExitOK, "9harness 1.2\n", ""},
		{[]string{"help", "hidden"}, ExitUsage, "", `no command "hidden"`},
		{[]string{"help", "echo", "x"}, ExitUsage, "", `no command "echo x"`},
		{[]string{"version", "x"}, ExitUsage, "", `unexpected argument "x"`},
		{[]string{"nosuch"}, ExitUsage, "", `unknown command "nosuch"`},
		{[]string{}, ExitUsage, "", "no command given"},
		{[]string{"--nosuch"}, ExitUsage, "", "--nosuch"},
	} {
		var out, errs bytes.Buffer
		code := p.Run(tc.args, nil, &out, &errs)
		if code != tc.code || !strings.HasPrefix(out.String(), tc.out) || (tc.out == "" && out.Len() > 0) ||
			!strings.Contains(errs.String(), tc.err) || strings.Count(errs.String(), "\n") != min(len(tc.err), 1) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errs.String(), tc.code, tc.out, tc.err)
		}
	}
	var out bytes.Buffer
	if code := p.Run([]string{"-s", "/a", "echo", "x", "-s", "/b", "y"}, nil, &out, &out); code != 7 || strings.Join(got, " ") != "x -s /b y" || sock != "/a" {
		t.Errorf("echo: exit %d, operands %q, socket %q; want 7, the rest after the name, and the socket before it", code, got, sock)
	}
}
