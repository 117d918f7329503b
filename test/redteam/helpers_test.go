//go:build redteam

package redteam

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/client"
)

// The helper peers: this test binary again (bins/self.test), run by an
// attacker under another uid, in a sandbox, or confined.

// helperMode says this run is a helper peer started by an attacker.
func helperMode() bool {
	for _, k := range []string{"HELPER_FLOOD", "HELPER_BURST", "HELPER_CONFINE", "HELPER_SPY", "HELPER_PROBE"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// helper returns the command that runs the helper test name, wrapped in
// wrap (none: directly), with env added.
func helper(name string, wrap []string, env ...string) *exec.Cmd {
	return helperCtx(context.Background(), name, wrap, env...)
}

// helperCtx is helper, killed when ctx is done.
func helperCtx(ctx context.Context, name string, wrap []string, env ...string) *exec.Cmd {
	argv := append(append([]string{}, wrap...), bin("self.test"), "-test.run=^"+name+"$")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	return cmd
}

// TestHelperFlood, run by a flood attacker: HELPER_FLOOD is the socket.
// HELPER_FLOOD_WORKERS workers each call connect() and close() again and again, on
// non-blocking sockets, until standard input closes; nothing is ever
// written. It prints how many connects succeeded and how many found the
// backlog full.
func TestHelperFlood(t *testing.T) {
	sock := os.Getenv("HELPER_FLOOD")
	if sock == "" {
		return
	}
	var ok, full, other atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	addr := &unix.SockaddrUnix{Name: sock}
	workers, _ := strconv.Atoi(os.Getenv("HELPER_FLOOD_WORKERS"))
	for range max(workers, 1) {
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
				switch err := unix.Connect(fd, addr); {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, unix.EAGAIN):
					full.Add(1)
				default:
					other.Add(1)
				}
				unix.Close(fd)
			}
		}()
	}
	fmt.Println("FLOODING")
	bufio.NewReader(os.Stdin).ReadString('\n')
	stop.Store(true)
	wg.Wait()
	fmt.Printf("CONNECTS %d FULL %d OTHER %d\n", ok.Load(), full.Load(), other.Load())
}

// TestHelperBurst, run by the burst attacker inside a cgroup of its own:
// once a line arrives on standard input, HELPER_BURST clients
// `9harness -s HELPER_SOCK ls /` start at once; it prints how many
// succeeded, the slowest, and the first failures.
func TestHelperBurst(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HELPER_BURST"))
	if n == 0 {
		return
	}
	sock, client := os.Getenv("HELPER_SOCK"), os.Getenv("HELPER_CLIENT")
	bufio.NewReader(os.Stdin).ReadString('\n')
	var mu sync.Mutex
	var wg sync.WaitGroup
	var worst time.Duration
	ok := 0
	var fails []string
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, client, "-s", sock, "ls", "/")
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			worst = max(worst, took)
			if err == nil && strings.Contains(string(out), "active") {
				ok++
			} else {
				fails = append(fails, strings.ReplaceAll(fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out))), "\n", " "))
			}
		}()
	}
	wg.Wait()
	fmt.Printf("BURST %d OK %d WORST %d\n", n, ok, worst.Milliseconds())
	kinds := map[string]int{}
	for _, f := range fails {
		if i := strings.IndexAny(f, "[("); i > 0 {
			f = f[:i]
		}
		kinds[f]++
	}
	for k, c := range kinds {
		fmt.Printf("FAIL %d× %s\n", c, k)
	}
}

// TestHelperConfined, run by a rule-9 attacker as the daemon's own uid.
// Stage 1 (HELPER_CONFINE=landlock or seccomp; userns: none, the
// wrapper made the sandbox) confines the thread it is locked to and
// executes stage 2 from it, so that the whole new process
// carries the restriction: Landlock (with NoNewPrivs) that grants reads
// only of the system's directories and the binaries, or a seccomp filter
// that refuses mkdirat (installed as root, without NoNewPrivs). Stage 2
// (HELPER_STAGE=2) shows what the kernel refuses it and what the daemon
// gives it: each path of HELPER_OWNER_ONLY (the owner's view only) it can
// stat, the agent's zmx and tmux files, and a move of the agent.
func TestHelperConfined(t *testing.T) {
	mode := os.Getenv("HELPER_CONFINE")
	if mode == "" {
		return
	}
	if os.Getenv("HELPER_STAGE") != "2" {
		runtime.LockOSThread() // never unlocked: the thread execs
		var err error
		switch mode {
		case "landlock":
			err = landlock(strings.Split(os.Getenv("HELPER_READABLE"), ":"))
		case "seccomp":
			err = seccompNoMkdir()
		case "userns":
			// Already in the sandbox its wrapper made.
		default:
			err = fmt.Errorf("unknown confinement %q", mode)
		}
		if err != nil {
			fmt.Println("CONFINE-ERR", err)
			return
		}
		err = syscall.Exec(bin0(), os.Args, append(os.Environ(), "HELPER_STAGE=2"))
		fmt.Println("EXEC-ERR", err)
		return
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "NoNewPrivs:") || strings.HasPrefix(line, "Seccomp:") {
			fmt.Println("STATUS", strings.Join(strings.Fields(line), " "))
		}
	}
	// What the kernel refuses it directly.
	if _, err := os.ReadDir(os.Getenv("HELPER_HOME")); err != nil {
		fmt.Println("KERNEL-REFUSES home:", err)
	}
	probe := filepath.Join(os.TempDir(), fmt.Sprintf("9harness-redteam-mkdir-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o700); err != nil {
		fmt.Println("KERNEL-REFUSES mkdir:", err)
	} else {
		os.Remove(probe)
	}
	c, err := client.Dial(os.Getenv("HELPER_SOCK"))
	if err != nil {
		fmt.Println("DIAL-ERR", err)
		return
	}
	defer c.Close()
	if ents, err := c.ReadDir("/"); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
		}
		fmt.Println("ROOT", strings.Join(names, " "))
	}
	for _, p := range strings.Split(os.Getenv("HELPER_OWNER_ONLY"), "\n") {
		if _, _, err := c.Stat(p); err == nil {
			fmt.Println("SEES", p)
		}
	}
	agent := os.Getenv("HELPER_AGENT")
	for _, f := range []string{"zmx", "tmux", "resume"} {
		if _, _, err := c.Stat(agent + "/" + f); err == nil {
			fmt.Println("SEES", agent+"/"+f)
		}
	}
	if err := c.WriteFile(agent+"/tmux", []byte("rescued\n")); err != nil {
		fmt.Println("MOVE-REFUSED", err)
	} else {
		fmt.Println("MOVE-DONE")
	}
}

// bin0 is this executable.
func bin0() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

// landlock restricts the calling thread: files and directories may be
// read (and programs run) only beneath readable; nothing may be written.
func landlock(readable []string) error {
	const read = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_EXECUTE
	handled := uint64(read | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_DIR)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	for _, p := range readable {
		if p == "" {
			continue
		}
		pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // a directory this system lacks
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: read, Parent_fd: int32(pfd)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(pfd)
		if e != 0 {
			return fmt.Errorf("landlock_add_rule %s: %w", p, e)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// seccompNoMkdir installs on the calling thread a filter that refuses
// mkdirat with EPERM: as root (CAP_SYS_ADMIN), without NoNewPrivs, so that
// the filter alone is what the kernel shows.
func seccompNoMkdir() error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_MKDIRAT},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
