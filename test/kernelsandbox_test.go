package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/linux"

	iproc "github.com/9harness/9harness/internal/proc"
)

// Never widen, for a sandbox that has no namespace of its own: a process
// of the owner's uid, in the owner's namespaces, that the kernel holds to
// Landlock, no_new_privs or a seccomp filter. The kernel refuses a
// Landlocked one the owner's home directly; the daemon must not serve it
// the owner's view, nor let it move an agent, nor move a Landlocked agent
// out of its sandbox.

// kernelSandboxes are the ways a peer is run confined by the kernel
// alone, with the restriction each must be judged by (the first the
// daemon names: a filter comes before no_new_privs).
func kernelSandboxes(t *testing.T) map[string]struct {
	wrap []string
	why  iproc.Restriction
} {
	setpriv := require(t, "setpriv")
	landlock := []string{bin("confine"), "landlock"}
	// Reads allowed only where the client's binary and its libraries
	// are: not the fixture home.
	for _, d := range []string{"/usr", "/lib", "/lib64", "/etc", "/proc", "/dev", "/sys", bins} {
		if _, err := os.Stat(d); err == nil {
			landlock = append(landlock, "-ro", d)
		}
	}
	return map[string]struct {
		wrap []string
		why  iproc.Restriction
	}{
		"landlock":               {append(landlock, "--"), iproc.NoNewPrivs},
		"setpriv --no-new-privs": {[]string{setpriv, "--no-new-privs"}, iproc.NoNewPrivs},
		"a seccomp filter":       {[]string{bin("confine"), "seccomp", "--"}, iproc.Seccomp},
	}
}

// TestKernelSandbox: against a real daemon on a fixture home, a copy of
// the test binary run under Landlock, under `setpriv --no-new-privs` and
// under a (permissive) seccomp filter is served the session-state view
// only: /hermes without its logs/ and profiles/, /active without zmx or tmux, no
// value of the agent's environment, and its write to the zmx file
// refused; the daemon's log names the restriction. The same binary
// unconfined gets the owner's view. Three references: the daemon itself,
// the daemon under no_new_privs and a seccomp filter as its unit runs it
// (its parent, here this test, is then what those two are compared
// with), and a proc helper run so.
//
// Guards rule 2: no credential is listed or read.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestKernelSandbox(t *testing.T) {
	t.Parallel()
	home, cl, _, _ := sandboxSetup(t)
	helperHome := "HELPER_HOME=" + home

	// A helper confined as 9harness-proc.service confines it.
	hsock := filepath.Join(t.TempDir(), "proc-helper-confined.sock")
	helper := launchCmd(t, bin("confine"), "seccomp", "--", bin("9harnessd"), "--serve-proc-helper", "--unix", hsock)
	helper.sock = hsock
	helper.waitReady()

	for _, cfg := range []struct {
		name    string
		start   func() *daemon
		against string
	}{
		{"the daemon", func() *daemon { return startDaemon(t, home, "--allow-move") }, "the daemon's reference"},
		{"the daemon under no_new_privs and seccomp", func() *daemon {
			sock := filepath.Join(t.TempDir(), "harness.sock")
			args := append([]string{"seccomp", "--", bin("9harnessd"), "--unix", sock, "--audit", "stderr", "--allow-move"}, rootArgs(home)...)
			d := launchCmd(t, bin("confine"), args...)
			d.sock = sock
			d.waitReady()
			return d
		}, "the daemon's reference"},
		{"through a helper under no_new_privs and seccomp", func() *daemon {
			return startDaemon(t, home, "--allow-move", "--proc-helper", hsock)
		}, "the proc helper's reference"},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			d := cfg.start()
			// The control: unconfined, the owner's view.
			var out string
			eventually(t, func() bool {
				out = sandboxPeer(t, nil, "daemon", d.sock, cl.pid(), helperHome)
				return strings.Contains(out, `READ zmx "sbx\n"`)
			}, "the owner's view of the agent's zmx")
			if ls, _ := lineWith(out, "LS-HERMES "); !strings.Contains(ls, "logs") || !strings.Contains(out, "DIRECT-READ ok") {
				t.Errorf("unconfined: not the owner's view:\n%s", out)
			}
			for name, sb := range kernelSandboxes(t) {
				out := sandboxPeer(t, sb.wrap, "daemon", d.sock, cl.pid(), helperHome, "HELPER_SANDBOX_WRITE=1")
				t.Logf("%s, served:\n%s", name, out)
				if strings.Contains(out, "DIAL") {
					t.Errorf("%s: not served at all (a grantee is served):\n%s", name, out)
				}
				for _, bad := range []string{"READ zmx", "READ tmux", "sbx", sandboxMarker, "logs", "profiles", "WRITE ok"} {
					if strings.Contains(out, bad) {
						t.Errorf("%s: the confined peer got %q:\n%s", name, bad, out)
					}
				}
				if ls, ok := lineWith(out, "LS-HERMES "); !ok || !strings.Contains(ls, "sessions") {
					t.Errorf("%s: not the session-state view of /hermes:\n%s", name, out)
				}
				if ls, ok := lineWith(out, "LS "); !ok || strings.Contains(ls, "zmx") || strings.Contains(ls, "tmux") {
					t.Errorf("%s: lists %q", name, ls)
				}
				if !strings.Contains(out, "WRITE-ERR") {
					t.Errorf("%s: the write was not refused:\n%s", name, out)
				}
				if name == "landlock" && !strings.Contains(out, "DIRECT-READ refused") {
					t.Errorf("landlock: the kernel let it read the home directly, so the test proves nothing:\n%s", out)
				}
				want := sb.why.Phrase(cfg.against) + " (a sandbox): served as a grantee, and it may never move"
				if log := d.stderr.Await(want); !strings.Contains(log, want) {
					t.Errorf("%s: the daemon's log does not say %q:\n%s", name, want, log)
				}
			}
			if log := d.stderr.String(); strings.Contains(log, sandboxMarker) {
				t.Error("the daemon logged an environment value")
			}
		})
	}
}

