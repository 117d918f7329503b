package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	nharness "github.com/9harness/9harness/internal/harness"
)

// Tests of the command line conventions of 9harness, 9harnessd and zmxify
// (issue 17): help on stdout with exit 0, a usage error one line on stderr
// with exit 2, flags anywhere, write errors reported, the exit statuses
// of 9harness's table, and the shell completions of packaging/completions
// driven by bash, zsh and fish themselves.

// cliRun is one run of a program: what it wrote on each stream and its
// exit status.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runProg runs prog with args and env added to a clean environment whose
// default daemon socket is in an empty directory (so that a command that
// ignored -s would fail, not reach some daemon of this machine). With
// stdout set, standard output is that file.
func runProg(t *testing.T, stdout *os.File, env []string, prog string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=" + t.TempDir(), "GORACE=atexit_sleep_ms=0"}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %q: %v", prog, args, err)
	}
	return cliRun{out.String(), errb.String(), code}
}

// oneLine tells whether s is exactly one line.
func oneLine(s string) bool { return strings.Count(s, "\n") == 1 && strings.HasSuffix(s, "\n") }

// TestCLIStatusAndStreams: for each case of the CLI bullet and the
// conventions around it, the exact exit status, which stream the words go
// to, and a usage error that is one line naming the flag as typed.
func TestCLIStatusAndStreams(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	zmxify, _ := filepath.Abs("../contrib/zmxify")
	nh, nhd := bin("9harness"), bin("9harnessd")
	noSock := filepath.Join(t.TempDir(), "none.sock")
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("/dev/full: %v", err)
	}
	defer full.Close()

	const (
		helpOut  = iota // stdout holds the text, stderr is empty
		usageErr        // stdout is empty, stderr is one line
		errLine         // stdout is empty, stderr is one line
		output          // stdout holds the output, stderr is empty
	)
	for _, tc := range []struct {
		name   string
		stdout *os.File
		prog   string
		args   []string
		code   int
		kind   int
		want   string // in stdout for helpOut and output, else in stderr
	}{
		{"9harnessd --help", nil, nhd, []string{"--help"}, 0, helpOut, "usage: 9harnessd"},
		{"9harnessd -h", nil, nhd, []string{"-h"}, 0, helpOut, "usage: 9harnessd"},
		{"9harnessd --version", nil, nhd, []string{"--version"}, 0, helpOut, "9harnessd "},
		{"9harnessd --bogus", nil, nhd, []string{"--bogus"}, 2, usageErr, "9harnessd: unknown flag --bogus (try '9harnessd --help')\n"},
		{"9harnessd -bogus", nil, nhd, []string{"-bogus"}, 2, usageErr, "unknown flag -b in -bogus "},
		{"9harnessd --audit bogus", nil, nhd, []string{"--audit", "bogus"}, 2, usageErr, "--audit bogus"},
		{"9harnessd operand", nil, nhd, []string{"extra"}, 2, usageErr, `unexpected argument "extra"`},
		{"9harnessd --unix --name", nil, nhd, []string{"--unix", "/x", "--name", "y"}, 2, usageErr, "alternatives"},

		{"9harness --help", nil, nh, []string{"--help"}, 0, helpOut, "usage: 9harness"},
		{"9harness -h", nil, nh, []string{"-h"}, 0, helpOut, "usage: 9harness"},
		{"9harness help", nil, nh, []string{"help"}, 0, helpOut, "usage: 9harness"},
		{"9harness help ls", nil, nh, []string{"help", "ls"}, 0, helpOut, "usage: 9harness [-s SOCKET | --ssh DEST] ls"},
		{"9harness ls --help", nil, nh, []string{"ls", "--help"}, 0, helpOut, "  -a, --all"},
		{"9harness ls -h", nil, nh, []string{"ls", "-h"}, 0, helpOut, "  -l, --long"},
		{"9harness help mount", nil, nh, []string{"help", "mount"}, 0, helpOut, "usage: 9harness [-s SOCKET] mount"},
		{"9harness umount --help", nil, nh, []string{"umount", "--help"}, 0, helpOut, "usage: 9harness umount DIR"},
		{"9harness move --help", nil, nh, []string{"move", "--help"}, 0, helpOut, "--tmux"},
		{"9harness --version", nil, nh, []string{"--version"}, 0, helpOut, "9harness "},
		{"9harness --bogus", nil, nh, []string{"--bogus", "ls"}, 2, usageErr, "9harness: unknown flag --bogus (try '9harness --help')\n"},
		{"9harness ls --bogus", nil, nh, []string{"ls", "--bogus"}, 2, usageErr, "9harness ls: unknown flag --bogus (try '9harness ls --help')\n"},
		{"9harness ls -lz", nil, nh, []string{"ls", "-lz"}, 2, usageErr, "9harness ls: unknown flag -z in -lz (try '9harness ls --help')\n"},
		{"9harness ls -s", nil, nh, []string{"ls", "-s"}, 2, usageErr, "9harness ls: flag -s needs a value"},
		{"9harness no command", nil, nh, nil, 2, usageErr, "no command"},
		{"9harness unknown command", nil, nh, []string{"frob"}, 2, usageErr, `unknown command "frob"`},
		{"9harness help frob", nil, nh, []string{"help", "frob"}, 2, usageErr, `no command "frob"`},
		{"9harness cat no path", nil, nh, []string{"cat"}, 2, usageErr, "no path given"},

		// Flags anywhere, combined short flags, and -- ending them.
		{"9harness ls -la", nil, nh, []string{"-s", d.sock, "ls", "-la", "/"}, 0, output, "claude/\n"},
		{"9harness ls / -s SOCK", nil, nh, []string{"ls", "/", "-s", d.sock}, 0, output, "claude/\n"},
		{"9harness ls / --socket=SOCK", nil, nh, []string{"ls", "/", "--socket=" + d.sock}, 0, output, "claude/\n"},
		// -h in a group: ls's human-readable sizes; any other command's
		// usage error, never the help with status 0.
		{"9harness ls -lh", nil, nh, []string{"-s", d.sock, "ls", "-lh", "/"}, 0, output, "claude/\n"},
		// A harness the daemon does not have is a bad operand.
		{"9harness ps --harness nope", nil, nh, []string{"-s", d.sock, "ps", "--harness", "nope"}, 2, usageErr, "9harness ps: "},
		{"9harness ps -qh", nil, nh, []string{"-s", d.sock, "ps", "-qh"}, 2, usageErr, "9harness ps: -h in -qh: -h means help only on its own"},
		{"9harness ls -- -l", nil, nh, []string{"-s", d.sock, "ls", "--", "-l"}, 1, errLine, "9harness ls: -l: no such file or directory\n"},

		// Errors name the command, the path and the cause.
		{"9harness cat missing", nil, nh, []string{"-s", d.sock, "cat", "/active/x"}, 1, errLine, "9harness cat: /active/x: no such file or directory\n"},
		{"9harness no daemon", nil, nh, []string{"-s", noSock, "ls"}, 1, errLine, "cannot reach the daemon at " + noSock},
		// Write errors: the output went nowhere, and the status says so.
		{"9harness cat > /dev/full", full, nh, []string{"-s", d.sock, "cat", "/claude/history"}, 1, errLine, "9harness cat: write error: no space left on device\n"},
		{"9harness ls > /dev/full", full, nh, []string{"-s", d.sock, "ls", "/"}, 1, errLine, "9harness ls: write error: no space left on device\n"},
		{"9harness stat > /dev/full", full, nh, []string{"-s", d.sock, "stat", "/claude/history"}, 1, errLine, "9harness stat: write error: no space left on device\n"},

		// move checks what it can before it prints or asks anything: here
		// with no daemon at all, so an answer other than 2 is a check
		// that came too late.
		{"9harness move bad name", nil, nh, []string{"-s", noSock, "move", "claude/345104", "bad name"}, 2, usageErr, `"bad name" is not a valid session name`},
		{"9harness move dash name", nil, nh, []string{"-s", noSock, "move", "claude/345104", "-x"}, 2, usageErr, "unknown flag -x"},
		{"9harness move -- dash name", nil, nh, []string{"-s", noSock, "move", "claude/345104", "--", "-x"}, 2, usageErr, "-x is not a valid session name"},
		{"9harness move tmux dot", nil, nh, []string{"-s", noSock, "move", "--tmux", "claude/345104", "a.b"}, 2, usageErr, "a.b is not a valid session name"},
		{"9harness move bad agent", nil, nh, []string{"-s", noSock, "move", "claude", "x"}, 2, usageErr, "is not HARNESS/PID"},
		{"9harness move one operand", nil, nh, []string{"-s", noSock, "move", "claude/345104"}, 2, usageErr, "expected HARNESS/PID NAME"},

		{"zmxify --help", nil, zmxify, []string{"--help"}, 0, helpOut, "usage: zmxify"},
		{"zmxify -h", nil, zmxify, []string{"-h"}, 0, helpOut, "usage: zmxify"},
		{"zmxify --bogus", nil, zmxify, []string{"--bogus"}, 2, usageErr, "zmxify: unknown flag --bogus"},
		{"zmxify -x", nil, zmxify, []string{"-x"}, 2, usageErr, "zmxify: unknown flag -x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runProg(t, tc.stdout, nil, tc.prog, tc.args...)
			bad := func(why string) {
				t.Errorf("%s: %s\nexit %d\nstdout: %q\nstderr: %q", tc.name, why, r.code, r.stdout, r.stderr)
			}
			if r.code != tc.code {
				bad("exit status, want " + string(rune('0'+tc.code)))
			}
			switch tc.kind {
			case helpOut, output:
				if r.stderr != "" {
					bad("something on stderr")
				}
				if !strings.Contains(r.stdout, tc.want) {
					bad("stdout lacks " + tc.want)
				}
			case usageErr, errLine:
				if r.stdout != "" {
					bad("something on stdout")
				}
				if !oneLine(r.stderr) {
					bad("stderr is not one line")
				}
				if !strings.Contains(r.stderr, tc.want) {
					bad("stderr lacks " + tc.want)
				}
			}
		})
	}
}

