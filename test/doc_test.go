package test

// The documentation's examples, run: every shell example in README.md and
// the man pages is either marked and run here, for real, against a daemon
// serving a fixture home with live fake agents, or listed in
// unrunnableExamples with the reason it cannot run in a test. A block that
// is neither fails TestDocExamplesListed, so the docs cannot drift from the
// code unnoticed.
//
// Markers: in README.md an HTML comment line `<!-- doctest -->` directly
// before a ```sh fence; in a man page a roff comment line `.\" doctest`
// directly before an .EX/.EE block. A marked block is a shell script run
// with bash -e and must exit 0; a block whose lines begin with "$ " is a
// transcript instead: each "$ " line is run on its own and the lines after
// it, up to the next "$ " line, are its expected standard output (a line
// "..." stands for any number of lines, and "…" within a line for any text).
//
// The docs name agents by example pids; before a block runs, each example
// pid in examplePIDs is replaced with the pid of the live fake agent of
// that harness, in the commands and in the expected output alike.
//
// TestManMatchesHelp compares the man pages' options with what the
// binaries' --help prints; TestManGroff renders each page with groff -ww.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	nharness "github.com/9harness/9harness/internal/harness"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docFiles are the documents whose examples are checked, relative to test/.
var docFiles = []string{"../README.md", "../packaging/man/9harness.1", "../packaging/man/9harnessd.8"}

// unrunnableExamples are the unmarked example blocks, keyed by file and
// the block's first line, with the reason each cannot run in a test.
var unrunnableExamples = map[[2]string]string{
	{"README.md", "make run     # the daemon on your own home, in the foreground, read-only;"}:                    "make run serves the real home of whoever runs it, in the foreground until interrupted; make test runs the whole suite, this test included",
	{"README.md", "make install-user          # ~/.local/bin, ~/.config/systemd/user, man pages; no root"}:        "installs into the real home and needs a running systemd user manager; loginctl enable-linger needs logind (test/system covers the units)",
	{"README.md", "systemctl --user edit 9harness.service     # add:  [Service]"}:                                 "opens an editor on a unit of a running systemd user manager",
	{"README.md", "ssh -N -L \"$XDG_RUNTIME_DIR/build1.sock:/run/user/1000/9p/harness\" alice@build1 &"}:          "needs a remote host alice@build1 reachable by ssh (test/ssh_test.go forwards a socket over a real sshd)",
	{"README.md", "sudo install -d -m 0755 -o $USER /run/9harness/$USER   # or a tmpfiles.d line"}:                "makes a directory in the machine's /run and edits units of a running systemd user manager (the Nix modules' test covers the same settings)",
	{"README.md", `9harness ps --detached -q | while read -r a; do 9harness move "$a" "rescued-${a#*/}"; done`}:   "moves every detached agent of the uid, which on a shared test machine includes other tests' agents (test/reach_test.go lists the detached agents it started with ps --detached; test/move_test.go moves agents)",
	{"README.md", "contrib/zmxify                       # pick an agent with fzf and move it into zmx"}:           "interactive: fzf waits for a choice on a terminal (test/zmxify_test.go drives it)",
	{"README.md", "mount -t 9p -o trans=unix,version=9p2000.L,ro /run/user/1000/9p/harness /mnt/harness"}:         "a kernel 9p mount: root, the 9p modules and uid 1000's daemon granting root",
	{"README.md", "journalctl -t 9harnessd                                     # everything the daemon recorded"}: "reads the system journal, where only a daemon run under systemd writes (test/system checks the entries)",
	{"README.md", "9harness notify --test                                  # one message to each target"}:         "posts to ntfy.sh on the internet and enables a unit of a running systemd user manager (test/notify_test.go runs notify and --test against an ntfy server of its own)",
	{"9harness.1", "9harness --ssh alice@build1 ps"}:                                                              "needs remote hosts build1 reachable by ssh and a diod serving /srv/data",
	{"9harness.1", `9harness ps --watch --notify \`}:                                                              "runs until interrupted, and needs a desktop's notification service (test/wait_test.go runs --notify and contrib/notify-waiting against a stub on a private bus)",
	{"9harnessd.8", "journalctl -t 9harnessd"}:                                                                    "reads the system journal, where only a daemon run under systemd writes (test/system checks the entries)",
	{"9harnessd.8", "systemctl --user edit 9harness.service"}:                                                     "opens an editor on a unit of a running systemd user manager; loginctl enable-linger needs logind",
}

// examplePIDs are the pids the docs use for agents, by harness.
var examplePIDs = map[string]string{"345104": "claude", "51234": "codex"}

// docBlock is one example block of a document.
type docBlock struct {
	file   string // base name
	line   int    // where the block's text starts, 1-based
	text   string // the shell text, unescaped
	marked bool
}

func (b docBlock) first() string {
	for _, l := range strings.Split(b.text, "\n") {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

var shellFences = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true}

// markdownBlocks returns the shell fences of a markdown file; a fence with
// no language, or an indented code block, is an error: each must say
// whether it is an example.
func markdownBlocks(name, src string) ([]docBlock, []error) {
	var blocks []docBlock
	var errs []error
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			if i > 0 && strings.TrimSpace(lines[i-1]) == "" && strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" {
				errs = append(errs, fmt.Errorf("%s:%d: an indented code block: fence it (```sh for an example, ```text otherwise)", name, i+1))
			}
			continue
		}
		info := strings.TrimSpace(strings.TrimPrefix(l, "```"))
		start := i + 1
		j := start
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		if info == "" {
			errs = append(errs, fmt.Errorf("%s:%d: a fence without a language: sh for an example, text for anything else", name, i+1))
		}
		if shellFences[info] {
			blocks = append(blocks, docBlock{file: name, line: start + 1, text: strings.Join(lines[start:j], "\n"),
				marked: i > 0 && strings.TrimSpace(lines[i-1]) == "<!-- doctest -->"})
		}
		i = j
	}
	return blocks, errs
}

