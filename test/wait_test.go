package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/9harness/9harness/internal/client"
)

// The client side of "tell me when it needs me": ps's STATE and TOKENS,
// 9harness wait, ps --watch --notify, and the contrib tmux status snippet
// and desktop notifier, against a real daemon and fake agents whose
// Claude registry record the tests rewrite as Claude does.

// within polls cond every 50 ms until it holds, failing after d.
func within(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setClaudeStatus rewrites the fake claude's registry record as Claude
// does (a new file renamed over it), with status busy, idle or waiting
// (and waitingFor), and waits until the daemon serves the state it means.
func (e *psEnv) setClaudeStatus(t *testing.T, status, waitingFor string) {
	t.Helper()
	path := filepath.Join(e.home, ".claude", "sessions", strconv.Itoa(e.claude.pid())+".json")
	var own func(string) error
	if e.uid != 0 {
		own = func(tmp string) error { return os.Chown(tmp, e.uid, e.uid) } // the agent's own file
	}
	writeRegistryStatus(t, path, status, waitingFor, own)
	want := map[string]string{"busy": "working", "idle": "idle", "waiting": "waiting"}[status]
	// A connection of its own, closed at once: an owned environment's
	// test is a grantee, whose connections are few.
	c, err := client.Dial(e.d.sock)
	must(t, err)
	defer c.Close()
	within(t, 10*time.Second, func() bool {
		s, _ := readField(c, e.dir("claude", e.claude)+"/state")
		return s == want
	}, "the claude agent's state "+want)
}

// appendClaude appends lines to the fake claude's transcript.
func (e *psEnv) appendClaude(t *testing.T, lines ...map[string]any) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.home, ".claude", "projects", "*", psClaudeSID+".jsonl"))
	if len(m) != 1 {
		t.Fatalf("the fake claude's transcript: %q", m)
	}
	f, err := os.OpenFile(m[0], os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	for _, l := range lines {
		b, err := json.Marshal(l)
		must(t, err)
		_, err = f.Write(append(b, '\n'))
		must(t, err)
	}
}

// setClaudeTitle gives the fake claude a title, as a user renaming the
// session would, and waits for the daemon to serve it.
func (e *psEnv) setClaudeTitle(t *testing.T, title string) {
	t.Helper()
	e.appendClaude(t, map[string]any{"type": "custom-title", "customTitle": title, "sessionId": psClaudeSID})
	c := e.d.client()
	within(t, 10*time.Second, func() bool {
		s, _ := readField(c, e.dir("claude", e.claude)+"/title")
		return s == title
	}, "the title under /active")
}

// started is a 9harness command this test started, and its end.
type started struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
}

