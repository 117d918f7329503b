package test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/client"
)

// What a move shows other users, what it runs, and where it lands: rules 5,
// 6, 7 and 9 as a move meets them.

func marker(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// poller is another uid reading every /proc/*/cmdline in a loop, as any
// local user can, and counting a marker.
type poller struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bytes.Buffer
}

func startPoller(t *testing.T, markers ...string) *poller {
	t.Helper()
	p := &poller{out: &bytes.Buffer{}}
	p.cmd = exec.Command(bin("self.test"), "-test.run=^TestHelperPoll$", "-test.count=1")
	p.cmd.Env = []string{"HELPER_POLL=" + strings.Join(markers, ","), "PATH=/usr/bin:/bin"}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	must(t, err)
	must(t, p.cmd.Start())
	t.Cleanup(func() { p.stdin.Close(); p.cmd.Wait() })
	return p
}

// stop ends the poll and returns how often it saw each marker, and how
// many sweeps of /proc it made.
func (p *poller) stop(t *testing.T) (map[string]int, int) {
	t.Helper()
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("poller: %v\n%s", err, p.out.String())
	}
	seen, sweeps := map[string]int{}, 0
	sc := bufio.NewScanner(bytes.NewReader(p.out.Bytes()))
	for sc.Scan() {
		var k string
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "seen %s %d", &k, &n); err == nil {
			seen[k] = n
		} else if _, err := fmt.Sscanf(sc.Text(), "sweeps %d", &n); err == nil {
			sweeps = n
		}
	}
	return seen, sweeps
}

// TestHelperPoll is the poller (run by startPoller as another uid): it
// reads every /proc/*/cmdline until its stdin closes.
func TestHelperPoll(t *testing.T) {
	list := os.Getenv("HELPER_POLL")
	if list == "" {
		t.Skip("a helper: run by TestMoveSecret")
	}
	markers := strings.Split(list, ",")
	seen := make([]int, len(markers))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	sweeps := 0
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-done:
			for i, m := range markers {
				fmt.Printf("seen %s %d\n", m, seen[i])
			}
			fmt.Printf("sweeps %d\n", sweeps)
			return
		default:
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			f, err := os.Open("/proc/" + e.Name() + "/cmdline")
			if err != nil {
				continue
			}
			n, _ := io.ReadFull(f, buf)
			f.Close()
			for i, m := range markers {
				seen[i] += bytes.Count(buf[:n], []byte(m))
			}
		}
		sweeps++
		time.Sleep(time.Millisecond)
	}
}

// lineage is one agent moved again and again: its own tmux server
// directory, zmx directory and launch record.
type lineage struct {
	m      *moveEnv
	env    []string
	record string
	tmux   string
	zmx    string
	pid    int
}

func (l *lineage) records(t *testing.T) []launchRecord { return readLaunches(l.record) }

