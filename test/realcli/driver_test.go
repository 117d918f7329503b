package realcli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// systemPath is the PATH of every agent after its own programs.
const systemPath = "/usr/local/bin:/usr/bin:/bin"

// world is one test's private area: a scratch HOME, a private tmux server,
// the mock model server, and a marker variable in the environment of every
// process the test starts, by which cleanup finds them (never by name).
type world struct {
	t       *testing.T
	dir     string // the scratch root; short, for socket paths
	home    string
	tmuxDir string // TMUX_TMPDIR of the agents and of the test's tmux
	label   string // tmux -L of the private server
	marker  string // NAME=VALUE
	mock    *Mock
	nlaunch int
	// trusted are the cwds of the agents started so far, and codexConfig
	// extra tables of Codex's config.toml.
	trusted     []string
	codexConfig []string
	// claudeAuto: Claude's settings name no permission mode, so it starts
	// in its own default, auto.
	claudeAuto bool
	// lonePane: the agent's session is the only thing on its tmux
	// server, which exits with it (remain-on-exit off).
	lonePane bool
}

// markerName is the marker variable; its value starts with the pid of
// the test process, so a later run finds what a crashed one left behind.
const markerName = "REALCLI_RUN"

// sweepOrphans kills what an earlier test process of this tier left
// running when it died before its cleanups (a panic, a timeout): the
// processes whose marker names a test process that no longer exists.
func sweepOrphans() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			v, ok := bytes.CutPrefix(kv, []byte(markerName+"="))
			if !ok {
				continue
			}
			owner, _, _ := bytes.Cut(v, []byte("-"))
			if o, err := strconv.Atoi(string(owner)); err == nil && o > 0 && !alive(o) {
				fmt.Fprintf(os.Stderr, "realcli: killing %d %q, left by the dead test process %d\n", pid, cmdline(pid), o)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			break
		}
	}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		missing(t, "tmux is not installed (make deps installs it)")
	}
	dir, err := os.MkdirTemp("", "rc-")
	if err != nil {
		t.Fatal(err)
	}
	// Resolve symlinks (a /tmp that is one): /proc shows resolved cwds.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	var b [6]byte
	rand.Read(b[:])
	w := &world{
		t:       t,
		dir:     dir,
		home:    filepath.Join(dir, "home"),
		tmuxDir: filepath.Join(dir, "tmux"),
		label:   "rc" + hex.EncodeToString(b[:3]),
		marker:  fmt.Sprintf("%s=%d-%s-%s", markerName, os.Getpid(), t.Name(), hex.EncodeToString(b[:])),
	}
	for _, d := range []string{w.home, w.tmuxDir, filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m, err := StartMock()
	if err != nil {
		t.Fatal(err)
	}
	w.mock = m
	// Registered first, so it runs last: after the daemon and the
	// agents' own cleanups.
	t.Cleanup(w.cleanup)
	return w
}

