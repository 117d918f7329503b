package realcli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// claudeBgMin is the oldest Claude the background test runs: 2.1.197's
// background worker wrote its registry record and then sent the mock no
// request in a minute, where 2.1.332's answered at once (its supervisor
// hands the worker the key from the environment: CLAUDE_BG_SESSION_CREDENTIAL
// "env-key" in the job's dispatch).
const claudeBgMin = "2.1.332"

// claudeBg is Claude at the tier's version, or at claudeBgMin where that
// is older.
var claudeBg = func() *cli {
	c := *claudeCode
	if versionLess(c.pinned, claudeBgMin) {
		c.pinned = claudeBgMin
	}
	return &c
}()

// versionLess compares dotted decimal versions.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// claudeEnv is the environment of a Claude the test runs outside a pane:
// the scratch HOME and TMPDIR (Claude's background supervisor keeps its
// sockets under TMPDIR/cc-daemon-UID), the mock, and the marker.
func claudeEnv(w *world, cwd string) []string {
	binDir := claudeBg.binDir(w.t)
	tmp := filepath.Join(w.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		w.t.Fatal(err)
	}
	return append([]string{
		"HOME=" + w.home,
		"PATH=" + binDir + ":" + install.pathFor(w.t),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"TMPDIR=" + tmp,
		"XDG_RUNTIME_DIR=" + filepath.Join(w.dir, "run"),
		w.marker,
	}, claudeBg.configure(w, cwd)...)
}

// ccDaemonDir is a supervisor's socket directory in a worker's argv.
var ccDaemonDir = regexp.MustCompile(`^/tmp/cc-daemon-[0-9]+/[0-9a-f]+`)

// bgID is the job id "claude --bg" prints: "backgrounded · 3d289299".
var bgID = regexp.MustCompile(`backgrounded\W+([0-9a-z]+)`)

// claudeRecordOf is the live registry record of a background job: its
// worker's pid, once the worker has written it and runs.
func claudeRecordOf(home, job string) (pid int, sid string) {
	ents, _ := os.ReadDir(filepath.Join(home, ".claude", "sessions"))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var r struct {
			PID       int    `json:"pid"`
			SessionID string `json:"sessionId"`
			JobID     string `json:"jobId"`
		}
		b, err := os.ReadFile(filepath.Join(home, ".claude", "sessions", e.Name()))
		if err == nil && json.Unmarshal(b, &r) == nil && r.JobID == job && alive(r.PID) {
			return r.PID, r.SessionID
		}
	}
	return 0, ""
}

