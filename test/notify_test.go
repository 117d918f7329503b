package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/9harness/9harness/internal/client"
)

// 9harness notify against a real daemon and a fake Claude whose registry
// the test rewrites: an HTTP server of the test's own speaks ntfy's
// publish API (POST / with the JSON message, a Bearer token) and takes a
// webhook's POSTs, and counts what arrives.

// pushReceiver is the test's ntfy server and webhook receiver on one
// port, which it can stop listening on and open again.
type pushReceiver struct {
	t     *testing.T
	addr  string
	token string

	mu      sync.Mutex
	srv     *http.Server
	ntfy    []map[string]any
	hooks   []map[string]any
	badAuth int
}

func newPushReceiver(t *testing.T, token string) *pushReceiver {
	r := &pushReceiver{t: t, token: token}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.close)
	return r
}

func (r *pushReceiver) serve(ln net.Listener) {
	mux := http.NewServeMux()
	record := func(list *[]map[string]any) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			if req.Header.Get("Authorization") != "Bearer "+r.token {
				r.mu.Lock()
				r.badAuth++
				r.mu.Unlock()
				http.Error(w, `{"code":40101,"http":401,"error":"unauthorized"}`, http.StatusUnauthorized)
				return
			}
			b, _ := io.ReadAll(req.Body)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				http.Error(w, "not JSON", http.StatusBadRequest)
				return
			}
			r.mu.Lock()
			*list = append(*list, m)
			r.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x%d","event":"message"}`+"\n", time.Now().UnixNano())
		}
	}
	// ntfy's JSON publishing: POST to the root, the topic in the body.
	mux.HandleFunc("/{$}", record(&r.ntfy))
	mux.HandleFunc("/hook", record(&r.hooks))
	r.mu.Lock()
	r.srv = &http.Server{Handler: mux}
	srv := r.srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

// close stops listening: connections are refused until reopen.
func (r *pushReceiver) close() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (r *pushReceiver) reopen() {
	ln, err := net.Listen("tcp", r.addr)
	must(r.t, err)
	r.serve(ln)
}

// count is how many messages of each target say state (waiting, idle,
// exit) for pid.
func (r *pushReceiver) count(pid int, state string) (ntfy, hooks int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := strconv.Itoa(pid)
	for _, m := range r.ntfy {
		title, _ := m["title"].(string)
		if strings.HasPrefix(title, "claude/"+p+" ") && strings.Contains(title, map[string]string{"waiting": " waits", "idle": " is idle", "exit": " exited"}[state]) {
			ntfy++
		}
	}
	for _, m := range r.hooks {
		if m["pid"] == float64(pid) && m["state"] == state {
			hooks++
		}
	}
	return
}

func (r *pushReceiver) snapshot() (ntfy, hooks []map[string]any, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.ntfy...), append([]map[string]any(nil), r.hooks...), r.badAuth
}

// notifyEnv is a config and state directory, a 0600 token file for ntfy
// and a credential directory for the webhook's.
type notifyEnv struct {
	conf, state, creds, tokenFile, token string
}

func newNotifyEnv(t *testing.T, token string) *notifyEnv {
	n := &notifyEnv{conf: t.TempDir(), state: t.TempDir(), creds: t.TempDir(), token: token}
	n.tokenFile = filepath.Join(n.conf, "ntfy.token")
	must(t, os.WriteFile(n.tokenFile, []byte(token+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(n.creds, "hook"), []byte(token), 0o400))
	must(t, os.MkdirAll(filepath.Join(n.conf, "9harness"), 0o700))
	return n
}

func (n *notifyEnv) write(t *testing.T, lines ...string) {
	must(t, os.WriteFile(filepath.Join(n.conf, "9harness", "notify.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

func (n *notifyEnv) env(home string, extra ...string) []string {
	return append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + n.conf, "XDG_STATE_HOME=" + n.state, "CREDENTIALS_DIRECTORY=" + n.creds}, extra...)
}

// noToken fails if the token is in the command line of notify's process
// (while it runs), its standard error or the state file.
func (n *notifyEnv) noToken(t *testing.T, s *started) {
	t.Helper()
	if s != nil && !s.exited() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.cmd.Process.Pid))
		must(t, err)
		if strings.Contains(string(b), n.token) {
			t.Errorf("the token is in notify's command line")
		}
		if s.stdout != nil && strings.Contains(s.stdout.String()+s.stderr.String(), n.token) {
			t.Errorf("the token is in notify's output")
		}
	}
	b, _ := os.ReadFile(filepath.Join(n.state, "9harness", "notify.state"))
	if strings.Contains(string(b), n.token) {
		t.Errorf("the token is in the state file")
	}
}

