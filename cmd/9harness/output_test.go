package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTextWriter: what standard error is handed is shown as text: escapes
// (title, OSC 52, clear screen), BEL, C1 controls and bidirectional
// overrides become '?', lines stay lines, and a character split across two
// writes arrives whole.
func TestTextWriter(t *testing.T) {
	var out bytes.Buffer
	w := newTextWriter(&out)
	in := []string{
		"9harness ps: h: \x1b]0;title\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H",
		"pass\u009b2J \u202eevil\r\n", "caf\xc3", "\xa9 ok\n", "\xe2\x82", "\xac\n",
	}
	for _, s := range in {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\x07\r\u009b\u202e") {
		t.Errorf("a control reached the output: %q", got)
	}
	want := "9harness ps: h: ?]0;title??]52;c;cHduZWQ=??[2J?[H" + "pass?2J ?evil \n" + "café ok\n" + "€\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

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