// TestClaudeBackground: a real background session (claude --bg) is listed
// once, as its worker, with its session and its attach command; a move is
// refused with that command as the reason and leaves it running; once its
// supervisor and worker are killed it is no longer listed, and its records
// show under /stale/claude.
func TestClaudeBackground(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeBg}, "--allow-move")
	// Claude keeps the supervisor's sockets under /tmp/cc-daemon-UID/<hash>
	// whatever TMPDIR says: stop this test's processes other than the
	// daemon (the world's cleanup would too, later) and remove that
	// directory.
	t.Cleanup(func() {
		dirs := map[string]bool{}
		for _, pid := range w.markedPIDs() {
			for _, a := range cmdline(pid) {
				if m := ccDaemonDir.FindString(a); m != "" {
					dirs[m] = true
				}
			}
			if pid != d.cmd.Process.Pid {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(500 * time.Millisecond)
		for dir := range dirs {
			os.RemoveAll(dir)
		}
	})
	cwd := w.cwd("bg")
	cmd := exec.Command(filepath.Join(claudeBg.binDir(t), "claude"), "--bg", "say hello bg")
	cmd.Dir = cwd
	cmd.Env = claudeEnv(w, cwd)
	out, err := cmd.CombinedOutput()
	m := bgID.FindStringSubmatch(string(out))
	require(t, err == nil && m != nil, "claude --bg: %v\n%s", err, out)
	job := m[1]
	t.Logf("claude --bg: job %s", job)
	var worker int
	var sid string
	w.waitFor(60*time.Second, nil, "the background worker's registry record", func() bool {
		worker, sid = claudeRecordOf(w.home, job)
		return worker != 0
	})
	w.waitFor(60*time.Second, nil, "the mock to answer the background prompt", func() bool { return w.mock.Turns() >= 1 })
	t.Logf("worker %d %q, session %s", worker, cmdline(worker), sid)

	// Listed once: the worker, not the supervisor, its pty hosts or the spare.
	// Other tests' Claudes of this uid may be listed too: judge only this
	// test's processes (the supervisor, the pty hosts, the spare).
	mine := func() (listed []int) {
		l := d.listed()
		for _, pid := range w.markedPIDs() {
			if l[pid] != "" {
				listed = append(listed, pid)
			}
		}
		return listed
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		bg := mine()
		if len(bg) == 1 && bg[0] == worker {
			break
		}
		if time.Now().After(deadline) {
			var shapes []string
			for _, pid := range w.markedPIDs() {
				shapes = append(shapes, strconv.Itoa(pid)+" "+strings.Join(cmdline(pid), " "))
			}
			t.Fatalf("of this test's processes /active/claude lists %v, want [%d]; they are:\n%s", bg, worker, strings.Join(shapes, "\n"))
		}
	}
	dir := "/active/claude/" + strconv.Itoa(worker)
	for file, want := range map[string]string{"session": sid, "attach": "claude attach " + job, "cwd": cwd} {
		if b, err := d.c.ReadFile(dir + "/" + file); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s/%s = %q (%v), want %q", dir, file, b, err, want)
		}
	}
	// The title is the transcript's, which Claude may write a moment
	// after its worker is listed.
	var title []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if title, err = d.c.ReadFile(dir + "/title"); err == nil && strings.TrimSpace(string(title)) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s/title = %q (%v) after 20 s, want the session's title", dir, title, err)
			break
		}
	}

	// ps shows where zmx or tmux would be the attach command's id.
	psOut, _ := exec.Command(bin("9harness"), "-s", d.sock, "ps", "--no-trunc").CombinedOutput()
	shown := false
	for _, line := range strings.Split(string(psOut), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == strconv.Itoa(worker) {
			shown = slices.Contains(f, "attach:"+job)
		}
	}
	if !shown {
		t.Errorf("9harness ps does not show the background session %d with attach:%s:\n%s", worker, job, psOut)
	}

	// The move is refused before anything is touched, and journalled.
	status, mout := d.move("claude", worker, "bgmoved")
	reason := "a background session: claude attach " + job
	if status != 1 || !strings.Contains(mout, reason) {
		t.Errorf("moving a background session: exit %d, %q; want 1 and %q", status, mout, reason)
	}
	if !d.logged(reason) {
		t.Errorf("the daemon's audit does not give the reason %q", reason)
	}
	time.Sleep(3 * time.Second)
	require(t, alive(worker), "the background worker %d is gone after a refused move", worker)
	if _, ok := w.findSession("bgmoved"); ok {
		t.Errorf("a tmux session bgmoved exists after a refused move")
	}

	// Kill the supervisor first (it would respawn the worker), then the
	// worker: the job's state and the record still claim it.
	var sup struct {
		SupervisorPID int `json:"supervisorPid"`
	}
	b, err := os.ReadFile(filepath.Join(w.home, ".claude", "daemon.status.json"))
	require(t, err == nil && json.Unmarshal(b, &sup) == nil && sup.SupervisorPID > 0, "daemon.status.json: %v %s", err, b)
	require(t, marked(w, sup.SupervisorPID), "the supervisor %d does not carry this test's marker", sup.SupervisorPID)
	syscall.Kill(sup.SupervisorPID, syscall.SIGKILL)
	syscall.Kill(worker, syscall.SIGKILL)
	w.waitFor(20*time.Second, nil, "the worker to exit", func() bool { return !alive(worker) })
	if l := mine(); len(l) != 0 {
		t.Errorf("after the kill /active/claude still lists this test's %v", l)
	}
	state, _ := os.ReadFile(filepath.Join(w.home, ".claude", "jobs", job, "state.json"))
	t.Logf("jobs/%s/state.json after the kill: %.300q", job, state)
	reg := "/stale/claude/registry-" + strconv.Itoa(worker)
	if b, err := d.c.ReadFile(reg + "/why"); err != nil || !strings.HasPrefix(string(b), "pid "+strconv.Itoa(worker)+" is not running") {
		t.Errorf("%s/why = %q (%v)", reg, b, err)
	}
	if b, err := d.c.ReadFile(reg + "/session"); err != nil || strings.TrimSpace(string(b)) != sid {
		t.Errorf("%s/session = %q (%v), want %s", reg, b, err, sid)
	}
	var js struct {
		State string `json:"state"`
	}
	json.Unmarshal(state, &js)
	// The job's state claims a process (its supervisor died before it
	// could say otherwise): a stale job.
	require(t, js.State != "stopped" && js.State != "done" && js.State != "completed" && js.State != "failed",
		"after SIGKILL of the supervisor and the worker the job's state says %q, which claims no process", js.State)
	if b, err := d.c.ReadFile("/stale/claude/job-" + job + "/claim"); err != nil || !strings.HasPrefix(string(b), "job "+job+": "+js.State) {
		t.Errorf("/stale/claude/job-%s/claim = %q (%v); the job's state says %q", job, b, err, js.State)
	}
}