// TestCLIDaemonHelp: 9harnessd --help lists /active, says that both
// 9P2000.L and plain 9P2000 are served, and names every harness of
// internal/harness, so that a new one shows up without an edit here.
func TestCLIDaemonHelp(t *testing.T) {
	t.Parallel()
	r := runProg(t, nil, nil, bin("9harnessd"), "--help")
	if r.code != 0 {
		t.Fatalf("9harnessd --help: exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"/active/HARNESS/PID/", "9P2000.L", "plain 9P2000"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("9harnessd --help lacks %q:\n%s", w, r.stdout)
		}
	}
	for _, h := range nharness.Names() {
		if !strings.Contains(r.stdout, "/"+h+"/") || !regexp.MustCompile(`\b`+h+`\b`).MatchString(r.stdout[:strings.Index(r.stdout, "Who may")]) {
			t.Errorf("9harnessd --help does not name harness %s (in the opening and as /%s/ in the tree)", h, h)
		}
	}
}

// cliHelpFlagRE finds the flags of a help's flag line ("  -l, --long  text",
// "  --json  text").
var cliHelpFlagRE = regexp.MustCompile(`^  (-[A-Za-z0-9]|--[a-z][a-z0-9-]*)((, |\s)(--[a-z][a-z0-9-]*))?`)

