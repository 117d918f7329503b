package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
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
// are not. It is Terminals(uid).Held for one agent: a caller asking for
// several makes one Terminals and asks it.
func (t *Table) TTYHeld(pid int, start uint64) (bool, error) {
	uid, err := t.UID(pid)
	if err != nil {
		return false, err
	}
	return t.Terminals(uid).Held(pid, start)
}

// TTYHeldNow is TTYHeld for the process pid is now: the proc helper's
// answer (which pins pid itself).
func (t *Table) TTYHeldNow(pid int) (bool, error) {
	p, err := t.IdentStat(pid)
	if err != nil {
		return false, err
	}
	return t.TTYHeld(pid, p.Start)
}

// Terminals is one reading of the terminals a uid's processes hold, made
// when first asked and shared by every question asked of it: one request
// (a table read, a reach file) makes one, so that its agents cost one
// pass over the user's processes, not one each, and nothing read before
// the request is used for it. Safe for concurrent use.
type Terminals struct {
	t   *Table
	uid uint32

	statOnce sync.Once
	procs    map[int]ttyProc // the uid's processes: parent and controlling terminal
	statErr  error

	fdOnce sync.Once
	// holds names, per terminal ("/dev/pts/N", or "ptmx:N" for the master
	// of /dev/pts/N), the processes of the uid holding it open.
	holds map[string][]int
}

type ttyProc struct {
	ppid int
	tty  uint32
}

// Terminals returns an empty reading of uid's terminals.
func (t *Table) Terminals(uid uint32) *Terminals { return &Terminals{t: t, uid: uid} }

// Held is TTYHeld for pid, from this reading. The agent's own stat is
// read now; the other processes' stat once for the reading, and their
// descriptors once, only when an agent's terminal is no other process's
// controlling terminal (the proc helper reads them for a daemon that may
// not, and then answers for the one agent).
func (ts *Terminals) Held(pid int, start uint64) (bool, error) {
	t := ts.t
	dev, err := t.CtrlTTY(pid, start)
	if err != nil || dev == 0 {
		return false, err
	}
	path := TTYPath(dev)
	if path == "" {
		return false, fmt.Errorf("proc: pid %d: terminal %d:%d is no pty or console", pid, dev>>8&0xfff, dev&0xff)
	}
	// The usual case first, without the pass over every process: the
	// shell that started the agent shares its terminal, and is never its
	// descendant.
	var buf [1024]byte
	if b, err := t.readHeld(pid, heldStat, buf[:0]); err == nil {
		if p, err := ParseStat(b); err == nil && p.PPID > 1 && t.uidIs(p.PPID, ts.uid) {
			if b, err := t.read(p.PPID, "stat", buf[:0]); err == nil {
				if tty, err := statTTY(b); err == nil && tty == dev {
					return true, nil
				}
			}
		}
	}
	ts.statOnce.Do(ts.readStats)
	if ts.statErr != nil {
		return false, ts.statErr
	}
	mine := func(q int) bool {
		for n := 0; q > 1 && n < 4096; n++ {
			if q == pid {
				return true
			}
			s, ok := ts.procs[q]
			if !ok {
				return false
			}
			q = s.ppid
		}
		return false
	}
	for q, s := range ts.procs {
		if s.tty == dev && !mine(q) {
			return true, nil
		}
	}
	if t.guard != nil {
		held, err := t.guard.TTYHeld(pid)
		if err == nil && !t.Alive(pid, start) {
			return false, ErrGone // the helper may have answered for a reused pid
		}
		return held, err
	}
	ts.fdOnce.Do(ts.readFDs)
	keys := []string{path}
	if index, ok := strings.CutPrefix(path, "/dev/pts/"); ok {
		keys = append(keys, "ptmx:"+index)
	}
	for _, k := range keys {
		for _, q := range ts.holds[k] {
			if !mine(q) {
				return true, nil
			}
		}
	}
	return false, nil
}

// readStats reads the parent and controlling terminal of every process
// of the uid.
func (ts *Terminals) readStats() {
	t := ts.t
	pids, err := t.PIDs()
	if err != nil {
		ts.statErr = err
		return
	}
	ts.procs = make(map[int]ttyProc, len(pids))
	var buf [1024]byte
	for _, q := range pids {
		if !t.uidIs(q, ts.uid) {
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
		ts.procs[q] = ttyProc{p.PPID, tty}
	}
}

// readFDs reads which terminals each process of the uid holds open.
func (ts *Terminals) readFDs() {
	ts.holds = map[string][]int{}
	for q := range ts.procs {
		fds, names, err := ts.t.fdLinks(q)
		if err != nil {
			continue
		}
		for i, target := range fds {
			switch {
			case strings.HasPrefix(target, "/dev/pts/") && target != "/dev/pts/ptmx", strings.HasPrefix(target, "/dev/tty"):
				ts.holds[target] = append(ts.holds[target], q)
			case target == "/dev/ptmx" || target == "/dev/pts/ptmx":
				if index := ptyIndex(ts.t.path(q, "fdinfo/"+names[i])); index != "" {
					ts.holds["ptmx:"+index] = append(ts.holds["ptmx:"+index], q)
				}
			}
		}
	}
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
