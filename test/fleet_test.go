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
// so that its daemon (which serves its own uid's agents) lists it.
func startFakeAs(t *testing.T, h *sshHost) *fakeAgent {
	t.Helper()
	cmd := exec.Command(bin("claude"))
	cmd.Dir = h.fixture
	cmd.Env = []string{"HOME=" + h.fixture, "PATH=/usr/bin:/bin", "FAKE_SESSION=" + fmt.Sprintf("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e%06d", h.uid%1_000_000)}
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
	const timeout = 3 * time.Second
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