// cliHelpFlags is every flag of the lines of text that start with two spaces
// and a dash: the form each --help keeps its flags in.
func cliHelpFlags(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		m := cliHelpFlagRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		out = append(out, m[1])
		if m[4] != "" {
			out = append(out, m[4])
		}
	}
	return out
}

// TestCLIHelpFlagsAccepted: every flag a --help lists is one the command
// takes: FLAG VALUE --bogus2 fails on --bogus2, never on FLAG (a flag that
// needs no value leaves VALUE an operand, and flags go anywhere). It also
// holds each help to the "  -x, --long" form the man page test reads.
func TestCLIHelpFlagsAccepted(t *testing.T) {
	t.Parallel()
	value := func(flag string) string {
		switch flag {
		case "--root":
			return "claude=/nonexistent"
		case "--idle-exit", "--idle-timeout":
			return "1s"
		case "--sort":
			return "pid"
		case "--ssh-forward":
			return "no"
		}
		return "1"
	}
	check := func(name, prog string, pre []string, help string) {
		flags := cliHelpFlags(help)
		if !slices.Contains(flags, "--help") {
			t.Errorf("%s --help lists no --help: its flag lines are not in the '  -x, --long' form?\n%s", name, help)
		}
		for _, f := range flags {
			if f == "-h" || f == "--help" {
				continue
			}
			args := append(slices.Clone(pre), f, value(f), "--bogus2")
			r := runProg(t, nil, nil, prog, args...)
			if r.code != 2 || !strings.Contains(r.stderr, "unknown flag --bogus2") {
				t.Errorf("%s: %q: want the usage error on --bogus2 (so %s was taken), got exit %d: %s", name, args, f, r.code, r.stderr)
			}
		}
	}
	nh := bin("9harness")
	top := runProg(t, nil, nil, nh, "--help")
	// The global flags are taken before the command and after it.
	check("9harness", nh, []string{"ls"}, top.stdout)
	for _, cmd := range []string{"ps", "move", "mount", "umount", "ls", "cat", "stat", "relay"} {
		r := runProg(t, nil, nil, nh, cmd, "--help")
		if r.code != 0 || r.stderr != "" {
			t.Errorf("9harness %s --help: exit %d: %s", cmd, r.code, r.stderr)
			continue
		}
		check("9harness "+cmd, nh, []string{cmd}, r.stdout)
	}
	r := runProg(t, nil, nil, bin("9harnessd"), "--help")
	check("9harnessd", bin("9harnessd"), nil, r.stdout)
}

