package test

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// Never widen, for a process of the owner's own uid inside a sandbox: the
// kernel refuses it /proc/<pid>/environ of every process outside, so
// neither the proc helper nor the daemon may hand it any.
//
// The sandboxes are `unshare --user` and `unshare --user --pid --fork`,
// and the ones the kernel shows without a namespace: Landlock,
// `setpriv --no-new-privs` and a seccomp filter (kernelsandbox_test.go).
// The tests run as root, and --map-root-user (or --map-current-user) maps
// uid 0 inside to uid 0 outside: SO_PEERCRED, which the kernel translates
// into the reader's namespace, names the owner's uid, so a uid check alone
// would let such a peer through. Only the confinement and executable
// checks stand between it and the agents' secrets.

const sandboxMarker = "sk-sandbox-marker"

// sandboxes are the ways a peer is run in a sandbox, as the owner's uid.
func sandboxes(t *testing.T) map[string][]string {
	unshare := require(t, "unshare")
	kinds := map[string][]string{
		"unshare --user":               {unshare, "--user", "--map-root-user"},
		"unshare --user (current uid)": {unshare, "--user", "--map-current-user"},
		"unshare --user --pid":         {unshare, "--user", "--map-root-user", "--pid", "--fork"},
	}
	// And every sandbox the kernel shows without a namespace: Landlock,
	// no_new_privs, a seccomp filter.
	for name, k := range kernelSandboxes(t) {
		kinds[name] = k.wrap
	}
	return kinds
}

// sandboxPeer runs this test binary (its copy in bins) as a peer, wrapped
// in wrap (none: unsandboxed), and returns its output.
func sandboxPeer(t *testing.T, wrap []string, mode, sock string, agent int, env ...string) string {
	t.Helper()
	argv := append(append([]string{}, wrap...), bin("self.test"), "-test.run=^TestHelperSandboxPeer$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "HELPER_SOCK="+sock, "HELPER_SANDBOX="+mode, "HELPER_AGENT="+strconv.Itoa(agent)), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("peer %q: %v\n%s", wrap, err, out)
	}
	return string(out)
}

// TestHelperSandboxPeer is run as a subprocess, in a sandbox or not, by
// the tests below. HELPER_SANDBOX=helper asks the proc helper at
// HELPER_SOCK every agent op about HELPER_AGENT, raw, and prints how many
// reply bytes came back; =daemon lists and reads the agent's /active
// directory through the daemon at HELPER_SOCK and writes its zmx file.
func TestHelperSandboxPeer(t *testing.T) {
	sock, agent := os.Getenv("HELPER_SOCK"), os.Getenv("HELPER_AGENT")
	switch os.Getenv("HELPER_SANDBOX") {
	case "helper":
		pid, _ := strconv.ParseUint(agent, 10, 32)
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Println("DIAL", err)
			return
		}
		defer c.Close()
		var req []byte
		for _, op := range "efcxntm" {
			req = binary.LittleEndian.AppendUint32(append(req, byte(op)), uint32(pid))
		}
		req = binary.LittleEndian.AppendUint32(append(req, 'r'), 0)
		c.Write(req)
		c.(*net.UnixConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		fmt.Printf("REPLY-BYTES %d\n", len(b))
		if strings.Contains(string(b), sandboxMarker) {
			fmt.Println("LEAK")
		}
	case "daemon":
		c, err := client.Dial(sock)
		if err != nil {
			fmt.Println("DIAL", err)
			return
		}
		defer c.Close()
		dir := "/active/claude/" + agent
		if ents, err := c.ReadDir(dir); err != nil {
			fmt.Println("LS-ERR", err)
		} else {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			fmt.Println("LS", strings.Join(names, " "))
		}
		// A mirror whose owner's view is more than its session state.
		if ents, err := c.ReadDir("/hermes"); err == nil {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			fmt.Println("LS-HERMES", strings.Join(names, " "))
		}
		if home := os.Getenv("HELPER_HOME"); home != "" {
			// What the kernel lets this process read directly.
			if _, err := os.ReadFile(home + "/.claude/settings.json"); err != nil {
				fmt.Println("DIRECT-READ refused")
			} else {
				fmt.Println("DIRECT-READ ok")
			}
		}
		for _, f := range []string{"zmx", "tmux", "cwd", "session"} {
			if b, err := c.ReadFile(dir + "/" + f); err == nil {
				fmt.Printf("READ %s %q\n", f, b)
			}
		}
		if os.Getenv("HELPER_SANDBOX_WRITE") != "" {
			if err := c.WriteFile(dir+"/zmx", []byte("stolen\n")); err != nil {
				fmt.Println("WRITE-ERR", err)
			} else {
				fmt.Println("WRITE ok")
			}
		}
	}
}

