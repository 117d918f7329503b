package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/9harness/9harness/internal/move"
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
		g := newGlobals()
		fs := g.flagSet("ls")
		long := fs.BoolP("long", "l", false, "")
		human := fs.Bool("human-readable", false, "")
		fs.BoolP("all", "a", false, "")
		var stdout, stderr bytes.Buffer
		ops, status, ok := parseFlags(fs, tc.args, true, &stdout, &stderr)
		if ok != tc.ok || status != tc.status || !slices.Equal(ops, tc.ops) || *long != tc.long || *human != tc.human {
			t.Errorf("%q: ops %q status %d ok %v long %v human %v; want %q %d %v %v %v", tc.args, ops, status, ok, *long, *human, tc.ops, tc.status, tc.ok, tc.long, tc.human)
		}
		if tc.sock != "" && g.sock != tc.sock {
			t.Errorf("%q: socket %q, want %q", tc.args, g.sock, tc.sock)
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
	g := newGlobals()
	fs := g.flagSet("ps")
	fs.BoolP("quiet", "q", false, "")
	var stdout, stderr bytes.Buffer
	_, status, ok := parseFlags(fs, []string{"-qh"}, true, &stdout, &stderr)
	if ok || status != exitUsage || stdout.Len() != 0 ||
		stderr.String() != "9harness ps: -h in -qh: -h means help only on its own (try '9harness ps --help')\n" {
		t.Errorf("ps -qh: ok %v status %d stdout %q stderr %q", ok, status, stdout.String(), stderr.String())
	}
}

// TestHumanSize: sizes as GNU ls -lh prints them.
func TestHumanSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0", 1023: "1023", 1024: "1.0K", 1536: "1.5K", 10 << 10: "10K", 10235: "10K",
		1<<20 - 1: "1.0M", 5 << 20: "5.0M", 123 << 20: "123M", 3 << 30: "3.0G",
	} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestCheckSessionName: the client refuses exactly the names the daemon
// would (move.ValidName, and tmux's '.' and ':'), so that its early
// refusal never stops a move the daemon would make.
func TestCheckSessionName(t *testing.T) {
	names := []string{"rescued", "a-b_c.d", "x", strings.Repeat("n", 100), strings.Repeat("n", 101),
		"", ".", "..", "-x", "a b", "a/b", "a:b", "a.b", "é", "a\nb", "a\n", "under_score", "9"}
	for _, host := range []string{"zmx", "tmux"} {
		for _, n := range names {
			_, err := move.ValidName([]byte(n))
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

// TestHelpFlags: every flag line of every help is in the "  -x, --long"
// form, and __complete flags reads them all.
func TestHelpFlags(t *testing.T) {
	names := func(ds []described) []string {
		var out []string
		for _, d := range ds {
			if d.desc == "" {
				t.Errorf("%s has no description", d.name)
			}
			out = append(out, d.name)
		}
		return out
	}
	if got := names(helpFlags(lsHelp)); !slices.Equal(got, []string{"-l", "--long", "--human-readable", "-a", "--all", "-h", "--help"}) {
		t.Errorf("ls's flags %q", got)
	}
	top := names(helpFlags(usage))
	for _, f := range []string{"-s", "--socket", "--aname", "--version", "-h", "--help", "--ssh", "--ssh-opt", "--ssh-cmd"} {
		if !slices.Contains(top, f) {
			t.Errorf("the usage's flags %q lack %s", top, f)
		}
	}
	cmds := names(usageCommands(usage))
	for cmd := range helps {
		if !slices.Contains(cmds, cmd) {
			t.Errorf("the usage's commands %q lack %s", cmds, cmd)
		}
	}
	for cmd, h := range helps {
		if !slices.Contains(names(helpFlags(h)), "--help") {
			t.Errorf("%s's help lists no --help", cmd)
		}
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
	w := newErrWriter(f)
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to /dev/full: %v", err)
	}
	var stderr bytes.Buffer
	if !w.report(&stderr, "cat") || stderr.String() != "9harness cat: write error: no space left on device\n" {
		t.Errorf("report: %q", stderr.String())
	}
	ok := newErrWriter(&bytes.Buffer{})
	ok.Write([]byte("x"))
	if ok.report(&stderr, "cat") {
		t.Error("a writer with no error reported one")
	}
}

// TestSSHHosts: the Host lines of ~/.ssh/config without patterns, and the
// lines of ~/.config/9harness/hosts, sorted, once each.
func TestSSHHosts(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host b a\n\tHostName x\nHost *.corp !c d?\n  host e # comment\nHostName f\nMatch host g\n"), 0o600)
	if got := sshHosts(); !slices.Equal(got, []string{"a", "b", "e"}) {
		t.Errorf("hosts %q", got)
	}
	os.MkdirAll(filepath.Join(home, ".config", "9harness"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "9harness", "hosts"), []byte("# mine\nz\n\n a \n"), 0o644)
	if got := sshHosts(); !slices.Equal(got, []string{"a", "b", "e", "z"}) {
		t.Errorf("hosts with the 9harness list %q", got)
	}
}
