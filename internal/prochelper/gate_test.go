package prochelper

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// TestMain lets the gate tests re-run this binary as a peer of the helper
// (PROCHELPER_ASK=SOCK): it asks for an agent's environment, its whole
// environment, its cwd and the helper's namespaces, and prints how many
// reply bytes came back and whether the agent's marker was among them.
func TestMain(m *testing.M) {
	if sock := os.Getenv("PROCHELPER_ASK"); sock != "" {
		os.Exit(askAsChild(sock))
	}
	os.Exit(m.Run())
}

func askAsChild(sock string) int {
	pid, _ := strconv.ParseUint(os.Getenv("PROCHELPER_PID"), 10, 32)
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("DIAL", err)
		return 1
	}
	defer c.Close()
	var req []byte
	for _, op := range []byte{opEnviron, opMoveEnv, opCwd} {
		req = binary.LittleEndian.AppendUint32(append(req, op), uint32(pid))
	}
	req = binary.LittleEndian.AppendUint32(append(req, opRef), 0)
	c.Write(req)
	c.(*net.UnixConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	fmt.Printf("REPLY %d\n", len(b))
	if strings.Contains(string(b), "sk-gate-marker") {
		fmt.Println("LEAK")
	}
	return 0
}

func TestDaemonUnit(t *testing.T) {
	for _, tc := range []struct{ own, override, want string }{
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/9harness-proc.service", "",
			"/user.slice/user-1000.slice/user@1000.service/app.slice/9harness.service"},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/9h-proc.service", "9h-daemon.service",
			"/user.slice/user-1000.slice/user@1000.service/app.slice/9h-daemon.service"},
		{"/system.slice/foo-proc.service", "", "/system.slice/foo.service"},
		{"/", "", ""},
		{"", "", ""},
		{"/user.slice/session-3.scope", "", ""}, // started by hand in a login session
		{"/user.slice/user@0.service/app.slice/other.service", "", ""}, // not NAME-proc.service
		{"/a/-proc.service", "", ""},
		{"/a/x-proc.service", "../evil.service", ""},
		{"/a/x-proc.service", "evil.scope", ""},
	} {
		if got := DaemonUnit(tc.own, tc.override); got != tc.want {
			t.Errorf("DaemonUnit(%q, %q) = %q, want %q", tc.own, tc.override, got, tc.want)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0::/user.slice/u.service\n", "/user.slice/u.service"},
		{"12:name=systemd:/app.slice/a.service\n0::/\n", "/app.slice/a.service"},
		{"12:name=systemd:/app.slice/a.service\n0::/app.slice/b.service\n", "/app.slice/b.service"},
		{"4:memory:/x\n0::/\n", "/"},
		{"", "/"},
	} {
		if got := peer.CgroupPath([]byte(tc.in)); got != tc.want {
			t.Errorf("CgroupPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// peerRun is one way of running this test binary as a peer of the helper.
type peerRun struct {
	name    string
	wrap    []string // a program that execs the peer (unshare ...), or none
	copyExe bool     // run a copy of the binary: the same bytes, another file
	cgroup  string   // start it in this cgroup directory
	answer  bool     // the helper answers it
	why     string   // else: the helper's log names this
}

func (r peerRun) run(t *testing.T, sock string, agent int, lb *logBuf) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if r.copyExe {
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(t.TempDir(), "copy.test")
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argv := append(append([]string{}, r.wrap...), exe)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PROCHELPER_ASK=" + sock, "PROCHELPER_PID=" + strconv.Itoa(agent)}
	if r.cgroup != "" {
		dir, err := os.Open(r.cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	}
	before := len(lb.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v\n%s", r.name, err, out)
		return
	}
	n := -1
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "REPLY "); ok {
			n, _ = strconv.Atoi(rest)
		}
	}
	leaked := strings.Contains(string(out), "LEAK")
	log := lb.String()[before:]
	switch {
	case r.answer && (n <= 0 || !leaked):
		t.Errorf("%s: %d reply bytes (marker seen: %v), want the daemon's answers\n%s%s", r.name, n, leaked, out, log)
	case !r.answer && (n != 0 || leaked):
		t.Errorf("%s: %d reply bytes (marker seen: %v), want none\n%s", r.name, n, leaked, out)
	case !r.answer && (!strings.Contains(log, "refused") || !strings.Contains(log, r.why)):
		t.Errorf("%s: the helper's log does not name the refusal (%q):\n%s", r.name, r.why, log)
	}
}

// Started by hand, the helper answers only this same executable in its
// own user, mount and pid namespaces: the same binary in a user namespace
// (with or without a pid namespace), in another mount namespace, or
// another binary of the same uid, gets no byte of any environment and no
// answer at all, and the helper logs why.
func TestGateByHand(t *testing.T) {
	requireRoot(t)
	unshare := requireTool(t, "unshare")
	sock, _, lb := startGate(t, 0, nil)
	agent := candidate(t, t.TempDir(), []string{"ZMX_SESSION=gate", "ANTHROPIC_API_KEY=sk-gate-marker"}).Process.Pid
	for _, r := range []peerRun{
		{name: "the helper's own executable", answer: true},
		{name: "a copy of it", copyExe: true, why: "executable is not the helper's own"},
		{name: "unshare --user", wrap: []string{unshare, "--user", "--map-root-user"}, why: "another user namespace"},
		{name: "unshare --user --map-current-user", wrap: []string{unshare, "--user", "--map-current-user"}, why: "another user namespace"},
		{name: "unshare --user --pid", wrap: []string{unshare, "--user", "--map-root-user", "--pid", "--fork"}, why: "another pid namespace"},
		{name: "unshare --mount", wrap: []string{unshare, "--mount"}, why: "another mnt namespace"},
	} {
		r.run(t, sock, agent, lb)
	}
}

// Under systemd the daemon runs in its own unit, in its own user and mount
// namespaces (PrivateUsers=yes): the helper answers this executable there,
// in a user namespace its uid made directly in the helper's, and nothing
// outside that unit, in a nested user namespace or in another pid
// namespace.
//
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestGateUnit(t *testing.T) {
	requireRoot(t)
	unshare := requireTool(t, "unshare")
	root := cgroup2(t)
	base := filepath.Join(root, fmt.Sprintf("9h-gate-%06d", rand.IntN(1e6)))
	unit := filepath.Join(base, "9harness.service")
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The peers have exited (CombinedOutput waited for them).
		os.Remove(unit)
		os.Remove(base)
	})
	g, err := NewGate(uint32(os.Getuid()), "")
	if err != nil {
		t.Fatal(err)
	}
	g.Unit = strings.TrimPrefix(unit, root)
	sock, _, lb := startGate(t, 0, g)
	agent := candidate(t, t.TempDir(), []string{"ZMX_SESSION=gate", "ANTHROPIC_API_KEY=sk-gate-marker"}).Process.Pid
	userns := []string{unshare, "--user", "--map-root-user"}
	for _, r := range []peerRun{
		{name: "in the unit", cgroup: unit, answer: true},
		{name: "in the unit, in its own user and mount namespaces (PrivateUsers=yes)", cgroup: unit, answer: true,
			wrap: append(append([]string{}, userns...), "--mount")},
		{name: "outside the unit", why: "not in the daemon's unit"},
		{name: "outside the unit, in a user namespace", wrap: userns, why: "not in the daemon's unit"},
		{name: "in the unit, a copy of the binary", cgroup: unit, copyExe: true, why: "executable is not the helper's own"},
		{name: "in the unit, in a nested user namespace", cgroup: unit,
			wrap: append(append([]string{}, userns...), userns...), why: "not one that uid"},
		{name: "in the unit, in a pid namespace", cgroup: unit,
			wrap: append(append([]string{}, userns...), "--pid", "--fork"), why: "another pid namespace"},
	} {
		r.run(t, sock, agent, lb)
	}
}

// cgroup2 returns where the unified cgroup hierarchy is mounted.
func cgroup2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 {
				return f[4]
			}
		}
	}
	fail(t, "no cgroup2 hierarchy is mounted")
	return ""
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		fail(t, "needs root")
	}
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		fail(t, name+" is not installed")
	}
	return p
}