func start9harness(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(bin("9harness"), args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd.Env = append([]string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + t.TempDir()}, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	// A command --notify ran that still runs must not hold up the end.
	s.cmd.WaitDelay = 5 * time.Second
	must(t, s.cmd.Start())
	go func() {
		s.cmd.Wait()
		s.code = s.cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *started) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// end waits up to d for the command to exit.
func (s *started) end(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(d):
		t.Fatalf("9harness %q still running after %v; stderr %q", s.cmd.Args[1:], d, s.stderr.String())
		return -1
	}
}

// TestWait: wait returns at once when the agent is already in the state,
// blocks while it is not (and has not returned a moment before the
// change), returns within about a poll of a real change of the registry,
// and says timeout, not found and exited with their statuses.
func TestWait(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	pid := strconv.Itoa(e.claude.pid())
	cl := "claude/" + pid
	e.setClaudeStatus(t, "busy", "")
	sock := []string{"-s", e.d.sock}

	// Already in the state: at once.
	out, errs, code := run9harness(t, nil, append(sock, "wait", "--state", "working", cl)...)
	if code != 0 || out != cl+" working\n" || errs != "" {
		t.Errorf("wait --state working on a working agent: exit %d, %q, %q", code, out, errs)
	}
	// --timeout 0 looks once.
	out, errs, code = run9harness(t, nil, append(sock, "wait", "--state", "idle", "--timeout", "0", cl)...)
	if code != 124 || out != "" || strings.Count(errs, "\n") != 1 {
		t.Errorf("wait --timeout 0 on a working agent: exit %d, %q, %q", code, out, errs)
	}

	// A real change: busy → idle, the agent named by its pid alone.
	w := start9harness(t, nil, append(sock, "wait", "--state", "idle", pid)...)
	time.Sleep(2 * time.Second) // eight polls
	if w.exited() {
		t.Fatalf("wait returned before the change: exit %d, %q, %q", w.code, w.stdout.String(), w.stderr.String())
	}
	changed := time.Now()
	e.setClaudeStatus(t, "idle", "")
	if code := w.end(t, 10*time.Second); code != 0 || w.stdout.String() != cl+" idle\n" || w.stderr.String() != "" {
		t.Errorf("wait --state idle: exit %d, %q, %q", code, w.stdout.String(), w.stderr.String())
	}
	t.Logf("wait returned %v after the registry changed", time.Since(changed).Round(time.Millisecond))

	// The default is waiting or idle: a working agent that starts
	// waiting is printed with what it waits for.
	e.setClaudeStatus(t, "busy", "")
	w = start9harness(t, nil, append(sock, "wait", cl)...)
	time.Sleep(time.Second)
	if w.exited() {
		t.Fatalf("wait returned while the agent worked: exit %d, %q, %q", w.code, w.stdout.String(), w.stderr.String())
	}
	e.setClaudeStatus(t, "waiting", "approve Bash")
	if code := w.end(t, 10*time.Second); code != 0 || w.stdout.String() != cl+" waiting approve Bash\n" {
		t.Errorf("wait (default states): exit %d, %q, %q", code, w.stdout.String(), w.stderr.String())
	}

	// --all-of: the codex agent is never waiting (its fake rollout has
	// no turn), so the pair never is, and the timeout runs out.
	t0 := time.Now()
	out, errs, code = run9harness(t, nil, append(sock, "wait", "--all-of", "--state", "waiting", "--timeout", "1s", cl, "codex/"+strconv.Itoa(e.codex.pid()))...)
	if code != 124 || out != "" || !strings.Contains(errs, "timed out") || time.Since(t0) < time.Second {
		t.Errorf("wait --all-of with one of two waiting: exit %d after %v, %q, %q", code, time.Since(t0), out, errs)
	}
	// Any of them: the waiting one.
	out, _, code = run9harness(t, nil, append(sock, "wait", "--state", "waiting", "codex/"+strconv.Itoa(e.codex.pid()), cl)...)
	if code != 0 || out != cl+" waiting approve Bash\n" {
		t.Errorf("wait on codex or claude: exit %d, %q", code, out)
	}

	// An agent that is not there: 1, named.
	out, errs, code = run9harness(t, nil, append(sock, "wait", "claude/1")...)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no live agent claude/1") {
		t.Errorf("wait on no agent: exit %d, %q, %q", code, out, errs)
	}
	// An agent that exits while waited for: 3. The wait must have
	// looked before the agent exits (else it is "no live agent", 1): it
	// has connected, then a second for its look.
	w = start9harness(t, nil, append(sock, "wait", "--state", "idle", cl)...)
	eventually15(t, func() bool { return sockets(w.cmd.Process.Pid) > 0 || w.exited() }, "wait to connect")
	time.Sleep(time.Second)
	if w.exited() {
		t.Fatalf("wait --state idle returned on a waiting agent: exit %d, %q, %q", w.code, w.stdout.String(), w.stderr.String())
	}
	e.claude.stop(t)
	if code := w.end(t, 10*time.Second); code != 3 || w.stdout.String() != "" || !strings.Contains(w.stderr.String(), "exited before it was idle: "+cl) {
		t.Errorf("wait on an agent that exited: exit %d, %q, %q", code, w.stdout.String(), w.stderr.String())
	}
}

