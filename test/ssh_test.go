package test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/client"
)

// The relay alone: `9harness relay` joins its stdio to a daemon, through
// the project's own CommandConn, exactly as --ssh uses it.

// TestRelayServesAndHalfCloses: 9P spoken over a relay's stdin/stdout
// reaches the daemon; closing the relay's stdin (the client hanging up)
// half-closes the daemon connection, the daemon closes, and the relay
// exits 0 at once, having written nothing on stderr.
func TestRelayServesAndHalfCloses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, fixtureHome(t))
	conn, err := client.StartCommand("relay", []string{bin("9harness"), "relay", "-s", d.sock})
	must(t, err)
	c, err := client.New(conn)
	must(t, err)
	b, err := c.ReadFile("/pid")
	must(t, err)
	if got := strings.TrimSpace(string(b)); got != itoa(d.cmd.Process.Pid) {
		t.Fatalf("/pid over the relay = %q, want %d", got, d.cmd.Process.Pid)
	}
	ents, err := c.ReadDir("/")
	must(t, err)
	if !hasEntry(ents, "claude") {
		t.Fatalf("ls / over the relay lacks claude: %v", ents)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("relay did not exit cleanly on stdin EOF: %v", err)
	}
	took := time.Since(start)
	e := conn.Exited()
	if e == nil || e.Err != nil || e.Stderr != "" {
		t.Fatalf("relay's end: %#v", e)
	}
	// Close kills after 5 s; a relay that needed that did not half-close.
	if took > 3*time.Second {
		t.Fatalf("relay took %v to exit after stdin EOF", took)
	}
	t.Logf("relay exited %v after its stdin closed", took.Round(time.Millisecond))
}

// TestRelayDaemonCloses: when the daemon goes away the relay exits 0
// without waiting for its stdin, which stays open.
func TestRelayDaemonCloses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, fixtureHome(t))
	cmd := exec.Command(bin("9harness"), "relay", "-s", d.sock)
	in, err := cmd.StdinPipe()
	must(t, err)
	defer in.Close()
	out, err := cmd.StdoutPipe()
	must(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	_, err = in.Write(tversion(0xffff, 8192, "9P2000.L"))
	must(t, err)
	buf := make([]byte, 64)
	if _, err := io.ReadAtLeast(out, buf, 7); err != nil || buf[4] != 101 {
		t.Fatalf("no Rversion through the relay: %v %x", err, buf)
	}
	d.stop()
	select {
	case err := <-done:
		if err != nil || stderr.String() != "" {
			t.Fatalf("relay after the daemon closed: %v %q", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("relay still running 5 s after its daemon closed (its stdin is open)")
	}
}

// TestRelayUnreachable: no daemon: one line on stderr naming the socket,
// nothing on stdout (the protocol stream), exit 1.
func TestRelayUnreachable(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "nobody-here.sock")
	cmd := exec.Command(bin("9harness"), "relay", "-s", sock)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("relay to nothing: %v, want exit 1", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("relay wrote %q on stdout, the protocol stream", stdout.String())
	}
	msg := stderr.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, sock) || !strings.HasPrefix(msg, "9harness relay: cannot reach the daemon at ") {
		t.Fatalf("relay's error is not one line naming the socket: %q", msg)
	}
	t.Logf("%s", strings.TrimSpace(msg))
}

// TestRelayRefusedUID: a relay running as a uid the daemon does not serve
// gets nothing, and says so in one line: the relay has no authority of its
// own, the daemon's gate judges its uid as it judges any client's.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestRelayRefusedUID(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir, err := os.MkdirTemp("", "9harness-sock-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "harness.sock")
	d := launch(t, append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(fixtureHome(t))...)...)
	d.sock = sock
	d.waitReady()
	must(t, os.Chmod(sock, 0o666))

	cmd := exec.Command(bin("9harness"), "relay", "-s", sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	in, err := cmd.StdinPipe()
	must(t, err)
	defer in.Close()
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	in.Write(tversion(0xffff, 8192, "9P2000.L"))
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("refused relay: %v, want exit 1; stderr %q", err, stderr.String())
	}
	if stdout.String() != "" {
		t.Fatalf("refused relay wrote %q on stdout", stdout.String())
	}
	if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.Contains(msg, sock) || !strings.Contains(msg, "without answering") {
		t.Fatalf("refused relay's message: %q", msg)
	}
	eventually(t, func() bool { return strings.Contains(d.stderr.String(), "peer_uid=65534") }, "the refusal in the audit log")
}

