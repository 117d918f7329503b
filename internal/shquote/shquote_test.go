package shquote

import (
	"os/exec"
	"testing"
)

var cases = []struct {
	in, want string
}{
	{"work", "work"},
	{"/tmp/tmux-1000/default", "/tmp/tmux-1000/default"},
	{"--model=opus", "--model=opus"},
	{"-x", "-x"},
	{"user@host:22", "user@host:22"},
	{"a+b,c", "a+b,c"},
	{"", "''"},
	{"a b", "'a b'"},
	{"it's", `'it'\''s'`},
	{`"dq"`, `'"dq"'`},
	{"'", `''\'''`},
	{"line1\nline2", "'line1\nline2'"},
	{"tab\there", "'tab\there'"},
	{"🚀 café", "'🚀 café'"},
	{"$HOME", "'$HOME'"},
	{"`id`", "'`id`'"},
	{"$(id)", "'$(id)'"},
	{"a;b", "'a;b'"},
	{"a|b&c", "'a|b&c'"},
	{"*", "'*'"},
	{"?", "'?'"},
	{"[a]", "'[a]'"},
	{"~", "'~'"},
	{"~root", "'~root'"},
	{"{a,b}", "'{a,b}'"},
	{"%1", "'%1'"},
	{"!", "'!'"},
	{"#c", "'#c'"},
	{"a\\b", `'a\b'`},
	{"FOO=bar", "'FOO=bar'"},
	{"_x=1", "'_x=1'"},
	{"=x", "=x"},
	{"1a=b", "1a=b"},
	{"a=b=c", "'a=b=c'"},
	{"\x00", "'\x00'"},
	{"\x1b[31m", "'\x1b[31m'"},
}

func TestQuote(t *testing.T) {
	for _, tc := range cases {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRoundTrip: sh reads each quoted word back as the word itself, as an
// argument and as the command word (where NAME=... would be an
// assignment). NUL cannot be in an argument, so it is left out.
func TestRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("no sh to read the quoted words back")
	}
	for _, tc := range cases {
		if tc.in == "\x00" {
			continue
		}
		out, err := exec.Command(sh, "-c", `printf %s `+Quote(tc.in)).Output()
		if err != nil || string(out) != tc.in {
			t.Errorf("sh read back %q as %q (%v)", tc.in, out, err)
		}
		script := `f() { printf %s "$1"; }; f ` + Join([]string{tc.in, "x"})
		if out, err := exec.Command(sh, "-c", script).Output(); err != nil || string(out) != tc.in {
			t.Errorf("sh read back %q (first of two) as %q (%v)", tc.in, out, err)
		}
		script = `set -- ` + Quote(tc.in) + `; printf %s "$1"`
		if out, err := exec.Command(sh, "-c", script).Output(); err != nil || string(out) != tc.in {
			t.Errorf("sh read back %q via set as %q (%v)", tc.in, out, err)
		}
		// At the start of a command, an unquoted NAME=value would be an
		// assignment and the next word the command.
		script = "\n" + Quote(tc.in) + ` 2>/dev/null; printf %s "${FOO-unset}${_x-unset}${a-unset}"`
		if out, _ := exec.Command(sh, "-c", script).Output(); string(out) != "unsetunsetunset" {
			t.Errorf("sh took %q at the start of a command as an assignment (%q)", tc.in, out)
		}
	}
}