// TestPsStateTokens: ps shows the turn state (with what a waiting agent
// waits for) and the context's size, piped and through --format, and
// sorts the waiting agent first.
func TestPsStateTokens(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	pid := strconv.Itoa(e.claude.pid())
	// A finished reply with its usage: the context is its prompt, 934 +
	// 40,000 + 300 tokens.
	e.appendClaude(t, map[string]any{
		"type": "assistant", "sessionId": psClaudeSID, "cwd": e.cwd, "isSidechain": false,
		"uuid": "aaaa0000-0000-4000-8000-000000000003", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"message": map[string]any{"id": "msg_01", "role": "assistant", "model": "claude-opus-4-6", "stop_reason": "end_turn",
			"content": []any{map[string]any{"type": "text", "text": "Done."}},
			"usage":   map[string]any{"input_tokens": 934, "cache_read_input_tokens": 40000, "cache_creation_input_tokens": 300, "output_tokens": 50}},
	})
	e.setClaudeStatus(t, "waiting", "approve Bash")
	c := e.d.client()
	within(t, 10*time.Second, func() bool {
		s, _ := readField(c, e.dir("claude", e.claude)+"/tokens")
		return strings.Contains(s, "context 41234")
	}, "the tokens file")

	out, errs, code := e.ps(t, "ps")
	if code != 0 || errs != "" {
		t.Fatalf("ps: exit %d, %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "HARNESS PID AGE STATE TOKENS LIMITS STATUS CWD REACH ZMX/TMUX VIA TITLE" {
		t.Fatalf("header %q", lines[0])
	}
	row := ""
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[1] == pid {
			row = l
		}
	}
	// Cells by the header's positions (the state holds blanks); all
	// before TITLE is ASCII here.
	cell := func(name, next string) string {
		return strings.TrimSpace(row[strings.Index(lines[0], name):strings.Index(lines[0], next)])
	}
	st, tok, status := cell("STATE", "TOKENS"), cell("TOKENS", "LIMITS"), cell("STATUS", "CWD")
	if st != "waiting: approve Bash" || tok != "41k" || status != "waiting" {
		t.Errorf("claude row: STATE %q TOKENS %q STATUS %q, want \"waiting: approve Bash\" 41k waiting:\n%s", st, tok, status, out)
	}
	out, _, code = e.ps(t, "ps", "--harness", "claude", "--format", "{{.pid}}|{{.state}}|{{.waiting}}|{{.state_via}}|{{.tokens.context}}|{{.tokens.output}}")
	if want := pid + "|waiting|approve Bash|registry|41234|50\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("ps --format: exit %d, %q, want the line %q", code, out, want)
	}
	out, _, _ = e.ps(t, "ps", "-q", "--sort", "state")
	if first, _, _ := strings.Cut(out, "\n"); first != "claude/"+pid {
		t.Errorf("ps --sort state: the waiting agent is not first:\n%s", out)
	}
}