// TestRelayAndSSHHelp: --help documents relay and the ssh flags; misuse is
// refused with a reason.
func TestRelayAndSSHHelp(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin("9harness"), "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"relay [-s SOCKET]", "--ssh DEST", "--ssh-opt OPTION", "--ssh-cmd CMD", "ssh -T -o BatchMode=yes DEST", "ssh -N -L"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{
		{"--ssh-opt", "Port=22", "ls", "/"},
		{"--ssh", "-oProxyCommand=x", "ls", "/"},
		{"--ssh", "host", "relay"},
		{"relay", "extra"},
	} {
		out, err := exec.Command(bin("9harness"), args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.Count(string(out), "\n") != 1 {
			t.Errorf("9harness %q: %v %q, want one line and exit 2", args, err, out)
		}
	}
}

// sshHost is a real OpenSSH server on 127.0.0.1 serving a throwaway user,
// whose own 9harnessd runs on the fixture home at that user's default
// socket.
type sshHost struct {
	user     string
	uid, gid int
	home     string
	port     int
	key      string // the user's private key
	badKey   string // a key sshd does not accept
	sock     string // the remote daemon's default socket
	daemon   *daemon
	sshd     *exec.Cmd
	sshdLog  *syncBuffer
	fixture  string
}

// TestSSH: --ssh reaches the remote user's daemon through ssh and a remote
// `9harness relay`, and the documented `ssh -L` recipe works, both under
// the daemon's ordinary uid gate: the ssh user's uid is its own, so it is
// served and nothing is refused.
func TestSSH(t *testing.T) {
	t.Parallel()
	h := newSSHHost(t)
	opts := h.opts(h.key)
	// The client's own runtime directory, where it keeps what it learns
	// of hosts (their forwards), is the test's.
	runtimeDir := t.TempDir()
	run9 := func(args ...string) (string, string, error, time.Duration) {
		t.Helper()
		cmd := exec.Command(bin("9harness"), append(opts, args...)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		return stdout.String(), stderr.String(), err, time.Since(start)
	}
	dest := "--ssh=" + h.user + "@127.0.0.1"

	// What the user sees locally on that host: the reference.
	local := func(args ...string) string {
		cmd := exec.Command(bin("9harness"), append([]string{"-s", h.sock}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid)}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("local 9harness %v as %s: %v\n%s", args, h.user, err, out)
		}
		return string(out)
	}
	wantRoot := local("ls", "/")
	if !strings.Contains(wantRoot, "claude/") {
		t.Fatalf("the remote daemon's own listing lacks claude/:\n%s", wantRoot)
	}
	daemonPid := itoa(h.daemon.cmd.Process.Pid)

	t.Run("relay", func(t *testing.T) {
		out, errs, err, took := run9(dest, "ls", "/")
		if err != nil || out != wantRoot {
			t.Fatalf("--ssh ls /: %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
		}
		t.Logf("--ssh ls / in %v", took.Round(time.Millisecond))
		out, errs, err, _ = run9(dest, "cat", "/pid")
		if err != nil || strings.TrimSpace(out) != daemonPid {
			t.Fatalf("--ssh cat /pid = %q (%v %s), want the remote daemon's pid %s", out, err, errs, daemonPid)
		}
		want, err := os.ReadFile(filepath.Join(h.fixture, ".claude", "history.jsonl"))
		must(t, err)
		out, errs, err, _ = run9(dest, "cat", "/claude/history")
		if err != nil || out != string(want) {
			t.Fatalf("--ssh cat /claude/history: %v %s\n%q\nwant %q", err, errs, out, want)
		}
		want, err = os.ReadFile(filepath.Join(h.fixture, bigTranscript))
		must(t, err)
		out, errs, err, took = run9(dest, "cat", "/claude/projects/"+strings.TrimPrefix(bigTranscript, ".claude/projects/"))
		if err != nil || out != string(want) {
			t.Fatalf("--ssh cat of a %d-byte transcript: %v %s: got %d bytes", len(want), err, errs, len(out))
		}
		t.Logf("--ssh cat of %d bytes in %v", len(want), took.Round(time.Millisecond))
		out, errs, err, _ = run9(dest, "ls", "-l", "/claude")
		if err != nil || out != local("ls", "-l", "/claude") {
			t.Fatalf("--ssh ls -l /claude: %v %s\n%s", err, errs, out)
		}
		out, errs, err, _ = run9(dest, "stat", "/claude/history")
		if err != nil || out != local("stat", "/claude/history") {
			t.Fatalf("--ssh stat: %v %s\n%s", err, errs, out)
		}
		// A missing path is the daemon's ENOENT, and the session goes on.
		out, errs, err, _ = run9(dest, "cat", "/nosuch", "/pid")
		if err == nil || !strings.Contains(errs, "no such file or directory") || strings.TrimSpace(out) != daemonPid {
			t.Fatalf("--ssh cat /nosuch /pid: %v %q %q", err, out, errs)
		}
	})

	t.Run("socket", func(t *testing.T) {
		// -s alongside --ssh names the remote socket: passed to the relay.
		out, errs, err, _ := run9("-s", h.sock, dest, "cat", "/pid")
		if err != nil || strings.TrimSpace(out) != daemonPid {
			t.Fatalf("-s %s --ssh cat /pid: %v %q %s", h.sock, err, out, errs)
		}
		missing := filepath.Join(h.home, "no such dir", "it's.sock")
		out, errs, err, _ = run9("-s", missing, dest, "ls", "/")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || out != "" {
			t.Fatalf("--ssh to a missing remote socket: %v %q", err, out)
		}
		if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, missing) || !strings.Contains(errs, "cannot reach the daemon") {
			t.Fatalf("--ssh to a missing remote socket, the message: %q", errs)
		}
		t.Logf("%s", strings.TrimSpace(errs))
	})

	t.Run("ssh-cmd", func(t *testing.T) {
		out, errs, err, _ := run9(dest, "--ssh-cmd", bin("9harness")+" relay", "cat", "/pid")
		if err != nil || strings.TrimSpace(out) != daemonPid {
			t.Fatalf("--ssh-cmd absolute: %v %q %s", err, out, errs)
		}
		out, errs, err, _ = run9(dest, "--ssh-cmd", "/nonexistent/9harness relay", "ls", "/")
		if err == nil || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "/nonexistent/9harness") {
			t.Fatalf("--ssh-cmd missing: %v %q %q", err, out, errs)
		}
		t.Logf("%s", strings.TrimSpace(errs))
		out, errs, err, _ = run9(dest, "--ssh-cmd", "true", "ls", "/")
		if err == nil || out != "" || !strings.Contains(errs, "exited without speaking 9P") {
			t.Fatalf("--ssh-cmd true: %v %q %q", err, out, errs)
		}
	})

	t.Run("ssh-fails", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts []string
			want string
		}{
			{"refused key", h.opts(h.badKey), "Permission denied"},
			// Options given first win, as in ssh: this Port beats h.opts's.
			{"closed port", append([]string{"--ssh-opt", "Port=" + itoa(closedPort(t))}, h.opts(h.key)...), "Connection refused"},
		} {
			cmd := exec.Command(bin("9harness"), append(tc.opts, dest, "ls", "/")...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			errs := stderr.String()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || stdout.Len() != 0 {
				t.Fatalf("%s: %v %q", tc.name, err, stdout.String())
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "9harness: ssh "+h.user+"@127.0.0.1: exit status 255: ") || !strings.Contains(errs, tc.want) {
				t.Fatalf("%s: the error is not one line with ssh's own: %q", tc.name, errs)
			}
			t.Logf("%s: %s", tc.name, strings.TrimSpace(errs))
		}
	})

	t.Run("forward", func(t *testing.T) {
		// The README's recipe: forward the remote socket, use it locally.
		local := filepath.Join(t.TempDir(), "h.sock")
		fwd := exec.Command(require(t, "ssh"), "-N", "-L", local+":"+h.sock,
			"-o", "ExitOnForwardFailure=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
			"-i", h.key, "-p", itoa(h.port), h.user+"@127.0.0.1")
		var fwdErr syncBuffer
		fwd.Stderr = &fwdErr
		must(t, fwd.Start())
		fwdDone := make(chan error, 1)
		go func() { fwdDone <- fwd.Wait() }()
		t.Cleanup(func() {
			fwd.Process.Signal(syscall.SIGTERM)
			select {
			case <-fwdDone:
			case <-time.After(5 * time.Second):
				fwd.Process.Kill()
				<-fwdDone
			}
		})
		deadline := time.Now().Add(15 * time.Second)
		for {
			if fi, err := os.Lstat(local); err == nil && fi.Mode()&os.ModeSocket != 0 {
				break
			}
			select {
			case err := <-fwdDone:
				fwdDone <- err // for the cleanup, which waits for it too
				t.Fatalf("ssh -N -L exited: %v\n%s", err, fwdErr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("ssh -L made no socket at %s\n%s", local, fwdErr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		out, err := exec.Command(bin("9harness"), "-s", local, "ls", "/").CombinedOutput()
		if err != nil || string(out) != wantRoot {
			t.Fatalf("9harness -s %s ls / through ssh -L: %v\n%s", local, err, out)
		}
		out, err = exec.Command(bin("9harness"), "-s", local, "cat", "/pid").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != daemonPid {
			t.Fatalf("cat /pid through ssh -L = %q (%v), want %s", out, err, daemonPid)
		}
	})

	// Every relay and every sshd session for the user ended with its
	// client: only the daemon is left running as the user.
	eventually(t, func() bool { return len(h.userProcs(h.daemon.cmd.Process.Pid)) == 0 }, "the user's relays and ssh sessions to exit")

	// The gate judged the relay's uid, the user's: served, never refused.
	if log := h.daemon.stderr.String(); strings.Contains(log, audit.IDConnRefused) || strings.Contains(log, "refused") {
		t.Fatalf("the remote daemon refused a connection:\n%s", log)
	}
}

const bigTranscript = ".claude/projects/-home-goblin-src-x/big-relay.jsonl"

// opts are the client flags that make ssh talk to this sshd with key.
func (h *sshHost) opts(key string) []string {
	var a []string
	for _, o := range []string{
		"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "GlobalKnownHostsFile=/dev/null",
		"LogLevel=ERROR", "IdentitiesOnly=yes", "IdentityFile=" + key, "Port=" + itoa(h.port),
	} {
		a = append(a, "--ssh-opt", o)
	}
	return a
}

// sshHostOption changes how newSSHHost sets up its host.
type sshHostOption func(*sshHostConfig)

type sshHostConfig struct {
	daemonArgs []string // more flags for the user's daemon
}

// withDaemonArgs gives the user's daemon more flags (--allow-move ...).
func withDaemonArgs(args ...string) sshHostOption {
	return func(c *sshHostConfig) { c.daemonArgs = append(c.daemonArgs, args...) }
}

// newSSHHost makes the user, its keys, its daemon and an sshd for it; all
// of it is undone when the test ends.
func newSSHHost(t *testing.T, options ...sshHostOption) *sshHost {
	t.Helper()
	var conf sshHostConfig
	for _, o := range options {
		o(&conf)
	}
	requireRoot(t)
	sshd := require(t, "sshd")
	require(t, "ssh")
	keygen := require(t, "ssh-keygen")
	useradd := require(t, "useradd")
	userdel := require(t, "userdel")

	base, err := os.MkdirTemp("", "9harness-ssh-")
	must(t, err)
	t.Cleanup(func() {
		if base != "" && strings.HasPrefix(base, os.TempDir()+"/9harness-ssh-") {
			os.RemoveAll(base)
		}
	})
	must(t, os.Chmod(base, 0o755))
	h := &sshHost{user: fmt.Sprintf("h9test%06d", rand.IntN(1_000_000)), home: filepath.Join(base, "home")}

	// The privilege-separation directory sshd insists on (Debian makes it
	// when its service starts; nothing has started one here).
	usePrivsepDir(t)

	// The user: password "*" is no password, but not a locked account,
	// which sshd without PAM would refuse.
	if out, err := userTool(useradd, "-M", "-d", h.home, "-s", "/bin/sh", "-p", "*", "-U", h.user); err != nil {
		t.Fatalf("useradd %s: %v\n%s", h.user, err, out)
	}
	t.Cleanup(func() { h.remove(t, userdel) })
	u, err := user.Lookup(h.user)
	must(t, err)
	h.uid, _ = strconv.Atoi(u.Uid)
	h.gid, _ = strconv.Atoi(u.Gid)
	run := filepath.Join(h.home, "run")
	must(t, os.MkdirAll(run, 0o700))
	h.chown(t, h.home)
	must(t, os.Chmod(h.home, 0o700))

	// The fixture home, readable by the user.
	h.fixture = fixtureHome(t)
	// A transcript of several full 9P messages, so reads span many
	// frames through the pipes.
	var big bytes.Buffer
	for i := 0; big.Len() < 5<<20; i++ {
		fmt.Fprintf(&big, "{\"type\":\"user\",\"n\":%d,\"text\":%q}\n", i, strings.Repeat("relay ", i%97))
	}
	must(t, os.WriteFile(filepath.Join(h.fixture, bigTranscript), big.Bytes(), 0o644))
	h.chown(t, h.fixture)
	must(t, os.Chmod(filepath.Dir(h.fixture), 0o711))

	// The user's daemon, at the user's default socket.
	h.sock = filepath.Join(run, "9p", "harness")
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1), sock: h.sock}
	d.cmd = exec.Command(bin("9harnessd"), append(append([]string{"--audit", "stderr"}, conf.daemonArgs...), rootArgs(h.fixture)...)...)
	d.cmd.Env = []string{"HOME=" + h.home, "XDG_RUNTIME_DIR=" + run, "PATH=/usr/bin:/bin", "USER=" + h.user}
	d.cmd.Dir = h.home
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid)}}
	d.cmd.Stderr, d.cmd.Stdout = d.stderr, d.stderr
	must(t, d.cmd.Start())
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	h.daemon = d
	// Ready when it says so: a probe from here (root) would be a refused
	// peer in its audit log.
	eventually15(t, func() bool {
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("the user's daemon exited: %v\n%s", err, d.stderr.String())
		default:
		}
		return strings.Contains(d.stderr.String(), "9harness -s "+h.sock+" ls /")
	}, "the user's daemon to listen")

	// Keys, and sshd's configuration.
	keys := filepath.Join(base, "ssh")
	must(t, os.Mkdir(keys, 0o755))
	hostKey := filepath.Join(keys, "host_ed25519")
	h.key = filepath.Join(keys, "id_ed25519")
	h.badKey = filepath.Join(keys, "other_ed25519")
	for _, k := range []string{hostKey, h.key, h.badKey} {
		if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", filepath.Base(k), "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(h.key + ".pub")
	must(t, err)
	authorized := filepath.Join(keys, "authorized_keys")
	must(t, os.WriteFile(authorized, pub, 0o644))

	for attempt := 0; ; attempt++ {
		h.port = freePort(t)
		conf := filepath.Join(keys, "sshd_config")
		must(t, os.WriteFile(conf, []byte(strings.Join([]string{
			"Port " + itoa(h.port),
			"ListenAddress 127.0.0.1",
			"HostKey " + hostKey,
			"PidFile " + filepath.Join(keys, "sshd.pid"),
			"AuthorizedKeysFile " + authorized,
			"UsePAM no",
			"StrictModes no",
			"PubkeyAuthentication yes",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PermitRootLogin no",
			"AllowUsers " + h.user,
			"AllowStreamLocalForwarding yes",
			"X11Forwarding no",
			"PrintMotd no",
			"PrintLastLog no",
			"Subsystem sftp internal-sftp",
			// The remote side of --ssh: 9harness on the PATH, and the
			// runtime directory the user's daemon posts its socket in.
			"SetEnv PATH=" + bins + ":/usr/bin:/bin XDG_RUNTIME_DIR=" + run,
			"LogLevel VERBOSE",
		}, "\n")+"\n"), 0o644))
		h.sshdLog = &syncBuffer{}
		h.sshd = exec.Command(sshd, "-D", "-e", "-f", conf)
		h.sshd.Stderr = h.sshdLog
		must(t, h.sshd.Start())
		done := make(chan error, 1)
		go func() { done <- h.sshd.Wait() }()
		listening := "Server listening on 127.0.0.1 port " + itoa(h.port)
		deadline := time.Now().Add(15 * time.Second)
		var exited error
		for !strings.Contains(h.sshdLog.String(), listening) {
			select {
			case exited = <-done:
			case <-time.After(20 * time.Millisecond):
			}
			if exited != nil || time.Now().After(deadline) {
				break
			}
		}
		if exited == nil && strings.Contains(h.sshdLog.String(), listening) {
			sshdCmd := h.sshd
			t.Cleanup(func() {
				sshdCmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					sshdCmd.Process.Kill()
					<-done
					t.Errorf("sshd did not stop on SIGTERM")
				}
				if t.Failed() {
					t.Logf("sshd's log:\n%s", h.sshdLog.String())
				}
			})
			return h
		}
		if exited == nil {
			h.sshd.Process.Kill()
			<-done
		}
		// Someone took the port between the probe and sshd's bind.
		if attempt < 3 && strings.Contains(h.sshdLog.String(), "Address already in use") {
			continue
		}
		t.Fatalf("sshd did not start: %v\n%s", exited, h.sshdLog.String())
	}
}