// TestMoveSecret: 50 moves of agents whose environment holds a secret,
// into tmux (the server started by the move, and already running) and
// zmx, while another uid reads every process's argv: the secret is seen
// 0 times, the audit never holds it, and a 256 KiB environment arrives
// whole in the resumed agent.
//
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
func TestMoveSecret(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	m := newMoveEnv(t)
	secret := marker(t, "SECRET")
	control := marker(t, "CONTROL")
	p := startPoller(t, secret, control)
	// The control: a marker in an argv the poller must see, so that 0 for
	// the secret means something.
	// In a process group of its own, ended whole: the shell forks sleep,
	// which a kill of the shell alone would leave running for 10 minutes.
	ctl := exec.Command("/bin/sh", "-c", "sleep 600", control)
	ctl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, ctl.Start())
	defer func() { syscall.Kill(-ctl.Process.Pid, syscall.SIGKILL); ctl.Wait() }()

	const workers, moves = 5, 10
	// A runtime directory of this test's own: the launch sockets live
	// under it, and nothing another test does lands there.
	rt := shortDir(t, "rt")
	d := startDaemonEnv(t, []string{"XDG_RUNTIME_DIR=" + rt}, m.home, m.moveArgs()...)
	// A 256 KiB environment, two variables near the kernel's per-string
	// limit, the secret inside both.
	big := []string{
		"BIG1=" + secret + strings.Repeat("a", 100<<10),
		"BIG2=" + strings.Repeat("b", 100<<10) + secret,
		"BIG3=" + strings.Repeat("c", 56<<10),
	}
	var lines []*lineage
	for w := 0; w < workers; w++ {
		l := &lineage{m: m, tmux: shortDir(t, "tm"), zmx: shortDir(t, "zx"), record: filepath.Join(t.TempDir(), "record.jsonl")}
		l.env = []string{"PATH=" + bins + ":/usr/bin:/bin", "TMUX_TMPDIR=" + l.tmux, "ZMX_DIR=" + l.zmx, "FAKE_RECORD=" + l.record,
			"LANG=C.UTF-8", "ANTHROPIC_API_KEY=" + secret, "GITHUB_TOKEN=x" + secret + "x",
			"FAKE_SESSION=" + fmt.Sprintf("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c%02d", w)}
		if w == 0 {
			l.env = append(l.env, big...)
		}
		tmuxDir, zmxDir := l.tmux, l.zmx
		t.Cleanup(func() {
			exec.Command("tmux", "-S", filepath.Join(tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "default"), "kill-server").Run()
			kill := exec.Command(bin("zmx"), "kill", "*")
			kill.Env = []string{"ZMX_DIR=" + zmxDir, "PATH=/usr/bin:/bin"}
			kill.Run()
		})
		a := startFake(t, "claude", m.home, m.cwd, l.env...)
		waitRegistry(t, m.home, a.pid())
		l.pid = a.pid()
		lines = append(lines, l)
	}
	// Worker 1's tmux server runs before its first move.
	{
		cmd := exec.Command("tmux", "new-session", "-d", "-s", "before", "sleep", "600")
		cmd.Env = []string{"TMUX_TMPDIR=" + lines[1].tmux, "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v %s", err, out)
		}
	}
	clients := make([]*client.Client, workers)
	for i := range clients {
		clients[i] = d.client()
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w, l := range lines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w]
			for i := 0; i < moves; i++ {
				host := []string{"tmux", "zmx"}[i%2]
				name := fmt.Sprintf("w%dm%d", w, i)
				if err := c.WriteFile("/active/claude/"+strconv.Itoa(l.pid)+"/"+host, []byte(name)); err != nil {
					errs <- fmt.Errorf("worker %d move %d (%s): %v", w, i, host, err)
					return
				}
				recs := l.records(t)
				if len(recs) != i+2 {
					errs <- fmt.Errorf("worker %d move %d: %d launches recorded, want %d", w, i, len(recs), i+2)
					return
				}
				old, nw := recs[0], recs[len(recs)-1]
				if w == 0 && strings.Join(envSet(old.Env), "\n") != strings.Join(envSet(nw.Env), "\n") {
					errs <- fmt.Errorf("worker 0 move %d: the environment did not arrive whole (%d entries, %d bytes; was %d, %d)",
						i, len(nw.Env), len(strings.Join(nw.Env, "")), len(old.Env), len(strings.Join(old.Env, "")))
					return
				}
				l.pid = nw.PID
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Error(err)
		failed = true
	}
	if failed {
		t.Logf("the daemon's log:\n%s", d.stderr.String())
	}
	seen, sweeps := p.stop(t)
	t.Logf("poller: %d sweeps of /proc/*/cmdline as uid 65534", sweeps)
	if seen[control] == 0 {
		t.Fatalf("the poller never saw the control marker in an argv (%d sweeps): it proves nothing\n%s", sweeps, p.out.String())
	}
	if seen[secret] != 0 {
		t.Errorf("another uid saw the secret %d times in argv", seen[secret])
	}
	if n := strings.Count(d.stderr.String(), secret); n != 0 {
		t.Errorf("the audit holds the secret %d times", n)
	}
	eventually(t, func() bool {
		return strings.Count(d.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55") >= workers*moves
	}, "every move's end in the audit")
	if n := strings.Count(d.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55"); n != workers*moves {
		t.Errorf("%d moves journaled done, want %d", n, workers*moves)
	}
	// Nothing of the relaunch is left behind: every move's socket is gone.
	dir := filepath.Join(rt, "9harness", "launch")
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("launch directory %s: %d entries left (%v)", dir, len(ents), err)
	}
	for _, l := range lines {
		if pr, err := os.FindProcess(l.pid); err == nil {
			pr.Signal(os.Interrupt)
		}
	}
}