// TestPsNotify: ps --watch --notify CMD, off a terminal, runs CMD once
// each time the agent starts waiting (not again while it stays waiting,
// again after it worked), with the agent's facts in its environment and
// nothing but CMD on its command line, however hostile the title. (rule
// 9: a title is text whatever wrote the transcript chose, a sandboxed
// agent too; were it shell code here, it would run outside the sandbox.)
func TestPsNotify(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	pid := strconv.Itoa(e.claude.pid())
	rec := t.TempDir()
	canary := filepath.Join(t.TempDir(), "canary")
	title := fmt.Sprintf(`-n $(touch %s); touch %s "'x`, canary, canary)
	e.setClaudeTitle(t, title)
	e.setClaudeStatus(t, "busy", "")
	const script = `d=$(mktemp -d "$REC/n.XXXXXX") && env > "$d/env" && tr '\0' '\n' < /proc/$$/cmdline > "$d/argv"`
	w := start9harness(t, []string{"REC=" + rec, "HARNESS_TITLE=stale"}, "-s", e.d.sock, "ps", "--watch", "--notify", script)
	// runs lists the commands run for our agent: each one's environment
	// (its HARNESS_ variables) and argv.
	type runRec struct {
		env  map[string]string
		argv []string
	}
	runs := func() []runRec {
		var out []runRec
		ds, _ := filepath.Glob(filepath.Join(rec, "n.*"))
		for _, d := range ds {
			envb, err1 := os.ReadFile(filepath.Join(d, "env"))
			argvb, err2 := os.ReadFile(filepath.Join(d, "argv"))
			if err1 != nil || err2 != nil || !bytes.HasSuffix(argvb, []byte("\n")) {
				continue // still being written
			}
			r := runRec{env: map[string]string{}, argv: strings.Split(strings.TrimSuffix(string(argvb), "\n"), "\n")}
			sc := bufio.NewScanner(bytes.NewReader(envb))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "HARNESS_") {
					r.env[k] = v
				}
			}
			if r.env["HARNESS_PID"] == pid {
				out = append(out, r)
			}
		}
		return out
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(runs()); n != 0 || w.exited() {
		t.Fatalf("%d commands run while the agent worked (exited %v, stderr %q)", n, w.exited(), w.stderr.String())
	}
	e.setClaudeStatus(t, "waiting", "approve Bash")
	within(t, 10*time.Second, func() bool { return len(runs()) >= 1 }, "the command for the first wait")
	time.Sleep(1500 * time.Millisecond) // six polls while it stays waiting
	if n := len(runs()); n != 1 {
		t.Errorf("%d commands run for one wait, want 1", n)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	r := runs()[0]
	want := map[string]string{
		"HARNESS_NAME": "claude", "HARNESS_PID": pid, "HARNESS_STATE": "waiting", "HARNESS_WAITING": "approve Bash",
		"HARNESS_CWD": e.cwd, "HARNESS_TITLE": title, "HARNESS_HOST": host,
	}
	for k, v := range want {
		if r.env[k] != v {
			t.Errorf("%s=%q, want %q", k, r.env[k], v)
		}
	}
	if len(r.env) != len(want) {
		t.Errorf("HARNESS_ variables %v, want exactly %v", r.env, want)
	}
	if !slices.Equal(r.argv, []string{"/bin/sh", "-c", script}) {
		t.Errorf("the command's argv is %q, want /bin/sh -c and the command alone", r.argv)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Errorf("the title ran as shell code: %s exists", canary)
	}
	// It works, then waits again: a second command.
	e.setClaudeStatus(t, "busy", "")
	time.Sleep(time.Second) // the watch's polls see it work
	e.setClaudeStatus(t, "waiting", "approve Bash")
	within(t, 10*time.Second, func() bool { return len(runs()) >= 2 }, "the command for the second wait")
	time.Sleep(time.Second)
	if n := len(runs()); n != 2 {
		t.Errorf("%d commands run for two waits, want 2", n)
	}
	// The daemon restarts on the same socket: the watch says so once
	// while it is gone, dials again, and announces the next wait.
	e.setClaudeStatus(t, "busy", "")
	time.Sleep(time.Second)
	e.d.stop()
	time.Sleep(1500 * time.Millisecond) // six polls with no daemon
	d2 := launch(t, append([]string{"--unix", e.d.sock, "--audit", "stderr"}, rootArgs(e.home)...)...)
	d2.sock = e.d.sock
	d2.waitReady()
	e.d = d2
	e.setClaudeStatus(t, "waiting", "approve Edit")
	within(t, 10*time.Second, func() bool { return len(runs()) >= 3 }, "the command for the wait after the restart")
	edits := 0
	for _, r := range runs() {
		if r.env["HARNESS_WAITING"] == "approve Edit" {
			edits++
		}
	}
	if n := len(runs()); n != 3 || edits != 1 {
		t.Errorf("after the restart: %d commands, %d for approve Edit; want 3 and 1", n, edits)
	}
	if n := strings.Count(w.stderr.String(), "\n"); n < 1 || n > 2 {
		t.Errorf("the watch said %d lines while the daemon was gone, want one or two:\n%s", n, w.stderr.String())
	}
	t.Logf("while the daemon was gone:\n%s", w.stderr.String())
	// SIGTERM ends the watch with status 0.
	must(t, w.cmd.Process.Signal(syscall.SIGTERM))
	if code := w.end(t, 10*time.Second); code != 0 || w.stdout.String() != "" {
		t.Errorf("the watch after SIGTERM: exit %d, stdout %q, stderr %q", code, w.stdout.String(), w.stderr.String())
	}
}