// sandboxSetup starts a fake claude in a fixture home, its environment
// holding the marker and a zmx session, and a proc helper started by hand.
func sandboxSetup(t *testing.T) (home string, cl *fakeAgent, helper *daemon, hsock string) {
	t.Helper()
	requireRoot(t)
	home = fixtureHome(t)
	cwd := filepath.Join(home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	cl = startFake(t, "claude", home, cwd, "FAKE_SESSION=6f4b2d3c-1e5a-4b7c-9d0e-1f2a3b4c5d6e", "ZMX_SESSION=sbx", "ANTHROPIC_API_KEY="+sandboxMarker)
	waitRegistry(t, home, cl.pid())

	hsock = filepath.Join(t.TempDir(), "proc-helper.sock")
	helper = launch(t, "--serve-proc-helper", "--unix", hsock)
	helper.sock = hsock
	helper.waitReady()
	return home, cl, helper, hsock
}

// TestSandboxProcHelper: a real `9harnessd --serve-proc-helper` started by
// hand answers a real daemon beside it, and nothing else: this test's own
// binary (another executable), the same in `unshare --user` and
// `unshare --user --pid` (the owner's uid), and even a real 9harnessd in
// `unshare --user` get no byte, and the helper logs each refusal.
//
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestSandboxProcHelper(t *testing.T) {
	t.Parallel()
	home, cl, helper, hsock := sandboxSetup(t)

	peers := map[string][]string{"unsandboxed, another executable": nil}
	for name, wrap := range sandboxes(t) {
		peers[name] = wrap
	}
	for name, wrap := range peers {
		out := sandboxPeer(t, wrap, "helper", hsock, cl.pid())
		if !strings.Contains(out, "REPLY-BYTES 0\n") || strings.Contains(out, "LEAK") {
			t.Errorf("%s: the helper answered:\n%s", name, out)
		}
	}
	log := helper.stderr.String()
	for _, why := range []string{"its executable is not the helper's own", "another user namespace", "another pid namespace"} {
		if !strings.Contains(log, why) {
			t.Errorf("the helper's log does not name a refusal for %q:\n%s", why, log)
		}
	}

	// A real daemon beside it is answered: the agent's zmx, from its
	// environment through the helper.
	d := startDaemon(t, home, "--proc-helper", hsock)
	c := d.client()
	dir := "/active/claude/" + strconv.Itoa(cl.pid())
	eventually(t, func() bool { v, err := readField(c, dir+"/zmx"); return err == nil && v == "sbx" },
		"the agent's zmx through the helper")

	// The same 9harnessd in a user namespace is not: a sandbox that runs
	// the real binary gets nothing either.
	before := strings.Count(helper.stderr.String(), "refused")
	sock := filepath.Join(t.TempDir(), "harness.sock")
	args := append([]string{"--user", "--map-root-user", "--", bin("9harnessd"), "--unix", sock, "--audit", "stderr", "--proc-helper", hsock}, rootArgs(home)...)
	sd := launchCmd(t, "unshare", args...)
	sd.sock = sock
	sd.waitReady()
	sc := sd.client()
	// Its peers (this test, outside) are unknown to it: a grantee's view.
	if v, err := readField(sc, dir+"/zmx"); err == nil {
		t.Errorf("the daemon in a user namespace served zmx = %q", v)
	}
	eventually(t, func() bool {
		return strings.Count(helper.stderr.String(), "refused") > before &&
			strings.Contains(helper.stderr.String(), "pid="+strconv.Itoa(sd.cmd.Process.Pid)+" ")
	}, "the helper's refusal of the daemon in a user namespace")
	if strings.Contains(helper.stderr.String(), sandboxMarker) {
		t.Error("the helper logged an environment value")
	}
}

// TestSandboxDaemon: a copy of the test binary of the owner's uid inside
// `unshare --user` or `unshare --user --pid` reaching the daemon's socket
// is served the grantee view, whether the daemon reads /proc itself or
// through a proc helper: no zmx or tmux file, no value from the agent's
// environment, and its write to the zmx file is refused. The same binary
// outside a sandbox is served the owner's view (the control).
//
// Guards rule 2: no credential is listed or read.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestSandboxDaemon(t *testing.T) {
	t.Parallel()
	home, cl, _, hsock := sandboxSetup(t)

	for _, cfg := range []struct {
		name    string
		args    []string
		against string
	}{
		{"direct", []string{"--allow-move"}, "the daemon's reference"},
		{"through the helper", []string{"--allow-move", "--proc-helper", hsock}, "the proc helper's reference"},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			d := startDaemon(t, home, cfg.args...)
			// The control: unsandboxed, the same binary sees the agent's zmx.
			eventually(t, func() bool {
				return strings.Contains(sandboxPeer(t, nil, "daemon", d.sock, cl.pid()), `READ zmx "sbx\n"`)
			}, "the owner's view of the agent's zmx")
			// The namespaces first, "unshare --user" the first of all: the
			// daemon logs one sandbox verdict a second per uid, and the
			// check below reads that first line.
			kinds := sandboxes(t)
			rank := func(s string) int {
				if strings.HasPrefix(s, "unshare") {
					return 0
				}
				return 1
			}
			names := slices.SortedFunc(maps.Keys(kinds), func(a, b string) int {
				return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
			})
			for _, name := range names {
				wrap := kinds[name]
				out := sandboxPeer(t, wrap, "daemon", d.sock, cl.pid(), "HELPER_SANDBOX_WRITE=1")
				t.Logf("%s, served:\n%s", name, out)
				if strings.Contains(out, "DIAL") {
					t.Errorf("%s: not served at all (a grantee is served):\n%s", name, out)
				}
				for _, bad := range []string{"READ zmx", "READ tmux", "sbx", sandboxMarker, "WRITE ok"} {
					if strings.Contains(out, bad) {
						t.Errorf("%s: the sandboxed peer got %q:\n%s", name, bad, out)
					}
				}
				if ls, ok := lineWith(out, "LS "); ok && (strings.Contains(ls, "zmx") || strings.Contains(ls, "tmux")) {
					t.Errorf("%s: lists %q", name, ls)
				}
				if !strings.Contains(out, "WRITE-ERR") {
					t.Errorf("%s: the write was not refused:\n%s", name, out)
				}
			}
			log := d.stderr.Await("another user namespace than " + cfg.against)
			for _, ns := range []string{"user"} {
				if want := "another " + ns + " namespace than " + cfg.against + " (a sandbox)"; !strings.Contains(log, want) {
					t.Errorf("the daemon's log does not say %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, sandboxMarker) {
				t.Error("the daemon logged an environment value")
			}
		})
	}
}

