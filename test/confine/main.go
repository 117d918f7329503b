// Command confine runs a program under a sandbox the kernel enforces
// without any namespace, for the tests of rule 9:
//
//	confine landlock [-ro DIR]... -- PROG ARG...
//	confine seccomp -- PROG ARG...
//
// landlock: no_new_privs (which an unprivileged process needs for
// Landlock), then a Landlock domain that handles reading files and
// directories and allows it only beneath each -ro DIR; everything else
// (the owner's home, say) the kernel refuses to read.
// seccomp: no_new_privs and a seccomp filter that allows every system
// call: it restricts nothing, but the kernel shows it (status Seccomp: 2).
//
// Then it execs PROG. Each restriction is per thread, so all of it runs
// on the one thread that execs.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { runtime.LockOSThread() }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "confine:", err)
		os.Exit(111)
	}
}

func run(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: confine landlock|seccomp [-ro DIR]... -- PROG ARG...")
	}
	mode, args := args[0], args[1:]
	var ro []string
	for len(args) > 0 && args[0] != "--" {
		if args[0] != "-ro" || len(args) < 2 {
			return fmt.Errorf("unknown argument %q", args[0])
		}
		ro, args = append(ro, args[1]), args[2:]
	}
	if len(args) < 2 {
		return fmt.Errorf("no program after --")
	}
	prog, err := exec.LookPath(args[1])
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	switch mode {
	case "landlock":
		err = landlock(ro)
	case "seccomp":
		err = seccomp()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	return syscall.Exec(prog, args[1:], os.Environ())
}

func landlock(ro []string) error {
	const read = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// Only the first field: every Landlock ABI knows it.
	attr := unix.LandlockRulesetAttr{Handled_access_fs: read}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	for _, dir := range ro {
		d, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		var st unix.Stat_t
		unix.Fstat(d, &st)
		allowed := uint64(read)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			allowed = unix.LANDLOCK_ACCESS_FS_READ_FILE
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: allowed, Parent_fd: int32(d)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(d)
		if e != 0 {
			return fmt.Errorf("landlock_add_rule %s: %w", dir, e)
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

func seccomp() error {
	filter := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	return nil
}
