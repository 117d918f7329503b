package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Uids of the client-trust tests (no passwd entries needed).
const (
	victimUID  = 4121 // runs the client
	squatUID   = 4122 // got there first
	trustDelay = 300 * time.Millisecond
)

// squatter is a listener run as another uid by the test binary itself
// (TestHelperSquatter), counting the connections and bytes it is sent.
type squatter struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startSquatter listens on sock as uid, first creating mkdir (mode 0755) if
// it is not "", and makes the socket connectable by anyone.
func startSquatter(t *testing.T, uid int, sock, mkdir string) *squatter {
	t.Helper()
	cmd := exec.Command(bin("self.test"), "-test.run=^TestHelperSquatter$")
	// HELPER_SOCK tells TestMain this is a helper run (no binaries built);
	// -test.run keeps the other helpers that read it from running.
	cmd.Env = []string{"HELPER_SOCK=" + sock, "HELPER_SQUAT_SOCK=" + sock, "HELPER_SQUAT_MKDIR=" + mkdir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	must(t, err)
	outp, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	s := &squatter{cmd: cmd, stdin: in, out: bufio.NewReader(outp)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := s.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "READY" {
		t.Fatalf("squatter did not start: %q %v", line, err)
	}
	return s
}

// received ends the squatter and returns what it was sent.
func (s *squatter) received(t *testing.T) (conns, bytes int) {
	t.Helper()
	time.Sleep(trustDelay) // let a connection made at the end be counted
	s.stdin.Close()
	rest, _ := io.ReadAll(s.out)
	s.cmd.Wait()
	m := regexp.MustCompile(`CONNS (\d+) BYTES (\d+)`).FindStringSubmatch(string(rest))
	if m == nil {
		t.Fatalf("squatter said %q", rest)
	}
	conns, _ = strconv.Atoi(m[1])
	bytes, _ = strconv.Atoi(m[2])
	return conns, bytes
}

// TestHelperSquatter is the squatter's body, when run as a helper.
func TestHelperSquatter(t *testing.T) {
	sock := os.Getenv("HELPER_SQUAT_SOCK")
	if sock == "" {
		return // not a helper run
	}
	if d := os.Getenv("HELPER_SQUAT_MKDIR"); d != "" {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o777)
	var conns, total atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				// It never answers: a client it was allowed to reach
				// would wait for an Rversion forever.
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					total.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	fmt.Println("READY")
	io.Copy(io.Discard, os.Stdin)
	l.Close()
	fmt.Printf("CONNS %d BYTES %d\n", conns.Load(), total.Load())
}

// runAsVictim runs the 9harness client as victimUID with env.
func runAsVictim(t *testing.T, env []string, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin("9harness"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: victimUID, Gid: victimUID}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// trustBase is a scratch temporary directory, sticky and world-writable
// like /tmp, so that the default socket directory /tmp/9p-<uid> can be
// squatted there without touching the machine's /tmp.
func trustBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "9harness-trust-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, os.ModeSticky|0o777))
	return base
}

// TestClientRefusesSquattedDir: with no XDG_RUNTIME_DIR the client's
// default socket is $TMPDIR/9p-<uid>/harness. Another uid created that
// directory first and listens there. The client (ls, and the relay ssh
// runs) refuses with a sentence naming the path and the squatter's uid, and
// the squatter receives no connection and 0 bytes. The control, the same
// listener run by the user in the user's own directory, is sent bytes: the
// squatter would have seen them.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestClientRefusesSquattedDir(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := trustBase(t)
	dir := filepath.Join(base, "9p-"+strconv.Itoa(victimUID))
	sock := filepath.Join(dir, "harness")
	env := []string{"TMPDIR=" + base}

	sq := startSquatter(t, squatUID, sock, dir)
	out, err := runAsVictim(t, env, "", "ls", "/")
	want := fmt.Sprintf("9harness: refusing %s: its directory is owned by uid %d, not you (uid %d); another user may have created it", sock, squatUID, victimUID)
	if err == nil || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("ls through a squatted directory: %v\n%s\nwant the line %q", err, out, want)
	}
	rout, rerr := runAsVictim(t, env, "some 9P the squatter must not see", "relay")
	if rerr == nil || !strings.Contains(rout, "9harness relay: refusing "+sock+": its directory is owned by uid "+strconv.Itoa(squatUID)) {
		t.Errorf("relay through a squatted directory: %v\n%s", rerr, rout)
	}
	if conns, n := sq.received(t); conns != 0 || n != 0 {
		t.Errorf("the squatter got %d connections and %d bytes, want 0", conns, n)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))

	// Control: the same listener, the user's own, in the user's own
	// directory, is spoken to (the client sends its Tversion).
	must(t, os.RemoveAll(dir))
	own := startSquatter(t, victimUID, sock, dir)
	runAsVictim(t, env, "", "ls", "/")
	if conns, n := own.received(t); conns == 0 || n == 0 {
		t.Errorf("the user's own listener got %d connections and %d bytes: the count above proves nothing", conns, n)
	}
}

