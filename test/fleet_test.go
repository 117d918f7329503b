package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fleetHost is one host of the fleet test: its name as the hosts file
// writes it, and the pid of the fake agent its user runs.
type fleetHost struct {
	*sshHost
	name  string
	agent *fakeAgent
}

// startFakeAs starts a fake Claude as the host's user on its fixture home,
// so that its daemon (which serves its own uid's agents) lists it. env
// adds to its environment, or replaces a variable of it.
func startFakeAs(t *testing.T, h *sshHost, env ...string) *fakeAgent {
	t.Helper()
	cmd := exec.Command(bin("claude"))
	cmd.Dir = h.fixture
	cmd.Env = append([]string{"HOME=" + h.fixture, "PATH=/usr/bin:/bin", "FAKE_SESSION=" + fmt.Sprintf("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e%06d", h.uid%1_000_000)}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid)}}
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	a := &fakeAgent{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// silentPort is a TCP port on 127.0.0.1 that accepts connections and never
// says a word (a host whose sshd hangs), until the test ends.
func silentPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// hostsLine is the hosts file's line for a host on 127.0.0.1:port that
// the key logs in to.
func hostsLine(name, key string) string {
	opts := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "GlobalKnownHostsFile=/dev/null",
		"LogLevel=ERROR", "IdentitiesOnly=yes", "IdentityFile=" + key}
	line := name
	for _, o := range opts {
		line += " ssh-opt=" + o
	}
	return line
}