// TestKernelSandboxAgent: an agent under Landlock (its own uid and
// namespaces, no_new_privs) is not moved out of its sandbox, by a daemon
// that reads /proc itself or through a proc helper: the owner's move is
// refused before any signal, with the restriction named, and the agent
// lives on.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestKernelSandboxAgent(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	m := newMoveEnv(t)
	// Everything a move needs is there (zmx on the daemon's host path, a
	// resolvable session): only the sandbox may refuse it.
	cmd := exec.Command(bin("confine"), "landlock", "-ro", "/", "--", bin("claude"))
	cmd.Dir = m.cwd
	cmd.Env = append([]string{"HOME=" + m.home}, append(m.env, "FAKE_SESSION=7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f")...)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); <-done })
	pid := cmd.Process.Pid
	waitRegistry(t, m.home, pid)
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); !strings.Contains(string(b), "NoNewPrivs:\t1") {
		t.Fatalf("the agent is not under no_new_privs:\n%s", b)
	}
	hsock := filepath.Join(t.TempDir(), "proc-helper.sock")
	helper := launch(t, "--serve-proc-helper", "--unix", hsock)
	helper.sock = hsock
	helper.waitReady()

	for _, args := range [][]string{m.moveArgs(), m.moveArgs("--proc-helper", hsock)} {
		d := startDaemon(t, m.home, args...)
		c := d.client()
		f := "/active/claude/" + strconv.Itoa(pid) + "/zmx"
		eventually(t, func() bool { _, _, err := c.Stat(f); return err == nil }, "the confined agent under /active")
		if err := c.WriteFile(f, []byte("out-of-landlock")); !isErrno(err, linux.EPERM) {
			t.Errorf("%q: moving the Landlocked agent: %v, want EPERM", args, err)
		}
		const why = "the agent runs with no_new_privs (which a Landlock or an unprivileged seccomp sandbox needs), which the daemon's reference does not have: a sandboxed agent is not moved out of its sandbox"
		if log := d.stderr.Await(why); !strings.Contains(log, why) {
			t.Errorf("%q: the refusal does not name the restriction:\n%s", args, log)
		}
		select {
		case <-done:
			t.Fatal("the Landlocked agent died from a refused move")
		default:
		}
	}
	for _, r := range m.records(t) {
		if r.PID != pid {
			t.Errorf("a relaunch ran: %+v", r)
		}
	}
}