// roffText undoes the escapes the man pages use in example text.
func roffText(s string) string {
	return strings.NewReplacer(`\-`, "-", `\e`, `\`, `\(aq`, "'", `\(ti`, "~", `\(ha`, "^", `\&`, "", `\fB`, "", `\fI`, "", `\fR`, "", `\fP`, "").Replace(s)
}

// manBlocks returns the .EX/.EE blocks of a man page.
func manBlocks(name, src string) []docBlock {
	var blocks []docBlock
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != ".EX" {
			continue
		}
		start := i + 1
		j := start
		for j < len(lines) && strings.TrimSpace(lines[j]) != ".EE" {
			j++
		}
		var text []string
		for _, l := range lines[start:j] {
			text = append(text, roffText(l))
		}
		blocks = append(blocks, docBlock{file: name, line: start + 1, text: strings.Join(text, "\n"),
			marked: i > 0 && strings.TrimSpace(lines[i-1]) == `.\" doctest`})
		i = j
	}
	return blocks
}

func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	var all []docBlock
	for _, f := range docFiles {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		if strings.HasSuffix(f, ".md") {
			b, errs := markdownBlocks(name, string(src))
			for _, err := range errs {
				t.Error(err)
			}
			all = append(all, b...)
		} else {
			all = append(all, manBlocks(name, string(src))...)
		}
	}
	return all
}

// TestDocExamplesListed: every example block is marked or listed with a
// reason, every listed block exists, and none is both.
func TestDocExamplesListed(t *testing.T) {
	blocks := docBlocks(t)
	seen := map[[2]string]bool{}
	marked := 0
	for _, b := range blocks {
		key := [2]string{b.file, b.first()}
		_, listed := unrunnableExamples[key]
		switch {
		case b.marked && listed:
			t.Errorf("%s:%d is marked doctest and also listed as unrunnable: %q", b.file, b.line, key[1])
		case !b.marked && !listed:
			t.Errorf("%s:%d: an example neither marked (run by TestDocExamples) nor listed in unrunnableExamples with a reason: %q", b.file, b.line, key[1])
		}
		if b.marked {
			marked++
		}
		seen[key] = true
	}
	for key := range unrunnableExamples {
		if !seen[key] {
			t.Errorf("unrunnableExamples lists %s %q, which no longer exists", key[0], key[1])
		}
	}
	t.Logf("%d example blocks: %d marked and run, %d listed as unrunnable", len(blocks), marked, len(blocks)-marked)
	if marked == 0 {
		t.Error("no marked example found: the markers are not being recognized")
	}
}

// docEnv is the world a marked example runs in: a fixture home with a
// Claude-shaped and a Codex-shaped agent, the daemon on the default socket
// under a private XDG_RUNTIME_DIR with moves on, private zmx and tmux
// socket directories, and a working directory whose bin/ holds the built
// binaries (the README runs bin/9harness from the source tree).
type docEnv struct {
	home, run, work, tmuxDir, zmxDir, record string
	claude, codex                            *fakeAgent
	d                                        *daemon
	env                                      []string
}

const (
	docClaudeSID = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
	docCodexSID  = "019e8888-3333-7444-8555-666677778888"
)

func newDocEnv(t *testing.T) *docEnv {
	t.Helper()
	e := &docEnv{home: fixtureHome(t), run: shortDir(t, "dr"), tmuxDir: shortDir(t, "dt"), zmxDir: shortDir(t, "dz"), work: t.TempDir()}
	must(t, os.Chmod(e.run, 0o700))
	e.record = filepath.Join(t.TempDir(), "record.jsonl")
	contrib, err := filepath.Abs("../contrib")
	must(t, err)
	must(t, os.Symlink(bins, filepath.Join(e.work, "bin")))
	must(t, os.Symlink(contrib, filepath.Join(e.work, "contrib")))
	cwd := filepath.Join(e.home, "src", "project")
	must(t, os.MkdirAll(cwd, 0o755))
	e.env = []string{
		"HOME=" + e.home,
		"XDG_RUNTIME_DIR=" + e.run,
		"PATH=" + bins + ":/usr/bin:/bin:/usr/sbin:/sbin",
		"TMUX_TMPDIR=" + e.tmuxDir,
		"ZMX_DIR=" + e.zmxDir,
		"FAKE_RECORD=" + e.record,
		"LANG=C.UTF-8",
		"USER=" + "root",
	}
	t.Cleanup(func() { e.cleanup(t) })
	e.claude = startFake(t, "claude", e.home, cwd, append(append([]string{}, e.env...), "FAKE_SESSION="+docClaudeSID)...)
	e.codex = startFake(t, "codex", e.home, cwd, append(append([]string{}, e.env...), "FAKE_SESSION="+docCodexSID)...)
	waitRegistry(t, e.home, e.claude.pid())

	e.d = &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1), sock: filepath.Join(e.run, "9p", "harness")}
	e.d.cmd = exec.Command(bin("9harnessd"), "--audit", "stderr", "--allow-move", "--host-path", bins+":/usr/bin:/bin")
	e.d.cmd.Env = e.env
	e.d.cmd.Stdout, e.d.cmd.Stderr = e.d.stderr, e.d.stderr
	must(t, e.d.cmd.Start())
	go func() { e.d.done <- e.d.cmd.Wait() }()
	t.Cleanup(e.d.stop)
	e.d.waitReady()
	c := e.d.client()
	eventually(t, func() bool {
		s1, _ := readField(c, "/active/claude/"+strconv.Itoa(e.claude.pid())+"/session")
		s2, _ := readField(c, "/active/codex/"+strconv.Itoa(e.codex.pid())+"/session")
		return s1 == docClaudeSID && s2 == docCodexSID
	}, "both fake agents resolved under /active")
	return e
}

