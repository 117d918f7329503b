// Package confine starts a program that can reach no file: a Landlock
// domain that handles every filesystem right the kernel knows, no TCP, no
// abstract unix socket and no signal outside the domain, and grants only
// what loading the program needs (its executable, its ELF interpreter and
// shared libraries, read-only) plus whatever files the caller names.
//
// The daemon runs tmux clients this way. A tmux client obeys its server:
// the server can ask it to open a file for reading or writing on its
// behalf (MSG_READ_OPEN, MSG_WRITE_OPEN: load-buffer, save-buffer,
// source-file) or to exec a shell. Confined, such a request fails in the
// kernel, whatever server answered.
//
// How the domain reaches the child. Landlock restricts the calling thread
// (landlock_restrict_self), and a child inherits the credentials of the
// thread that forks it. Go's os/exec runs no code of ours between fork
// and exec, so Start locks a goroutine to a fresh OS thread, restricts
// that thread (with no_new_privs, which Landlock requires of an
// unprivileged caller), forks from it, and lets the goroutine end still
// locked, which makes the runtime terminate the thread: no other
// goroutine ever runs on it, and the runtime never clones a new thread
// from a locked one (it asks its template thread instead). This was
// preferred to re-executing the daemon's own binary as a shim between
// fork and exec: there is no second program to find and trust, no second
// Go runtime to start per tmux call, and the restriction is applied by
// the very process that judged the server.
//
// Pathname unix sockets are not filesystem accesses Landlock restricts at
// the ABIs this package handles (up to 7), so the child still connects to
// the socket it is given; abstract sockets are scoped (ABI 6).
package confine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported means the kernel has no Landlock (or it is disabled).
var ErrUnsupported = errors.New("the kernel has no Landlock")

// fs rights by the ABI that introduced them.
const (
	fsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsABI2 = fsABI1 | unix.LANDLOCK_ACCESS_FS_REFER
	fsABI3 = fsABI2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsABI5 = fsABI3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// Rights that may be granted on a file that is not a directory.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// Read and Exec are what a Rule grants.
	Read = unix.LANDLOCK_ACCESS_FS_READ_FILE
	Exec = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE
	// ReadTree grants reading the files and directories beneath a
	// directory.
	ReadTree = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// Rule grants access to the file (or beneath the directory) at Path. A
// rule whose path does not exist is skipped.
type Rule struct {
	Path   string
	Access uint64
}

var (
	abiOnce sync.Once
	abi     int
)

// ABI returns the kernel's Landlock ABI version, 0 when it has none.
func ABI() int {
	abiOnce.Do(func() {
		v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if e == 0 {
			abi = int(v)
		}
	})
	return abi
}

// rulesetAttr is struct landlock_ruleset_attr up to scoped (ABI 6): the
// kernel takes the size it is given.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

func handled(v int) rulesetAttr {
	var a rulesetAttr
	switch {
	case v >= 5:
		a.handledFS = fsABI5
	case v >= 3:
		a.handledFS = fsABI3
	case v == 2:
		a.handledFS = fsABI2
	default:
		a.handledFS = fsABI1
	}
	if v >= 4 {
		a.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if v >= 6 {
		a.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return a
}

// ruleset makes a ruleset fd handling every right of the kernel's ABI,
// with rules.
func ruleset(rules []Rule) (int, error) {
	v := ABI()
	if v < 1 {
		return -1, ErrUnsupported
	}
	attr := handled(v)
	size := unsafe.Sizeof(attr)
	if v < 4 {
		size = 8 // handled_access_fs only
	} else if v < 6 {
		size = 16
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	rs := int(fd)
	for _, r := range rules {
		pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // nothing there to grant
		}
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			unix.Close(pfd)
			unix.Close(rs)
			return -1, fmt.Errorf("%s: %w", r.Path, err)
		}
		access := r.Access & attr.handledFS
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= fileRights
		}
		pb := struct {
			allowed uint64
			parent  int32
		}{access, int32(pfd)}
		// struct landlock_path_beneath_attr is packed: 12 bytes.
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		unix.Close(pfd)
		if e != 0 {
			unix.Close(rs)
			return -1, fmt.Errorf("landlock_add_rule %s: %w", r.Path, e)
		}
	}
	return rs, nil
}

// Start starts cmd confined: it reaches only the files rules grant, plus
// what loading cmd.Path needs (ProgramRules). cmd.Path must be absolute.
// A nil Stdin, Stdout or Stderr is /dev/null, opened here before the
// restriction. On a kernel without Landlock it returns ErrUnsupported and
// starts nothing.
func Start(cmd *exec.Cmd, rules []Rule) error {
	if !filepath.IsAbs(cmd.Path) {
		return fmt.Errorf("confine: %q is not an absolute path", cmd.Path)
	}
	prog, err := ProgramRules(cmd.Path)
	if err != nil {
		return err
	}
	rs, err := ruleset(append(prog, rules...))
	if err != nil {
		return err
	}
	defer unix.Close(rs)
	// exec.Cmd opens /dev/null itself for a nil stream: on the restricted
	// thread that open would be refused.
	var nulls []*os.File
	defer func() {
		for _, f := range nulls {
			f.Close()
		}
	}()
	if cmd.Stdin == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		nulls = append(nulls, f)
		cmd.Stdin = f
	}
	if cmd.Stdout == nil || cmd.Stderr == nil {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		nulls = append(nulls, f)
		if cmd.Stdout == nil {
			cmd.Stdout = f
		}
		if cmd.Stderr == nil {
			cmd.Stderr = f
		}
	}
	errc := make(chan error, 1)
	go restrictAndStart(cmd, rs, errc)
	return <-errc
}

