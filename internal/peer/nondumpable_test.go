package peer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/proc"
)

// The processes of TestNonDumpablePeer are this test binary run again,
// as TestNonDumpableRole with roleEnv set.
const (
	roleEnv = "NINEHARNESS_TEST_NONDUMPABLE_ROLE"
	sockEnv = "NINEHARNESS_TEST_NONDUMPABLE_SOCK"
	nEnv    = "NINEHARNESS_TEST_NONDUMPABLE_N"
	// nobody: a uid without privilege, which the kernel refuses the
	// namespaces of a non-dumpable process of its own.
	nobody = 65534
)

// A non-dumpable peer of the judge's own uid (what sshd's session process
// is to the daemon) is refused its ns links, and is placed from its
// status, uid_map and mountinfo: in the judge's namespaces when it is,
// and in a sandbox when it was started in a new mount, pid or user
// namespace. The judge and the peers run as uid 65534: root could read
// the links. Root is needed to start them there, and in new namespaces.
func TestNonDumpablePeer(t *testing.T) {
	if os.Geteuid() != 0 {
		skipUnlessCI(t, "needs root to start processes as uid %d and in new namespaces", nobody)
	}
	dir, err := os.MkdirTemp("", "nondumpable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The test binary's own directory is root's alone: uid 65534 runs a
	// copy.
	bin := filepath.Join(dir, "peer.test")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(dir, "s")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sockDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "judge")
	asNobody := &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}

	peers := []struct {
		want string // the judge's verdict
		attr *syscall.SysProcAttr
	}{
		{"", &syscall.SysProcAttr{Credential: asNobody}},
		{"mnt", &syscall.SysProcAttr{Credential: asNobody, Unshareflags: unix.CLONE_NEWNS}},
		{"pid", &syscall.SysProcAttr{Credential: asNobody, Cloneflags: unix.CLONE_NEWPID}},
		// Root inside a user namespace of its own, which is uid 65534 to
		// the judge (the Credential makes it so: the creator's uid is
		// still 0, which the new namespace does not map).
		{"user", &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
		}},
	}

	judge := role(bin, "judge", sock, &syscall.SysProcAttr{Credential: asNobody})
	judge.Env = append(judge.Env, nEnv+"="+strconv.Itoa(len(peers)))
	out, err := judge.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuf
	judge.Stderr = &stderr
	if err := judge.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { judge.Process.Kill(); judge.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var said []string // the judge's other lines, for a failure
	next := func(prefix string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the judge exited before saying %q; it said %q, and on stderr: %s", prefix, said, stderr.String())
				}
				if rest, ok := strings.CutPrefix(l, prefix); ok {
					return rest
				}
				said = append(said, l)
			case <-timeout:
				judge.Process.Signal(syscall.SIGQUIT) // its goroutines, on stderr
				time.Sleep(time.Second)
				t.Fatalf("no %q from the judge in 30s; it said %q, and on stderr: %s", prefix, said, stderr.String())
			}
		}
	}
	next("listening")

	want := map[int]string{}
	for _, pr := range peers {
		cmd := role(bin, "peer", sock, pr.attr)
		var said syncBuf
		cmd.Stdout, cmd.Stderr = &said, &said
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the peer for %q: %v", pr.want, err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("the peer for %q said: %s", pr.want, said.String())
			}
		})
		want[cmd.Process.Pid] = pr.want
	}
	for range peers {
		line := next("verdict ")
		var pid int
		var eacces bool
		var strict, fallback string
		if _, err := fmt.Sscanf(line, "pid=%d eacces=%t strict=%q fallback=%q", &pid, &eacces, &strict, &fallback); err != nil {
			t.Fatalf("judge said %q: %v", line, err)
		}
		w, ok := want[pid]
		if !ok {
			t.Fatalf("judge judged pid %d, none of ours (%v)", pid, want)
		}
		delete(want, pid)
		if !eacces {
			t.Errorf("peer %q: reading its ns links was not refused (EACCES): it does not test the fallback", w)
		}
		if strict != "unknown" {
			t.Errorf("peer %q: by its ns links alone it is %q, want unknown", w, strict)
		}
		if fallback != w {
			t.Errorf("peer %q: judged %q", w, fallback)
		}
	}
	if err := judge.Wait(); err != nil {
		t.Errorf("judge: %v; its stderr: %s", err, stderr.String())
	}
}

// TestNonDumpableRole is a process of TestNonDumpablePeer, and returns at
// once otherwise.
func TestNonDumpableRole(t *testing.T) {
	sock := os.Getenv(sockEnv)
	switch os.Getenv(roleEnv) {
	case "peer":
		// Like sshd's session process: not dumpable, so its own uid may
		// not read its ns links. It stays until the judge hangs up.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
			t.Fatalf("still dumpable: %d %v", d, err)
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Read(make([]byte, 1))
		c.Close()
	case "judge":
		judgeRole(t, sock)
	default:
		// Not started as a role (the helper-process idiom of os/exec's
		// tests): nothing to do, and nothing missing.
		return
	}
}

// judgeRole accepts the peers and says, for each, whether its ns links
// were refused, its verdict by them alone, and its verdict with the
// fallback, against this process, as the daemon judges its peers.
func judgeRole(t *testing.T, sock string) {
	n, err := strconv.Atoi(os.Getenv(nEnv))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref, err := proc.ReadNS("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("listening")
	for range n {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		p, err := Identify(c, "")
		if err != nil {
			t.Fatal(err)
		}
		_, rerr := proc.ReadNS("/proc/" + strconv.Itoa(int(p.PID)))
		ns, nerr := p.Namespaces()
		fmt.Printf("verdict pid=%d eacces=%t strict=%q fallback=%q\n", p.PID, errors.Is(rerr, unix.EACCES), Compare(ns, nerr, ref), p.Sandbox(ref))
		p.Close()
		c.Close()
	}
}

func role(bin, name, sock string, attr *syscall.SysProcAttr) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^TestNonDumpableRole$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), roleEnv+"="+name, sockEnv+"="+sock)
	cmd.Dir = "/"
	cmd.SysProcAttr = attr
	return cmd
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncBuf collects a child's output, which may be read while it runs.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// skipUnlessCI skips, saying why, except under CI=true, where a missing
// prerequisite must fail.
func skipUnlessCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}