// userMu serializes this process's useradd and userdel: each locks
// /etc/passwd and fails at once, rather than waiting, while another holds
// it.
var userMu sync.Mutex

// userTool runs useradd or userdel, again while it fails because another
// program (another checkout's test) holds the passwd or group file's lock.
func userTool(tool string, args ...string) ([]byte, error) {
	userMu.Lock()
	defer userMu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			return out, err
		}
	}
}

// privsep counts the tests of this process that need /run/sshd, so that
// the one that made it removes it only once the last of them ended.
var privsep struct {
	sync.Mutex
	users int
	made  bool
}

func usePrivsepDir(t *testing.T) {
	privsep.Lock()
	defer privsep.Unlock()
	if privsep.users == 0 {
		if _, err := os.Stat("/run/sshd"); os.IsNotExist(err) {
			must(t, os.MkdirAll("/run/sshd", 0o755))
			privsep.made = true
		}
	}
	privsep.users++
	t.Cleanup(func() {
		privsep.Lock()
		defer privsep.Unlock()
		if privsep.users--; privsep.users == 0 && privsep.made {
			os.Remove("/run/sshd")
			privsep.made = false
		}
	})
}

// remove deletes the user once nothing runs as it any more.
func (h *sshHost) remove(t *testing.T, userdel string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := h.userProcs(0)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Processes of a uid this test created are this test's own.
			t.Errorf("processes of %s outlived the test: %v", h.user, left)
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.user == "" || !strings.HasPrefix(h.user, "h9test") {
		return
	}
	if out, err := userTool(userdel, "-r", h.user); err != nil {
		t.Errorf("userdel -r %s: %v\n%s", h.user, err, out)
	}
	if _, err := user.Lookup(h.user); err == nil {
		t.Errorf("user %s still exists", h.user)
	}
}

// chown gives dir and everything beneath it to the user.
func (h *sshHost) chown(t *testing.T, dir string) {
	t.Helper()
	if dir == "" || dir == "/" || h.uid == 0 {
		t.Fatalf("refusing to chown %q to uid %d", dir, h.uid)
	}
	must(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, h.uid, h.gid)
	}))
}

// userProcs lists the pids whose real uid is the user's, except except.
func (h *sshHost) userProcs(except int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "Uid:" {
				if f[1] == itoa(h.uid) {
					pids = append(pids, pid)
				}
				break
			}
		}
		f.Close()
	}
	return pids
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now, for a
// server the test starts there (another process may take it first: the
// caller retries).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// closedPort is a TCP port on 127.0.0.1 that refuses connections until the
// test ends: a socket bound to it that never listens holds it, so no other
// process (another test, another checkout's) can start listening there
// meanwhile, and a connect gets ECONNREFUSED.
func closedPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	must(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	must(t, err)
	return sa.(*syscall.SockaddrInet4).Port
}

func eventually15(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasEntry(ents []client.Entry, name string) bool {
	for _, e := range ents {
		if e.Name == name {
			return true
		}
	}
	return false
}