// TestCLIMountTwice: a second mount on a directory where a 9harness mount
// already is is refused, exit 1 with one line, and leaves exactly one
// mount there (it used to stack a second one on top).
func TestCLIMountTwice(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	home := fixtureHome(t)
	d := startDaemon(t, home)
	m := mountTree(t, d.sock)
	for _, args := range [][]string{
		{"-s", d.sock, "mount", m.dir},
		{"-s", d.sock, "mount", "-f", m.dir},
		{"mount", m.dir + "/", "-s", d.sock},
	} {
		r := runProg(t, nil, nil, bin("9harness"), args...)
		if r.code != 1 || r.stdout != "" || !oneLine(r.stderr) || !strings.Contains(r.stderr, "a 9harness mount is already there") {
			t.Errorf("9harness %q on a mounted tree: exit %d, stdout %q, stderr %q; want exit 1 and one line", args, r.code, r.stdout, r.stderr)
		}
		b, err := os.ReadFile("/proc/self/mountinfo")
		must(t, err)
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == m.dir {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("after 9harness %q: %d mounts on %s, want 1", args, n, m.dir)
		}
	}
	m.umount()
}

// completionDrivers run a completion of packaging/completions in its own
// shell, for the words of a command line whose last word is the one under
// the cursor, and print the candidates one a line.
var completionDrivers = map[string]string{
	// bash: the function the file registers, called as bash would, with
	// COMP_WORDS and COMP_CWORD set.
	"bash": `source "$COMPLETION"
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
_9harness
[ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}"
`,
	// zsh: the file autoloaded from fpath as compinit would, with words and
	// CURRENT set; compadd and the file helpers, which only a completion
	// widget may call, print instead (compadd matching the word's prefix,
	// as zsh's default matching does).
	"zsh": `fpath=("${COMPLETION:h}" $fpath)
autoload -Uz _9harness
compadd() {
	local a; local -i seen=0
	for a in "$@"; do
		if (( seen )); then [[ $a == ${words[CURRENT]}* ]] && print -r -- "$a"
		elif [[ $a == -- ]]; then seen=1; fi
	done
}
_files() { print -r -- '<files>' }
_directories() { print -r -- '<directories>' }
words=("$@"); CURRENT=${#words}
_9harness
`,
	// fish: complete -C on the command line, as a Tab would.
	"fish": `source $COMPLETION; complete -C (string join ' ' -- $argv) | string replace -r '\t.*' ''; true`,
}