// setStatus rewrites the fake claude's registry record as Claude does,
// statusUpdatedAt too (the daemon's since), and waits for the daemon to
// serve the state.
func setStatus(t *testing.T, e *psEnv, status, waitingFor string) {
	t.Helper()
	path := filepath.Join(e.home, ".claude", "sessions", strconv.Itoa(e.claude.pid())+".json")
	writeRegistryStatus(t, path, status, waitingFor, func(tmp string) error {
		b, err := os.ReadFile(tmp)
		if err != nil {
			return err
		}
		var reg map[string]any
		if err := json.Unmarshal(b, &reg); err != nil {
			return err
		}
		reg["statusUpdatedAt"] = reg["updatedAt"]
		b, _ = json.Marshal(reg)
		if err := os.WriteFile(tmp, b, 0o600); err != nil || e.uid == 0 {
			return err
		}
		return os.Chown(tmp, e.uid, e.uid) // the agent's own file
	})
	want := map[string]string{"busy": "working", "idle": "idle", "waiting": "waiting"}[status]
	// A connection of its own, closed at once: a grantee's connections
	// are few, and the test sets a status a dozen times.
	c, err := client.Dial(e.d.sock)
	must(t, err)
	defer c.Close()
	within(t, 10*time.Second, func() bool {
		s, _ := readField(c, e.dir("claude", e.claude)+"/state")
		return s == want
	}, "the claude agent's state "+want)
}

// newOwnedPsEnv is newPsEnv's claude alone, with the daemon and the agent
// running as the test's owner uid (testUIDs) and the daemon granting root,
// which this test and its 9harness run as. Such a daemon lists only the
// agents of its uid, so a test that counts every message a notify sends
// counts only its own agent's, whatever agent-like processes come and go
// on the machine meanwhile.
func newOwnedPsEnv(t *testing.T) *psEnv {
	t.Helper()
	requireRoot(t)
	u := testUIDs(t)
	home, sock := sharedHome(t, u.owner)
	e := &psEnv{home: home, uid: u.owner, sock: sock}
	e.cwd = filepath.Join(home, "src", "a-project-directory-with-a-rather-long-name")
	must(t, os.MkdirAll(e.cwd, 0o755))
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", u.owner, u.owner), home).CombinedOutput(); err != nil {
		t.Fatalf("chown %s: %v %s", home, err, out)
	}
	e.claude = e.startFake(t, "claude", "FAKE_SESSION="+psClaudeSID, "ZMX_SESSION=work")
	waitRegistry(t, home, e.claude.pid())
	e.d = e.startDaemon(t)
	c := e.d.client()
	eventually(t, func() bool {
		s, _ := readField(c, e.dir("claude", e.claude)+"/session")
		return s == psClaudeSID
	}, "the claude agent resolved under /active")
	return e
}

