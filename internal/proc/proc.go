// Package proc reads a process table rooted at a directory: /proc, or a
// fixture tree with the same shape (<pid>/{stat,cmdline,environ,status,cwd,fd/}
// and a top-level stat with btime). It lists processes, never threads, and
// names a process by pid plus start time: a pid whose start time changed is
// another process.
//
// Reads are targeted rather than through a general /proc library
// (prometheus/procfs parses every field of every file it touches): a scan
// reads only cmdline for every process, and the rest only for the few that
// a harness claims, which is what keeps a listing of /active cheaper than
// ps on a machine with thousands of processes.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ClockTicks is USER_HZ, the unit of the start time: 100 on every Linux
// architecture Go supports.
const ClockTicks = 100

// Table is a process table rooted at a directory.
type Table struct {
	root string

	bootMu sync.Mutex
	boot   time.Time // btime, once read: it changes only with a reboot

	guard Guarded // nil: read cwd, environ and fd/ directly

	// owners says the kernel owns the root's process directories, each
	// owned by its process's effective uid (procfs); a fixture's are
	// owned by whoever wrote it, and say nothing.
	owners bool

	envs envCache // EnvironOf's

	held *held // nil: every read opens afresh (held.go)
}

// Guarded answers the reads the kernel guards with its ptrace check
// (/proc/<pid>/cwd, environ and fd/). A daemon in a user namespace is
// refused them for every process outside it, its own user's included, so
// it asks a helper that runs outside (package prochelper) instead.
type Guarded interface {
	Cwd(pid int) (string, error)
	// Environ returns the variables 9harness reads of a candidate agent
	// (Wanted), never the whole environment.
	Environ(pid int) ([]string, error)
	FDs(pid int) ([]string, error)
	Exe(pid int) (string, error)
	Namespaces(pid int) (NS, error)
	// Reference is the namespaces every peer and agent is judged against:
	// those of the helper itself, which runs in the user's own.
	Reference() (NS, error)
	// Confinement and ReferenceConfinement are Namespaces and Reference
	// with the rest of what the kernel shows of a sandbox (confine.go);
	// the reference's is the helper's Baseline.
	Confinement(pid int) (Confinement, error)
	ReferenceConfinement() (Confinement, error)
	TTYSize(pid int) (cols, rows int, err error)
	// TTYHeld is Table.TTYHeld for the process pid is now.
	TTYHeld(pid int) (bool, error)
	// MoveEnviron returns the whole environment, for a move the daemon
	// has authorized; it is never kept, logged or served.
	MoveEnviron(pid int) ([]string, error)
}

// SetGuarded routes the guarded reads through g. Call it before the table
// is shared.
func (t *Table) SetGuarded(g Guarded) { t.guard = g }

// New returns the table rooted at root ("/proc" for the live one).
func New(root string) *Table {
	t := &Table{root: strings.TrimSuffix(root, "/")}
	var fs unix.Statfs_t
	t.owners = unix.Statfs(root, &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC
	if t.owners {
		// Only procfs binds a file to its process; a fixture's files
		// are replaced by its test, and are read afresh.
		t.held = newHeld()
		t.held.pidfds = pidfdsUsable(t.root)
	}
	return t
}

// SetOwners says whether the owners of the root's process directories are
// the processes' effective uids, as procfs makes them (New finds out); a
// test whose fixture sets them says so. Call it before the table is shared.
func (t *Table) SetOwners(known bool) { t.owners = known }

// Root returns the directory the table reads.
func (t *Table) Root() string { return t.root }

// Proc is what identifies a process and what a harness matches on.
type Proc struct {
	PID   int
	PPID  int
	UID   uint32
	Start uint64 // field 22 of stat: clock ticks after boot
	Comm  string
	Argv  []string
	// TTY is field 7 of stat (tty_nr, 0 without a controlling terminal)
	// as the read that gave Start saw it, when TTYRead: a reader of many
	// agents' terminals (the table) takes it from its own scan instead
	// of reading each stat again.
	TTY     uint32
	TTYRead bool
}

// ErrGone means the process does not exist (or is no longer the one named).
var ErrGone = errors.New("no such process")

func (t *Table) path(pid int, name string) string {
	return t.root + "/" + strconv.Itoa(pid) + "/" + name
}

// PIDs lists the processes (numeric entries of the root; threads live under
// <pid>/task and are never listed), in ascending order. The files held
// for processes no longer listed are closed.
func (t *Table) PIDs() ([]int, error) {
	f, err := os.Open(t.root)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '1' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids) // procfs lists in pid order already: a single pass
	if t.held != nil {
		t.held.retain(pids)
	}
	return pids, nil
}

