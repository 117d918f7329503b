package test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/sockpath"
)

// The owner always gets in (rule 10): a burst of the owner's own clients
// waits for slots rather than being closed, and a flood of connects by
// another uid, or by the owner's uid inside a sandbox, never locks the
// owner out. The figures (answered, worst latency) are logged; the only
// time the tests assert is the generous bound of one owner command.

const (
	// burstClients is how many `9harness ls /` of the owner start at once.
	burstClients = 1000
	// burstWait bounds one client of the burst: 1,000 Go processes
	// starting together on a 2-CPU machine take tens of seconds of CPU.
	burstWait = 3 * time.Minute
	// floodOwnerLs is how many owner `ls /` run during each flood.
	floodOwnerLs = 12
)

// burstCgroup is a memory cgroup (v1) the burst's clients run in, so that
// a thousand processes cannot take the shared machine's memory whatever
// they do. It is removed when the test ends.
func burstCgroup(t *testing.T, limit int64) string {
	t.Helper()
	dir := fmt.Sprintf("/sys/fs/cgroup/memory/9harness-burst-%d", os.Getpid())
	if err := os.Mkdir(dir, 0o755); err != nil {
		missing(t, "a memory cgroup (v1) for the burst: "+err.Error())
		return ""
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("the burst's cgroup %s is still there", dir)
	})
	must(t, os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644))
	return dir
}

// TestOwnerBurst: 1,000 `9harness ls /` processes of the owner, started
// together (each waits at a barrier, a pipe they all read, and execs the
// client when it closes), against a daemon with the default 64 slots: all
// of them are answered, the 65th and later connections waiting for a slot
// instead of being closed.
//
// Guards rule 10: a burst of the owner's own clients waits for a slot.
func TestOwnerBurst(t *testing.T) {
	u := testUIDs(t)
	requireRoot(t)
	home, sock := sharedHome(t, u.owner)
	d := startAs(t, u.owner, home, sock, "--proc", emptyProc(t))
	waitOwnerLs(t, sock, d)
	cg := burstCgroup(t, 8<<30)
	client := bin("9harness")
	if raceEnabled {
		// The race detector's shadow memory triples a client's; the
		// daemon stays the race build, the burst's clients are plain.
		dir, err := os.MkdirTemp("", "9harness-burst-")
		must(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		must(t, os.Chmod(dir, 0o755)) // the owner's uid runs it
		client = filepath.Join(dir, "9harness")
		if out, err := exec.Command("go", "build", "-o", client, "../cmd/9harness").CombinedOutput(); err != nil {
			t.Fatalf("building a plain client: %v\n%s", err, out)
		}
	}

	gateR, gateW, err := os.Pipe()
	must(t, err)
	defer gateR.Close()
	type result struct {
		err  error
		took time.Duration
		out  string
	}
	results := make([]result, burstClients)
	cmds := make([]*exec.Cmd, burstClients)
	outs := make([]*syncBuffer, burstClients)
	ctx, cancel := context.WithTimeout(context.Background(), burstWait)
	defer cancel()
	// The barrier: sh reads the gate (which only ever gives EOF) and then
	// becomes the client. Starting the processes is serial (fork); their
	// connections are all made after the gate opens.
	script := `read x; exec "$0" -s "$1" ls /`
	for i := range cmds {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script, client, sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.owner), Gid: uint32(u.owner)}}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdin = gateR
		outs[i] = &syncBuffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			gateW.Close()
			for _, c := range cmds[:i] {
				c.Wait()
			}
			t.Fatalf("starting client %d: %v", i, err)
		}
		if cg != "" {
			os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		}
		cmds[i] = cmd
	}
	start := time.Now()
	gateW.Close()
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			results[i] = result{err: err, took: time.Since(start), out: outs[i].String()}
		}()
	}
	wg.Wait()
	ok, worst := 0, time.Duration(0)
	var fails []string
	for i, r := range results {
		worst = max(worst, r.took)
		if r.err == nil && strings.Contains(r.out, "active") {
			ok++
			continue
		}
		if len(fails) < 10 {
			fails = append(fails, fmt.Sprintf("client %d: %v: %s", i, r.err, strings.TrimSpace(r.out)))
		}
	}
	hwm := "?"
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid)); err == nil {
		hwm = strings.TrimSpace(lineAfter(string(b), "VmHWM:"))
	}
	t.Logf("burst of %d owner `ls /`: %d answered, the last after %v; the daemon's %s", burstClients, ok, worst.Round(time.Millisecond), hwm)
	if ok != burstClients {
		t.Errorf("%d of %d owner `ls /` failed; the first:\n%s", burstClients-ok, burstClients, strings.Join(fails, "\n"))
	}
}

// waitOwnerLs waits until the daemon answers the owner.
func waitOwnerLs(t *testing.T, sock string, d *daemon) {
	t.Helper()
	for deadline := time.Now().Add(ownerWait); ; time.Sleep(50 * time.Millisecond) {
		if _, _, err := ownerLsAt(testUIDs(t).owner, sock); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer: %v\n%s", err, d.stderr.String())
		}
	}
}

// ownerLsAt lists / as the owner through the real client, and says how
// long it took.
func ownerLsAt(owner int, sock string) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin("9harness"), "-s", sock, "ls", "/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner), Gid: uint32(owner)}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil && !strings.Contains(string(out), "active") {
		err = fmt.Errorf("no active in %q", out)
	}
	return took, string(out), err
}