// marked reports whether pid carries the world's marker, so the test
// signals only what it started.
func marked(w *world, pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && strings.Contains("\x00"+string(env)+"\x00", "\x00"+w.marker+"\x00")
}

// kstat is what the kernel shows of a process's session and terminal, in
// /proc/PID/stat (fields 4 to 8).
type kstat struct {
	state                       string
	ppid, pgrp, sid, tty, tpgid int
}

func (k kstat) String() string {
	return fmt.Sprintf("state %s ppid %d pgrp %d session %d tty_nr %d tpgid %d", k.state, k.ppid, k.pgrp, k.sid, k.tty, k.tpgid)
}

func kstatOf(pid int) (kstat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return kstat{}, false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 6 {
		return kstat{}, false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return kstat{f[0], n(f[1]), n(f[2]), n(f[3]), n(f[4]), n(f[5])}, true
}

// TestClaudeDetachedStale: a Claude that outlives its closed terminal
// shows reach detached and is listed by ps --detached; moved into tmux it
// shows tmux; killed, its registry record shows under /stale/claude.
//
// The Claude that outlives its terminal is a print run started from a
// shell and disowned, its output to a file, as people do for long tasks:
// a Claude TUI exits within a second or two of its terminal hanging up,
// SIGHUP ignored or not. Disowned, because at the hang-up bash sends
// SIGHUP to the jobs it still owns, and Claude catches SIGHUP and exits,
// so nohup, whose SIG_IGN Claude's handler replaces, does not keep it.
// The terminal is a real tmux pane whose session is killed while the
// mock holds the run's turn open, so the agent is still working when the
// kernel hangs the pty up and takes it from every process of the
// session.
func TestClaudeDetachedStale(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.startDaemon([]*cli{claudeCode}, "--allow-move")
	cwd := w.cwd("detached")
	env := append([]string{
		"HOME=" + w.home,
		"PATH=" + claudeCode.binDir(t) + ":" + install.pathFor(t),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"TMUX_TMPDIR=" + w.tmuxDir,
	}, claudeCode.configure(w, cwd)...)
	hold := w.mock.Hold(HoldWord)
	defer hold.Release()
	p := w.launch("cldet", cwd, env, "/bin/bash", "--norc", "--noprofile", "-i")
	var shell int
	w.waitFor(30*time.Second, &p, "the pane's shell to prompt", func() bool {
		shell = w.panePID(p)
		scr := w.screen(p)
		return shell != 0 && exeBase(shell) == "bash" && (strings.Contains(scr, "$") || strings.Contains(scr, "#"))
	})
	w.typeLine(p, `claude -p "`+HoldWord+` say hello detached" >print.log 2>&1 & disown`)
	select {
	case <-hold.Arrived():
	case <-time.After(90 * time.Second):
		log, _ := os.ReadFile(filepath.Join(cwd, "print.log"))
		t.Fatalf("the print run's turn never reached the mock; screen:\n%s\nprint.log: %q", w.screen(p), log)
	}
	var run int
	for _, k := range children(shell) {
		if claudeCode.isAgent(k) {
			run = k
		}
	}
	require(t, run != 0, "no Claude among the shell %d's children %v", shell, children(shell))
	t.Logf("print run %d %q", run, cmdline(run))
	before, _ := kstatOf(run)
	t.Logf("in the pane: %s", before)
	a := &agent{w: w, cli: claudeCode, cwd: cwd, pane: p, pid: run}
	sid := a.facts().session
	rec, _ := os.ReadFile(filepath.Join(w.home, ".claude", "sessions", strconv.Itoa(run)+".json"))
	t.Logf("its registry record: %.400s", rec)
	reach := func(pid int) string {
		b, _ := d.c.ReadFile("/active/claude/" + strconv.Itoa(pid) + "/reach")
		return strings.TrimSpace(string(b))
	}
	if r := reach(run); r != "tmux" {
		t.Errorf("reach of the print run in its pane: %q, want tmux", r)
	}

	// The terminal closes.
	_, err := w.tmux(p.label, "kill-session", "-t", "="+p.session)
	require(t, err == nil, "killing the pane's session: %v", err)
	var after kstat
	// The kernel clears the terminal of every process of the session at
	// the hang-up; the shell, its leader, exits on the SIGHUP soon after.
	w.waitFor(20*time.Second, nil, "the kernel to take the terminal from the print run, and its shell to exit", func() bool {
		var ok bool
		after, ok = kstatOf(run)
		return !ok || after.tty == 0 && !alive(shell)
	})
	require(t, alive(run), "the print run %d exited when its terminal closed", run)
	fd0, _ := os.Readlink("/proc/" + strconv.Itoa(run) + "/fd/0")
	t.Logf("terminal closed: %s, fd 0 %s", after, fd0)
	if after.tty != 0 || after.tpgid != -1 || after.sid != before.sid {
		t.Errorf("after the close the kernel shows %s; want tty_nr 0, tpgid -1, the same session %d", after, before.sid)
	}
	w.waitFor(10*time.Second, nil, "reach detached", func() bool { return reach(run) == "detached" })
	out, _ := exec.Command(bin("9harness"), "-s", d.sock, "ps", "--detached", "-q").CombinedOutput()
	if !slices.Contains(strings.Fields(string(out)), "claude/"+strconv.Itoa(run)) {
		t.Errorf("9harness ps --detached -q does not list claude/%d:\n%s", run, out)
	}
	// Its resume is the interactive TUI: nothing of -p or the prompt.
	if b, err := d.c.ReadFile("/active/claude/" + strconv.Itoa(run) + "/resume"); err != nil || strings.TrimSpace(string(b)) != "cd "+cwd+" && claude --resume "+sid {
		t.Errorf("the print run's resume = %q (%v), want %q", b, err, "cd "+cwd+" && claude --resume "+sid)
	}

	status, mout := d.move("claude", run, "cldetmoved")
	require(t, status == 0, "moving the detached print run: exit %d: %s", status, mout)
	hold.Release()
	w.waitFor(20*time.Second, nil, "the print run to exit", func() bool { return !alive(run) })
	var q pane
	w.waitFor(30*time.Second, nil, "tmux session cldetmoved", func() bool {
		var ok bool
		q, ok = w.findSession("cldetmoved")
		return ok
	})
	b := &agent{w: w, cli: claudeCode, cwd: cwd, pane: q}
	w.waitFor(30*time.Second, &q, "the resumed Claude", func() bool {
		if pp := w.panePID(q); pp != 0 && claudeCode.isAgent(pp) {
			b.pid = pp
		}
		return b.pid != 0
	})
	t.Logf("moved to %d in %s", b.pid, q)
	if argv := cmdline(b.pid); !slices.Equal(argv, []string{"claude", "--resume", sid}) {
		t.Errorf("the resumed Claude runs %q, want the TUI: claude --resume %s", argv, sid)
	}
	ready := claudeCode.waitReady()
	w.waitFor(60*time.Second, &q, "the resumed TUI to take input", func() bool { return ready(w.screen(q)) })
	w.waitFor(20*time.Second, &q, "reach tmux after the move", func() bool { return reach(b.pid) == "tmux" })
	b.prompt("say hello again")
	if f := b.facts(); f.session != sid {
		t.Errorf("the resumed TUI is in session %q, the print run's was %q", f.session, sid)
	}
	log, _ := os.ReadFile(filepath.Join(cwd, "print.log"))
	_, err = d.c.ReadFile("/stale/claude/registry-" + strconv.Itoa(run) + "/why")
	t.Logf("the print run's log after the move: %q; its record under /stale/claude: %v", log, err == nil)

	// Killed, it leaves its registry record (only SIGTERM removes it).
	moved := b.pid
	syscall.Kill(moved, syscall.SIGKILL)
	w.waitFor(20*time.Second, nil, "the killed Claude to exit", func() bool { return !alive(moved) })
	st := "/stale/claude/registry-" + strconv.Itoa(moved)
	for file, want := range map[string]string{"pid": strconv.Itoa(moved), "why": "pid " + strconv.Itoa(moved) + " is not running", "session": sid} {
		if b, err := d.c.ReadFile(st + "/" + file); err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), want) {
			names, _ := os.ReadDir(filepath.Join(w.home, ".claude", "sessions"))
			stale, _ := d.c.ReadDir("/stale/claude")
			t.Errorf("%s/%s = %q (%v), want %q; sessions/ holds %v, /stale/claude %v", st, file, b, err, want, names, stale)
		}
	}
	// Other tests' Claudes of this uid may be listed: only these matter.
	if l := d.listed(); l[moved] != "" || l[run] != "" {
		t.Errorf("/active/claude lists the killed %d or the moved %d", moved, run)
	}
}