// Argv reads a process's command line. A process whose cmdline is empty
// (a kernel thread, a zombie) has no argv.
func (t *Table) Argv(pid int) ([]string, error) {
	var buf [4096]byte
	b, err := t.readHeld(pid, heldCmdline, buf[:0])
	if err != nil {
		return nil, err
	}
	return splitNul(b), nil
}

// ReadCmdline appends pid's raw cmdline (NUL-separated) to buf and returns
// it: usually one read (of the file held open since the last scan, or one
// open and one read), no allocation when buf is big enough. A scan reuses
// one buffer across the whole table.
func (t *Table) ReadCmdline(pid int, buf []byte) ([]byte, error) {
	return t.readHeld(pid, heldCmdline, buf)
}

// Owner is the owner of the process's directory, from one stat. The
// kernel gives it the process's effective uid, or root's while the process
// is not dumpable, so it answers only "certainly not uid": a directory
// owned by a uid other than uid or root is a process running with another
// user's effective uid, whose cwd, environ and fd/ the kernel refuses uid
// anyway. A stat costs about a third of a read of cmdline. ok is false
// when the table's owners say nothing (SetOwners).
func (t *Table) Owner(pid int) (uid uint32, ok bool, err error) {
	if !t.owners {
		return 0, false, nil
	}
	var st unix.Stat_t
	path := t.root + "/" + strconv.Itoa(pid)
	if err := unix.Stat(path, &st); err != nil {
		return 0, true, gone(&os.PathError{Op: "stat", Path: path, Err: err})
	}
	return st.Uid, true, nil
}

// SplitCmdline is a raw cmdline as argv, as Argv returns it.
func SplitCmdline(b []byte) []string { return splitNul(b) }

// read appends the file <pid>/<name> to buf with as few system calls as a
// /proc file allows: open, read into the spare capacity (a short read is
// the end: procfs fills the buffer it is given, and so does a regular
// file), close. os.ReadFile would add an fstat and a read that returns 0.
func (t *Table) read(pid int, name string, buf []byte) ([]byte, error) {
	path := t.path(pid, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, gone(&os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(4096, cap(buf)))
		}
		free := buf[len(buf):cap(buf)]
		n, err := unix.Read(fd, free)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, gone(&os.PathError{Op: "read", Path: path, Err: err})
		}
		buf = buf[:len(buf)+n]
		if n < len(free) {
			return buf, nil
		}
	}
}

func splitNul(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	// A process that rewrote its title (process.title) may leave spaces in
	// one argument instead of NULs; the caller sees what the kernel shows.
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// Stat reads pid's identity: ppid, start time, comm, uid and argv.
func (t *Table) Stat(pid int) (Proc, error) {
	p, err := t.Ident(pid)
	if err != nil {
		return Proc{}, err
	}
	if argv, err := t.Argv(pid); err == nil {
		p.Argv = argv
	}
	return p, nil
}

// Ident is Stat without argv: one read of stat and one of status, for a
// caller that has just read the cmdline itself.
func (t *Table) Ident(pid int) (Proc, error) {
	p, err := t.IdentStat(pid)
	if err != nil {
		return Proc{}, err
	}
	if uid, err := t.UID(pid); err == nil {
		p.UID = uid
	}
	return p, nil
}

// IdentStat is Ident without the uid: one read of stat. A scan uses it to
// classify a candidate and reads the uid (status, the costlier file for
// the kernel to write) only for the candidates that are sessions.
func (t *Table) IdentStat(pid int) (Proc, error) {
	var buf [1024]byte
	b, err := t.readHeld(pid, heldStat, buf[:0])
	if err != nil {
		return Proc{}, err
	}
	p, err := ParseStat(b)
	if err != nil {
		return Proc{}, err
	}
	p.PID = pid
	return p, nil
}

// UID returns the process's real uid, from its pidfd where the kernel
// answers for one (pidfd.go), else from its status.
func (t *Table) UID(pid int) (uint32, error) {
	if t.held != nil && t.held.pidfds {
		return t.uidByPidfd(pid)
	}
	var buf [2048]byte
	b, err := t.readHeld(pid, heldStatus, buf[:0])
	if err != nil {
		return 0, err
	}
	uid, ok := parseUID(b)
	if !ok {
		return 0, fmt.Errorf("proc: no Uid in %s", t.path(pid, "status"))
	}
	return uid, nil
}

// ParseStat parses a stat line. The comm sits between the first '(' and
// the LAST ')': a comm may itself hold ") (", so fields are split only
// after the last ')'.
func ParseStat(b []byte) (Proc, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Proc{}, fmt.Errorf("proc: malformed stat")
	}
	ppid, start, tty, ttyOK, err := statFields(b[end+1:])
	if err != nil {
		return Proc{}, err
	}
	return Proc{PPID: ppid, Start: start, Comm: string(b[open+1 : end]), TTY: tty, TTYRead: ttyOK}, nil
}

