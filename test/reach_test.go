package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/client"
)

// TestReachLive: a real daemon tells who can answer each agent from the
// kernel: one in a real tmux pane (tmux); one at a terminal this test
// holds (tty), and the same agent once the test closes that terminal
// (detached: the kernel takes a hung-up terminal from its session); one
// started with setsid and no terminal (detached); one whose tmux pane was
// killed while it ignores SIGHUP (detached, though its environment still
// names tmux). ps --detached lists exactly the detached ones of these,
// and the table agrees with the files.
func TestReachLive(t *testing.T) {
	t.Parallel()
	tm := require(t, "tmux")
	setsid := require(t, "setsid")
	home := fixtureHome(t)
	dir, err := os.MkdirTemp("/tmp", "h9reach")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o700))
	// The agents are sleep under Claude's name: the scan claims them by
	// their argv, and nothing else about them matters here.
	sleep, err := exec.LookPath("sleep")
	must(t, err)
	b, err := os.ReadFile(sleep)
	must(t, err)
	claude := filepath.Join(dir, "claude")
	writeExe(t, claude, b)

	var started []int
	t.Cleanup(func() {
		for _, pid := range started {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// tmux: a pane, and a second one whose agent ignores SIGHUP.
	sock := filepath.Join(dir, "s")
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tm, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TERM=xterm"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tmux("new-session", "-d", "-s", "live", claude+" 600")
	t.Cleanup(func() { exec.Command(tm, "-S", sock, "kill-server").Run() })
	tmux("new-session", "-d", "-s", "closed", `trap "" HUP; exec `+claude+" 600")
	paneOf := func(session string) int {
		pid, err := strconv.Atoi(tmux("list-panes", "-t", session, "-F", "#{pane_pid}"))
		must(t, err)
		started = append(started, pid)
		return pid
	}
	inTmux, closedPane := paneOf("live"), paneOf("closed")

	// setsid, no terminal at all.
	cmd := exec.Command(setsid, claude, "600")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	must(t, cmd.Start())
	noTTY := cmd.Process.Pid
	started = append(started, noTTY)
	go cmd.Wait()

	// A terminal this test holds the master of, the agent's controlling
	// terminal, in a session of its own.
	master, slave := openPTY(t)
	cmd = exec.Command("/bin/sh", "-c", `trap "" HUP; exec `+claude+" 600")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	must(t, cmd.Start())
	slave.Close()
	atTTY := cmd.Process.Pid
	started = append(started, atTTY)
	go cmd.Wait()

	d := startDaemon(t, home)
	c := d.client()
	reach := func(pid int) string {
		r, err := readField(c, client.AgentDir("claude", pid)+"/reach")
		if err != nil {
			return "error: " + err.Error()
		}
		return r
	}
	expect := func(what string, want map[int]string) {
		t.Helper()
		got := map[int]string{}
		eventually(t, func() bool {
			ok := true
			for pid, w := range want {
				if got[pid] = reach(pid); got[pid] != w {
					ok = false
				}
			}
			if !ok {
				t.Logf("%s: %v, want %v", what, got, want)
			}
			return ok
		}, what)
		tab, err := c.Table()
		must(t, err)
		for _, a := range tab {
			if w, ok := want[a.PID]; ok && a.Harness == "claude" && a.Reach != w {
				t.Errorf("%s: table reach of %d is %q, want %q", what, a.PID, a.Reach, w)
			}
		}
	}
	want := map[int]string{inTmux: "tmux", closedPane: "tmux", noTTY: "detached", atTTY: "tty"}
	expect("reach before any terminal closed", want)

	// The pane is killed; its agent ignores the hangup and runs on, with
	// no terminal. The test closes the terminal it held.
	tmux("kill-session", "-t", "closed")
	master.Close()
	want[closedPane], want[atTTY] = "detached", "detached"
	expect("reach after the terminals closed", want)
	for _, pid := range []int{closedPane, atTTY} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("pid %d did not outlive its terminal: %v", pid, err)
		}
	}

	out, errs, code := run9harness(t, nil, "-s", d.sock, "ps", "--detached", "-q")
	if code != 0 {
		t.Fatalf("ps --detached: exit %d, %q", code, errs)
	}
	listed := strings.Fields(out)
	for pid, w := range want {
		if got := slices.Contains(listed, "claude/"+strconv.Itoa(pid)); got != (w == "detached") {
			t.Errorf("ps --detached lists claude/%d: %v, its reach is %s:\n%s", pid, got, w, out)
		}
	}
	out, _, _ = run9harness(t, nil, "-s", d.sock, "ps", "--json")
	if !strings.Contains(out, `"reach": "tmux"`) || !strings.Contains(out, `"reach": "detached"`) {
		t.Errorf("ps --json lacks the reach values:\n%s", out)
	}
}

// openPTY opens a new pseudo-terminal: its master, and its slave without
// making it this process's controlling terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(t, err)
	// Non-blocking, so that the reader below waits in the poller and a
	// Close really closes it (a blocking read would hold it open).
	must(t, unix.SetNonblock(fd, true))
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	must(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	must(t, err)
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	must(t, err)
	t.Cleanup(func() { master.Close(); slave.Close() })
	// Something reads the terminal, as a window would: the agent never
	// blocks on a full buffer.
	go func() {
		b := make([]byte, 512)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	return master, slave
}