// TestMoveSandbox: an agent in another user and pid namespace is refused
// before any signal, whatever its PATH holds, and no binary of its
// choosing ever runs; an agent with a hostile PATH in the user's own
// namespaces moves with the daemon's tmux, never its own.
//
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestMoveSandbox(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	unshare := require(t, "unshare")
	m := newMoveEnv(t)
	canaryDir := t.TempDir()
	canary := filepath.Join(t.TempDir(), "canary-ran")
	for _, name := range []string{"tmux", "zmx", "claude"} {
		writeExe(t, filepath.Join(canaryDir, name), []byte("#!/bin/sh\ntouch "+canary+"\nexit 0\n"))
	}
	hostile := append([]string{}, m.env...)
	hostile[0] = "PATH=" + canaryDir + ":" + bins + ":/usr/bin:/bin"

	// The sandboxed agent: unshare execs the fake in place (--fork makes
	// the fake a child of unshare; it is the agent).
	sb := exec.Command(unshare, "--user", "--pid", "--fork", bin("claude"))
	sb.Dir = m.cwd
	sb.Env = append([]string{"HOME=" + m.home}, append(hostile, "FAKE_SESSION=5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d")...)
	sb.Stderr = os.Stderr
	must(t, sb.Start())
	sbDone := make(chan struct{})
	go func() { sb.Wait(); close(sbDone) }()
	var inner int
	// unshare --fork waits out SIGTERM: the agent inside is ended first.
	defer func() {
		if inner > 0 {
			syscall.Kill(inner, syscall.SIGTERM)
		}
		select {
		case <-sbDone:
		case <-time.After(5 * time.Second):
			sb.Process.Kill()
			<-sbDone
		}
	}()
	eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(sb.Process.Pid) + "/task/" + strconv.Itoa(sb.Process.Pid) + "/children")
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			inner, _ = strconv.Atoi(f[0])
		}
		return inner > 0
	}, "the sandboxed agent")

	// The agent in the user's own namespaces, with the same hostile PATH.
	own := startFake(t, "claude", m.home, m.cwd, append(hostile, "FAKE_SESSION=6b7c8d9e-0f1a-4b2c-9d3e-4f5a6b7c8d9e")...)
	waitRegistry(t, m.home, own.pid())

	d := startDaemon(t, m.home, m.moveArgs()...)
	c := d.client()
	eventually(t, func() bool { _, _, err := c.Stat("/active/claude/" + strconv.Itoa(inner) + "/tmux"); return err == nil },
		"the sandboxed agent under /active")
	for _, host := range []string{"tmux", "zmx"} {
		err := c.WriteFile("/active/claude/"+strconv.Itoa(inner)+"/"+host, []byte("out-"+host))
		if !isErrno(err, linux.EPERM) {
			t.Errorf("moving the sandboxed agent into %s: %v, want EPERM", host, err)
		}
	}
	select {
	case <-sbDone:
		t.Fatal("the sandboxed agent died from a refused move")
	default:
	}
	if err := syscall.Kill(inner, 0); err != nil {
		t.Fatalf("the sandboxed agent is gone: %v", err)
	}
	if !strings.Contains(d.stderr.String(), "the agent is in another user namespace") {
		t.Errorf("the refusal does not name the namespace:\n%s", d.stderr.String())
	}

	if err := c.WriteFile("/active/claude/"+strconv.Itoa(own.pid())+"/tmux", []byte("own")); err != nil {
		t.Fatalf("moving the agent with a hostile PATH: %v\n%s", err, d.stderr.String())
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a binary from the agent's PATH ran")
	}
	if out, err := m.tmux("has-session", "-t", "=own"); err != nil {
		t.Errorf("the move did not land in the daemon's tmux: %v %s", err, out)
	}
	if recs := m.records(t); len(recs) > 0 {
		if pr, err := os.FindProcess(recs[len(recs)-1].PID); err == nil {
			pr.Signal(os.Interrupt)
		}
	}
}