// TestClientRefusesForeignServer: a socket in a directory the user owns
// (mode 0700), served by another uid, is refused after connect(2) and
// before a byte is written, by the server's SO_PEERCRED uid. A socket in a
// directory the user owns but its group may write is refused before
// connect, and so is another uid's socket in a sticky directory like /tmp.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestClientRefusesForeignServer(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := trustBase(t)
	// The squatter listens in its own directory; the socket is then moved
	// into the victim's (how it got there does not matter to the client).
	sqDir := filepath.Join(base, "squat")
	sq := startSquatter(t, squatUID, filepath.Join(sqDir, "s"), sqDir)
	mine := filepath.Join(base, "mine")
	must(t, os.Mkdir(mine, 0o700))
	must(t, os.Chown(mine, victimUID, victimUID))
	sock := filepath.Join(mine, "harness.sock")
	must(t, os.Rename(filepath.Join(sqDir, "s"), sock))

	out, err := runAsVictim(t, nil, "", "-s", sock, "cat", "/pid")
	want := fmt.Sprintf("9harness: refusing %s: it is served by uid %d", sock, squatUID)
	if err == nil || !strings.HasPrefix(out, want) || !strings.Contains(out, fmt.Sprintf("not you (uid %d)", victimUID)) {
		t.Errorf("a socket served by another uid: %v\n%s\nwant %q...", err, out, want)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
	rout, rerr := runAsVictim(t, nil, "some 9P", "relay", "-s", sock)
	if rerr == nil || !strings.Contains(rout, "refusing "+sock+": it is served by uid "+strconv.Itoa(squatUID)) {
		t.Errorf("relay to a socket served by another uid: %v\n%s", rerr, rout)
	}

	// The same socket, in a directory the user owns whose group may write.
	shared := filepath.Join(base, "shared")
	must(t, os.Mkdir(shared, 0o770))
	must(t, os.Chmod(shared, 0o770))
	must(t, os.Chown(shared, victimUID, victimUID))
	sock2 := filepath.Join(shared, "harness.sock")
	must(t, os.Rename(sock, sock2))
	out, err = runAsVictim(t, nil, "", "-s", sock2, "ls", "/")
	if err == nil || !strings.Contains(out, "refusing "+sock2+": its directory "+shared+" (owned by uid "+strconv.Itoa(victimUID)+") is writable by its group") {
		t.Errorf("a socket in a group-writable directory: %v\n%s", err, out)
	}
	// The peer check refused after connect: connections, but not a byte.
	if _, n := sq.received(t); n != 0 {
		t.Errorf("the foreign server got %d bytes, want 0", n)
	}

	// The README's forward recipe puts a socket in /tmp (sticky, anyone
	// may write): a socket another uid made there first, under the name
	// the user meant to forward to, is refused before connect.
	tmpSock := filepath.Join(base, "build1.sock")
	sq2 := startSquatter(t, squatUID, tmpSock, "")
	out, err = runAsVictim(t, nil, "", "-s", tmpSock, "ls", "/")
	if err == nil || !strings.Contains(out, fmt.Sprintf("refusing %s: it is owned by uid %d, not you (uid %d)", tmpSock, squatUID, victimUID)) {
		t.Errorf("a squatter's socket in a sticky directory: %v\n%s", err, out)
	}
	if conns, n := sq2.received(t); conns != 0 || n != 0 {
		t.Errorf("the squatter in the sticky directory got %d connections and %d bytes, want 0", conns, n)
	}
}

// TestClientDeniedHint: a client of another uid pointed at a daemon's
// socket (mode 0600) is told whose socket it is and what to do, not to
// start a daemon that is running; behind a directory it may not search, it
// is told that instead.
func TestClientDeniedHint(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := trustBase(t)
	dir := filepath.Join(base, "rootd")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "harness.sock")
	d := launch(t, append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(fixtureHome(t))...)...)
	d.sock = sock
	d.waitReady()

	out, err := runAsVictim(t, []string{"HARNESS_SOCKET=" + sock}, "", "ls", "/")
	want := fmt.Sprintf("9harness: cannot reach the daemon at %s: permission denied: it is the socket of uid 0's daemon (mode 0600). Start your own", sock)
	if err == nil || !strings.HasPrefix(out, want) || !strings.Contains(out, fmt.Sprintf("grant uid %d (9harnessd --allow-uid)", victimUID)) || strings.Count(out, "\n") != 1 {
		t.Errorf("another uid's socket: %v\n%s\nwant %q...", err, out, want)
	}
	if strings.Contains(out, "start it with") {
		t.Errorf("told to start a daemon that runs: %s", out)
	}

	must(t, os.Chmod(dir, 0o700))
	out, err = runAsVictim(t, []string{"HARNESS_SOCKET=" + sock}, "", "ls", "/")
	if err == nil || !strings.Contains(out, "permission denied: a directory on its path keeps this uid out") {
		t.Errorf("a socket behind a closed directory: %v\n%s", err, out)
	}
}