// flooder runs TestHelperConnectFlood through wrap (none: directly) as
// uid, and returns a function that stops it and returns how many
// connects it made.
func flooder(t *testing.T, uid int, wrap []string, sock string) func() string {
	t.Helper()
	argv := append(append([]string{}, wrap...), bin("self.test"), "-test.run=^TestHelperConnectFlood$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HELPER_SOCK="+sock, "HELPER_FLOOD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	stdin, err := cmd.StdinPipe()
	must(t, err)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	must(t, cmd.Start())
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			stdin.Close()
			cmd.Wait()
		}
		return out.String()
	}
	t.Cleanup(func() { stop() })
	if got := out.Await("FLOODING"); !strings.Contains(got, "FLOODING") {
		t.Fatalf("the flooder did not start: %s", got)
	}
	return stop
}

// floodConnects and floodWorkers shape the flood: each worker connects
// (non-blocking, as Go's net.Dial does), closes at once, and again.
const floodWorkers = 16

// TestHelperConnectFlood is run as a subprocess, as another uid or in a
// sandbox, by TestOwnerUnderConnectFlood: floodWorkers goroutines connect
// to HELPER_SOCK and close at once, again and again, until standard input
// closes; it prints how many connects succeeded and how many the backlog
// refused (EAGAIN).
func TestHelperConnectFlood(t *testing.T) {
	sock := os.Getenv("HELPER_SOCK")
	if sock == "" || os.Getenv("HELPER_FLOOD") == "" {
		return // not a helper run
	}
	var stop atomic.Bool
	var made, again, other atomic.Int64
	sa := &unix.SockaddrUnix{Name: sock}
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					other.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				switch err := unix.Connect(fd, sa); err {
				case nil:
					made.Add(1)
				case unix.EAGAIN:
					again.Add(1)
				default:
					other.Add(1)
				}
				unix.Close(fd)
			}
		}()
	}
	fmt.Println("FLOODING")
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	wg.Wait()
	fmt.Printf("CONNECTS %d EAGAIN %d OTHER %d\n", made.Load(), again.Load(), other.Load())
}

// TestOwnerUnderConnectFlood: while a peer does nothing but connect and
// close, as fast as it can, the owner's `ls /` is answered 12 times of
// 12: a peer of another uid that no grant admits (the socket is 0666
// because another uid is granted), a granted uid, and the owner's own uid
// inside `unshare --user` (a sandbox, served as a grantee).
//
// Guards rule 10: no peer, nor any flood of connects, can lock the owner
// out.
func TestOwnerUnderConnectFlood(t *testing.T) {
	u := testUIDs(t)
	requireRoot(t)
	unshare := require(t, "unshare")
	for _, tc := range []struct {
		name string
		uid  int
		wrap []string
	}{
		{"refused uid", u.strange, nil},
		{"granted uid", u.friend, nil},
		{"sandboxed owner uid", u.owner, []string{unshare, "--user", "--map-current-user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, sock := sharedHome(t, u.owner)
			d := startAs(t, u.owner, home, sock, "--allow-uid", strconv.Itoa(u.friend), "--proc", emptyProc(t))
			waitOwnerLs(t, sock, d)
			cpu0 := cpuTicks(d.cmd.Process.Pid)
			stop := flooder(t, tc.uid, tc.wrap, sock)
			time.Sleep(time.Second) // the flood is under way
			var lat []time.Duration
			var fails []string
			for i := range floodOwnerLs {
				took, out, err := ownerLsAt(testUIDs(t).owner, sock)
				lat = append(lat, took)
				if err != nil {
					fails = append(fails, fmt.Sprintf("ls %d after %v: %v: %s", i+1, took.Round(time.Millisecond), err, strings.TrimSpace(out)))
				}
			}
			// The connect alone, as the client makes it (this process is
			// refused after it, which does not matter here).
			var conn []time.Duration
			for range floodOwnerLs {
				start := time.Now()
				c, err := sockpath.Dial(sock, 5*time.Second)
				conn = append(conn, time.Since(start))
				if err != nil {
					t.Logf("a connect during the flood: %v", err)
					continue
				}
				c.Close()
			}
			flood := stop()
			cpu := cpuTicks(d.cmd.Process.Pid) - cpu0
			sort.Slice(conn, func(i, j int) bool { return conn[i] < conn[j] })
			t.Logf("connects during the flood: median %v, worst %v", conn[len(conn)/2].Round(time.Microsecond), conn[len(conn)-1].Round(time.Microsecond))
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			t.Logf("%s flooding: %d of %d owner `ls /` answered, median %v, worst %v; flooder: %s",
				tc.name, floodOwnerLs-len(fails), floodOwnerLs, lat[len(lat)/2].Round(time.Millisecond),
				lat[len(lat)-1].Round(time.Millisecond), strings.TrimSpace(lineAfter(flood, "CONNECTS")))
			t.Logf("the daemon's log: %d lines; its CPU time over the flood: %d ticks", strings.Count(d.stderr.String(), "\n"), cpu)
			if os.Getenv("ACCEPT_DUMP") != "" {
				os.WriteFile("/tmp/accept-dump-"+strings.ReplaceAll(tc.name, " ", "-"), []byte(d.stderr.String()), 0o644)
			}
			if len(fails) > 0 {
				t.Errorf("%d of %d owner `ls /` failed during the flood:\n%s", len(fails), floodOwnerLs, strings.Join(fails, "\n"))
			}
			if _, _, err := ownerLsAt(testUIDs(t).owner, sock); err != nil {
				t.Errorf("after the flood: %v", err)
			}
		})
	}
}

// cpuTicks is the user and system time of pid, in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// lineAfter returns the line of out that starts with prefix.
func lineAfter(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