// startFake starts a fake agent of an owned environment: its uid's.
func (e *psEnv) startFake(t *testing.T, name string, env ...string) *fakeAgent {
	t.Helper()
	cmd := exec.Command(bin(name))
	cmd.Dir = e.cwd
	cmd.Env = append([]string{"HOME=" + e.home, "PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.uid), Gid: uint32(e.uid)}}
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	a := &fakeAgent{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// startDaemon starts an owned environment's daemon on its socket.
func (e *psEnv) startDaemon(t *testing.T) *daemon {
	t.Helper()
	d := startAs(t, e.uid, e.home, e.sock, "--allow-uid", "0")
	d.waitReady()
	return d
}

// TestNotify: one message per transition to an ntfy server and a webhook,
// through a daemon restart, a restart of notify (and a transition while
// notify was stopped, and a SIGKILL between deliveries), and 10 s of the
// endpoint refusing connections; the token is nowhere but in the
// Authorization header.
func TestNotify(t *testing.T) {
	t.Parallel()
	e := newOwnedPsEnv(t)
	pid := e.claude.pid()
	title := "fix <the> & build\x1b[31m"
	e.setClaudeTitle(t, title)
	setStatus(t, e, "busy", "")
	const token = "tk_s3cret-notify-token-0123456789"
	rcv := newPushReceiver(t, token)
	n := newNotifyEnv(t, token)
	cmdLog := filepath.Join(t.TempDir(), "cmd.log")
	n.write(t,
		"# what and where",
		"on waiting idle exit",
		"idle-after 1s",
		"harness claude",
		"target ntfy url=http://"+rcv.addr+" topic=agents token-file="+n.tokenFile,
		"target webhook url=http://"+rcv.addr+"/hook token-credential=hook",
		`target command printf '%s %s %s\n' "$HARNESS_PID" "$HARNESS_STATE" "$HARNESS_ID" >>`+cmdLog,
	)
	// cmdCount is how many times the command target ran for state.
	cmdCount := func(state string) int {
		b, _ := os.ReadFile(cmdLog)
		k := 0
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == strconv.Itoa(pid) && f[1] == state {
				k++
			}
		}
		return k
	}
	start := func() *started {
		s := start9harness(t, n.env(e.home), "-s", e.d.sock, "notify")
		within(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "following") }, "notify to start")
		return s
	}
	stopNotify := func(s *started) {
		t.Helper()
		n.noToken(t, s)
		must(t, s.cmd.Process.Signal(syscall.SIGTERM))
		if code := s.end(t, 40*time.Second); code != 0 {
			t.Errorf("notify after SIGTERM: exit %d; stderr %q", code, s.stderr.String())
		}
	}
	// want waits until each target has had k messages of state, and
	// fails if either has more.
	want := func(state string, k int, what string) {
		t.Helper()
		within(t, 90*time.Second, func() bool {
			a, b := rcv.count(pid, state)
			return a >= k && b >= k && cmdCount(state) >= k
		}, what)
		if a, b := rcv.count(pid, state); a != k || b != k || cmdCount(state) != k {
			t.Errorf("%s: ntfy had %d %s messages, the webhook %d, the command ran %d times; want %d each", what, a, state, b, cmdCount(state), k)
		}
	}
	settle := func() { time.Sleep(3 * time.Second) }

	s := start()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(n.state, "9harness", "notify.state"))
			t.Logf("notify's stderr:\n%s\nstate file: %s\ndaemon: %s", s.stderr.String(), b, e.d.stderr.String())
		}
	})
	settle()
	if a, b := rcv.count(pid, "waiting"); a+b != 0 {
		t.Fatalf("messages while the agent worked: %d, %d", a, b)
	}
	asked := time.Now()
	setStatus(t, e, "waiting", "approve Bash")
	want("waiting", 1, "the first wait")
	t.Logf("the first wait reached all three targets %v after the registry changed", time.Since(asked).Round(10*time.Millisecond))

	// A second notify on the same state would send everything twice: it
	// is refused.
	if _, stderr, code := run9harness(t, n.env(e.home), "-s", e.d.sock, "notify"); code != 1 || !strings.Contains(stderr, "another 9harness notify uses") {
		t.Errorf("a second notify: exit %d, stderr %q", code, stderr)
	}

	// (a) The daemon restarts on the same socket; the agent still waits:
	// nothing again.
	e.d.stop()
	time.Sleep(1500 * time.Millisecond)
	e.d = e.startDaemon(t)
	within(t, 60*time.Second, func() bool { return strings.Contains(s.stderr.String(), ": back") }, "notify to reach the new daemon")
	settle()
	want("waiting", 1, "after the daemon's restart")
	setStatus(t, e, "busy", "")
	setStatus(t, e, "waiting", "approve Edit")
	want("waiting", 2, "the wait after the daemon's restart")

	// (b) notify restarts: nothing again; a wait while it was stopped is
	// told once it runs.
	stopNotify(s)
	s = start()
	settle()
	want("waiting", 2, "after notify's restart")
	stopNotify(s)
	setStatus(t, e, "busy", "")
	setStatus(t, e, "waiting", "approve Write")
	s = start()
	want("waiting", 3, "the wait while notify was stopped")
	// Killed outright between deliveries: nothing again either.
	time.Sleep(time.Second)
	must(t, s.cmd.Process.Kill())
	s.end(t, 10*time.Second)
	s = start()
	settle()
	want("waiting", 3, "after notify was killed")

	// (c) The endpoint refuses connections for 10 s while the agent
	// waits; the message arrives once after it listens again.
	rcv.close()
	setStatus(t, e, "busy", "")
	time.Sleep(1500 * time.Millisecond)
	setStatus(t, e, "waiting", "approve Read")
	time.Sleep(10 * time.Second)
	if a, b := rcv.count(pid, "waiting"); a != 3 || b != 3 {
		t.Errorf("while refused: %d and %d waits recorded", a, b)
	}
	// The command target is not held up by the others' endpoint.
	if k := cmdCount("waiting"); k != 4 {
		t.Errorf("while the endpoint refused, the command ran %d times for waits, want 4", k)
	}
	rcv.reopen()
	reopened := time.Now()
	want("waiting", 4, "the wait sent while the endpoint refused")
	t.Logf("delivered %v after the endpoint listened again", time.Since(reopened).Round(100*time.Millisecond))

	// A turn of more than idle-after ends: idle, once.
	setStatus(t, e, "busy", "")
	time.Sleep(2 * time.Second)
	setStatus(t, e, "idle", "")
	want("idle", 1, "the idle after a turn")

	// The agent exits: once.
	e.claude.stop(t)
	want("exit", 1, "the exit")
	settle()
	stopNotify(s)
	s = start()
	settle()
	n.noToken(t, s)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "Threads:") {
				t.Logf("notify's %s", strings.Join(strings.Fields(l), " "))
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(n.state, "9harness", "notify.state")); err == nil {
		t.Logf("the state file: %d bytes", fi.Size())
	}
	stopNotify(s)
	want("waiting", 4, "in the end")
	want("idle", 1, "in the end")
	want("exit", 1, "in the end")

	ntfy, hooks, bad := rcv.snapshot()
	if bad != 0 {
		t.Errorf("%d requests with a wrong or missing token", bad)
	}
	ids := map[string]bool{}
	for _, h := range hooks {
		id, _ := h["id"].(string)
		if ids[id] {
			t.Errorf("webhook id %q twice", id)
		}
		ids[id] = true
	}
	// The message: host, harness, pid, directory, title, what it waits
	// for; control bytes made printable.
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	var first map[string]any
	for _, m := range ntfy {
		if strings.Contains(m["title"].(string), "approve Bash") {
			first = m
		}
	}
	wantMsg := "fix <the> & build?[31m\nin " + e.cwd + "\non " + host
	if first == nil || first["topic"] != "agents" || first["title"] != "claude/"+strconv.Itoa(pid)+" waits: approve Bash" || first["message"] != wantMsg || first["priority"] != float64(4) {
		t.Errorf("ntfy message %v; want topic agents, title claude/%d waits: approve Bash, message %q, priority 4", first, pid, wantMsg)
	}
	for _, h := range hooks {
		if h["pid"] != float64(pid) {
			continue // none: the daemon lists only its own uid's agents
		}
		if h["host"] != host || h["harness"] != "claude" || h["cwd"] != e.cwd || h["title"] != "fix <the> & build?[31m" || h["since"] == "" || h["started"] == "" {
			t.Errorf("webhook body %v", h)
			break
		}
	}
	t.Logf("ntfy: %d messages, webhook: %d; notify's last run said:\n%s", len(ntfy), len(hooks), s.stderr.String())
}