// restrictAndStart restricts the thread it runs on and starts cmd from
// it, sending Start's error to errc. Never on the process's main thread:
// that thread's credentials are what /proc/PID/status shows of the whole
// process (the daemon would look sandboxed to every judgement), and the
// runtime never ends it. There, it holds the main thread while another
// goroutine, which cannot then run on it, does the work.
func restrictAndStart(cmd *exec.Cmd, rs int, errc chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			restrictAndStart(cmd, rs, errc)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	// Never unlocked: the thread ends with this goroutine.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		errc <- fmt.Errorf("confine: no_new_privs: %w", err)
		return
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); e != 0 {
		errc <- fmt.Errorf("confine: landlock_restrict_self: %w", e)
		return
	}
	errc <- cmd.Start()
}

// Output is cmd.Output, confined as Start confines it.
func Output(cmd *exec.Cmd, rules []Rule) ([]byte, error) {
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := Start(cmd, rules); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && stderr.Len() > 0 {
		ee.Stderr = stderr.Bytes()
	}
	return out.Bytes(), err
}

// shebang is the interpreter a script names on its #! line, or "".
func shebang(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var b [256]byte
	n, _ := f.Read(b[:])
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return ""
	}
	fields := strings.Fields(string(rest))
	if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
		return ""
	}
	return fields[0]
}

// program is what loading one executable needs, cached by the file's
// identity.
type program struct {
	dev, ino uint64
	mtime    unix.Timespec
	rules    []Rule
}

var (
	progMu sync.Mutex
	progs  = map[string]program{}
)

// ProgramRules is what loading the executable at path needs: the file
// itself and its ELF interpreter (read and execute), every shared library
// the interpreter resolves for it and the interpreter's cache (read).
// The libraries are learnt by asking the interpreter to list them (as
// ldd does), which loads nothing of the program's code; path is a program
// the caller already trusts to run.
func ProgramRules(path string) ([]Rule, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	progMu.Lock()
	p, ok := progs[path]
	progMu.Unlock()
	// The cached slice is shared by every caller: it is returned clipped,
	// so that a caller's append (Start's) copies it rather than writing
	// into its spare capacity while another caller does the same.
	if ok && p.dev == st.Dev && p.ino == st.Ino && p.mtime == st.Mtim {
		return slices.Clip(p.rules), nil
	}
	rules, err := programRules(path)
	if err != nil {
		return nil, err
	}
	progMu.Lock()
	progs[path] = program{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, rules: rules}
	progMu.Unlock()
	return slices.Clip(rules), nil
}

func programRules(path string) ([]Rule, error) {
	return programRules1(path, 0)
}

func programRules1(path string, depth int) ([]Rule, error) {
	rules := []Rule{{Path: path, Access: Exec}}
	if interp := shebang(path); interp != "" && depth < 4 {
		// A script (a wrapper, say): the kernel execs its interpreter.
		more, err := programRules1(interp, depth+1)
		if err != nil {
			return nil, err
		}
		return append(rules, more...), nil
	}
	interp, err := elfInterp(path)
	if err != nil {
		return nil, err
	}
	if interp == "" {
		return rules, nil // static
	}
	rules = append(rules, Rule{Path: interp, Access: Exec}, Rule{Path: "/etc/ld.so.cache", Access: Read})
	cmd := exec.Command(interp, "--list", path)
	cmd.Env = []string{}
	cmd.Dir = "/"
	done := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() {
		select {
		case <-done:
		default:
			if cmd.Process != nil {
				cmd.Process.Kill()
			}
		}
	})
	out, err := cmd.Output()
	close(done)
	timer.Stop()
	if err != nil {
		return nil, fmt.Errorf("%s --list %s: %w", interp, path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "\t/lib64/ld-linux-x86-64.so.2 (0x...)"
		ln := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(ln, "=> "); ok {
			ln = after
		}
		lib, _, _ := strings.Cut(ln, " (")
		if filepath.IsAbs(lib) {
			rules = append(rules, Rule{Path: lib, Access: Read})
		}
	}
	return rules, nil
}