// TestContribTmuxStatus: contrib/tmux-status in a real tmux status line:
// a tmux client attached inside another tmux's pane draws the inner
// server's status line, which shows "1 waiting" while the agent waits and
// nothing of it otherwise.
func TestContribTmuxStatus(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setClaudeStatus(t, "busy", "")
	snippet, err := filepath.Abs("../contrib/tmux-status")
	must(t, err)
	outer := newPsTmux(t)
	inner := filepath.Join(shortDir(t, "pi"), "s")
	tmuxEnv := []string{"PATH=" + bins + ":/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}
	itmux := func(args ...string) {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-S", inner, "-f", "/dev/null"}, args...)...)
		cmd.Env = tmuxEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tmux %q: %v\n%s", args, err, out)
		}
	}
	itmux("new-session", "-d", "-s", "main", "-x", "100", "-y", "10", "sleep 600")
	t.Cleanup(func() { exec.Command("tmux", "-S", inner, "kill-server").Run() })
	itmux("set-option", "-g", "status-interval", "1")
	itmux("set-option", "-g", "status-right-length", "60")
	itmux("set-option", "-g", "status-right", "[#("+snippet+" -s "+e.d.sock+" --harness claude)]")
	outer.run("new-session", "-d", "-s", "o", "-x", "100", "-y", "12",
		"/usr/bin/env", "-u", "TMUX", "PATH="+bins+":/usr/bin:/bin", "TERM=xterm-256color", "tmux", "-S", inner, "attach", "-t", "main")
	status := func() string {
		s := outer.rows("o")
		return s[len(s)-1]
	}
	// The bar is drawn, with nothing in the brackets while no agent waits.
	within(t, 15*time.Second, func() bool { return strings.Contains(status(), "[]") }, "the inner status line with an empty snippet")
	e.setClaudeStatus(t, "waiting", "approve Bash")
	within(t, 15*time.Second, func() bool { return strings.Contains(status(), "[1 waiting]") }, "1 waiting in the status line")
	t.Logf("status line: %q", status())
	e.setClaudeStatus(t, "idle", "")
	within(t, 15*time.Second, func() bool { return strings.Contains(status(), "[]") }, "the count gone from the status line")
}

// notifyStub is an org.freedesktop.Notifications service that records
// each Notify call.
type notifyStub struct {
	mu    sync.Mutex
	calls []notifyCall
}

type notifyCall struct {
	app, icon, summary, body string
}

func (s *notifyStub) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, notifyCall{app, icon, summary, body})
	return uint32(len(s.calls)), nil
}

func (s *notifyStub) GetCapabilities() ([]string, *dbus.Error) {
	return []string{"body"}, nil
}

func (s *notifyStub) GetServerInformation() (string, string, string, string, *dbus.Error) {
	return "stub", "9harness", "1", "1.2", nil
}

func (s *notifyStub) CloseNotification(id uint32) *dbus.Error { return nil }

func (s *notifyStub) list() []notifyCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// privateBus starts a dbus-daemon for a session bus of the test's own on
// a socket in a private directory, and returns its address.
func privateBus(t *testing.T) string {
	t.Helper()
	daemon := require(t, "dbus-daemon")
	dir := shortDir(t, "db")
	conf := filepath.Join(dir, "bus.conf")
	must(t, os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+filepath.Join(dir, "bus")+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o644))
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	// It warns of an fd limit it may not raise; only a failure needs it.
	var stderr syncBuffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dbus-daemon: %s", stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestContribNotifyWaiting: contrib/notify-waiting sends one desktop
