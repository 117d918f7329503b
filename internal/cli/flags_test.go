package cli

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestParseFlags: flags go anywhere up to "--", short ones combine, the
// global ones are taken after the command, -h/--help is help on stdout
// with status 0 and a bad flag one line on stderr, named as typed, with
// status 2.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		ops    []string
		long   bool
		human  bool
		sock   string
		status int
		ok     bool
		stdout string // a prefix
		stderr string // the whole
	}{
		{args: []string{"-la", "/x"}, ops: []string{"/x"}, long: true, ok: true},
		{args: []string{"/x", "-l"}, ops: []string{"/x"}, long: true, ok: true},
		{args: []string{"/x", "-s", "/sock", "/y"}, ops: []string{"/x", "/y"}, sock: "/sock", ok: true},
		{args: []string{"/x", "--socket=/sock"}, ops: []string{"/x"}, sock: "/sock", ok: true},
		{args: []string{"-s/sock", "/x"}, ops: []string{"/x"}, sock: "/sock", ok: true},
		{args: []string{"--", "-l", "-s"}, ops: []string{"-l", "-s"}, ok: true},
		{args: []string{"/x", "--", "--bogus"}, ops: []string{"/x", "--bogus"}, ok: true},
		{args: []string{"-h"}, stdout: "usage: 9harness [-s SOCKET | --ssh DEST] ls"},
		{args: []string{"/x", "--help"}, stdout: "usage: 9harness [-s SOCKET | --ssh DEST] ls"},
		{args: []string{"-lh"}, ops: []string{}, long: true, human: true, ok: true},
		{args: []string{"-hl", "/x"}, ops: []string{"/x"}, long: true, human: true, ok: true},
		{args: []string{"-s", "-lh", "/x"}, ops: []string{"/x"}, sock: "-lh", ok: true},
		{args: []string{"-ls/h", "/x"}, ops: []string{"/x"}, long: true, sock: "/h", ok: true},
		{args: []string{"--socket", "-h", "/x"}, ops: []string{"/x"}, sock: "-h", ok: true},
		{args: []string{"--bogus"}, status: 2, stderr: "9harness ls: unknown flag --bogus (try '9harness ls --help')\n"},
		{args: []string{"--bogus=1"}, status: 2, stderr: "9harness ls: unknown flag --bogus (try '9harness ls --help')\n"},
		{args: []string{"-z"}, status: 2, stderr: "9harness ls: unknown flag -z (try '9harness ls --help')\n"},
		{args: []string{"-lz"}, long: true, status: 2, stderr: "9harness ls: unknown flag -z in -lz (try '9harness ls --help')\n"},
		{args: []string{"-bogus"}, status: 2, stderr: "9harness ls: unknown flag -b in -bogus (try '9harness ls --help')\n"},
		{args: []string{"-s"}, status: 2, stderr: "9harness ls: flag -s needs a value (try '9harness ls --help')\n"},
		{args: []string{"--socket"}, status: 2, stderr: "9harness ls: flag --socket needs a value (try '9harness ls --help')\n"},
		{args: []string{"--long=maybe"}, status: 2, stderr: "9harness ls: invalid value \"maybe\" for --long: must be true or false (try '9harness ls --help')\n"},
	} {
		g := NewGlobals("test", map[string]string{"ls": "usage: 9harness [-s SOCKET | --ssh DEST] ls [-lah] [PATH...]\n"})
		fs := g.FlagSet("ls")
		long := fs.BoolP("long", "l", false, "")
		human := fs.Bool("human-readable", false, "")
		fs.BoolP("all", "a", false, "")
		var stdout, stderr bytes.Buffer
		ops, status, ok := g.ParseFlags(fs, tc.args, true, &stdout, &stderr)
		if ok != tc.ok || status != tc.status || !slices.Equal(ops, tc.ops) || *long != tc.long || *human != tc.human {
			t.Errorf("%q: ops %q status %d ok %v long %v human %v; want %q %d %v %v %v", tc.args, ops, status, ok, *long, *human, tc.ops, tc.status, tc.ok, tc.long, tc.human)
		}
		if tc.sock != "" && g.Sock != tc.sock {
			t.Errorf("%q: socket %q, want %q", tc.args, g.Sock, tc.sock)
		}
		if !strings.HasPrefix(stdout.String(), tc.stdout) || (tc.stdout == "") != (stdout.Len() == 0) {
			t.Errorf("%q: stdout %q, want it to start %q", tc.args, stdout.String(), tc.stdout)
		}
		if stderr.String() != tc.stderr {
			t.Errorf("%q: stderr %q, want %q", tc.args, stderr.String(), tc.stderr)
		}
	}
}

// TestGroupedH: -h inside a group of short flags is a usage error for a
// command that has no human-readable sizes, never the help with status 0.
func TestGroupedH(t *testing.T) {
	g := NewGlobals("test", nil)
	fs := g.FlagSet("ps")
	fs.BoolP("quiet", "q", false, "")
	var stdout, stderr bytes.Buffer
	_, status, ok := g.ParseFlags(fs, []string{"-qh"}, true, &stdout, &stderr)
	if ok || status != ExitUsage || stdout.Len() != 0 ||
		stderr.String() != "9harness ps: -h in -qh: -h means help only on its own (try '9harness ps --help')\n" {
		t.Errorf("ps -qh: ok %v status %d stdout %q stderr %q", ok, status, stdout.String(), stderr.String())
	}
}

// TestErrWriter: the first write error is kept, and every later write
// fails with it without reaching the file.
func TestErrWriter(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("/dev/full: %v", err)
	}
	defer f.Close()
	w := NewErrWriter(f)
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to /dev/full: %v", err)
	}
	var stderr bytes.Buffer
	if !w.Report(&stderr, "cat") || stderr.String() != "9harness cat: write error: no space left on device\n" {
		t.Errorf("report: %q", stderr.String())
	}
	ok := NewErrWriter(&bytes.Buffer{})
	ok.Write([]byte("x"))
	if ok.Report(&stderr, "cat") {
		t.Error("a writer with no error reported one")
	}
}

// TestTextWriter: what standard error is handed is shown as text: escapes
// (title, OSC 52, clear screen), BEL, C1 controls and bidirectional
// overrides become '?', lines stay lines, and a character split across two
// writes arrives whole.
func TestTextWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewTextWriter(&out)
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