// cleanup ends what the examples made: a mount left behind, the zmx and
// tmux sessions of the private socket directories, and the agents a move
// relaunched (every launch recorded after the two this test started).
func (e *docEnv) cleanup(t *testing.T) {
	mnt := filepath.Join(e.home, "harness")
	if out, err := exec.Command("mountpoint", "-q", mnt).CombinedOutput(); err == nil {
		t.Errorf("%s is still mounted after the example: %s", mnt, out)
		exec.Command("umount", "-l", mnt).Run()
	}
	z := exec.Command(bin("zmx"), "kill", "*")
	z.Env = e.env
	z.Run()
	exec.Command("tmux", "-S", filepath.Join(e.tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "default"), "kill-server").Run()
	for _, r := range readLaunches(e.record) {
		if r.PID != e.claude.pid() && r.PID != e.codex.pid() && running(t, r.PID) {
			syscall.Kill(r.PID, syscall.SIGTERM)
		}
	}
}

// substitute puts the live agents' pids in place of the docs' examples.
func (e *docEnv) substitute(s string) string {
	for ex, h := range examplePIDs {
		pid := e.claude.pid()
		if h == "codex" {
			pid = e.codex.pid()
		}
		s = regexp.MustCompile(`\b`+ex+`\b`).ReplaceAllString(s, strconv.Itoa(pid))
	}
	return s
}