var completionSources = map[string]string{"bash": "9harness.bash", "zsh": "_9harness", "fish": "9harness.fish"}

// TestCompletion: each shell's completion, driven by the shell itself,
// offers commands, each command's flags (global ones too after it), agents
// as HARNESS/PID for move, tree paths for ls, cat and stat, the tree's
// harnesses for ps --harness and ssh hosts for --ssh; the candidates that
// need the daemon come from the one the line names with -s, before or
// after the command.
func TestCompletion(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	fixtureTimeline(t, home)
	fixturePIDDomain(t, home)
	procs, pids := copyProcTable(t, "../testdata/proc", home)
	d := startFixtureDaemon(t, home, procs, pids)
	c := d.client()
	agents, err := c.Agents()
	must(t, err)
	var wantAgents []string
	for _, a := range agents {
		wantAgents = append(wantAgents, a.Harness+"/"+strconv.Itoa(a.PID))
	}
	if len(wantAgents) < 2 {
		t.Fatalf("the fixture table has %d agents: %v", len(wantAgents), wantAgents)
	}
	harnesses, err := c.Harnesses()
	must(t, err)

	// The user's hosts: ~/.ssh/config (patterns left out) and 9harness's
	// own list.
	user := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(user, ".ssh"), 0o700))
	must(t, os.WriteFile(filepath.Join(user, ".ssh", "config"), []byte("Host build1 build2\n  Port 2222\nHost *.corp !x\nhost alpha # a comment\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(user, ".config", "9harness"), 0o755))
	must(t, os.WriteFile(filepath.Join(user, ".config", "9harness", "hosts"), []byte("# mine\nzeta\nalpha\n"), 0o644))

	s := d.sock
	commands := []string{"cat", "events", "help", "ls", "mount", "move", "notify", "ps", "relay", "stat", "top", "umount", "version", "wait"}
	cases := []struct {
		name  string
		words []string
		want  []string
	}{
		{"commands", []string{""}, commands},
		{"command prefix", []string{"m"}, []string{"mount", "move"}},
		{"notify's flags", []string{"notify", "--c"}, []string{"--config"}},
		{"help's command", []string{"help", "u"}, []string{"umount"}},
		{"ls flags", []string{"ls", "--l"}, []string{"--long"}},
		{"global flags after the command", []string{"cat", "--ss"}, []string{"--ssh", "--ssh-cmd", "--ssh-forward", "--ssh-opt"}},
		{"move's agents", []string{"-s", s, "move", ""}, wantAgents},
		{"move's agents, -s after", []string{"move", "--socket", s, ""}, wantAgents},
		{"move's agents, prefix", []string{"-s", s, "move", "--tmux", "claude/"}, filterPrefix(wantAgents, "claude/")},
		{"move's name", []string{"-s", s, "move", wantAgents[0], ""}, nil},
		{"root paths", []string{"-s", s, "ls", "/cl"}, []string{"/claude/"}},
		{"paths below", []string{"-s", s, "cat", "/claude/h"}, []string{"/claude/history"}},
		{"paths of a directory", []string{"-s", s, "stat", "/claude/"}, []string{"/claude/history", "/claude/projects/", "/claude/skills/"}},
		{"harnesses", []string{"-s", s, "ps", "--harness", ""}, harnesses},
		{"wait's agents", []string{"-s", s, "wait", "--state", "idle", wantAgents[0], ""}, wantAgents},
		{"wait's states", []string{"wait", "--state", "w"}, []string{"waiting", "working"}},
		{"ps's sort keys", []string{"ps", "--sort", "t"}, []string{"title", "tokens"}},
		{"ps's sort keys, all", []string{"ps", "--sort", ""}, []string{"age", "cwd", "harness", "pid", "state", "status", "title", "tokens"}},
		{"ssh hosts", []string{"--ssh", ""}, []string{"alpha", "build1", "build2", "zeta"}},
		{"ssh hosts, prefix", []string{"--ssh", "b"}, []string{"build1", "build2"}},
		{"no daemon, no candidates", []string{"-s", s + ".none", "move", ""}, nil},
	}
	// The three shells share only the daemon, which they read: each runs
	// its cases beside the others'.
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			require(t, shell)
			file, _ := filepath.Abs(filepath.Join("../packaging/completions", completionSources[shell]))
			for _, tc := range cases {
				args := append([]string{"-c", completionDrivers[shell]}, "9harness")
				if shell == "bash" || shell == "zsh" {
					args = []string{"-c", completionDrivers[shell], shell, "9harness"}
				}
				if shell == "zsh" {
					args = append([]string{"-f"}, args...)
				}
				args = append(args, tc.words...)
				cmd := exec.Command(shell, args...)
				cmd.Env = []string{"PATH=" + bins + ":" + os.Getenv("PATH"), "HOME=" + user, "COMPLETION=" + file, "XDG_RUNTIME_DIR=" + t.TempDir()}
				var errb bytes.Buffer
				cmd.Stderr = &errb
				out, err := cmd.Output()
				if err != nil && shell != "zsh" {
					t.Errorf("%s: %v\n%s", tc.name, err, errb.String())
					continue
				}
				got := strings.Fields(string(out))
				slices.Sort(got)
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s %q: got %q, want %q\n%s", tc.name, tc.words, got, want, errb.String())
				}
			}
		})
	}
}