// statFields reads field 4 (ppid), field 7 (tty_nr; ttyOK false when it
// is not a number statTTY would take) and field 22 (starttime) from what
// follows the comm, without allocating.
func statFields(rest []byte) (ppid int, start uint64, tty uint32, ttyOK bool, err error) {
	// The first field after the comm is field 3 (state).
	field, n := 3, 0
	var pp, tt, st []byte
	for i := 0; i < len(rest); {
		for i < len(rest) && isSpace(rest[i]) {
			i++
		}
		if i == len(rest) {
			break
		}
		j := i
		for j < len(rest) && !isSpace(rest[j]) {
			j++
		}
		switch field {
		case 4:
			pp = rest[i:j]
		case 7:
			tt = rest[i:j]
		case 22:
			st = rest[i:j]
		}
		n++
		field++
		i = j
		if st != nil {
			break
		}
	}
	if st == nil {
		return 0, 0, 0, false, fmt.Errorf("proc: short stat (%d fields after comm)", n)
	}
	p, ok1 := atou(pp)
	s, ok2 := atou(st)
	if !ok1 || !ok2 || p > 1<<31 {
		return 0, 0, 0, false, fmt.Errorf("proc: malformed stat fields")
	}
	t, ok := atou(tt)
	return int(p), s, uint32(t), ok && t <= 1<<32-1, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

func atou(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// parseUID finds the real uid (the first number of the "Uid:" line).
func parseUID(b []byte) (uint32, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		i := 0
		for i < len(rest) && isSpace(rest[i]) {
			i++
		}
		j := i
		for j < len(rest) && !isSpace(rest[j]) {
			j++
		}
		u, ok := atou(rest[i:j])
		return uint32(u), ok && u <= 1<<32-1
	}
	return 0, false
}

// Parent reads pid's ppid and start time from one read of its stat.
func (t *Table) Parent(pid int) (ppid int, start uint64, err error) {
	var buf [1024]byte
	b, err := t.readHeld(pid, heldStat, buf[:0])
	if err != nil {
		return 0, 0, err
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("proc: malformed stat")
	}
	ppid, start, _, _, err = statFields(b[end+1:])
	return ppid, start, err
}

// Alive reports whether pid is still the process that started at start:
// one read of its stat into a stack buffer, parsing only the start time.
func (t *Table) Alive(pid int, start uint64) bool {
	var buf [1024]byte
	b, err := t.readHeld(pid, heldStat, buf[:0])
	if err != nil {
		return false
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return false
	}
	_, st, _, _, err := statFields(b[end+1:])
	return err == nil && st == start
}

// AllAlive reports whether every process in ps is still alive (Alive for
// each), reading in parallel when there are many: a listing of /active on
// a machine with hundreds of agents checks each one.
func (t *Table) AllAlive(ps []Proc) bool {
	var dead atomic.Bool
	Split(len(ps), func(lo, hi int) {
		for _, p := range ps[lo:hi] {
			if dead.Load() {
				return
			}
			if !t.Alive(p.PID, p.Start) {
				dead.Store(true)
				return
			}
		}
	})
	return !dead.Load()
}

// Split runs f over n items in contiguous runs [lo, hi), on one goroutine
// per CPU (at most 8, and none for fewer than 128 items each, where a
// goroutine would cost more than it saves), the calling goroutine one of
// them. Reads of a process table are independent syscalls, so a scan of
// thousands of processes uses every CPU this way. The runs are short
// (about a sixteenth of a goroutine's share) and handed out in order to
// whichever goroutine is free: a goroutine started late, or slowed by a
// costlier run, leaves its share to the others instead of making the
// whole wait for it. Callers that merge results index them by position
// (a run by its lo), so the output does not depend on the split.
func Split(n int, f func(lo, hi int)) {
	if n <= 0 {
		return // no run: a caller may index its results by lo
	}
	k := min(runtime.GOMAXPROCS(0), max(1, n/128), 8)
	if k == 1 {
		f(0, n)
		return
	}
	size := max(splitRun, n/(16*k))
	var next atomic.Int64
	work := func() {
		for {
			hi := int(next.Add(int64(size)))
			lo := hi - size
			if lo >= n {
				return
			}
			f(lo, min(hi, n))
		}
	}
	var wg sync.WaitGroup
	for range k - 1 {
		wg.Add(1)
		go func() { defer wg.Done(); work() }()
	}
	work()
	wg.Wait()
}

// splitRun is the shortest run Split hands out: a run costs one atomic
// add, and a caller's run may cost a buffer.
const splitRun = 8

// Cwd returns the process's working directory.
func (t *Table) Cwd(pid int) (string, error) {
	if t.guard != nil {
		return t.guard.Cwd(pid)
	}
	path := t.path(pid, "cwd")
	var buf [1024]byte // most paths: one readlink, one allocation
	for {
		n, err := unix.Readlink(path, buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return "", gone(&os.PathError{Op: "readlink", Path: path, Err: err})
		case n < len(buf):
			return string(buf[:n]), nil
		}
		s, err := os.Readlink(path) // as long as it takes
		return s, gone(err)
	}
}

// Environ returns the process's environment as it was at exec (or as it
// rewrote it in place).
func (t *Table) Environ(pid int) ([]string, error) {
	if t.guard != nil {
		return t.guard.Environ(pid)
	}
	b, err := t.read(pid, "environ", make([]byte, 0, 4096))
	if err != nil {
		return nil, err
	}
	return splitNul(b), nil
}

// Getenv returns one variable of the process's environment, if it is one
// of Wanted: the tree reads no other, with or without a proc helper.
func (t *Table) Getenv(pid int, name string) (string, bool) {
	if !IsWanted(name) {
		return "", false
	}
	env, err := t.Environ(pid)
	if err != nil {
		return "", false
	}
	return lookupEnv(env, name)
}

// lookupEnv is the value of name in env (NAME=value entries).
func lookupEnv(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// FDs returns the targets of the process's open descriptors.
func (t *Table) FDs(pid int) ([]string, error) {
	if t.guard != nil {
		return t.guard.FDs(pid)
	}
	dir := t.path(pid, "fd")
	f, err := os.Open(dir)
	if err != nil {
		return nil, gone(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if s, err := os.Readlink(dir + "/" + n); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// BootTime reads btime from the table's top-level stat. It is read once
// and remembered: it changes only with a reboot, and the top-level stat of
// the live /proc is costly to read (every CPU's and IRQ's counters), while
// every agent file's times derive from it.
func (t *Table) BootTime() (time.Time, error) {
	t.bootMu.Lock()
	defer t.bootMu.Unlock()
	if !t.boot.IsZero() {
		return t.boot, nil
	}
	boot, err := t.readBootTime()
	if err == nil {
		t.boot = boot
	}
	return boot, err
}

func (t *Table) readBootTime() (time.Time, error) {
	b, err := os.ReadFile(t.root + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(string(rest)), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("proc: no btime in %s/stat", t.root)
}

// Started is the wall-clock start of a process: boot time plus its start
// time in clock ticks.
func Started(boot time.Time, start uint64) time.Time {
	return boot.Add(time.Duration(start) * time.Second / ClockTicks)
}

// Ancestry returns pid and its ancestors, nearest first, up to pid 1.
func (t *Table) Ancestry(pid int) []int {
	var out []int
	seen := map[int]bool{}
	for pid > 0 && !seen[pid] {
		seen[pid] = true
		ppid, _, err := t.Parent(pid)
		if err != nil {
			break
		}
		out = append(out, pid)
		pid = ppid
	}
	return out
}

func gone(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: %v", ErrGone, err)
	}
	return err
}