// TestMoveTmuxOtherServer: an agent in a `tmux -L other` pane is moved
// within that server, into a session of the agent's old size; the tmux
// file names the server; a write naming another server is refused.
func TestMoveTmuxOtherServer(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "4d5e6f7a-8b9c-4d0e-8f1a-2b3c4d5e6f7a"
	other := filepath.Join(m.tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "other")
	t.Cleanup(func() { exec.Command("tmux", "-S", other, "kill-server").Run() })
	env := append([]string{"HOME=" + m.home}, append(append([]string{}, m.env...), "FAKE_SESSION="+sid)...)
	start := exec.Command("tmux", "-L", "other", "new-session", "-d", "-s", "orig", "-x", "132", "-y", "43", "-c", m.cwd, "--", bin("claude"), "--model", "opus", "--print-secret-prompt")
	start.Env = env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("tmux -L other: %v %s", err, out)
	}
	tm := func(args ...string) string {
		cmd := exec.Command("tmux", append([]string{"-S", other}, args...)...)
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	pid, _ := strconv.Atoi(tm("list-panes", "-t", "=orig", "-F", "#{pane_pid}"))
	if pid == 0 {
		t.Fatal("no agent pane")
	}
	waitRegistry(t, m.home, pid)
	d := startDaemon(t, m.home, m.moveArgs()...)
	c := d.client()
	dir := "/active/claude/" + strconv.Itoa(pid)
	if got, _ := readField(c, dir+"/tmux"); got != "other:orig" {
		t.Errorf("tmux file %q, want other:orig", got)
	}
	if err := c.WriteFile(dir+"/tmux", []byte("default:elsewhere")); !isErrno(err, linux.EINVAL) {
		t.Errorf("naming the default server: %v, want EINVAL", err)
	}
	if err := c.WriteFile(dir+"/tmux", []byte("other:moved")); err != nil {
		t.Fatalf("move: %v\n%s", err, d.stderr.String())
	}
	if size := tm("list-windows", "-t", "=moved", "-F", "#{window_width}x#{window_height}"); size != "132x43" {
		t.Errorf("new session size %q, want the old 132x43", size)
	}
	if _, err := m.tmux("has-session", "-t", "=moved"); err == nil {
		t.Error("the session landed on the default server")
	}
	recs := m.records(t)
	nw := recs[len(recs)-1]
	defer func() {
		if pr, err := os.FindProcess(nw.PID); err == nil {
			pr.Signal(os.Interrupt)
		}
	}()
	// The agent's own allowlisted flag comes back; anything else does not.
	if got := strings.Join(nw.Argv[1:], " "); got != "--resume "+sid+" --model opus" {
		t.Errorf("relaunch argv %q, want --resume %s --model opus", nw.Argv, sid)
	}
	if !strings.Contains(d.stderr.String(), "flags_kept=--model") || strings.Contains(d.stderr.String(), "opus") {
		t.Errorf("the journal must name the kept flag and never its value:\n%s", d.stderr.String())
	}
	if panes := tm("list-panes", "-t", "=moved", "-F", "#{pane_pid}"); panes != strconv.Itoa(nw.PID) {
		t.Errorf("the moved session's pane %q, want the new agent %d", panes, nw.PID)
	}
	eventually(t, func() bool {
		got, _ := readField(c, "/active/claude/"+strconv.Itoa(nw.PID)+"/tmux")
		return got == "other:moved"
	}, "the new agent's tmux file naming its server")
	if !strings.Contains(d.stderr.String(), "tmux_server=other") {
		t.Errorf("the journal does not name the server:\n%s", d.stderr.String())
	}
}

