// Package proctest writes fixture process tables: directories shaped like
// /proc (<pid>/{stat,cmdline,environ,status,cwd,fd/} and a top-level stat
// with btime), so the scan, the liveness guard and the resolution ladder
// are tested without the live machine.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is one fixture process.
type Proc struct {
	PID, PPID int
	UID       uint32
	Start     uint64 // field 22
	Comm      string // defaults to the base name of Argv[0], cut to 15 bytes
	Argv      []string
	Env       []string // KEY=VALUE
	Cwd       string
	FDs       []string // link targets of fd/0, fd/1, ...
	// FDInfo are the fdinfo/N texts, by index of FDs ("" writes none):
	// a pty master's says "tty-index:\tN".
	FDInfo  []string
	TTY     uint32 // field 7, tty_nr: the controlling terminal's device, 0 for none
	Threads []int  // task/<tid> entries (never listed as processes)
}

// Boot is the btime written to the fixture's top-level stat.
const Boot = 1790000000

// Write creates the fixture table in dir.
func Write(dir string, procs ...Proc) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), fmt.Appendf(nil, "cpu  1 2 3 4\nbtime %d\nprocesses 1\n", Boot), 0o644); err != nil {
		return err
	}
	for _, p := range procs {
		if err := Add(dir, p); err != nil {
			return err
		}
	}
	return nil
}

// Add writes one process into an existing fixture table, replacing any
// earlier process with the same pid (a reused pid).
func Add(dir string, p Proc) error {
	d := filepath.Join(dir, strconv.Itoa(p.PID))
	os.RemoveAll(d)
	if err := os.MkdirAll(filepath.Join(d, "fd"), 0o755); err != nil {
		return err
	}
	comm := p.Comm
	if comm == "" && len(p.Argv) > 0 {
		comm = filepath.Base(p.Argv[0])
		if len(comm) > 15 {
			comm = comm[:15]
		}
	}
	// Fields 3..52 after the comm; 4 is ppid, 22 is starttime.
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[0] = "S"
	f[1] = strconv.Itoa(p.PPID)
	f[4] = strconv.FormatUint(uint64(p.TTY), 10)
	f[19] = strconv.FormatUint(p.Start, 10)
	stat := fmt.Sprintf("%d (%s) %s\n", p.PID, comm, strings.Join(f, " "))
	files := map[string]string{
		"stat":    stat,
		"cmdline": nul(p.Argv),
		"environ": nul(p.Env),
		"status":  fmt.Sprintf("Name:\t%s\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if p.Cwd != "" {
		if err := os.Symlink(p.Cwd, filepath.Join(d, "cwd")); err != nil {
			return err
		}
	}
	for i, target := range p.FDs {
		if err := os.Symlink(target, filepath.Join(d, "fd", strconv.Itoa(i))); err != nil {
			return err
		}
		if i < len(p.FDInfo) && p.FDInfo[i] != "" {
			if err := os.MkdirAll(filepath.Join(d, "fdinfo"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, "fdinfo", strconv.Itoa(i)), []byte(p.FDInfo[i]), 0o644); err != nil {
				return err
			}
		}
	}
	for _, tid := range p.Threads {
		if err := os.MkdirAll(filepath.Join(d, "task", strconv.Itoa(tid)), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes a process from the table (it exited).
func Remove(dir string, pid int) error {
	return os.RemoveAll(filepath.Join(dir, strconv.Itoa(pid)))
}

func nul(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return strings.Join(ss, "\x00") + "\x00"
}