// TestNotifyConfig: a config error names FILE:LINE, exits 2 and sends
// nothing; a token file others may read is refused; --test sends one
// message to each target, and exits 1 when one refuses.
func TestNotifyConfig(t *testing.T) {
	t.Parallel()
	const token = "tk_another-s3cret"
	rcv := newPushReceiver(t, token)
	n := newNotifyEnv(t, token)
	home := t.TempDir()
	conf := filepath.Join(n.conf, "9harness", "notify.conf")
	ntfyLine := "target ntfy url=http://" + rcv.addr + " topic=agents token-file=" + n.tokenFile
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{ntfyLine, "on waiting sleeping"}, conf + `:2: on: unknown transition "sleeping"`},
		{[]string{"# x", "", ntfyLine, "target webhook token-credential=hook"}, conf + ":4: target webhook needs url=URL"},
		{[]string{"target ntfy url=http://" + rcv.addr + " topic=agents token-credential=nope"}, conf + ":1: token-credential=nope: "},
	} {
		n.write(t, c.lines...)
		stdout, stderr, code := run9harness(t, n.env(home), "notify", "--test")
		if code != 2 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("config %q: exit %d, stderr %q; want 2 and %q", c.lines, code, stderr, c.want)
		}
	}
	// A token file of mode 0644 is refused, by its line.
	must(t, os.Chmod(n.tokenFile, 0o644))
	n.write(t, "on waiting", ntfyLine)
	_, stderr, code := run9harness(t, n.env(home), "notify")
	if code != 2 || !strings.Contains(stderr, conf+":2: token-file "+n.tokenFile+" has mode 0644") {
		t.Errorf("a 0644 token file: exit %d, stderr %q", code, stderr)
	}
	if ntfy, hooks, bad := rcv.snapshot(); len(ntfy)+len(hooks)+bad != 0 {
		t.Errorf("a config error sent %d messages", len(ntfy)+len(hooks)+bad)
	}
	must(t, os.Chmod(n.tokenFile, 0o600))
	n.write(t, ntfyLine, "target webhook url=http://"+rcv.addr+"/hook token-credential=hook")
	stdout, stderr, code := run9harness(t, n.env(home), "notify", "--test")
	ntfy, hooks, bad := rcv.snapshot()
	if code != 0 || len(ntfy) != 1 || len(hooks) != 1 || bad != 0 {
		t.Errorf("--test: exit %d, %d ntfy, %d webhook, %d bad tokens; stdout %q stderr %q", code, len(ntfy), len(hooks), bad, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, token) {
		t.Errorf("--test printed the token")
	}
	rcv.close()
	_, stderr, code = run9harness(t, n.env(home), "notify", "--test")
	if code != 1 || !strings.Contains(stderr, "connection refused") || strings.Contains(stderr, token) {
		t.Errorf("--test with the endpoint down: exit %d, stderr %q", code, stderr)
	}
}

