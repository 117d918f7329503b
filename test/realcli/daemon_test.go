package realcli

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"

	"github.com/9harness/9harness/internal/client"
)

// daemon is the real 9harnessd serving the world's scratch HOME.
type daemon struct {
	w      *world
	sock   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
	c      *client.Client
}

// startDaemon runs 9harnessd with HOME and every root in the scratch
// HOME, TMUX_TMPDIR and XDG_RUNTIME_DIR in the scratch area, and the
// system's PATH (its tmux) after the programs of clis (where a move finds
// a node-based CLI to resume), with the extra flags (--allow-move).
func (w *world) startDaemon(clis []*cli, extra ...string) *daemon {
	w.t.Helper()
	d := &daemon{w: w, sock: filepath.Join(w.dir, "harness.sock"), stderr: &syncBuffer{}, done: make(chan error, 1)}
	args := []string{"--unix", d.sock, "--audit", "stderr"}
	for _, h := range harness.Names() {
		args = append(args, "--root", h+"="+harness.DefaultRoot(h, w.home, ""))
	}
	d.cmd = exec.Command(bin("9harnessd"), append(args, extra...)...)
	// pi's and Codex's programs are node scripts: the Node in use first.
	path := install.pathFor(w.t)
	for i := len(clis) - 1; i >= 0; i-- {
		path = clis[i].binDir(w.t) + ":" + path
	}
	d.cmd.Env = []string{"HOME=" + w.home, "PATH=" + path, "TMUX_TMPDIR=" + w.tmuxDir,
		"XDG_RUNTIME_DIR=" + filepath.Join(w.dir, "run"), "LANG=C.UTF-8", w.marker}
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	if err := d.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	w.t.Cleanup(d.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-d.done:
			d.done <- err
			w.t.Fatalf("9harnessd exited early: %v\n%s", err, d.stderr.String())
		default:
		}
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("9harnessd did not listen on %s\n%s", d.sock, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := client.Dial(d.sock)
	if err != nil {
		w.t.Fatalf("dial %s: %v", d.sock, err)
	}
	d.c = c
	return d
}

func (d *daemon) stop() {
	if d.c != nil {
		d.c.Close()
	}
	select {
	case err := <-d.done:
		d.done <- err
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		d.w.t.Errorf("9harnessd did not stop on SIGTERM within 10s")
	}
	if d.w.t.Failed() {
		d.w.t.Logf("9harnessd's log:\n%s", d.stderr.String())
	}
}

// logged reports whether the daemon's audit output (--audit stderr) holds s.
// logged reports whether the daemon's log has s within 10 s: the daemon
// writes a line before it answers, but the line reaches the buffer
// through a pipe and a copying goroutine, which a loaded machine delays.
func (d *daemon) logged(s string) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(d.stderr.String(), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// move runs `9harness move --tmux HARNESS/PID NAME` and returns its exit
// status and output.
func (d *daemon) move(harness string, pid int, name string) (int, string) {
	cmd := exec.Command(bin("9harness"), "-s", d.sock, "move", "--tmux", harness+"/"+strconv.Itoa(pid), name)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// listed is every pid under /active/<harness>/, per harness.
func (d *daemon) listed() map[int]string {
	out := map[int]string{}
	hs, _ := d.c.Harnesses()
	for _, h := range hs {
		ents, err := d.c.ReadDir(client.ActiveRoot + "/" + h)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name); err == nil {
				out[pid] = h
			}
		}
	}
	return out
}

// checkListed asserts that of this test's processes exactly the agents
// are listed, each under its harness: no node wrapper, no app-server
// daemon, no tmux server, no launcher.
func (d *daemon) checkListed(t testing.TB, agents map[int]string) {
	t.Helper()
	ours := map[int]bool{}
	for _, pid := range d.w.markedPIDs() {
		ours[pid] = true
	}
	listed := d.listed()
	for pid, h := range listed {
		if ours[pid] && agents[pid] != h {
			t.Errorf("/active/%s/%d is listed, but it is not one of the agents %v: %q", h, pid, agents, cmdline(pid))
		}
	}
	for pid, h := range agents {
		if listed[pid] != h {
			t.Errorf("agent %s/%d %q is not listed under /active/%s (listed there: %v)", h, pid, cmdline(pid), h, listedOf(listed, h))
		}
	}
}

func listedOf(l map[int]string, h string) []int {
	var out []int
	for pid, hh := range l {
		if hh == h {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// facts are what the CLI itself wrote about its session; an empty field
// is a fact the CLI did not write (then the tree must not have it either,
// unless noted by the caller).
type facts struct {
	session    string
	transcript string // host path of the transcript file
	model      string
	title      string
	name       string // the CLI's own name of the agent, where it keeps one
}

// checkFacts asserts every fact of /active/<harness>/<pid> against what
// the CLI wrote (want), /proc, and the transcript file, byte for byte.
func (d *daemon) checkFacts(t testing.TB, harness string, pid int, cwd string, want facts) {
	t.Helper()
	dir := client.AgentDir(harness, pid)
	a, err := d.c.Agent(harness, pid)
	if err != nil {
		t.Errorf("%s: %v", dir, err)
		return
	}
	if b, err := d.c.ReadFile(dir + "/pid"); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("%s/pid = %q (%v), want %d", dir, b, err, pid)
	}
	if pc, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err != nil || a.Cwd != pc || a.Cwd != cwd {
		t.Errorf("%s/cwd = %q, /proc says %q (%v), launched in %q", dir, a.Cwd, pc, err, cwd)
	}
	if ps, err := procStart(pid); err != nil || a.Started < ps-1 || a.Started > ps+1 {
		t.Errorf("%s/started = %d, /proc says %d (%v)", dir, a.Started, ps, err)
	}
	check := func(name, got, want string) {
		if got != want {
			t.Errorf("%s/%s = %q, the CLI wrote %q (via %q)", dir, name, got, want, a.Via)
			drifts.add(t, harness, name, got, want, a.Via)
		}
	}
	check("session", a.Session, want.session)
	check("model", a.Model, want.model)
	check("title", a.Title, want.title)
	if want.name != "" {
		check("name", a.Name, want.name)
	}
	if want.transcript == "" {
		if a.Transcript != "" {
			t.Errorf("%s/transcript exists, but the CLI wrote none", dir)
		}
		return
	}
	if a.Transcript == "" {
		drifts.add(t, harness, "transcript", "", want.transcript, a.Via)
		t.Errorf("%s/transcript is absent, the CLI wrote %s (via %q)", dir, want.transcript, a.Via)
		return
	}
	// The CLI may append while we read: compare when the file stood still.
	for try := 0; ; try++ {
		before, err1 := os.ReadFile(want.transcript)
		got, err2 := d.c.ReadFile(a.Transcript)
		after, err3 := os.ReadFile(want.transcript)
		if err1 != nil || err3 != nil {
			t.Errorf("reading %s: %v %v", want.transcript, err1, err3)
			return
		}
		if err2 != nil {
			t.Errorf("reading %s: %v", a.Transcript, err2)
			return
		}
		if !bytes.Equal(before, after) && try < 5 {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if !bytes.Equal(got, before) {
			drifts.add(t, harness, "transcript", strconv.Itoa(len(got))+" bytes", strconv.Itoa(len(before))+" bytes", a.Via)
			t.Errorf("%s/transcript (%d bytes) differs from %s (%d bytes)", dir, len(got), want.transcript, len(before))
		}
		return
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// driftLog collects the facts /active got wrong, for one summary at the
// end of the run: with REALCLI_VERSIONS=latest it is what changed in the
// newest CLIs before a user sees it.
type driftLog struct {
	mu    sync.Mutex
	lines []string
}

// drifts is the test process's one log; TestMain prints it.
var drifts = &driftLog{}

func (l *driftLog) add(t testing.TB, harness, fact, got, want, via string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("  %s: %s %s: the tree says %q, the CLI wrote %q (via %q)", t.Name(), harness, fact, got, want, via))
}

// report prints the summary, with the versions run.
func (l *driftLog) report(w io.Writer, versions []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(versions) == 0 {
		return
	}
	fmt.Fprintf(w, "realcli: ran %s\n", strings.Join(versions, ", "))
	if len(l.lines) == 0 {
		fmt.Fprintln(w, "realcli: every /active fact checked equals what the CLIs wrote")
		return
	}
	fmt.Fprintf(w, "realcli: %d /active facts differ from what the CLIs wrote:\n%s\n", len(l.lines), strings.Join(l.lines, "\n"))
}
