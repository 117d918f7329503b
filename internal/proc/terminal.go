package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CtrlTTY returns the device of pid's controlling terminal (field 7 of
// its stat, tty_nr), 0 when it has none, read now and checked to be the
// process that started at start. A terminal whose other end was closed
// (the terminal window, the ssh connection, the tmux pane) is hung up by
// the kernel, which takes it from every process of its session: their
// tty_nr is 0 from then on.
func (t *Table) CtrlTTY(pid int, start uint64) (uint32, error) {
	var buf [1024]byte
	b, err := t.readHeld(pid, heldStat, buf[:0])
	if err != nil {
		return 0, err
	}
	p, err := ParseStat(b)
	if err != nil {
		return 0, err
	}
	if p.Start != start {
		return 0, ErrGone
	}
	return statTTY(b)
}

// statTTY reads field 7 (tty_nr) of a stat line.
func statTTY(b []byte) (uint32, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, fmt.Errorf("proc: malformed stat")
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 5 {
		return 0, fmt.Errorf("proc: short stat")
	}
	// Fields after the comm start at 3: tty_nr (7) is the fifth. It is
	// a signed int in the kernel's text.
	v, err := strconv.ParseInt(string(f[4]), 10, 64)
	if err != nil || v < 0 || v > 1<<32-1 {
		return 0, fmt.Errorf("proc: malformed tty_nr")
	}
	return uint32(v), nil
}

// TTYPath is the path of the terminal device dev (a tty_nr) under /dev:
// a pseudo-terminal's /dev/pts/N, a virtual console's /dev/ttyN; "" for
// any other.
func TTYPath(dev uint32) string {
	major, minor := dev>>8&0xfff, dev&0xff|dev>>12&0xfff00
	switch {
	case major >= 136 && major <= 143:
		return "/dev/pts/" + strconv.FormatUint(uint64((major-136)<<8+minor), 10)
	case major == 4 && minor < 64:
		return "/dev/tty" + strconv.FormatUint(uint64(minor), 10)
	}
	return ""
}

// TTYHeld reports whether a process of pid's uid other than pid and its
// descendants holds pid's controlling terminal: has it as its own
// controlling terminal, holds it open, or holds the pseudo-terminal's
// master (the terminal window, sshd, the tmux server). Such a process is
// what someone can answer the agent through; the agent's own children
// are not. It reads the stat of every process of the uid and, until one
// is found, their descriptors: a cost in the number of the user's
// processes, paid only for an agent with a terminal and no session host.
func (t *Table) TTYHeld(pid int, start uint64) (bool, error) {
	dev, err := t.CtrlTTY(pid, start)
	if err != nil || dev == 0 {
		return false, err
	}
	if t.guard == nil {
		return t.ttyHeld(pid, dev)
	}
	held, err := t.guard.TTYHeld(pid)
	if err == nil && !t.Alive(pid, start) {
		return false, ErrGone // the helper may have answered for a reused pid
	}
	return held, err
}

// TTYHeldNow is TTYHeld for the process pid is now: the proc helper's
// answer (which pins pid itself).
func (t *Table) TTYHeldNow(pid int) (bool, error) {
	p, err := t.IdentStat(pid)
	if err != nil {
		return false, err
	}
	dev, err := t.CtrlTTY(pid, p.Start)
	if err != nil || dev == 0 {
		return false, err
	}
	return t.ttyHeld(pid, dev)
}

// ttyHeld is TTYHeld, from the table itself, for pid's terminal dev.
func (t *Table) ttyHeld(pid int, dev uint32) (bool, error) {
	path := TTYPath(dev)
	if path == "" {
		return false, fmt.Errorf("proc: pid %d: terminal %d:%d is no pty or console", pid, dev>>8&0xfff, dev&0xff)
	}
	uid, err := t.UID(pid)
	if err != nil {
		return false, err
	}
	var buf [1024]byte
	// The usual case first: the shell that started the agent shares its
	// terminal, and is never its descendant.
	if b, err := t.read(pid, "stat", buf[:0]); err == nil {
		if p, err := ParseStat(b); err == nil && p.PPID > 1 && t.uidIs(p.PPID, uid) {
			if b, err := t.read(p.PPID, "stat", buf[:0]); err == nil {
				if tty, err := statTTY(b); err == nil && tty == dev {
					return true, nil
				}
			}
		}
	}
	pids, err := t.PIDs()
	if err != nil {
		return false, err
	}
	type st struct {
		ppid int
		tty  uint32
	}
	procs := make(map[int]st, len(pids))
	for _, q := range pids {
		if !t.uidIs(q, uid) {
			continue
		}
		b, err := t.read(q, "stat", buf[:0]) // not held: most are no agent's
		if err != nil {
			continue
		}
		p, err1 := ParseStat(b)
		tty, err2 := statTTY(b)
		if err1 != nil || err2 != nil {
			continue
		}
		procs[q] = st{p.PPID, tty}
	}
	// pid's own and its descendants' hold on the terminal says nothing.
	mine := func(q int) bool {
		for n := 0; q > 1 && n < 4096; n++ {
			if q == pid {
				return true
			}
			s, ok := procs[q]
			if !ok {
				return false
			}
			q = s.ppid
		}
		return false
	}
	var others []int
	for q, s := range procs {
		if mine(q) {
			continue
		}
		if s.tty == dev {
			return true, nil
		}
		others = append(others, q)
	}
	index, pty := strings.CutPrefix(path, "/dev/pts/")
	for _, q := range others {
		fds, names, err := t.fdLinks(q)
		if err != nil {
			continue
		}
		for i, target := range fds {
			switch {
			case target == path:
				return true, nil
			case pty && (target == "/dev/ptmx" || target == "/dev/pts/ptmx"):
				if ptyIndex(t.path(q, "fdinfo/"+names[i])) == index {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// uidIs reports whether q's uid is uid: by its directory's owner on
// procfs (one stat), else by its status.
func (t *Table) uidIs(q int, uid uint32) bool {
	if t.owners {
		u, ok, err := t.Owner(q)
		return err == nil && ok && u == uid
	}
	u, err := t.UID(q)
	return err == nil && u == uid
}

// fdLinks are q's descriptors' targets and their names (numbers).
func (t *Table) fdLinks(q int) (targets, names []string, err error) {
	dir := t.path(q, "fd")
	f, err := os.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	ns, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range ns {
		if s, err := os.Readlink(dir + "/" + n); err == nil {
			targets, names = append(targets, s), append(names, n)
		}
	}
	return targets, names, nil
}

// ptyIndex is the "tty-index" of a pty master's fdinfo: the N of the
// /dev/pts/N it is the other end of; "" when not shown.
func ptyIndex(fdinfo string) string {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return ""
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "tty-index:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