// TestNotifyDesktop: the desktop target calls Notify on the session bus
// (a stub of org.freedesktop.Notifications on a private bus) once for one
// wait, the body's markup escaped and its control bytes made printable.
func TestNotifyDesktop(t *testing.T) {
	t.Parallel()
	addr := privateBus(t)
	conn, err := dbus.Connect(addr)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	stub := &notifyStub{}
	must(t, conn.Export(stub, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"))
	reply, err := conn.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning org.freedesktop.Notifications: %v %v", reply, err)
	}
	e := newPsEnv(t)
	pid := strconv.Itoa(e.claude.pid())
	title := "<b>bold</b> & \x07 more"
	e.setClaudeTitle(t, title)
	e.setClaudeStatus(t, "busy", "")
	n := newNotifyEnv(t, "unused")
	n.write(t, "on waiting", "target desktop")
	s := start9harness(t, n.env(e.home, "DBUS_SESSION_BUS_ADDRESS="+addr), "-s", e.d.sock, "notify")
	within(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "following") }, "notify to start")
	ours := func() []notifyCall {
		var out []notifyCall
		for _, c := range stub.list() {
			if strings.HasPrefix(c.summary, "claude/"+pid+" ") {
				out = append(out, c)
			}
		}
		return out
	}
	e.setClaudeStatus(t, "waiting", "approve Bash")
	within(t, 15*time.Second, func() bool { return len(ours()) >= 1 }, "the notification")
	time.Sleep(3 * time.Second)
	calls := ours()
	if len(calls) != 1 {
		t.Fatalf("%d notifications for one wait: %+v", len(calls), calls)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	wantCall := notifyCall{app: "9harness", icon: "dialog-question", summary: "claude/" + pid + " waits: approve Bash",
		body: "&lt;b&gt;bold&lt;/b&gt; &amp; ? more\nin " + e.cwd + "\non " + host}
	if calls[0] != wantCall {
		t.Errorf("notification %+v, want %+v", calls[0], wantCall)
	}
	must(t, s.cmd.Process.Signal(syscall.SIGTERM))
	if code := s.end(t, 40*time.Second); code != 0 {
		t.Errorf("notify after SIGTERM: exit %d; stderr %q", code, s.stderr.String())
	}
}

