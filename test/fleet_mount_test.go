package test

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond every 50 ms for up to d: the fleet's hosts come and
// go on their own schedule (a probe every 2 s, a re-dial with backoff).
func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// listDir is the names in dir, sorted; nil if it cannot be read.
func listDir(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// isDir reports whether p is a directory now.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// fleetMount starts `9harness mount -f --all --hosts FILE --timeout 3s` on
// a new directory, this machine's daemon at sock, and ends it with the
// test.
func fleetMount(t *testing.T, sock, home, hostsFile string) *fuseMount {
	m := &fuseMount{t: t, dir: t.TempDir(), out: &syncBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(bin("9harness"), "-s", sock, "mount", "-f", "--all", "--hosts", hostsFile, "--timeout", "3s", m.dir)
	m.cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + t.TempDir()}
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	must(t, m.cmd.Start())
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(m.cleanup)
	return m
}

// TestFleetMount: `mount --all DIR` over three hosts (three users, each
// with their own sshd and daemon on loopback) and this machine shows
// DIR/HOST/active for each, and this machine as DIR/local. A host that
// goes away (its sshd stopped and its sessions ended, as when the machine
// goes down) leaves DIR, a file of it held open then fails with EIO or
// ENOTCONN (not a hang), and the others stay; when its sshd is back, so is
// DIR/HOST. The mount is torn down however the test ends.
func TestFleetMount(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	var hosts []*fleetHost
	for range 3 {
		h := newSSHHost(t)
		hosts = append(hosts, &fleetHost{sshHost: h, name: h.user + "@127.0.0.1:" + itoa(h.port)})
	}
	local := fixtureHome(t)
	d := startDaemon(t, local)
	var lines []string
	for _, h := range hosts {
		lines = append(lines, hostsLine(h.name, h.key))
	}
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

	m := fleetMount(t, d.sock, local, hostsFile)
	// On a loaded machine a host may take longer than --timeout to answer
	// first ("mounted 3 of 4 hosts"); it comes once it answers.
	said := regexp.MustCompile(`mounted ([0-4] of )?4 hosts on ` + regexp.QuoteMeta(m.dir) + "\n")
	if out := m.out.Await("hosts on " + m.dir + "\n"); !said.MatchString(out) {
		t.Fatalf("9harness mount --all did not say it mounted:\n%s", out)
	}
	if !isMounted(t, m.dir) {
		t.Fatalf("no %s in /proc/self/mountinfo:\n%s", m.dir, m.out.String())
	}

	want := []string{"local"}
	for _, h := range hosts {
		want = append(want, h.name)
	}
	slices.Sort(want)
	took := waitFor(t, 30*time.Second, func() bool {
		for _, name := range want {
			if !isDir(filepath.Join(m.dir, name, "active")) {
				return false
			}
		}
		return slices.Equal(listDir(m.dir), want)
	}, "DIR/HOST/active for every host, and nothing else in DIR")
	t.Logf("all four hosts in the mount after %v", took.Round(time.Millisecond))
	// Each is its own daemon: the same file differs by host.
	pids := map[string]bool{}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(m.dir, name, "pid"))
		if err != nil {
			t.Fatalf("read %s/pid: %v", name, err)
		}
		pids[strings.TrimSpace(string(b))] = true
	}
	if len(pids) != len(want) {
		t.Errorf("DIR/HOST/pid should be four daemons' pids, got %v", pids)
	}

	gone := hosts[1]
	held, err := os.Open(filepath.Join(m.dir, gone.name, "pid"))
	must(t, err)
	defer held.Close()

	// The host goes down: sshd stops listening, and its sessions (the
	// relay, run as the host's user) end. Every process named is this
	// test's own: the sshd it started and the user it made.
	gone.sshd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 15*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(gone.port), time.Second)
		if err == nil {
			c.Close()
			return false
		}
		return true
	}, "the stopped sshd's port to close")
	for _, pid := range gone.userProcs(gone.daemon.cmd.Process.Pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	took = waitFor(t, 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(m.dir, gone.name))
		return errors.Is(err, os.ErrNotExist) && !slices.Contains(listDir(m.dir), gone.name)
	}, "the stopped host to leave DIR")
	t.Logf("the stopped host left DIR after %v", took.Round(time.Millisecond))
	for _, name := range want {
		if name != gone.name && !isDir(filepath.Join(m.dir, name, "active")) {
			t.Errorf("%s/active went with the stopped host", name)
		}
	}
	// A file of the host that went, open from before: an error at once,
	// not a wait for a host that is not there.
	readDone := make(chan error, 1)
	go func() {
		_, err := held.ReadAt(make([]byte, 64), 0)
		readDone <- err
	}()
	select {
	case err := <-readDone:
		if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("read of a gone host's open file: %v, want EIO or ENOTCONN", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("a read of a gone host's open file still waits after 15 s")
	}
	held.Close()

	// The host comes back: the same sshd configuration on the same port.
	conf := filepath.Join(filepath.Dir(gone.home), "ssh", "sshd_config")
	log := &syncBuffer{}
	sshd := exec.Command(require(t, "sshd"), "-D", "-e", "-f", conf)
	sshd.Stderr = log
	// Its sessions' processes inherit its stderr; once sshd is gone, Wait
	// must not wait for them to close it.
	sshd.WaitDelay = 5 * time.Second
	must(t, sshd.Start())
	sshdDone := make(chan error, 1)
	go func() { sshdDone <- sshd.Wait() }()
	t.Cleanup(func() {
		sshd.Process.Signal(syscall.SIGTERM)
		select {
		case <-sshdDone:
		case <-time.After(10 * time.Second):
			sshd.Process.Kill()
			<-sshdDone
		}
	})
	if out := log.Await("Server listening on 127.0.0.1 port " + itoa(gone.port)); !strings.Contains(out, "Server listening") {
		t.Fatalf("the restarted sshd does not listen:\n%s", out)
	}
	took = waitFor(t, 30*time.Second, func() bool {
		return isDir(filepath.Join(m.dir, gone.name, "active")) && slices.Equal(listDir(m.dir), want)
	}, "the restarted host to come back to DIR")
	t.Logf("the restarted host came back after %v", took.Round(time.Millisecond))
	b, err := os.ReadFile(filepath.Join(m.dir, gone.name, "pid"))
	if err != nil || strings.TrimSpace(string(b)) != itoa(gone.daemon.cmd.Process.Pid) {
		t.Errorf("%s/pid after the host came back: %q %v, want %d", gone.name, b, err, gone.daemon.cmd.Process.Pid)
	}

	// A host that hangs (its relay and session stopped, as a machine
	// that drops off the network without a word): its probe goes
	// unanswered for --timeout, it leaves DIR, and a read waiting on it
	// fails instead of waiting for ever. When it answers again it is
	// back, on a new connection.
	hung := hosts[2]
	held, err = os.Open(filepath.Join(m.dir, hung.name, "pid"))
	must(t, err)
	defer held.Close()
	stopped := hung.userProcs(hung.daemon.cmd.Process.Pid)
	if len(stopped) == 0 {
		t.Fatalf("no relay runs as %s", hung.user)
	}
	cont := func() {
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(cont)
	for _, pid := range stopped {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	start := time.Now()
	go func() {
		_, err := held.ReadAt(make([]byte, 64), 0)
		readDone <- err
	}()
	took = waitFor(t, 30*time.Second, func() bool {
		_, err := os.Lstat(filepath.Join(m.dir, hung.name))
		return errors.Is(err, os.ErrNotExist)
	}, "the hung host to leave DIR")
	t.Logf("the hung host left DIR after %v", took.Round(time.Millisecond))
	select {
	case err := <-readDone:
		t.Logf("a read waiting on the hung host failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
		if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("read of a hung host's open file: %v, want EIO or ENOTCONN", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a read of a hung host's open file still waits after 30 s")
	}
	held.Close()
	cont()
	took = waitFor(t, 30*time.Second, func() bool {
		return isDir(filepath.Join(m.dir, hung.name, "active")) && slices.Equal(listDir(m.dir), want)
	}, "the hung host to come back to DIR")
	t.Logf("the hung host came back after %v", took.Round(time.Millisecond))
	m.umount()
}

// TestFleetMountSlowHost: a host whose every connection takes longer to
// set up than --timeout (a slow link: here a proxy that holds each TCP
// connection 4 s before passing it on) is reported as not answering when
// the mount starts, and then appears on that same first dial rather than
// never: the probe's bound is not the dial's.
func TestFleetMountSlowHost(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	h := newSSHHost(t)
	proxy, dials := slowProxy(t, "127.0.0.1:"+itoa(h.port), 4*time.Second)
	name := h.user + "@" + proxy
	local := fixtureHome(t)
	d := startDaemon(t, local)
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(hostsLine(name, h.key)+"\n"), 0o644))

	m := fleetMount(t, d.sock, local, hostsFile)
	out := m.out.Await("hosts on " + m.dir + "\n")
	if !regexp.MustCompile(`mounted [01] of 2 hosts on `).MatchString(out) {
		t.Fatalf("the slow host is not reported as not answering yet:\n%s", out)
	}
	if want := "9harness mount: " + name + ": no answer within 3s; its directory appears once it answers\n"; !strings.Contains(out, want) {
		t.Errorf("no %q:\n%s", want, out)
	}
	took := waitFor(t, 30*time.Second, func() bool {
		return isDir(filepath.Join(m.dir, name, "active"))
	}, "the slow host to appear in DIR")
	t.Logf("the slow host appeared %v after the mount's report", took.Round(time.Millisecond))
	if n := dials.Load(); n != 1 {
		t.Errorf("the slow host was dialed %d times before it appeared, want once", n)
	}
	b, err := os.ReadFile(filepath.Join(m.dir, name, "pid"))
	if err != nil || strings.TrimSpace(string(b)) != itoa(h.daemon.cmd.Process.Pid) {
		t.Errorf("%s/pid: %q %v, want %d", name, b, err, h.daemon.cmd.Process.Pid)
	}
	m.umount()
}

// slowProxy listens on loopback and passes each connection on to target
// after holding it for delay; it returns its address and the count of
// connections it took. It ends with the test.
func slowProxy(t *testing.T, target string, delay time.Duration) (string, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	var n atomic.Int32
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			wg.Go(func() {
				defer c.Close()
				select {
				case <-done:
					return
				case <-time.After(delay):
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					<-done
					c.Close()
					up.Close()
				}()
				go io.Copy(up, c)
				io.Copy(c, up)
			})
		}
	})
	return ln.Addr().String(), &n
}

