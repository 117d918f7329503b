package peer

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/proc"
)

// selfPeer identifies one end of a socketpair: its peer is the pair's
// creator, this process.
func selfPeer(t *testing.T) *Peer {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	t.Cleanup(func() { unix.Close(fds[0]) })
	p, err := FromFD(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The pinned reads of our own connection say what /proc/self says, and
// FromFD gives the same account as Identify.
func TestPinnedSelf(t *testing.T) {
	p := selfPeer(t)
	if p.PID != int32(os.Getpid()) || p.PIDFD() < 0 {
		t.Fatalf("FromFD: %+v", p)
	}
	self, err := proc.ReadNS("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	if ns, err := p.Namespaces(); err != nil || ns != self {
		t.Errorf("namespaces %+v %v, want %+v", ns, err, self)
	}
	if v := p.Sandbox(self); v != "" {
		t.Errorf("Sandbox against our own = %q", v)
	}
	if v := p.Sandbox(proc.NS{User: self.User + 1, Mnt: self.Mnt, PID: self.PID}); v != "user" {
		t.Errorf("Sandbox against another user namespace = %q", v)
	}
	// The whole confinement: ours, and no restriction against our own
	// reference; one more filter than ours is a restriction.
	ref, err := proc.ReadReference()
	if err != nil {
		t.Fatal(err)
	}
	mine, err := proc.ReadConfinement("/proc/self")
	if c, cerr := p.Confinement("/proc/self", self); err != nil || cerr != nil || c != mine {
		t.Errorf("confinement %+v %v, want %+v %v", c, cerr, mine, err)
	}
	if v := p.Restriction(ref); v != "" {
		t.Errorf("Restriction against our own reference = %q", v)
	}
	if ref.Seccomp == 0 {
		if v := p.Restriction(proc.Confinement{NS: ref.NS, NoNewPrivs: true, Seccomp: 2, SeccompFilters: 0, LSM: ref.LSM}); v != "" {
			t.Errorf("Restriction against a more confined reference = %q", v)
		}
	}
	exe, err := p.Exe()
	want, err2 := SelfExe()
	if err != nil || err2 != nil || exe != want || exe.Ino == 0 {
		t.Errorf("exe %+v %v, self %+v %v", exe, err, want, err2)
	}
	cg, err := p.Cgroup()
	own, _ := os.ReadFile("/proc/self/cgroup")
	if err != nil || cg != CgroupPath(own) {
		t.Errorf("cgroup %q %v, want %q", cg, err, CgroupPath(own))
	}
}

// Without a pidfd nothing is read: the process cannot be told from one
// that took its pid.
func TestNotPinned(t *testing.T) {
	p := &Peer{Cred: Cred{PID: int32(os.Getpid())}, pidfd: -1}
	if _, err := p.Namespaces(); err == nil {
		t.Error("namespaces read without a pidfd")
	}
	if _, err := p.Exe(); err == nil {
		t.Error("exe read without a pidfd")
	}
	if v := p.Sandbox(proc.NS{User: 1, Mnt: 2, PID: 3}); v != "unknown" {
		t.Errorf("Sandbox without a pidfd = %q, want unknown", v)
	}
	if v := p.Restriction(proc.Confinement{NS: proc.NS{User: 1, Mnt: 2, PID: 3}}); v != proc.Unknown {
		t.Errorf("Restriction without a pidfd = %q, want unknown", v)
	}
}

// A peer that has exited is not read, even though the pidfd keeps its pid
// from being reused.
func TestPinnedExited(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: no python3 to connect from a child (.ci/run installs it)")
		}
		t.Skip("no python3 to connect from a child")
	}
	cmd := exec.Command(nc, "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(1)", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := Identify(c, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Exe(); err != nil {
		t.Fatalf("exe of a live child: %v", err)
	}
	c.Write([]byte{0})
	cmd.Wait()
	if _, err := p.Namespaces(); err == nil {
		t.Error("namespaces of an exited peer")
	}
	if _, err := p.Exe(); err == nil {
		t.Error("exe of an exited peer")
	}
}
