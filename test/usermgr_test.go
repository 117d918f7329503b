package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// TestUserManager is the way people meet 9harness, on a real systemd user
// manager and journald (started by the test for a user it creates, in a
// private mount namespace): make install-user, systemctl --user enable
// --now 9harness.socket, activation on the first connection, systemd-analyze
// verify and security, idle exit and reactivation, the daemon's log in the
// journal, and moves into tmux and zmx from the socket-activated daemon
// that outlive it.
//
// Guards rule 6: a move completes, whatever its client and the daemon do.
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestUserManager(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	for _, p := range []string{"/usr/lib/systemd/systemd", "/usr/lib/systemd/systemd-journald", "/usr/sbin/useradd"} {
		if !isExec(p) {
			missing(t, p)
		}
	}
	require(t, "tmux")
	require(t, "setpriv")

	base, err := os.MkdirTemp("", "9h-um-")
	must(t, err)
	must(t, os.Chmod(base, 0o755))
	name := fmt.Sprintf("h9u%06d", rand.IntN(1000000))
	home := filepath.Join(base, "home")
	if out, err := userTool("useradd", "-m", "-d", home, "-s", "/bin/bash", name); err != nil {
		t.Fatalf("useradd: %v %s", err, out)
	}
	u, err := user.Lookup(name)
	must(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	cg := fmt.Sprintf("user.slice/user-%d.slice/user@%d.service", uid, uid)
	t.Cleanup(func() {
		// Processes of the test user are the test's own: end them all.
		exec.Command("pkill", "-KILL", "-u", u.Uid).Run()
		time.Sleep(200 * time.Millisecond)
		for _, h := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"} {
			leaf := filepath.Join(h, cg)
			if _, err := os.Stat(leaf); err == nil {
				exec.Command("find", leaf, "-depth", "-type", "d", "-exec", "rmdir", "{}", ";").Run()
				os.Remove(filepath.Join(h, "user.slice", fmt.Sprintf("user-%d.slice", uid)))
				os.Remove(filepath.Join(h, "user.slice"))
			}
		}
		userTool("userdel", "-r", name)
		os.RemoveAll(filepath.Join("/tmp", "tmux-"+u.Uid))
		os.RemoveAll(base)
	})

	// The user's harness state: the fixture home.
	if out, err := exec.Command("cp", "-a", "../testdata/home/.", home).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// make install-user, as the README says, into that user's home.
	tmpbin := t.TempDir()
	mk := exec.Command("make", "-C", "..", "install-user", "HOME="+home, "BIN="+tmpbin)
	mk.Env = append(os.Environ(), goEnv(t)...)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make install-user: %v\n%s", err, out)
	}
	chownR(t, home, uid)
	for _, h := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"} {
		if _, err := os.Stat(h); err != nil {
			continue
		}
		leaf := filepath.Join(h, cg)
		must(t, os.MkdirAll(leaf, 0o755))
		chownR(t, leaf, uid)
	}
	work := filepath.Join(base, "work")
	must(t, os.Mkdir(work, 0o777))
	must(t, os.Chmod(work, 0o777))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("system/usermgr.sh")
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--", "bash", script)
	cmd.Env = append(os.Environ(), "U="+u.Uid, "UNAME="+name, "UHOME="+home, "BINS="+bins, "WORK="+work, "SELF="+bin("self.test"))
	// Output to a file, not a pipe: the daemons the scenario starts keep
	// inherited descriptors, and a pipe would wait for them.
	logf, err := os.Create(filepath.Join(work, "scenario.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	t.Cleanup(func() {
		// journald runs as root inside the namespace: stop it by its pid.
		if b, err := os.ReadFile(filepath.Join(work, "journald.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
	})
	err = cmd.Run()
	logf.Close()
	out, _ := os.ReadFile(filepath.Join(work, "scenario.log"))
	checks := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "CHECK "); ok {
			k, v, _ := strings.Cut(rest, " ")
			checks[k] = v
		}
	}
	if err != nil || !strings.Contains(string(out), "DONE") {
		logs := ""
		for _, f := range []string{"usermgr.log", "journald.log"} {
			b, _ := os.ReadFile(filepath.Join(work, f))
			logs += "\n--- " + f + "\n" + string(b)
		}
		t.Fatalf("scenario failed: %v\n%s%s", err, out, logs)
	}
	t.Logf("checks: %q", checks)
	expect := func(k string, ok func(string) bool, what string) {
		t.Helper()
		if v, found := checks[k]; !found || !ok(v) {
			t.Errorf("%s = %q, want %s", k, v, what)
		}
	}
	eq := func(want string) func(string) bool { return func(v string) bool { return v == want } }
	has := func(want string) func(string) bool { return func(v string) bool { return strings.Contains(v, want) } }
	expect("manager", eq("active"), "active")
	expect("socket", eq("active"), "active")
	expect("service-before", eq("inactive"), "inactive until the first connection")
	expect("verify-rc", eq("0"), "0")
	expect("verify-output", eq(""), "nothing")
	// The daemon's unit runs with PrivateUsers=yes and the sandbox it
	// enables; the proc helper answers what the namespace hides.
	expect("security", func(v string) bool { f, err := strconv.ParseFloat(v, 64); return err == nil && f <= 2.0 }, "an exposure of at most 2.0")
	// The helper can have only what a user manager enforces outside a user
	// namespace (9harness-proc.service.in lists what it lacks and why).
	expect("security-helper", func(v string) bool { f, err := strconv.ParseFloat(v, 64); return err == nil && f <= 5.7 }, "the helper's seccomp/prctl hardening (at most 5.7)")
	// 9harness-notify.service, as installed: hardened, in its own user
	// namespace, a sandboxed peer of the daemon that still sees the
	// agents' states; its token from LoadCredential= reaches the webhook
	// in the header and nowhere else.
	expect("notify-verify", eq("0 "), "systemd-analyze verify to pass")
	expect("security-notify", func(v string) bool { f, err := strconv.ParseFloat(v, 64); return err == nil && f <= 4.0 }, "an exposure of at most 4.0")
	expect("notify-active", eq("active"), "active")
	expect("notify-userns", eq("own"), "notify in a user namespace of its own")
	expect("notify-hook", eq("1 waiting approve Bash True "), "one webhook message for the wait, with the credential's token")
	expect("notify-state", func(v string) bool { return strings.Contains(v, "9harness/notify.state") }, "the state file in systemd's state directory")
	expect("notify-token-journal", eq("0"), "the token in no journal entry")
	expect("notify-token-argv", eq("0"), "the token in no process's argv")
	expect("slice", eq("background.slice background.slice"), "both services in background.slice")
	expect("type", eq("exec exec"), "both services Type=exec")
	expect("helper-userns", eq("host"), "the helper outside any user namespace")
	expect("helper-seccomp", eq("2"), "the helper under a seccomp filter")
	expect("sock-removed", eq("removed"), "no socket file left once the sockets stop (RemoveOnStop=yes)")
	expect("userns", eq("yes"), "the daemon in its own user namespace")
	expect("active-cwd", eq(filepath.Join(home, "src/x")+" "), "every agent's cwd, read through the helper")
	expect("helper", eq("active"), "the helper activated by the daemon's first question")
	expect("root-read", eq("refused"), "root refused (not granted)")
	expect("root-named", func(v string) bool { n, _ := strconv.Atoi(v); return n >= 1 }, "the refusal naming uid 0, not the overflow uid")
	expect("moved-zmx", func(v string) bool { return strings.Contains(v, "sysmoved-z") }, "the zmx-moved agent's zmx field, from its environment")
	expect("sockmode", eq("600 700"), "socket 0600 in a 0700 directory")
	expect("ls", has("active/"), "the tree, /active included")
	expect("ls", has("claude/"), "the mirrors")
	expect("owner-hermes", has("logs/"), "the owner's view for the user's own client (judged against the user manager)")
	expect("nnp-hermes", func(v string) bool { return strings.Contains(v, "sessions/") && !strings.Contains(v, "logs/") },
		"the session-state view under no_new_privs")
	expect("service-after", eq("active"), "active after the first connection")
	expect("pid-is-main", eq("yes"), "the activated service's MainPID")
	expect("mirror", has("019e763f"), "the codex session index")
	expect("active-via", eq("registry "), "both agents resolved by their registry")
	expect("idle-exit", eq("inactive"), "inactive after the idle time")
	expect("reactivated", eq("yes"), "a new daemon on the next connection")
	expect("journal-idle", func(v string) bool { n, _ := strconv.Atoi(v); return n >= 1 }, "the daemon's idle-exit line under _SYSTEMD_USER_UNIT=9harness.service")
	expect("move-tmux", eq("WRITE ok"), "a successful move")
	expect("move-zmx", eq("WRITE ok"), "a successful move")
	expect("tmux-found", eq("yes"), "the tmux session, found from outside the unit")
	expect("zmx-found", eq("sysmoved-z"), "the zmx session, found from outside the unit")
	expect("relaunches", eq("4"), "2 starts and 2 relaunches")
	expect("new-cgroups", func(v string) bool {
		return !strings.Contains(v, "9harness.service") && strings.Count(v, "9harness-move-") == 2
	}, "the moved agents in transient units, not in the daemon's cgroup")
	expect("secret-moved", eq("2"), "the agents' environment, secret included, given back to both moved agents")
	expect("secret-journal", eq("0"), "the secret in no journal entry")
	expect("secret-units", eq("0"), "the secret in no property of the transient units")
	expect("secret-argv", eq("0"), "the secret in no process's argv")
	expect("launch-left", eq("0"), "no launch socket or file left after the moves")
	expect("launcher-refused-other", eq("0"), "no launcher refused but the spy's connections: both launchers, outside the daemon's namespaces, given their relaunch")
	// A spy of the user's uid in a user+mount namespace sharing the launch
	// directory: judged through the helper, it gets nothing.
	atLeast1 := func(v string) bool { n, _ := strconv.Atoi(v); return n >= 1 }
	expect("spy-watching", eq("1"), "the spy's inotify watch in place before the moves")
	expect("spy-connects", atLeast1, "the spy connecting to a move's socket")
	expect("spy-refused", atLeast1, "the spy refused as a sandbox (through the helper)")
	expect("spy-canary", eq("0"), "no byte of the secret reaching the spy")
	expect("survivors", eq("2"), "both moved agents alive after systemctl --user stop 9harness.service")
	expect("journal-9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54", eq("2"), "two move-start entries")
	expect("journal-9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55", eq("2"), "two move-done entries")
	// The move entries carry every documented field.
	b, err := os.ReadFile(filepath.Join(work, "j-9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55.json"))
	must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("journal entry: %v: %s", err, line)
		}
		for _, k := range []string{"PEER_UID", "PEER_GID", "PEER_PID", "PEER_COMM", "ACTION", "DECISION", "HARNESS", "AGENT_PID",
			"AGENT_START", "SESSION", "CWD", "HOST", "TARGET", "NEW_PID", "OUTCOME", "PRIORITY", "SYSLOG_IDENTIFIER", "_SYSTEMD_USER_UNIT"} {
			if v, _ := e[k].(string); v == "" {
				t.Errorf("move-done entry lacks %s: %s", k, line)
			}
		}
		if e["_SYSTEMD_USER_UNIT"] != "9harness.service" || e["OUTCOME"] != "moved" || e["PEER_UID"] != u.Uid {
			t.Errorf("move-done entry: unit %v outcome %v peer %v", e["_SYSTEMD_USER_UNIT"], e["OUTCOME"], e["PEER_UID"])
		}
	}
	if t.Failed() {
		t.Logf("scenario output:\n%s", out)
	}
}

func chownR(t *testing.T, dir string, uid int) {
	t.Helper()
	if dir == "" || dir == "/" || !filepath.IsAbs(dir) {
		t.Fatalf("refusing to chown -R %q", dir)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, uid), dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
}

// TestHelperWrite is run by the user-manager scenario as the test user:
// one write into the tree, the way a client moves an agent.
func TestHelperWrite(t *testing.T) {
	sock := os.Getenv("HELPER_WRITE_SOCK")
	if sock == "" {
		return
	}
	c, err := client.Dial(sock)
	if err != nil {
		println("WRITE dial", err.Error())
		return
	}
	defer c.Close()
	if err := c.WriteFile(os.Getenv("HELPER_WRITE_PATH"), []byte(os.Getenv("HELPER_WRITE_VALUE")+"\n")); err != nil {
		println("WRITE err", err.Error())
		return
	}
	println("WRITE ok")
}