// TestMoveResumePath: an agent whose executable does not name its harness
// (as pi and Codex run under node) is resumed with the binary the
// daemon's own path names, and the journal says so.
//
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
func TestMoveResumePath(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	a := startFakeExe(t, "claude", m.home, m.cwd, append(append([]string{}, m.env...), "FAKE_SESSION=5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b")...)
	waitRegistry(t, m.home, a.pid())
	d := startDaemon(t, m.home, m.moveArgs("--resume-path", bins)...)
	if err := d.client().WriteFile("/active/claude/"+strconv.Itoa(a.pid())+"/tmux", []byte("bypath")); err != nil {
		t.Fatalf("move: %v\n%s", err, d.stderr.String())
	}
	recs := m.records(t)
	nw := recs[len(recs)-1]
	defer func() {
		if pr, err := os.FindProcess(nw.PID); err == nil {
			pr.Signal(os.Interrupt)
		}
	}()
	if exe, _ := os.Readlink("/proc/" + strconv.Itoa(nw.PID) + "/exe"); exe != bin("claude") {
		t.Errorf("resumed from %q, want %q", exe, bin("claude"))
	}
	if !strings.Contains(d.stderr.String(), `resume_binary="the daemon's resume path"`) {
		t.Errorf("the journal does not say where the binary came from:\n%s", d.stderr.String())
	}
	// Default size when the agent has no terminal.
	if size, _ := m.tmux("list-windows", "-t", "=bypath", "-F", "#{window_width}x#{window_height}"); size != "200x50" {
		t.Errorf("size %q, want 200x50 for an agent without a terminal", size)
	}
}

// TestMoveOutcomeTrue: a relaunched agent that comes up, resolves to its
// session and dies within a second (as a Claude that finds no
// conversation does) is not a move that worked: the write fails with EIO
// and the journal says failed, with the command that resumes by hand.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestMoveOutcomeTrue(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	a := startFakeExe(t, "claude", m.home, m.cwd, append(append([]string{}, m.env...), "FAKE_SESSION=6f7a8b9c-0d1e-4f2a-9b3c-4d5e6f7a8b9c")...)
	waitRegistry(t, m.home, a.pid())
	// The daemon's resume path names a claude that lives one second.
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	writeExe(t, filepath.Join(dir, "claude"), []byte("#!/bin/sh\n( sleep 1; kill $$ ) &\nexec "+bin("claude")+" \"$@\"\n"))
	d := startDaemon(t, m.home, m.moveArgs("--resume-path", dir)...)
	start := time.Now()
	err := d.client().WriteFile("/active/claude/"+strconv.Itoa(a.pid())+"/tmux", []byte("brief"))
	if !isErrno(err, linux.EIO) {
		t.Fatalf("a relaunch that died: %v, want EIO\n%s", err, d.stderr.String())
	}
	t.Logf("reported failed after %v", time.Since(start).Round(time.Second))
	log := d.stderr.Await("message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e56")
	if strings.Contains(log, "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55") {
		t.Errorf("the journal says moved:\n%s", log)
	}
	for _, want := range []string{"message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e56", "outcome=failed", "exited)", "claude --resume 6f7a8b9c-0d1e-4f2a-9b3c-4d5e6f7a8b9c"} {
		if !strings.Contains(log, want) {
			t.Errorf("the journal lacks %q:\n%s", want, log)
		}
	}
	// It did come up in the session first: the outcome was judged, not missed.
	if recs := m.records(t); len(recs) != 2 {
		t.Errorf("%d launches recorded, want the original and the brief relaunch", len(recs))
	}
}
