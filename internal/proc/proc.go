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
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ClockTicks is USER_HZ, the unit of the start time: 100 on every Linux
// architecture Go supports.
const ClockTicks = 100

// Table is a process table rooted at a directory.
type Table struct {
	root string
}

// New returns the table rooted at root ("/proc" for the live one).
func New(root string) *Table { return &Table{root: strings.TrimSuffix(root, "/")} }

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
}

// ErrGone means the process does not exist (or is no longer the one named).
var ErrGone = errors.New("no such process")

func (t *Table) path(pid int, name string) string {
	return t.root + "/" + strconv.Itoa(pid) + "/" + name
}

// PIDs lists the processes (numeric entries of the root; threads live under
// <pid>/task and are never listed).
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
	return pids, nil
}

// Argv reads a process's command line. A process whose cmdline is empty
// (a kernel thread, a zombie) has no argv.
func (t *Table) Argv(pid int) ([]string, error) {
	b, err := os.ReadFile(t.path(pid, "cmdline"))
	if err != nil {
		return nil, gone(err)
	}
	return splitNul(b), nil
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
	b, err := os.ReadFile(t.path(pid, "stat"))
	if err != nil {
		return Proc{}, gone(err)
	}
	p, err := ParseStat(b)
	if err != nil {
		return Proc{}, err
	}
	p.PID = pid
	if uid, err := t.uid(pid); err == nil {
		p.UID = uid
	}
	if argv, err := t.Argv(pid); err == nil {
		p.Argv = argv
	}
	return p, nil
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
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
	if len(f) < 20 {
		return Proc{}, fmt.Errorf("proc: short stat (%d fields after comm)", len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return Proc{}, fmt.Errorf("proc: malformed stat fields")
	}
	return Proc{PPID: ppid, Start: start, Comm: string(b[open+1 : end])}, nil
}

func (t *Table) uid(pid int) (uint32, error) {
	b, err := os.ReadFile(t.path(pid, "status"))
	if err != nil {
		return 0, gone(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			f := strings.Fields(string(rest))
			if len(f) > 0 {
				u, err := strconv.ParseUint(f[0], 10, 32)
				return uint32(u), err
			}
		}
	}
	return 0, fmt.Errorf("proc: no Uid in status")
}

// Alive reports whether pid is still the process that started at start.
func (t *Table) Alive(pid int, start uint64) bool {
	b, err := os.ReadFile(t.path(pid, "stat"))
	if err != nil {
		return false
	}
	p, err := ParseStat(b)
	return err == nil && p.Start == start
}

// Cwd returns the process's working directory.
func (t *Table) Cwd(pid int) (string, error) {
	s, err := os.Readlink(t.path(pid, "cwd"))
	return s, gone(err)
}

// Environ returns the process's environment as it was at exec (or as it
// rewrote it in place).
func (t *Table) Environ(pid int) ([]string, error) {
	b, err := os.ReadFile(t.path(pid, "environ"))
	if err != nil {
		return nil, gone(err)
	}
	return splitNul(b), nil
}

// Getenv returns one variable of the process's environment.
func (t *Table) Getenv(pid int, name string) (string, bool) {
	env, err := t.Environ(pid)
	if err != nil {
		return "", false
	}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// FDs returns the targets of the process's open descriptors.
func (t *Table) FDs(pid int) ([]string, error) {
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

// BootTime reads btime from the table's top-level stat.
func (t *Table) BootTime() (time.Time, error) {
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
		b, err := os.ReadFile(t.path(pid, "stat"))
		if err != nil {
			break
		}
		p, err := ParseStat(b)
		if err != nil {
			break
		}
		out = append(out, pid)
		pid = p.PPID
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