// sh runs a script in the example's world; it is killed, with everything
// it started in its process group, after three minutes. The daemon lists
// every agent of the test's uid, so a loop over /active also meets the
// agents other tests on the machine run at the same time (hundreds, under
// a load test), each read by a client that may be built with -race.
func (e *docEnv) sh(t *testing.T, script string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = e.work
	cmd.Env = e.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	err = cmd.Run()
	return o.String(), se.String(), err
}

// transcript splits a "$ " block into commands and their expected output.
func transcript(text string) (cmds []string, outs [][]string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			cmds = append(cmds, c)
			outs = append(outs, nil)
		} else if len(cmds) > 0 {
			outs[len(outs)-1] = append(outs[len(outs)-1], l)
		}
	}
	return cmds, outs
}

// outputMatches reports whether got matches the expected lines ("..." any
// lines, "…" any text within a line).
func outputMatches(want []string, got string) bool {
	var re strings.Builder
	re.WriteString(`\A`)
	for _, w := range want {
		if w == "..." {
			re.WriteString(`(?:.*\n)*`)
			continue
		}
		parts := strings.Split(w, "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re.WriteString(strings.Join(parts, ".*") + `\n`)
	}
	re.WriteString(`\z`)
	return regexp.MustCompile(re.String()).MatchString(got)
}

// TestDocExamples runs every marked example.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	require(t, "tmux")
	require(t, "diodls")
	require(t, "mountpoint")
	requireFuse(t)
	n := 0
	for _, b := range docBlocks(t) {
		if !b.marked {
			continue
		}
		n++
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			// Each example has its own home, daemon, runtime, tmux and
			// zmx directories: they run beside each other.
			t.Parallel()
			e := newDocEnv(t)
			text := e.substitute(b.text)
			if !strings.Contains(text, "\n$ ") && !strings.HasPrefix(text, "$ ") {
				out, errs, err := e.sh(t, text)
				if err != nil {
					t.Fatalf("%s:%d: %v\n--- script\n%s\n--- stdout\n%s--- stderr\n%s--- daemon\n%s", b.file, b.line, err, text, out, errs, e.d.stderr.String())
				}
				t.Logf("stdout:\n%s", out)
				return
			}
			cmds, outs := transcript(text)
			for i, c := range cmds {
				out, errs, err := e.sh(t, c)
				if err != nil {
					t.Errorf("%s:%d: $ %s: %v\n%s%s", b.file, b.line, c, err, out, errs)
					continue
				}
				if !outputMatches(outs[i], out) {
					t.Errorf("%s:%d: $ %s printed\n%s--- the doc shows\n%s", b.file, b.line, c, out, strings.Join(outs[i], "\n"))
				}
			}
		})
	}
	t.Logf("%d marked examples run", n)
}