// TestFleetPs: ps --all over three live hosts (three users, each with
// their own sshd and daemon on loopback), this machine, one host whose
// port is closed and one that accepts TCP and never speaks: every live
// host's agent is listed under its HOST, sorted by host; both dead hosts
// are named on stderr, one line each; it returns after about --timeout
// (the silent host is waited for, and no longer); and it exits partial
// (3). --json has the host in every row, and -q prints HOST:HARNESS/PID.
// A move through HOST:HARNESS/PID is decided by that host's daemon: one
// started without --allow-move refuses it, and the reason reaches the
// client; an agent of another host is not on that one.
func TestFleetPs(t *testing.T) {
	t.Parallel()
	// The three hosts' setups run in turn: each makes a user, keys, a
	// daemon and an sshd, and they share the 2 CPUs with everyone.
	var hosts []*fleetHost
	for range 3 {
		h := newSSHHost(t)
		hosts = append(hosts, &fleetHost{sshHost: h, name: h.user + "@127.0.0.1:" + itoa(h.port), agent: startFakeAs(t, h)})
	}
	local := fixtureHome(t)
	localAgent := startFake(t, "claude", local, local, "FAKE_SESSION=6f7a8b9c-0d1e-4f2a-8b3c-4d5e6f7a8b9c")
	waitRegistry(t, local, localAgent.pid())
	d := startDaemon(t, local)

	closed := "nobody@127.0.0.1:" + itoa(closedPort(t))
	silent := "silent@127.0.0.1:" + itoa(silentPort(t))
	var lines []string
	lines = append(lines, "# the fleet of TestFleetPs")
	for _, h := range hosts {
		lines = append(lines, hostsLine(h.name, h.key))
	}
	lines = append(lines, hostsLine(closed, hosts[0].key), hostsLine(silent, hosts[0].key)+"  # never speaks")
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

	env := []string{"HOME=" + local}
	// Long enough for a live host to answer on a machine running two
	// make tests at once; the silent host costs each ps that much.
	const timeout = 6 * time.Second
	ps := func(args ...string) (string, string, int, time.Duration) {
		start := time.Now()
		out, errs, code := run9harness(t, env, append([]string{"-s", d.sock, "ps", "--all", "--hosts", hostsFile, "--timeout", timeout.String()}, args...)...)
		return out, errs, code, time.Since(start)
	}
	want := map[string]int{"-": localAgent.pid()}
	for _, h := range hosts {
		want[h.name] = h.agent.pid()
	}

	// The fakes take a moment to register and their daemons to see them.
	var out, errs string
	var code int
	var took time.Duration
	eventually15(t, func() bool {
		out, errs, code, took = ps("--json")
		var rows []map[string]any
		if json.Unmarshal([]byte(out), &rows) != nil {
			return false
		}
		found := 0
		for _, r := range rows {
			if pid, ok := r["pid"].(float64); ok && want[fmt.Sprint(r["host"])] == int(pid) {
				found++
			}
		}
		return found == len(want)
	}, "every live host's agent in ps --all --json")

	t.Run("json", func(t *testing.T) {
		var rows []map[string]any
		must(t, json.Unmarshal([]byte(out), &rows))
		for _, r := range rows {
			h, ok := r["host"].(string)
			if _, known := want[h]; !ok || !known {
				t.Errorf("a --json row without a live host's name: %v", r)
			}
		}
		if code != 3 {
			t.Errorf("ps --all --json with two dead hosts: exit %d, want 3 (partial)\n%s", code, errs)
		}
	})

	t.Run("table", func(t *testing.T) {
		out, errs, code, took = ps()
		if code != 3 {
			t.Errorf("exit %d, want 3 (partial); stderr:\n%s", code, errs)
		}
		// Returns after about the timeout: the silent host is waited
		// for, and not for ever (a generous bound for a loaded machine).
		if took < timeout-500*time.Millisecond || took > timeout+10*time.Second {
			t.Errorf("ps --all took %v with --timeout %v", took, timeout)
		}
		t.Logf("ps --all over %d hosts (2 dead) in %v:\n%s%s", len(want)+2, took.Round(time.Millisecond), out, errs)
		errLines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		if len(errLines) != 2 || !strings.Contains(errLines[0]+errLines[1], closed+": ") || !strings.Contains(errLines[0]+errLines[1], silent+": ") {
			t.Errorf("stderr should name both dead hosts, one line each:\n%s", errs)
		}
		rows := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if f := strings.Fields(rows[0]); len(f) < 3 || f[0] != "HOST" || f[1] != "HARNESS" || f[2] != "PID" {
			t.Fatalf("header %q: want HOST first, then HARNESS and PID", rows[0])
		}
		var order []string
		for h, pid := range want {
			var row []string
			for _, r := range rows[1:] {
				if f := strings.Fields(r); len(f) > 2 && f[0] == h && f[2] == itoa(pid) {
					row = f
				}
			}
			if row == nil || row[1] != "claude" {
				t.Errorf("no row for %s's agent %d:\n%s", h, pid, out)
			}
		}
		for _, r := range rows[1:] {
			order = append(order, strings.Fields(r)[0])
		}
		if !slices.IsSorted(order) {
			t.Errorf("rows not sorted by host: %q", order)
		}
	})

	t.Run("quiet", func(t *testing.T) {
		out, _, _, _ := ps("-q")
		for h, pid := range want {
			name := "claude/" + itoa(pid)
			if h != "-" {
				name = h + ":" + name
			}
			if !slices.Contains(strings.Split(out, "\n"), name) {
				t.Errorf("ps -q --all lacks %s:\n%s", name, out)
			}
		}
	})

	// --detached with --all: every host's agents nobody can answer, and
	// only those, each under its host. A remote fake runs as its host's
	// user with no process of that user holding a terminal: detached.
	t.Run("detached", func(t *testing.T) {
		// Other tests' agents of this uid come and go between the two
		// calls: only this test's agents are compared.
		mine := map[string]bool{}
		for h, pid := range want {
			mine[fmt.Sprint(h, ":", float64(pid))] = true
		}
		key := func(r map[string]any) string { return fmt.Sprint(r["host"], ":", r["pid"]) }
		// Under load a live host can miss --timeout: a listing is taken
		// again until it holds every live host's agent (each of them is
		// detached: no process of its user holds a terminal).
		listing := func(args ...string) (rows []map[string]any, errs string, code int) {
			waitFor(t, time.Minute, func() bool {
				var out string
				out, errs, code, _ = ps(args...)
				rows = nil
				if json.Unmarshal([]byte(out), &rows) != nil {
					return false
				}
				n := 0
				for _, r := range rows {
					if mine[key(r)] {
						n++
					}
				}
				return n == len(mine)
			}, "every live host's agent in ps --all "+strings.Join(args, " "))
			return rows, errs, code
		}
		allRows, _, _ := listing("--json")
		detRows, errs, code := listing("--detached", "--json")
		if code != 3 {
			t.Errorf("ps --all --detached with two dead hosts: exit %d, want 3 (partial)\n%s", code, errs)
		}
		var want, got []string
		for _, r := range allRows {
			if r["reach"] == "detached" && mine[key(r)] {
				want = append(want, key(r))
			}
		}
		for _, r := range detRows {
			if r["reach"] != "detached" {
				t.Errorf("ps --all --detached lists a row whose reach is %v: %v", r["reach"], r)
			}
			if mine[key(r)] {
				got = append(got, key(r))
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("ps --all --detached lists %q; the detached rows of ps --all are %q", got, want)
		}
		for _, h := range hosts {
			if !slices.Contains(got, fmt.Sprint(h.name, ":", float64(h.agent.pid()))) {
				t.Errorf("ps --all --detached lacks %s's agent %d: %q", h.name, h.agent.pid(), got)
			}
		}
		q, _, _, _ := ps("--detached", "-q")
		if !strings.Contains(q, hosts[0].name+":claude/"+itoa(hosts[0].agent.pid())+"\n") {
			t.Errorf("ps --all --detached -q lacks %s:claude/%d:\n%s", hosts[0].name, hosts[0].agent.pid(), q)
		}
	})

	// A host whose line asks for a shared connection keeps one master
	// warm: the command still returns at once (the master, gone to the
	// background, holds none of its pipes), and the next call uses it.
	t.Run("controlmaster", func(t *testing.T) {
		h := hosts[0]
		cm := filepath.Join(t.TempDir(), "cm")
		file := filepath.Join(t.TempDir(), "hosts")
		line := hostsLine(h.name, h.key) + " ssh-opt=ControlMaster=auto ssh-opt=ControlPath=" + cm + " ssh-opt=ControlPersist=30"
		must(t, os.WriteFile(file, []byte(line+"\n"), 0o644))
		t.Cleanup(func() {
			exec.Command("ssh", "-o", "ControlPath="+cm, "-O", "exit", "x").Run()
		})
		for i := range 2 {
			start := time.Now()
			out, errs, code := run9harness(t, env, "ps", "-q", "--hosts", file)
			took := time.Since(start)
			if code != 0 || !strings.Contains(out, h.name+":claude/"+itoa(h.agent.pid())) {
				t.Fatalf("ps with ControlMaster=auto, call %d: exit %d\n%s%s", i, code, out, errs)
			}
			// The master persists 30 s: a call that waited for it
			// would take that long.
			if took > 15*time.Second {
				t.Errorf("ps with ControlMaster=auto, call %d, took %v: it waited for the master", i, took)
			}
			if _, err := os.Stat(cm); err != nil {
				t.Errorf("no master socket after call %d: %v", i, err)
			}
			t.Logf("call %d with ControlMaster=auto: %v", i, took.Round(time.Millisecond))
		}
	})

	// --watch redraws the whole fleet, the dead hosts named under the
	// title; Ctrl-C ends it with status 0.
	t.Run("watch", func(t *testing.T) {
		tm := newPsTmux(t)
		tm.run("new-session", "-d", "-s", "w", "-x", "200", "-y", "1000",
			"/usr/bin/env", "-i", "HOME="+local, "PATH=/usr/bin:/bin", "PS1=fleet$ ", "TERM=xterm-256color", "/bin/sh")
		eventually(t, func() bool { return contains(tm.screen("w"), "fleet$") }, "the shell's prompt")
		tm.run("send-keys", "-t", "w", "-l", bin("9harness")+" -s "+d.sock+" ps --watch --all --hosts "+hostsFile+" --timeout 2s")
		tm.run("send-keys", "-t", "w", "Enter")
		var screen string
		eventually15(t, func() bool {
			screen = strings.Join(tm.screen("w"), "\n")
			if !strings.Contains(screen, "Every 1s: 9harness ps") || !strings.Contains(screen, "\nHOST ") ||
				!strings.Contains(screen, closed+": ") || !strings.Contains(screen, silent+": ") {
				return false
			}
			for h, pid := range want {
				if !strings.Contains(screen, "\n"+h+" ") || !strings.Contains(screen, " "+itoa(pid)+" ") {
					return false
				}
			}
			return true
		}, "a frame with every live host's agent and both dead hosts named")
		tm.run("send-keys", "-t", "w", "C-c")
		tm.run("send-keys", "-t", "w", "-l", "echo rc=$?")
		tm.run("send-keys", "-t", "w", "Enter")
		start := time.Now()
		// The echo, typed while ps ran, may share the prompt's line.
		for !strings.Contains(strings.Join(tm.screen("w"), "\n"), "rc=0") {
			if time.Since(start) > 20*time.Second {
				t.Fatalf("no exit status 0 within 20 s of Ctrl-C; the screen:\n%s", strings.Join(tm.screen("w"), "\n"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("Ctrl-C to the prompt: %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("move", func(t *testing.T) {
		h := hosts[1]
		// The agent is there, the daemon (no --allow-move) refuses: its
		// reason comes back, nothing is changed.
		out, errs, code := run9harness(t, env, "move", "--hosts", hostsFile, h.name+":claude/"+itoa(h.agent.pid()), "rescued")
		if code != 1 || !strings.Contains(errs, "moves are off") {
			t.Errorf("move %s:claude/%d on a daemon without --allow-move: exit %d\n%s%s", h.name, h.agent.pid(), code, out, errs)
		}
		// Another host's agent is not on this host: the move went there.
		other := hosts[2].agent.pid()
		out, errs, code = run9harness(t, env, "move", "--hosts", hostsFile, h.name+":claude/"+itoa(other), "rescued")
		if code != 1 || !strings.Contains(errs, "no such agent: "+h.name+":claude/"+itoa(other)) {
			t.Errorf("move of another host's agent through %s: exit %d\n%s%s", h.name, code, out, errs)
		}
		select {
		case <-h.agent.done:
			t.Errorf("the refused move stopped the agent")
		default:
		}
		// A dead host is one line naming it.
		_, errs, code = run9harness(t, env, "move", "--hosts", hostsFile, closed+":claude/1", "x")
		if code != 1 || !strings.HasPrefix(errs, "9harness move: "+closed+": ") {
			t.Errorf("move through a closed port: exit %d\n%s", code, errs)
		}
	})
}

// TestFleetHostsErrors: a malformed hosts file is a usage error naming
// FILE:LINE, and --timeout is for several hosts only.
func TestFleetHostsErrors(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(bad, []byte("good\nbad:port\n"), 0o644))
	_, errs, code := run9harness(t, nil, "ps", "--hosts", bad)
	if code != 2 || !strings.Contains(errs, bad+":2: ") {
		t.Errorf("ps --hosts with a bad line 2: exit %d, %q", code, errs)
	}
	_, errs, code = run9harness(t, nil, "ps", "--timeout", "1s")
	if code != 2 || !strings.Contains(errs, "--timeout") {
		t.Errorf("ps --timeout alone: exit %d, %q", code, errs)
	}
	_, errs, code = run9harness(t, nil, "--ssh", "a", "--ssh", "b", "ls", "/")
	if code != 2 || !strings.Contains(errs, "--ssh is given once") {
		t.Errorf("ls with two --ssh: exit %d, %q", code, errs)
	}
}

// relayPids are the pids of the user's `9harness relay` processes.
func (h *sshHost) relayPids() []int {
	var pids []int
	for _, pid := range h.userProcs(h.daemon.cmd.Process.Pid) {
		b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) > 1 && filepath.Base(argv[0]) == "9harness" && argv[1] == "relay" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// setStatusAs rewrites the fake Claude's registry record on the host as
// Claude does, the new file the user's.
func setStatusAs(t *testing.T, h *sshHost, pid int, status, waitingFor string) {
	t.Helper()
	path := filepath.Join(h.fixture, ".claude", "sessions", itoa(pid)+".json")
	writeRegistryStatus(t, path, status, waitingFor, func(tmp string) error { return os.Chown(tmp, h.uid, h.gid) })
}

// writeRegistryStatus rewrites a Claude registry record as Claude does (a
// new file renamed over it), with status busy, idle or waiting (and
// waitingFor); own, if set, gives the new file its owner first.
func writeRegistryStatus(t *testing.T, path, status, waitingFor string, own func(string) error) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var reg map[string]any
	must(t, json.Unmarshal(b, &reg))
	reg["status"] = status
	reg["updatedAt"] = time.Now().UnixMilli()
	delete(reg, "waitingFor")
	if waitingFor != "" {
		reg["waitingFor"] = waitingFor
	}
	b, err = json.Marshal(reg)
	must(t, err)
	tmp := path + ".fedcba9876543210.tmp"
	must(t, os.WriteFile(tmp, b, 0o600))
	if own != nil {
		must(t, own(tmp))
	}
	must(t, os.Rename(tmp, path))
}

// outLines are the lines of b ending in "\n" so far.
func outLines(b *syncBuffer) []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

// TestFleetEvents: events --all follows this machine and a remote host
// (a user with its own daemon behind a real sshd) at once, and a host
// whose port is closed: an agent appearing on the remote host reaches the
// merged stream as a line prefixed with that host's name, and one on this
// machine with -; the closed host is one line on stderr. When the remote
// host's stream is cut mid-way (its relay killed), that is one line on
// stderr, the host is dialled again ("back"), and its next change arrives
// again. --json carries "host". Interrupted, events exits 3: a host
// failed on the way. wait --all returns when the remote agent needs its
// user, printing HOST HARNESS/PID STATE WHAT; --timeout 0 with nobody
// waiting looks once and says partial (3), since a host was down.
func TestFleetEvents(t *testing.T) {
	t.Parallel()
	h := newSSHHost(t)
	name := h.user + "@127.0.0.1:" + itoa(h.port)
	local := fixtureHome(t)
	d := startDaemon(t, local)
	closed := "nobody@127.0.0.1:" + itoa(closedPort(t))
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(hostsLine(name, h.key)+"\n"+hostsLine(closed, h.key)+"\n"), 0o644))
	env := []string{"HOME=" + local}

	ev := start9harness(t, env, "-s", d.sock, "events", "--all", "--hosts", hostsFile)
	evJSON := start9harness(t, env, "-s", d.sock, "events", "--hosts", hostsFile, "--json")
	awaitOut(t, ev.stderr, "9harness events: "+closed+": ")

	// lineFor waits for a line of out that ends in suffix and starts with
	// prefix, and returns it.
	lineFor := func(out *syncBuffer, prefix, suffix string, d time.Duration) (string, bool) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			for _, l := range outLines(out) {
				if strings.HasPrefix(l, prefix) && strings.HasSuffix(l, suffix) {
					return l, true
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", false
	}
	// An agent appears on the remote host. The stream may not be open
	// yet when the first starts (nothing says when it is): a few tries.
	appearOn := func(what string) *fakeAgent {
		t.Helper()
		for try := range 4 {
			a := startFakeAs(t, h, "FAKE_SESSION="+fmt.Sprintf("6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a%06d", try+10*len(outLines(ev.stdout))))
			l, ok := lineFor(ev.stdout, name+" ", " claude "+itoa(a.pid())+" appear", 8*time.Second)
			if ok {
				if !eventLineRE.MatchString(strings.TrimPrefix(l, name+" ")) {
					t.Fatalf("%s: %q is not HOST TIME HARNESS PID EVENT", what, l)
				}
				t.Logf("%s: %q (try %d)", what, l, try)
				return a
			}
			a.stop(t)
		}
		t.Fatalf("%s: no line %s ... claude PID appear; stdout:\n%s\nstderr:\n%s", what, name, ev.stdout.String(), ev.stderr.String())
		return nil
	}
	a := appearOn("the remote host")
	if _, ok := lineFor(evJSON.stdout, `{"host":"`+name+`",`, `"pid":`+itoa(a.pid())+`,"event":"appear"}`, 10*time.Second); !ok {
		t.Errorf("--json has no appear line with the host first:\n%s", evJSON.stdout.String())
	}

	la := startFake(t, "claude", local, local, "FAKE_SESSION=7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e")
	if l, ok := lineFor(ev.stdout, "- ", " claude "+itoa(la.pid())+" appear", 10*time.Second); !ok {
		t.Errorf("no line - ... claude %d appear for this machine:\n%s", la.pid(), ev.stdout.String())
	} else {
		t.Logf("this machine: %q", l)
	}

	// The remote stream is cut: its relay dies. One line, then back.
	relays := h.relayPids()
	if len(relays) == 0 {
		t.Fatalf("no relay of %s running", h.user)
	}
	for _, pid := range relays {
		// A process of the user this test made, started for this test.
		syscall.Kill(pid, syscall.SIGKILL)
	}
	awaitOut(t, ev.stderr, "9harness events: "+name+": ")
	awaitOut(t, ev.stderr, "9harness events: "+name+": back")
	appearOn("the remote host after it came back")

	for _, l := range strings.Split(strings.TrimRight(ev.stderr.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "9harness events: "+closed+": ") && !strings.HasPrefix(l, "9harness events: "+name+": ") {
			t.Errorf("a stderr line that names no host: %q", l)
		}
	}
	if strings.Count(ev.stderr.String(), closed+": ") != 1 {
		t.Errorf("the closed host is not one line (it is retried quietly):\n%s", ev.stderr.String())
	}
	ev.cmd.Process.Signal(os.Interrupt)
	if code := ev.end(t, 10*time.Second); code != 3 {
		t.Errorf("events --all interrupted after a host failed: exit %d, want 3\n%s", code, ev.stderr.String())
	}
	t.Logf("events --all stderr:\n%s", ev.stderr.String())

	// wait --all: nobody waits yet; --timeout 0 looks once, partial.
	out, errs, code := run9harness(t, env, "-s", d.sock, "wait", "--all", "--hosts", hostsFile, "--state", "waiting", "--timeout", "0")
	if code != 3 || out != "" || !strings.Contains(errs, closed+": ") {
		t.Errorf("wait --all --timeout 0 with nobody waiting and a host down: exit %d, want 3\n%s%s", code, out, errs)
	}
	w := start9harness(t, env, "-s", d.sock, "wait", "--all", "--hosts", hostsFile, "--state", "waiting", "--timeout", "60s")
	awaitOut(t, w.stderr, closed+": ")
	time.Sleep(time.Second)
	if w.exited() {
		t.Fatalf("wait --all returned before anyone waited: %d\n%s%s", w.code, w.stdout.String(), w.stderr.String())
	}
	setStatusAs(t, h, a.pid(), "waiting", "approve Bash")
	if code := w.end(t, 20*time.Second); code != 0 {
		t.Fatalf("wait --all: exit %d\n%s%s", code, w.stdout.String(), w.stderr.String())
	}
	if got, want := w.stdout.String(), name+" claude/"+itoa(a.pid())+" waiting approve Bash\n"; got != want {
		t.Errorf("wait --all printed %q, want %q", got, want)
	}
	if _, errs, code := run9harness(t, env, "wait", "--all", "--hosts", hostsFile, "claude/1"); code != 2 {
		t.Errorf("wait --all with an AGENT: exit %d, want 2\n%s", code, errs)
	}
}

// TestFleetMove: `9harness move HOST:claude/PID NAME --tmux` moves an
// agent of a remote host (a user behind a real sshd, whose daemon runs
// with --allow-move): the agent is resumed there with its session, inside
// a new tmux session on that user's own tmux server, and the move is in
// THAT host's daemon's audit (started and done, the user's uid as the
// peer, the new pid). A second move into the same name is refused by that
// daemon, and its reason (not a guess of the client's) reaches the
// client: exit 1, the agent untouched.
func TestFleetMove(t *testing.T) {
	t.Parallel()
	require(t, "tmux")
	h := newSSHHost(t, withDaemonArgs("--allow-move", "--host-path", bins+":/usr/bin:/bin"))
	name := h.user + "@127.0.0.1:" + itoa(h.port)
	// The agent's world, the user's: a private tmux directory and the fake's
	// launch record.
	own := func(dir string) string {
		must(t, os.Chown(dir, h.uid, h.gid))
		must(t, os.Chmod(dir, 0o700))
		return dir
	}
	tmuxDir := own(shortDir(t, "ft"))
	recDir := own(shortDir(t, "fr"))
	record := filepath.Join(recDir, "record.jsonl")
	tmuxSock := filepath.Join(tmuxDir, "tmux-"+itoa(h.uid), "default")
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-S", tmuxSock}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid)}}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	// Runs before the user is removed: its tmux server and what runs in it.
	t.Cleanup(func() { tmux("kill-server") })
	const sid = "8c9d0e1f-2a3b-4c4d-8e5f-6a7b8c9d0e1f"
	agent := startFakeAs(t, h, "FAKE_SESSION="+sid, "PATH="+bins+":/usr/bin:/bin", "TMUX_TMPDIR="+tmuxDir,
		"FAKE_RECORD="+record, "LANG=C.UTF-8", "AGENT_MARK=kept")
	waitRegistry(t, h.fixture, agent.pid())
	// A warm master, so that once the host has answered through its
	// relay the client reaches it through the forward the master holds:
	// the move below goes that way, its refusal through the relay.
	cm := filepath.Join(shortDir(t, "fc"), "%C")
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(hostsLine(name, h.key)+" ssh-opt=ControlMaster=auto ssh-opt=ControlPath="+cm+" ssh-opt=ControlPersist=60\n"), 0o644))
	t.Cleanup(func() {
		exec.Command("ssh", "-o", "ControlPath="+cm, "-O", "exit", "-p", itoa(h.port), h.user+"@127.0.0.1").Run()
	})
	local := fixtureHome(t)
	clientRun := t.TempDir()
	env := []string{"HOME=" + local, "XDG_RUNTIME_DIR=" + clientRun}
	target := name + ":claude/" + itoa(agent.pid())

	// The remote daemon must see the agent and its session first.
	eventually15(t, func() bool {
		out, _, code := run9harness(t, env, "ps", "-q", "--hosts", hostsFile)
		return code == 0 && strings.Contains(out, target+"\n")
	}, "the remote agent in ps --hosts")

	out, errs, code := run9harness(t, env, "move", "--tmux", "--hosts", hostsFile, target, "rescued")
	if code != 0 || !strings.Contains(out, "moved "+target+" into tmux session rescued") ||
		!strings.Contains(out, "attach with: ssh -t ssh://"+name+" tmux attach -t rescued\n") {
		t.Fatalf("move %s: exit %d\n%s%s\nremote daemon:\n%s", target, code, out, errs, h.daemon.stderr.String())
	}
	t.Logf("move %s:\n%s", target, out)
	select {
	case <-agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the remote agent still runs after the move was reported done")
	}
	recs := readLaunches(record)
	if len(recs) != 2 {
		t.Fatalf("%d launches recorded, want 2: %+v", len(recs), recs)
	}
	nw := recs[1]
	t.Cleanup(func() { syscall.Kill(nw.PID, syscall.SIGTERM) }) // the moved fake, this test's
	if got := strings.Join(nw.Argv[1:], " "); got != "--resume "+sid || filepath.Base(nw.Argv[0]) != "claude" {
		t.Errorf("relaunch argv %q, want claude --resume %s", nw.Argv, sid)
	}
	if nw.Cwd != recs[0].Cwd {
		t.Errorf("relaunched in %q, was in %q", nw.Cwd, recs[0].Cwd)
	}
	if fi, err := os.Stat(filepath.Join("/proc", itoa(nw.PID))); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(h.uid) {
		t.Errorf("the resumed agent %d does not run as %s (uid %d): %v", nw.PID, h.user, h.uid, err)
	}
	panes, err := tmux("list-panes", "-s", "-t", "=rescued", "-F", "#{pane_pid}")
	if err != nil || panes != itoa(nw.PID) {
		t.Errorf("the user's tmux session rescued has panes %q (%v), want the new pid %d", panes, err, nw.PID)
	}
	audit := h.daemon.stderr.String()
	// The forward's peer: sshd's session for the user, judged the owner.
	for _, want := range []string{"message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54", "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55",
		"peer_uid=" + itoa(h.uid), "peer_comm=sshd", "new_pid=" + itoa(nw.PID), "session=" + sid, "target=rescued", "host=tmux"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the remote daemon's audit lacks %q:\n%s", want, audit)
		}
	}

	// Into the same name again: the remote daemon refuses, with its reason.
	moved := name + ":claude/" + itoa(nw.PID)
	eventually15(t, func() bool {
		out, _, _ := run9harness(t, env, "ps", "-q", "--hosts", hostsFile)
		return strings.Contains(out, moved+"\n")
	}, "the moved agent in ps --hosts")
	out, errs, code = run9harness(t, env, "move", "--tmux", "--ssh-forward=no", "--hosts", hostsFile, moved, "rescued")
	if code != 1 || !strings.HasPrefix(errs, "9harness move: refused: ") || !strings.Contains(errs, "rescued") || strings.Contains(out, "attach with") {
		t.Errorf("a move into a tmux session that exists: exit %d, want 1 and the daemon's reason\n%s%s", code, out, errs)
	}
	t.Logf("refusal: %s", strings.TrimSpace(errs))
	if !strings.Contains(h.daemon.stderr.String(), "message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53") {
		t.Errorf("the refusal is not in the remote daemon's audit:\n%s", h.daemon.stderr.String())
	}
	if !running(t, nw.PID) {
		t.Errorf("the refused move stopped the agent")
	}
}

// TestFleetPsSlowHost: ps --all on a terminal, with a host that accepts
// TCP and never speaks. While it waits, this machine's row is on the
// screen, with a line naming the host it waits for; at the end that line
// is gone, and what stays is the listing: this machine's row, the silent
// host named on stderr, exit 3 (partial). Without a hosts file, ps --all
// says so in one line on stderr and lists this machine. The daemon runs as
// a test uid, so that this machine's rows are the test's agent alone,
// whatever else runs on the machine.
func TestFleetPsSlowHost(t *testing.T) {
	t.Parallel()
	e := newOwnedPsEnv(t)
	local, agent, d := e.home, e.claude, e.d
	localRow := func(out string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "-" && f[1] == "claude" && f[2] == itoa(agent.pid()) {
				return f
			}
		}
		return nil
	}

	conf := t.TempDir()
	env := []string{"HOME=" + local, "XDG_CONFIG_HOME=" + conf}
	var out, errs string
	var code int
	eventually15(t, func() bool {
		out, errs, code = run9harness(t, env, "-s", d.sock, "ps", "--all")
		return localRow(out) != nil
	}, "this machine's agent in ps --all")
	if want := "no hosts file " + filepath.Join(conf, "9harness", "hosts"); code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, want) {
		t.Errorf("ps --all without a hosts file: exit %d, stderr %q; want 0 and one line saying %q", code, errs, want)
	}

	silent := "silent@127.0.0.1:" + itoa(silentPort(t))
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(hostsLine(silent, "/dev/null")+"\n"), 0o644))
	tm := newPsTmux(t)
	p := startTopPane(t, tm, "slow", 200, 50, append(env, "LANG=C.UTF-8"),
		"-s", d.sock, "ps", "--all", "--hosts", hostsFile, "--timeout", "8s")
	s := p.await(t, "the host waited for, named", screenHas("waiting for "+silent))
	if localRow(s) == nil {
		t.Errorf("this machine's row is not on the screen while ps waits for %s:\n%s", silent, s)
	}
	s = p.await(t, "ps to end", screenHas("[exit 3]"))
	t.Logf("the screen at the end:\n%s", s)
	if strings.Contains(s, "waiting for") {
		t.Errorf("the waiting line is still on the screen at the end:\n%s", s)
	}
	if localRow(s) == nil || !strings.Contains(s, "9harness ps: "+silent+": ") {
		t.Errorf("the listing at the end lacks this machine's row or the silent host's line:\n%s", s)
	}
	if n := strings.Count(s, "HOST "); n != 1 {
		t.Errorf("%d table headers on the screen at the end, want 1:\n%s", n, s)
	}
}