// zshWidget types lines ($2...), each followed by a Tab and Enter, into
// one real interactive zsh (on a pty, through zsh's own zpty module) whose
// fpath holds the completions ($1): a 9harness function prints each
// completed line as "LINE: ARGS" (completion's own calls, with
// __complete, go to the binary), and the script prints the ARGS, one a
// line. The prompt is spelled in two pieces so that the echo of the setup
// line is not taken for it.
const zshWidget = `zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D; 9harness() { if (( \${@[(I)__complete]} )); then command 9harness \"\$@\"; else print -r -- \"LINE: \$*\"; fi }; PS1='REA''DY> '"
shift
local out all= i line
for i in {1..600}; do
	if zpty -r -t z out; then all+=$out; else sleep 0.05; fi
	[[ $all == *READY\>* ]] && break
done
for line; do
	zpty -w -n z "$line"$'\t'
	zpty -w -n z $'\n'
	all=
	for i in {1..600}; do
		if zpty -r -t z out; then all+=$out; else sleep 0.05; fi
		[[ $all == *$'\n'LINE:*$'\n'* ]] && break
	done
	all=${all#*$'\n'LINE: }
	print -r -- "${all%%$'\r'*}"
done
zpty -d z
`

// TestCompletionZshWidget: the zsh completion as zsh runs it, from a Tab
// in an interactive shell with compinit (TestCompletion calls it with
// compadd stubbed): a unique candidate completes the word, a directory
// without a space after it.
func TestCompletionZshWidget(t *testing.T) {
	t.Parallel()
	zsh := require(t, "zsh")
	home := fixtureHome(t)
	d := startDaemon(t, home)
	user := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(user, ".ssh"), 0o700))
	must(t, os.WriteFile(filepath.Join(user, ".ssh", "config"), []byte("Host alpha beta\n"), 0o600))
	dir, _ := filepath.Abs("../packaging/completions")
	script := filepath.Join(t.TempDir(), "widget.zsh")
	must(t, os.WriteFile(script, []byte(zshWidget), 0o644))
	cases := []struct{ typed, want string }{
		{"9harness mov", "move"},
		{"9harness -s " + d.sock + " ls /cl", "-s " + d.sock + " ls /claude/"},
		{"9harness cat --socket " + d.sock + " /claude/hi", "cat --socket " + d.sock + " /claude/history"},
		{"9harness --ssh al", "--ssh alpha"},
	}
	args := []string{"-f", script, dir}
	for _, tc := range cases {
		args = append(args, tc.typed)
	}
	cmd := exec.Command(zsh, args...)
	cmd.Env = []string{"PATH=" + bins + ":" + os.Getenv("PATH"), "HOME=" + user, "TERM=dumb", "XDG_RUNTIME_DIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(got) != len(cases) {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	for i, tc := range cases {
		if got[i] != tc.want {
			t.Errorf("zsh: %q Tab: got %q, want %q", tc.typed, got[i], tc.want)
		}
	}
}