// TestDocOutputMatch: the transcript matcher's wildcards.
func TestDocOutputMatch(t *testing.T) {
	for _, tc := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{[]string{"a", "b"}, "a\nb\n", true},
		{[]string{"a", "b"}, "a\nb\nc\n", false},
		{[]string{"a", "..."}, "a\nb\nc\n", true},
		{[]string{"a", "...", "c"}, "a\nc\n", true},
		{[]string{"pid …"}, "pid 12\n", true},
		{[]string{"pid …"}, "pod 12\n", false},
		{[]string{"a.b"}, "axb\n", false},
	} {
		if got := outputMatches(tc.want, tc.got); got != tc.ok {
			t.Errorf("outputMatches(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
}

// Flags as --help prints them: a line that starts with two to six spaces
// and a dash; its first column (up to two spaces or a tab) holds the flag
// and its short or long twin ("-s, --socket SOCKET", "--json", and Go's
// flag package's "-allow-move").
var (
	helpFlagLine = regexp.MustCompile(`^ {2,6}-`)
	flagToken    = regexp.MustCompile(`(?:^|[\s\[,|(])(--?[A-Za-z0-9][A-Za-z0-9-]*)`)
)

// normFlag writes a multi-letter flag with two dashes, as the man pages do
// (Go's flag package prints -name and accepts --name).
func normFlag(f string) string {
	if !strings.HasPrefix(f, "--") && len(f) > 2 {
		return "-" + f
	}
	return f
}

func helpFlags(help string) map[string]bool {
	flags := map[string]bool{}
	for _, l := range strings.Split(help, "\n") {
		if !helpFlagLine.MatchString(l) {
			continue
		}
		col := strings.TrimSpace(l)
		if i := strings.Index(col, "  "); i >= 0 {
			col = col[:i]
		}
		if i := strings.Index(col, "\t"); i >= 0 {
			col = col[:i]
		}
		for _, m := range flagToken.FindAllStringSubmatch(col, -1) {
			flags[normFlag(m[1])] = true
		}
	}
	return flags
}

// helpCommands are the commands the usage's "Commands:" list names: the
// first word of each of its lines indented by two spaces.
func helpCommands(help string) []string {
	var cmds []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		if strings.HasSuffix(strings.TrimSpace(l), "Commands:") && !strings.HasPrefix(l, " ") {
			in = true
			continue
		}
		if in && strings.TrimSpace(l) == "" {
			in = false
		}
		if in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
			w := strings.Fields(l)[0]
			if regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(w) {
				cmds = append(cmds, w)
			}
		}
	}
	return cmds
}

// manOptions reads a man page's documented options: the tag line after
// each .TP in OPTIONS (the global ones, key "") and, in COMMANDS, under
// each .SS, whose first words name the commands ("mount ..., umount DIR").
func manOptions(src string) map[string]map[string]bool {
	opts := map[string]map[string]bool{}
	section, cmds := "", []string{""}
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, ".SH "):
			section = strings.Trim(strings.TrimPrefix(l, ".SH "), `"`)
			cmds = []string{""}
		case strings.HasPrefix(l, ".SS ") && section == "COMMANDS":
			cmds = nil
			for _, part := range strings.Split(roffText(strings.Trim(strings.TrimPrefix(l, ".SS "), `"`)), ",") {
				if f := strings.Fields(part); len(f) > 0 && regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(f[0]) {
					cmds = append(cmds, f[0])
					if opts[f[0]] == nil {
						opts[f[0]] = map[string]bool{}
					}
				}
			}
		case (l == ".TP" || l == ".TQ") && i+1 < len(lines) && (section == "OPTIONS" || section == "COMMANDS"):
			tag := roffText(lines[i+1])
			for _, m := range flagToken.FindAllStringSubmatch(tag, -1) {
				for _, c := range cmds {
					if opts[c] == nil {
						opts[c] = map[string]bool{}
					}
					opts[c][m[1]] = true
				}
			}
		}
	}
	return opts
}

func runHelp(t *testing.T, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin(prog), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Errorf("%s %s: %v (help must exit 0)\n%s", prog, strings.Join(args, " "), err, e.String())
	}
	if o.Len() == 0 {
		t.Errorf("%s %s printed nothing on standard output", prog, strings.Join(args, " "))
	}
	return o.String()
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// compareFlags reports each flag --help shows that the man page lacks, and
// each the man page documents that --help does not show.
func compareFlags(t *testing.T, what string, help, man, manGlobal map[string]bool) {
	t.Helper()
	for _, f := range keys(help) {
		if !man[f] && !manGlobal[f] {
			t.Errorf("%s: --help shows %s, the man page does not document it", what, f)
		}
	}
	for _, f := range keys(man) {
		if !help[f] {
			t.Errorf("%s: the man page documents %s, --help does not show it", what, f)
		}
	}
}