// cwd makes a working directory for an agent under the scratch area.
func (w *world) cwd(name string) string {
	d := filepath.Join(w.dir, "work", name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return d
}

// tmuxEnv is the environment of the test's own tmux commands (and so of
// the agents they start): the private TMUX_TMPDIR, XDG_RUNTIME_DIR in the
// scratch area (Claude makes its cc-socks directory there, else under
// /tmp, where nothing would remove it), and the marker, so a server that
// outlives its kill is found.
func (w *world) tmuxEnv() []string {
	return []string{"PATH=" + systemPath, "HOME=" + w.home, "TMUX_TMPDIR=" + w.tmuxDir,
		"XDG_RUNTIME_DIR=" + filepath.Join(w.dir, "run"), "TERM=xterm-256color", "LANG=C.UTF-8", w.marker}
}

// tmux runs tmux against a server: label "" is the default server of the
// scratch TMUX_TMPDIR.
func (w *world) tmux(label string, args ...string) (string, error) {
	a := []string{"-f", "/dev/null"}
	if label != "" {
		a = append(a, "-L", label)
	}
	cmd := exec.Command("tmux", append(a, args...)...)
	cmd.Env = w.tmuxEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// pane is where an agent's terminal is: a session on a server.
type pane struct {
	label, session string
}

func (p pane) String() string {
	if p.label == "" {
		return "default:" + p.session
	}
	return p.label + ":" + p.session
}

// launch starts argv in a new 200x50 session of the private tmux server,
// in cwd, with exactly env (plus the marker, TMUX and TMUX_PANE, which
// tmux gives the pane) through env -i. It returns the session.
func (w *world) launch(session, cwd string, env []string, argv ...string) pane {
	w.t.Helper()
	w.nlaunch++
	script := filepath.Join(w.dir, fmt.Sprintf("launch%d.sh", w.nlaunch))
	var b strings.Builder
	b.WriteString("#!/bin/sh\nexec /usr/bin/env -i")
	for _, kv := range append(append([]string{}, env...), w.marker) {
		b.WriteString(" " + shq(kv))
	}
	b.WriteString(` TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"` + "\n")
	// Written by sh, not through a descriptor of this process: one open
	// for writing here is inherited, until their exec, by the children
	// other tests fork meanwhile, and tmux's exec of the script would fail
	// with ETXTBSY while one holds it.
	wr := exec.Command("sh", "-c", `umask 077 && cat >"$1" && chmod 700 "$1"`, "sh", script)
	wr.Stdin = strings.NewReader(b.String())
	if out, err := wr.CombinedOutput(); err != nil {
		w.t.Fatalf("writing %s: %v %s", script, err, out)
	}
	args := append([]string{"new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", cwd, "--", script}, argv...)
	if _, err := w.tmux(w.label, args...); err != nil {
		w.t.Fatal(err)
	}
	// Keep a pane whose program exited, so its last words can be read,
	// and so the server outlives its agents, as a user's does (one that
	// exits when a move stops its only agent is another test).
	if !w.lonePane {
		if _, err := w.tmux(w.label, "set-option", "-g", "remain-on-exit", "on"); err != nil {
			w.t.Fatal(err)
		}
	}
	return pane{w.label, session}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// screen is the pane's visible text.
func (w *world) screen(p pane) string {
	out, err := w.tmux(p.label, "capture-pane", "-p", "-J", "-t", "="+p.session+":")
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return out
}

// panePID is the pid of the program in the pane.
func (w *world) panePID(p pane) int {
	out, err := w.tmux(p.label, "list-panes", "-s", "-t", "="+p.session, "-F", "#{pane_pid}")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// typeLine types text into the pane and presses Enter, as a user would:
// the text, a pause (TUIs tell a paste from typing by timing), then Enter.
func (w *world) typeLine(p pane, text string) {
	w.t.Helper()
	if _, err := w.tmux(p.label, "send-keys", "-t", "="+p.session+":", "-l", text); err != nil {
		w.t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := w.tmux(p.label, "send-keys", "-t", "="+p.session+":", "Enter"); err != nil {
		w.t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the timeout passes; then the test
// fails with what, and the pane's screen when there is one.
func (w *world) waitFor(timeout time.Duration, p *pane, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			scr := ""
			if p != nil {
				scr = "\nscreen of " + p.String() + ":\n" + w.screen(*p)
			}
			w.t.Fatalf("timed out after %s waiting for %s%s", timeout, what, scr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// findSession finds a session by name on the private server or on the
// default server of the scratch TMUX_TMPDIR: a move goes to one of them.
func (w *world) findSession(name string) (pane, bool) {
	for _, label := range []string{w.label, ""} {
		if _, err := w.tmux(label, "has-session", "-t", "="+name); err == nil {
			return pane{label, name}, true
		}
	}
	return pane{}, false
}

// markedPIDs lists this test's processes: those whose environment holds
// the marker (the agents, their children, the private tmux server), or
// the scratch HOME (what 9harnessd started: a tmux server of a move).
func (w *world) markedPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == w.marker || string(kv) == "HOME="+w.home {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// cleanup stops everything the test started: the tmux servers, every
// process carrying the marker (by pid: Codex's daemon is re-parented to
// pid 1 and outlives its TUI), Codex's control socket outside HOME, and the
// scratch area. A process left running is a test failure.
func (w *world) cleanup() {
	sockets := codexControl(w.home)
	for _, label := range []string{w.label, ""} {
		w.tmux(label, "kill-server")
	}
	signalAll := func(sig syscall.Signal) {
		for _, pid := range w.markedPIDs() {
			syscall.Kill(pid, sig)
		}
	}
	signalAll(syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for len(w.markedPIDs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := w.markedPIDs(); len(left) > 0 {
		signalAll(syscall.SIGKILL)
		time.Sleep(500 * time.Millisecond)
	}
	if left := w.markedPIDs(); len(left) > 0 {
		w.t.Errorf("processes of this test still running after SIGKILL: %v", describe(left))
	}
	for _, s := range sockets {
		os.Remove(s)
		os.Remove(s + ".lock")
		os.Remove(filepath.Dir(s)) // only when empty: other runs may share it
	}
	// Codex makes the directory at start and leaves it; remove it when
	// empty, whoever made it.
	os.Remove(filepath.Join(os.TempDir(), "codex-daemon-"+strconv.Itoa(os.Getuid())))
	if w.mock != nil {
		w.mock.Close()
		if w.t.Failed() {
			var b strings.Builder
			for _, r := range w.mock.Requests() {
				fmt.Fprintf(&b, "\n  %s %s model=%q kind=%q answer=%q ua=%q body=%dB", r.Method, r.Path, r.Model, r.Kind, r.Answer, r.UserAgent, len(r.Body))
			}
			w.t.Logf("the mock's requests:%s", b.String())
		}
	}
	if w.t.Failed() && os.Getenv("REALCLI_KEEP") != "" {
		w.t.Logf("kept the scratch area %s", w.dir)
		return
	}
	if err := os.RemoveAll(w.dir); err != nil {
		w.t.Errorf("removing the scratch area: %v", err)
	}
}

// codexControl names Codex's daemon control sockets, which live outside
// HOME (TMPDIR/codex-daemon-UID/<hash>, with a .lock beside), by the
// symlinks HOME/.codex/app-server-control/*.sock; only those inside a
// codex-daemon-* directory, never anything else a symlink could name.
func codexControl(home string) []string {
	var out []string
	links, _ := filepath.Glob(filepath.Join(home, ".codex", "app-server-control", "*.sock"))
	for _, l := range links {
		target, err := os.Readlink(l)
		if err != nil || !filepath.IsAbs(target) || strings.HasPrefix(target, home+"/") ||
			!strings.HasPrefix(filepath.Base(filepath.Dir(target)), "codex-daemon-") {
			continue
		}
		out = append(out, target)
	}
	return out
}

// describe names pids with their argv, for a failure message.
func describe(pids []int) string {
	var s []string
	for _, pid := range pids {
		s = append(s, fmt.Sprintf("%d %q", pid, cmdline(pid)))
	}
	return strings.Join(s, ", ")
}

// cmdline is /proc/PID/cmdline as argv, trailing NULs dropped.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// procStart is the wall-clock start of pid, in unix seconds, from
// /proc/PID/stat's starttime and btime, as the kernel counts it.
func procStart(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+2:]))
	// starttime is field 22; f[0] is field 3.
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, err
			}
			return boot + ticks/100, nil
		}
	}
	return 0, errors.New("no btime in /proc/stat")
}

// alive tells whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// exeBase is the base name of /proc/PID/exe.
func exeBase(pid int) string {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(p, " (deleted)"))
}

// inputBox tells whether the screen shows an empty input line: a line
// that is just the prompt glyph, under a horizontal rule (Claude's input
// box; the footer under it changes between versions).
func inputBox(screen, glyph string) bool {
	prev := ""
	for _, line := range strings.Split(screen, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if line == glyph && strings.HasPrefix(prev, "─") {
			return true
		}
		prev = line
	}
	return false
}