// notification, through the real notify-send, to the session bus's
// org.freedesktop.Notifications (a stub on a private bus) when the agent
// starts waiting: the agent and what it waits for as the summary, its
// title, which a shell would have run, as the text.
func TestContribNotifyWaiting(t *testing.T) {
	t.Parallel()
	require(t, "notify-send")
	addr := privateBus(t)
	conn, err := dbus.Connect(addr)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	stub := &notifyStub{}
	must(t, conn.Export(stub, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"))
	reply, err := conn.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning org.freedesktop.Notifications: %v %v", reply, err)
	}

	e := newPsEnv(t)
	pid := strconv.Itoa(e.claude.pid())
	canary := filepath.Join(t.TempDir(), "canary")
	title := fmt.Sprintf(`-x "$(touch %s)" ; touch %s`, canary, canary)
	e.setClaudeTitle(t, title)
	e.setClaudeStatus(t, "busy", "")
	script, err := filepath.Abs("../contrib/notify-waiting")
	must(t, err)
	cmd := exec.Command(script, "-s", e.d.sock, "--harness", "claude")
	cmd.Env = []string{"PATH=" + bins + ":/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS=" + addr, "HOME=" + e.home}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	// A notify-send still running must not hold up the end.
	cmd.WaitDelay = 5 * time.Second
	must(t, cmd.Start())
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	ours := func() []notifyCall {
		var out []notifyCall
		for _, c := range stub.list() {
			if strings.HasPrefix(c.summary, "claude/"+pid+" ") {
				out = append(out, c)
			}
		}
		return out
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(ours()); n != 0 {
		t.Fatalf("%d notifications while the agent worked", n)
	}
	e.setClaudeStatus(t, "waiting", "approve Bash")
	within(t, 15*time.Second, func() bool { return len(ours()) >= 1 }, "the notification")
	time.Sleep(1500 * time.Millisecond)
	calls := ours()
	if len(calls) != 1 {
		t.Errorf("%d notifications for one wait, want 1: %+v", len(calls), calls)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	want := notifyCall{app: "9harness", icon: "dialog-question", summary: "claude/" + pid + " waits: approve Bash", body: title + " (on " + host + ")"}
	if calls[0] != want {
		t.Errorf("notification %+v, want %+v", calls[0], want)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Errorf("the title ran as shell code: %s exists", canary)
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
		if waitErr != nil {
			t.Errorf("notify-waiting after SIGTERM: %v; stderr %q", waitErr, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("notify-waiting still running 10 s after SIGTERM")
	}
}

// TestPsWatchNotifyTerminal: on a terminal, ps --watch --notify draws the
// table as --watch does and runs the command once when the agent starts
// waiting, its output kept off the drawn screen; Ctrl-C ends both with
// status 0.
func TestPsWatchNotifyTerminal(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setClaudeStatus(t, "busy", "")
	rec := filepath.Join(t.TempDir(), "rec")
	tm := newPsTmux(t)
	tm.run("new-session", "-d", "-s", "w", "-x", "120", "-y", "1000",
		"/usr/bin/env", "-i", "HOME="+e.home, "PATH=/usr/bin:/bin", "PS1=ps-test$ ", "TERM=xterm-256color", "REC="+rec, "/bin/sh")
	within(t, 10*time.Second, func() bool { return contains(tm.screen("w"), "ps-test$") }, "the shell's prompt")
	tm.run("send-keys", "-t", "w", "-l", bin("9harness")+` -s `+e.d.sock+` ps --watch --harness claude --notify 'echo "$HARNESS_PID $HARNESS_WAITING" >>"$REC"; echo ON-SCREEN'`)
	tm.run("send-keys", "-t", "w", "Enter")
	within(t, 10*time.Second, func() bool {
		s := tm.screen("w")
		return len(s) > 3 && strings.HasPrefix(s[0], "Every 1s: 9harness ps --harness claude --notify …") && psRowOf(s, e.claude.pid()) != nil
	}, "the first frame")
	e.setClaudeStatus(t, "waiting", "approve Bash")
	want := strconv.Itoa(e.claude.pid()) + " approve Bash\n"
	within(t, 10*time.Second, func() bool { b, _ := os.ReadFile(rec); return string(b) == want }, "the command's record")
	within(t, 10*time.Second, func() bool {
		return strings.Contains(strings.Join(tm.screen("w"), "\n"), "waiting: approve Bash")
	}, "the waiting state in the table")
	time.Sleep(1500 * time.Millisecond)
	if b, _ := os.ReadFile(rec); string(b) != want {
		t.Errorf("records %q, want one: %q", b, want)
	}
	if screen := strings.Join(tm.screen("w"), "\n"); strings.Contains(screen, "ON-SCREEN") {
		t.Errorf("the command's output is on the drawn screen:\n%s", screen)
	}
	tm.run("send-keys", "-t", "w", "C-c")
	within(t, 10*time.Second, func() bool {
		s := tm.screen("w")
		return strings.TrimSpace(s[len(s)-1]) == "ps-test$"
	}, "the prompt after Ctrl-C")
	tm.run("send-keys", "-t", "w", "-l", "echo rc=$?")
	tm.run("send-keys", "-t", "w", "Enter")
	within(t, 10*time.Second, func() bool { return contains(tm.screen("w"), "rc=0") }, "the exit status 0")
}

// sockets is how many sockets process pid holds.
func sockets(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