// TestNotifyFleet: notify --hosts follows a host over ssh (a real sshd on
// loopback): one webhook message for a wait there, naming the host, none
// again when the host's stream is cut and comes back, and one for the
// agent's exit.
func TestNotifyFleet(t *testing.T) {
	t.Parallel()
	h := newSSHHost(t)
	name := h.user + "@127.0.0.1:" + itoa(h.port)
	local := fixtureHome(t)
	d := startDaemon(t, local)
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(hostsFile, []byte(hostsLine(name, h.key)+"\n"), 0o644))
	const token = "tk_fleet-s3cret-0123"
	rcv := newPushReceiver(t, token)
	n := newNotifyEnv(t, token)
	n.write(t, "on waiting exit", "target webhook url=http://"+rcv.addr+"/hook token-credential=hook")
	a := startFakeAs(t, h)
	waitRegistry(t, h.fixture, a.pid())
	count := func(state string) int {
		_, hooks, _ := rcv.snapshot()
		k := 0
		for _, m := range hooks {
			if m["host"] == name && m["pid"] == float64(a.pid()) && m["state"] == state {
				k++
			}
		}
		return k
	}
	s := start9harness(t, n.env(local), "-s", d.sock, "notify", "--hosts", hostsFile)
	within(t, 10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "following 1 host") }, "notify to start")
	// The host's stream may not be open yet: its first table says the
	// wait as well as a change would.
	setStatusAs(t, h, a.pid(), "waiting", "approve Bash")
	within(t, 60*time.Second, func() bool { return count("waiting") >= 1 }, "the remote wait at the webhook")

	relays := h.relayPids()
	if len(relays) == 0 {
		t.Fatalf("no relay of %s running", h.user)
	}
	for _, pid := range relays {
		// A process of the user this test made, started for this test.
		syscall.Kill(pid, syscall.SIGKILL)
	}
	within(t, 60*time.Second, func() bool { return strings.Contains(s.stderr.String(), name+": back") }, "the host back")
	time.Sleep(3 * time.Second)
	if k := count("waiting"); k != 1 {
		t.Errorf("%d messages for one wait after the host came back", k)
	}
	a.stop(t)
	within(t, 60*time.Second, func() bool { return count("exit") >= 1 }, "the remote exit at the webhook")
	time.Sleep(2 * time.Second)
	if w, x := count("waiting"), count("exit"); w != 1 || x != 1 {
		t.Errorf("%d wait and %d exit messages, want 1 each", w, x)
	}
	n.noToken(t, s)
	t.Logf("notify said:\n%s", s.stderr.String())
}