// fail skips, except under CI=true, where a missing prerequisite fails.
func fail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true: " + why)
	}
	t.Skip(why)
}

// The reference and peer replies carry namespaces as the helper reads
// them; a peer whose namespaces the helper may not read is unknown, never
// the owner's.
func TestCompare(t *testing.T) {
	ref := proc.NS{User: 1, Mnt: 2, PID: 3}
	for _, tc := range []struct {
		ns   proc.NS
		err  error
		want string
	}{
		{ref, nil, ""},
		{proc.NS{User: 9, Mnt: 2, PID: 3}, nil, "user"},
		{proc.NS{User: 1, Mnt: 9, PID: 3}, nil, "mnt"},
		{proc.NS{User: 1, Mnt: 2, PID: 9}, nil, "pid"},
		{proc.NS{}, nil, "unknown"},
		{proc.NS{User: 1, Mnt: 2}, nil, "unknown"},
		{ref, os.ErrPermission, "unknown"},
	} {
		if got := peer.Compare(tc.ns, tc.err, ref); got != tc.want {
			t.Errorf("Compare(%+v, %v) = %q, want %q", tc.ns, tc.err, got, tc.want)
		}
	}
	if got := peer.Compare(ref, nil, proc.NS{}); got != "unknown" {
		t.Errorf("against an unknown reference: %q", got)
	}
}
