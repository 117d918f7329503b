package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunStderrIsText: every command's standard error goes through the
// text writer: an error that quotes a hostile word (here a path no daemon
// answers for, and an unknown command) carries no escape to the terminal.
func TestRunStderrIsText(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	hostile := "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b]0;title\x07"
	for _, args := range [][]string{
		{"cat", "/" + hostile},
		{"-s", "/nonexistent/" + hostile, "ls", "/"},
		{hostile},
		{"help", hostile},
	} {
		var out, errOut bytes.Buffer
		run(args, strings.NewReader(""), &out, &errOut)
		if strings.ContainsAny(out.String()+errOut.String(), "\x1b\x07") {
			t.Errorf("run(%q): a control byte reached the output: %q %q", args, out.String(), errOut.String())
		}
		if errOut.Len() == 0 {
			t.Errorf("run(%q): nothing on stderr", args)
		}
	}
}