// TestManMatchesHelp: every flag of 9harness --help, of each
// 9harness COMMAND --help and of 9harnessd --help is in the man page, and
// every option the man page documents is in --help; the man page
// documents every command the usage lists.
func TestManMatchesHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prog, page string }{{"9harness", "../packaging/man/9harness.1"}, {"9harnessd", "../packaging/man/9harnessd.8"}} {
		src, err := os.ReadFile(tc.page)
		must(t, err)
		man := manOptions(string(src))
		top := runHelp(t, tc.prog, "--help")
		global := helpFlags(top)
		if len(global) == 0 {
			t.Fatalf("%s --help: no flag lines found:\n%s", tc.prog, top)
		}
		compareFlags(t, tc.prog, global, man[""], nil)
		for _, required := range []string{"EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "OPTIONS", "SEE ALSO"} {
			if !strings.Contains(string(src), "\n.SH "+required+"\n") && !strings.Contains(string(src), "\n.SH \""+required+"\"\n") {
				t.Errorf("%s has no %s section", tc.page, required)
			}
		}
		cmds := helpCommands(top)
		if tc.prog == "9harness" && len(cmds) < 5 {
			t.Fatalf("9harness --help: found only the commands %q", cmds)
		}
		listed := map[string]bool{}
		for _, c := range cmds {
			listed[c] = true
			if _, ok := man[c]; !ok {
				t.Errorf("%s: the usage lists the command %s, the man page's COMMANDS does not", tc.prog, c)
				continue
			}
			if c == "help" {
				continue // help's own flags are the usage's
			}
			compareFlags(t, tc.prog+" "+c, helpFlags(runHelp(t, tc.prog, c, "--help")), man[c], man[""])
		}
		for c := range man {
			if c != "" && !listed[c] {
				t.Errorf("%s: the man page documents the command %s, the usage does not list it", tc.prog, c)
			}
		}
	}
}

// TestManGroff: each man page renders under groff -ww (every warning on)
// without a word on standard error.
func TestManGroff(t *testing.T) {
	t.Parallel()
	groff := require(t, "groff")
	for _, page := range []string{"../packaging/man/9harness.1", "../packaging/man/9harnessd.8"} {
		cmd := exec.Command(groff, "-ww", "-man", "-Tutf8", page)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil || e.Len() != 0 {
			t.Errorf("groff -ww -man %s: %v\n%s", page, err, e.String())
		}
		if o.Len() < 1000 {
			t.Errorf("groff rendered %s to only %d bytes", page, o.Len())
		}
	}
}

// TestDocVerifiedVersions: the README's harness table and 9harnessd --help
// quote the CLI versions the real-CLI tier pins (harness.Verified), so
// neither can claim a version the tier did not run.
func TestDocVerifiedVersions(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help, err := exec.Command(bin("9harnessd"), "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range nharness.Names() {
		v := nharness.Verified(h)
		if v == "" {
			continue
		}
		row := regexp.MustCompile(`(?m)^\|[^|\n]*\|.*\| ` + regexp.QuoteMeta(v) + `( |\|)`)
		if !row.Match(readme) {
			t.Errorf("README's harness table does not give %s %s, the version test/realcli runs", h, v)
		}
		if !bytes.Contains(help, []byte(" "+v)) {
			t.Errorf("9harnessd --help does not give %s %s", h, v)
		}
	}
}