func filterPrefix(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestDaemonErrorsInWords: what the daemon says when it cannot start, or
// cannot serve a root, names the path and the cause in words a user can
// act on, never the Go operation that failed ("sockpath.EnsureDir:").
func TestDaemonErrorsInWords(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	other := t.TempDir()
	must(t, os.Chown(other, victimUID, victimUID))
	goName := regexp.MustCompile(`\b(sockpath|saferoot|daemon|tree|proc|errs|harness|ninep)\.[A-Z]\w*`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"socket directory a file", []string{"--unix", "/dev/null/x.sock"},
			"9harnessd: listen /dev/null/x.sock: the socket's directory /dev/null is not a directory\n"},
		{"socket directory another uid's", []string{"--unix", other + "/x.sock"},
			fmt.Sprintf("the socket's directory %s is owned by uid %d, not you (uid 0): another user may have made it", other, victimUID)},
		{"a root whose directory is missing", []string{"--unix", other + "/x.sock", "--root", "opencode=/nonexistent/share/opencode"},
			"root opencode: /nonexistent/share: does not exist: not served"},
	} {
		r := runProg(t, nil, nil, bin("9harnessd"), tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tc.name, r.code, r.stderr, tc.want)
		}
		if m := goName.FindString(r.stderr); m != "" {
			t.Errorf("%s: names %s: %q", tc.name, m, r.stderr)
		}
	}
}

// TestCompletionDescriptions: zsh and fish show what each command and flag
// does beside it, in the words of the help (bash has no place for them).
func TestCompletionDescriptions(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../packaging/completions")
	env := []string{"PATH=" + bins + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=" + t.TempDir()}
	// zsh's compadd, stubbed as in completionDrivers, prints the
	// descriptions its -d array gives.
	const zshDescs = `fpath=("$1" $fpath); shift
autoload -Uz _9harness
compadd() {
	while (( $# )); do
		case $1 in
		-d) print -rl -- "${(@P)2}"; shift 2 ;;
		--) break ;;
		*) shift ;;
		esac
	done
}
words=("$@"); CURRENT=${#words}
_9harness
`
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"9harness", ""}, []string{"ps -- list the live agents, one row each", "move -- stop an agent and resume the same session inside a new", "help -- this text, or one command's"}},
		{[]string{"9harness", "ps", "--no-h"}, []string{"--no-headers -- the same, as kubectl and procps spell it"}},
		{[]string{"9harness", "ls", "--ss"}, []string{"--ssh -- read the tree on DEST"}},
	} {
		for _, shell := range []string{"zsh", "fish"} {
			path := require(t, shell)
			var cmd *exec.Cmd
			if shell == "zsh" {
				cmd = exec.Command(path, append([]string{"-f", "-c", zshDescs, "zsh", dir}, tc.words...)...)
			} else {
				cmd = exec.Command(path, "-c", "source $argv[1]; complete -C $argv[2]", filepath.Join(dir, "9harness.fish"), strings.Join(tc.words, " "))
			}
			cmd.Env = env
			out, err := cmd.Output()
			got := string(out)
			if shell == "fish" {
				got = strings.ReplaceAll(got, "\t", " -- ")
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w+"\n") {
					t.Errorf("%s %q: no %q in\n%s(%v)", shell, tc.words, w, got, err)
				}
			}
		}
	}
}