func lineWith(out, prefix string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// cgroupUnits makes two sibling cgroups in the unified hierarchy, as a
// user manager makes 9harness-proc.service and 9harness.service, and
// removes them when the test's processes are gone. It returns their
// directories.
func cgroupUnits(t *testing.T) (helperUnit, daemonUnit string) {
	t.Helper()
	requireRoot(t)
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	root := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 {
				root = f[4]
			}
		}
	}
	if root == "" {
		missing(t, "a cgroup2 hierarchy")
	}
	base := filepath.Join(root, fmt.Sprintf("9h-units-%06d", rand.IntN(1e6)))
	helperUnit, daemonUnit = filepath.Join(base, "9harness-proc.service"), filepath.Join(base, "9harness.service")
	must(t, os.MkdirAll(helperUnit, 0o755))
	must(t, os.MkdirAll(daemonUnit, 0o755))
	// Registered first, so it runs after the processes' own cleanups.
	t.Cleanup(func() {
		for _, d := range []string{helperUnit, daemonUnit, base} {
			for i := 0; i < 50 && os.Remove(d) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	return helperUnit, daemonUnit
}

// launchIn is launchCmd with the process started inside a cgroup.
func launchIn(t *testing.T, cgroup, prog string, args ...string) *daemon {
	t.Helper()
	dir, err := os.Open(cgroup)
	must(t, err)
	defer dir.Close()
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(prog, args...)
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	must(t, d.cmd.Start())
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	return d
}