// TestLayoutListsPackages: the README's Layout names every Go package of
// the module (go list ./..., and test/redteam, which a build tag keeps
// out of it), and everything it names is in the tree: the map of the code
// stays true as packages come and go.
func TestLayoutListsPackages(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../README.md")
	must(t, err)
	_, rest, ok := strings.Cut(string(src), "\n## Layout\n\n```text\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no Layout block")
	}
	named := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		// The first column: one path, or several separated by ", ".
		col, _, _ := strings.Cut(line, "  ")
		for _, p := range strings.Split(col, ", ") {
			if p = strings.TrimSuffix(strings.TrimSpace(p), "/"); p != "" {
				named[p] = true
			}
		}
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]bool{"test/redteam": true}
	for _, p := range strings.Fields(string(out)) {
		pkgs[strings.TrimPrefix(p, "github.com/9harness/9harness/")] = true
	}
	for p := range pkgs {
		if !named[p] {
			t.Errorf("the README's Layout does not name the package %s", p)
		}
	}
	// A path that is no package of the module is a directory of another
	// kind (the p9 fork's own module, test/system's scripts), or gone.
	for p := range named {
		if _, err := os.Stat(filepath.Join("..", p)); !pkgs[p] && err != nil {
			t.Errorf("the README's Layout names %s, which is neither a package nor in the tree", p)
		}
	}
}

// TestTestMap: test/README.md's tables name every test file of test/,
// test/realcli/ and test/redteam/ (each under its section, which says the
// make target that runs it), with its tier in the row, and name no file
// that is gone.
func TestTestMap(t *testing.T) {
	src, err := os.ReadFile("README.md")
	must(t, err)
	listed := map[string]map[string]bool{}
	section := ""
	for _, line := range strings.Split(string(src), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = ""
			for _, dir := range []string{"test/redteam/", "test/realcli/", "test/"} {
				if strings.HasPrefix(h, dir+" ") {
					section = dir
					break
				}
			}
			if section != "" && !strings.Contains(h, "make ") {
				t.Errorf("test/README.md: the section %q names no make target", h)
			}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[2]) == "" {
			t.Errorf("test/README.md: a row with no tier or purpose: %s", line)
		}
		for _, f := range strings.Split(cells[1], "`") {
			if strings.HasSuffix(f, ".go") {
				if listed[section] == nil {
					listed[section] = map[string]bool{}
				}
				listed[section][f] = true
			}
		}
	}
	for _, dir := range []string{"test/", "test/realcli/", "test/redteam/"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
		must(t, err)
		if len(files) == 0 {
			t.Fatalf("no test files in %s", dir)
		}
		for _, f := range files {
			if !listed[dir][filepath.Base(f)] {
				t.Errorf("test/README.md does not map %s%s", dir, filepath.Base(f))
			}
		}
		for f := range listed[dir] {
			if _, err := os.Stat(filepath.Join("..", dir, f)); err != nil {
				t.Errorf("test/README.md maps %s%s, which is gone", dir, f)
			}
		}
	}
}

// updateDocs rewrites the docs' harness lists from the Specs instead of
// comparing them: go test ./test/ -run TestDocHarnesses -update-docs.
var updateDocs = flag.Bool("update-docs", false, "rewrite the docs' harness lists from internal/harness's Specs")

// docSpan is one piece of a doc generated from the Specs: the text between
// before and after in file (both kept), where after is the first match
// after before.
type docSpan struct {
	file, what    string
	before, after *regexp.Regexp
	text          string
}

// harnessList is names as prose: "a, b and c".
func harnessList(names []string, and string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + and + " " + names[len(names)-1]
}