// TestFleetMountSaysWhoAnswered: a fleet mount with a host that refuses
// connections says "mounted 1 of 2 hosts", names the host that did not
// answer and why, both in the foreground and as a background mount (whose
// count comes from the process that dialed), and its directory holds the
// host that answered.
func TestFleetMountSaysWhoAnswered(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	local := fixtureHome(t)
	d := startDaemon(t, local)
	closed := "nobody@127.0.0.1:" + itoa(closedPort(t))
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	line := closed + " ssh-opt=BatchMode=yes ssh-opt=StrictHostKeyChecking=no ssh-opt=UserKnownHostsFile=/dev/null\n"
	must(t, os.WriteFile(hostsFile, []byte(line), 0o644))
	env := []string{"HOME=" + local, "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + t.TempDir()}
	args := func(dir string, fg bool) []string {
		a := []string{"-s", d.sock, "mount", "--all", "--hosts", hostsFile, "--timeout", "3s", dir}
		if fg {
			a = append(a, "-f")
		}
		return a
	}
	refused := "9harness mount: " + closed + ": "
	check := func(how, dir, out string) {
		t.Helper()
		if !strings.Contains(out, "mounted 1 of 2 hosts on "+dir+"\n") {
			t.Errorf("%s: no \"mounted 1 of 2 hosts on %s\":\n%s", how, dir, out)
		}
		if !strings.Contains(out, refused) || !strings.Contains(out, "Connection refused") {
			t.Errorf("%s: the host that refused is not named with its error:\n%s", how, out)
		}
		if got := listDir(dir); !slices.Equal(got, []string{"local"}) {
			t.Errorf("%s: %s holds %q, want [local]", how, dir, got)
		}
	}

	m := &fuseMount{t: t, dir: t.TempDir(), out: &syncBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(bin("9harness"), args(m.dir, true)...)
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	must(t, m.cmd.Start())
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(m.cleanup)
	check("mount -f", m.dir, m.out.Await("hosts on "+m.dir+"\n"))
	m.umount()

	bg := t.TempDir()
	cmd := exec.Command(bin("9harness"), args(bg, false)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		if isMounted(t, bg) {
			exec.Command(bin("9harness"), "umount", bg).Run()
		}
	})
	if err != nil {
		t.Fatalf("background mount: %v\n%s", err, out)
	}
	check("mount", bg, string(out))
	if out, err := exec.Command(bin("9harness"), "umount", bg).CombinedOutput(); err != nil {
		t.Errorf("9harness umount %s: %v %s", bg, err, out)
	}
}
