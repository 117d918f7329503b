package test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
)

// TestProcHelper is the systemd unit's situation without systemd: the
// helper in its unit's cgroup (9harness-proc.service), the daemon in the
// sibling unit's (9harness.service) and in its own user namespace
// (unshare -r, as PrivateUsers=yes puts it). Alone, the daemon cannot read
// an agent's cwd or environment, nor place its peers (they are outside its
// namespace: a grantee's view); with --proc-helper it reads them through a
// real `9harnessd --serve-proc-helper`, which answers it because it is
// 9harnessd in the daemon's unit. When the helper goes away the fields are
// absent again (never an error page), and the daemon keeps serving.
//
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestProcHelper(t *testing.T) {
	t.Parallel()
	require(t, "unshare")
	helperUnit, daemonUnit := cgroupUnits(t)
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	const sid = "6f4b2d3c-1e5a-4b7c-9d0e-1f2a3b4c5d6e"
	cl := startFake(t, "claude", home, cwd, "FAKE_SESSION="+sid, "ZMX_SESSION=helped")
	waitRegistry(t, home, cl.pid())
	dir := "/active/claude/" + strconv.Itoa(cl.pid())

	hsock := filepath.Join(t.TempDir(), "proc-helper.sock")
	helper := launchIn(t, helperUnit, bin("9harnessd"), "--serve-proc-helper", "--unix", hsock)
	helper.sock = hsock
	helper.waitReady()

	inUserns := func(extra ...string) *daemon {
		sock := filepath.Join(t.TempDir(), "harness.sock")
		args := append([]string{"-r", "--", bin("9harnessd"), "--unix", sock, "--audit", "stderr"}, rootArgs(home)...)
		d := launchIn(t, daemonUnit, require(t, "unshare"), append(args, extra...)...)
		d.sock = sock
		d.waitReady()
		return d
	}
	alone := inUserns()
	helped := inUserns("--proc-helper", hsock)
	// Both are really in another user namespace.
	for _, d := range []*daemon{alone, helped} {
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/ns/user")
		self, _ := os.Readlink("/proc/self/ns/user")
		if ns == "" || ns == self {
			t.Fatalf("daemon %d: user namespace %q, want one other than ours (%q)", d.cmd.Process.Pid, ns, self)
		}
	}
	if !strings.Contains(helper.stderr.String(), "9h-units-") {
		t.Errorf("the helper does not say it answers only the daemon's unit:\n%s", helper.stderr.String())
	}

	ca, ch := alone.client(), helped.client()
	eventually(t, func() bool {
		return contains(listNames(t, ch, "/active/claude"), strconv.Itoa(cl.pid()))
	}, "the agent listed by the daemon with the helper")

	// Alone, the kernel refuses the daemon the agent's cwd and environ (and
	// its peers' namespaces: they get a grantee's view).
	for _, f := range []string{"cwd", "zmx"} {
		if v, err := readField(ca, dir+"/"+f); err == nil {
			t.Errorf("without the helper, %s = %q, want none (the namespace hides it)", f, v)
		}
	}
	// Through the helper they are there.
	for f, want := range map[string]string{"cwd": cwd, "zmx": "helped", "session": sid, "via": "registry"} {
		if got, err := readField(ch, dir+"/"+f); err != nil || got != want {
			t.Errorf("with the helper, %s = %q (%v), want %q", f, got, err, want)
		}
	}
	// An agent at a terminal only this test holds the master of: the
	// daemon may not read the test's descriptors, the helper says one bit
	// about them (tty); once the terminal closes, detached. Alone, a peer
	// of the daemon is a grantee's, and sees no reach.
	sleep, err := exec.LookPath("sleep")
	must(t, err)
	b, err := os.ReadFile(sleep)
	must(t, err)
	claude := filepath.Join(t.TempDir(), "claude")
	writeExe(t, claude, b)
	master, slave := openPTY(t)
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP; exec `+claude+" 600")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	must(t, cmd.Start())
	slave.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	atTTY := "/active/claude/" + strconv.Itoa(cmd.Process.Pid) + "/reach"
	eventually(t, func() bool { r, _ := readField(ch, atTTY); return r == "tty" }, "reach tty through the helper")
	if r, err := readField(ca, atTTY); err == nil {
		t.Errorf("without the helper (a grantee's view), reach = %q, want none", r)
	}
	master.Close()
	eventually(t, func() bool { r, _ := readField(ch, atTTY); return r == "detached" }, "reach detached once the terminal closed")

	// (It refused this test, which dialled it to see it was up.)
	if strings.Contains(helper.stderr.String(), "refused pid="+strconv.Itoa(helped.cmd.Process.Pid)+" ") {
		t.Errorf("the helper refused its daemon:\n%s", helper.stderr.String())
	}

	// The helper goes away: the fields are absent again, nothing else.
	helper.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-helper.done:
		helper.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not exit on SIGINT")
	}
	if _, err := net.Dial("unix", hsock); err == nil {
		t.Fatal("helper socket still answers")
	}
	if _, _, err := ch.Stat(dir + "/cwd"); !isErrno(err, linux.ENOENT) {
		t.Errorf("helper gone, cwd: %v, want ENOENT", err)
	}
	if got, err := readField(ch, dir+"/session"); err != nil || got != sid {
		t.Errorf("helper gone, session = %q (%v)", got, err)
	}
}