// mirrorsLine is the tree's line of a harness whose mirrors are named
// paths: /NAME/{a,b} with a child of deeper paths as child/{x,y}.
func mirrorsLine(s nharness.Spec) string {
	var walk func(prefix string) string
	walk = func(prefix string) string {
		var parts []string
		seen := map[string]bool{}
		for _, m := range s.Mirrors {
			rest, ok := strings.CutPrefix(m.At, prefix)
			if !ok || rest == "" {
				continue
			}
			first, _, deeper := strings.Cut(rest, "/")
			if seen[first] {
				continue
			}
			seen[first] = true
			if deeper {
				first += "/" + walk(prefix+first+"/")
			}
			parts = append(parts, first)
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return "/" + s.Name + "/" + walk("")
}

// harnessDocs are the pieces of README.md, 9harnessd(8) and 9harness ps's
// help that list the harnesses, as the Specs make them.
func harnessDocs() []docSpan {
	var names, titles, skills, rows, tree []string
	var wholes []string
	for _, s := range nharness.Specs() {
		names = append(names, s.Name)
		titles = append(titles, s.Doc.Title)
		if s.Skills != "" {
			skills = append(skills, s.Name)
		}
		d := s.Doc
		rows = append(rows, "| "+strings.Join([]string{d.Title, "`" + d.Root + "`", d.Process, d.Via, d.Resume, d.RealCLI}, " | ")+" |\n")
		if len(s.Mirrors) == 1 && s.Mirrors[0].At == "" {
			wholes = append(wholes, "/"+s.Name)
			continue
		}
		if len(wholes) > 0 {
			tree, wholes = append(tree, strings.Join(wholes, " ")), nil
		}
		tree = append(tree, mirrorsLine(s))
	}
	if len(wholes) > 0 {
		tree = append(tree, strings.Join(wholes, " "))
	}
	roff := func(s string) string { return strings.ReplaceAll(s, "-", `\-`) }
	re := regexp.MustCompile
	return []docSpan{
		{"README.md", "the harness table", re(`\| --- \| --- \| --- \| --- \| --- \| --- \|\n`), re(`\n[^|]`), strings.TrimSuffix(strings.Join(rows, ""), "\n")},
		{"README.md", "the opening list", re(`You run many AI coding agents at once \(`), re(`\)`), strings.Join(titles, ", ")},
		{"README.md", "the tree's /skills", re(`\n/skills/\{`), re(`\}/`), strings.Join(skills, ",")},
		{"packaging/man/9harnessd.8", "the harnesses served", re(`on-disk state of `), re(`, and\n\.IR /active`), harnessList(titles, "and")},
		{"packaging/man/9harnessd.8", "the --root names", re(`Pin a harness root \(`), re(`\);`), strings.Join(names, ", ")},
		{"packaging/man/9harnessd.8", "the tree", re(`/active/HARNESS/PID/ .*\n`), re(`\n\.fi`), roff(strings.Join(append(tree, "/skills/{"+strings.Join(skills, ",")+"}"), "\n"))},
		{"internal/cli/ps/ps.go", "ps --help's HARNESS", re(`\n  HARNESS   `), re(`\n`), harnessList(names, "or")},
	}
}

// TestDocHarnesses: the README's harness table and its list of harnesses,
// the man page's lists of harnesses, roots and mirrors, and the help of
// 9harness ps are what the Specs (internal/harness) make of them, and
// 9harnessd --help (built from the Specs) names every root: a harness
// added, removed or changed there fails here until the docs are made
// again (-update-docs). Line breaks in prose do not count.
func TestDocHarnesses(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for _, d := range harnessDocs() {
		src, ok := files[d.file]
		if !ok {
			b, err := os.ReadFile("../" + d.file)
			must(t, err)
			src = string(b)
		}
		loc := d.before.FindStringIndex(src)
		if loc == nil {
			t.Errorf("%s: %s not found", d.file, d.what)
			continue
		}
		start := loc[1]
		end := d.after.FindStringIndex(src[start:])
		if end == nil {
			t.Errorf("%s: the end of %s not found", d.file, d.what)
			continue
		}
		got := src[start : start+end[0]]
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(d.text), " ") {
			if !*updateDocs {
				t.Errorf("%s: %s differs from the Specs (go test ./test/ -run TestDocHarnesses -update-docs):\n got: %s\nwant: %s", d.file, d.what, got, d.text)
			}
			src = src[:start] + d.text + src[start+end[0]:]
		}
		files[d.file] = src
	}
	if *updateDocs {
		for f, src := range files {
			must(t, os.WriteFile("../"+f, []byte(src), 0o644))
		}
	}
	// The README's tree gives each harness's directory.
	for _, n := range nharness.Names() {
		if !regexp.MustCompile(`(?m)^/` + n + `/`).MatchString(files["README.md"]) {
			t.Errorf("README's tree lacks /%s/", n)
		}
	}
	help, err := exec.Command(bin("9harnessd"), "--help").Output()
	must(t, err)
	if want := strings.Join(nharness.Names(), ", "); !strings.Contains(strings.Join(strings.Fields(string(help)), " "), want) {
		t.Errorf("9harnessd --help does not list %s", want)
	}
}
