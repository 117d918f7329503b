package proc

import (
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// The per-process files a live table keeps open between reads: every
// listing reads the cmdline of every process and the stat and status of
// every candidate, and on procfs a pread from offset 0 of an open file
// costs less than half of an open, a read and a close (no path walk
// through /proc/PID, no file to set up and tear down): 4–5 µs against
// 11–14 µs per file on the machines we measured.
//
// A held file answers exactly what a fresh open would:
//   - procfs generates the text on every read, from the process as it is
//     then (an exec, a changed title, a reparenting all show);
//   - the file is bound to the process, not to the pid: once the process
//     is gone (reaped) every read fails with ESRCH, so a held file never
//     shows a later process that reused the pid. On that error the file
//     is closed and the pid's file opened afresh, as before;
//   - none of these files checks its reader's access at open only: stat
//     checks the ptrace access of its few guarded fields on every read,
//     cmdline and status check nothing. environ (checked at open) and the
//     guarded links are never held.
const (
	heldCmdline = iota
	heldStat
	heldStatus
	nHeld
)

var heldNames = [nHeld]string{"cmdline", "stat", "status"}

// heldMax bounds the descriptors held: at most a quarter of the open-file
// limit, and never more than this (a stat or status file also pins one
// page of kernel memory while it is open).
const heldMax = 4096

// held are a table's open per-process files (package comment above).
type held struct {
	// mu is read-held around every use of a descriptor and write-held to
	// add or close one, so that no descriptor is closed (and its number
	// reused) under a read.
	mu  sync.RWMutex
	fds map[int]*[nHeld]int32 // pid → descriptor+1 of each file, 0: not held
	n   int
	max int
	// pidfds: the heldStatus slot holds the process's pidfd, not its
	// status file (pidfd.go). Set once, before the table is shared.
	pidfds bool
}

func newHeld() *held {
	max := heldMax
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		max = int(min(uint64(heldMax), rl.Cur/4))
	}
	return &held{fds: map[int]*[nHeld]int32{}, max: max}
}

// readHeld appends the file f of pid to buf, from a held descriptor when there
// is one, else from a fresh open that is then kept if the bound allows.
func (t *Table) readHeld(pid, f int, buf []byte) ([]byte, error) {
	h := t.held
	if h == nil {
		return t.read(pid, heldNames[f], buf)
	}
	if b, err, ok := h.pread(pid, f, buf); ok {
		if err == nil {
			return b, nil
		}
		// Gone, or reused: what a fresh open finds decides.
		h.drop(pid)
	}
	path := t.path(pid, heldNames[f])
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, gone(pathErr("open", path, err))
	}
	b, err := preadAll(fd, buf)
	if err != nil {
		unix.Close(fd)
		return nil, gone(pathErr("read", path, err))
	}
	if !h.keep(pid, f, fd) {
		unix.Close(fd)
	}
	return b, nil
}

// pread reads pid's file f from its held descriptor; ok is false when none
// is held.
func (h *held) pread(pid, f int, buf []byte) (b []byte, err error, ok bool) {
	ok = h.use(pid, f, func(fd int) { b, err = preadAll(fd, buf) })
	return b, err, ok
}

// use calls do with pid's held descriptor f, read-locked so that it is not
// closed meanwhile; false when none is held.
func (h *held) use(pid, f int, do func(fd int)) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	fds := h.fds[pid]
	if fds == nil || fds[f] == 0 {
		return false
	}
	do(int(fds[f] - 1))
	return true
}

// keep holds fd as pid's file f, unless the bound is reached or another
// read has just done so; false: the caller closes fd.
func (h *held) keep(pid, f, fd int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	fds := h.fds[pid]
	if h.n >= h.max || fds != nil && fds[f] != 0 {
		return false
	}
	if fds == nil {
		fds = new([nHeld]int32)
		h.fds[pid] = fds
	}
	fds[f] = int32(fd + 1)
	h.n++
	return true
}

// drop closes every file held for pid.
func (h *held) drop(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeLocked(pid)
}

func (h *held) closeLocked(pid int) {
	fds := h.fds[pid]
	if fds == nil {
		return
	}
	for _, fd := range fds {
		if fd != 0 {
			unix.Close(int(fd - 1))
			h.n--
		}
	}
	delete(h.fds, pid)
}

// retain closes the files of every pid not in pids (sorted): processes
// that have exited since they were held.
func (h *held) retain(pids []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for pid := range h.fds {
		if _, ok := slices.BinarySearch(pids, pid); !ok {
			h.closeLocked(pid)
		}
	}
}

// Close closes every held file. The table reads afresh after it.
func (t *Table) Close() {
	if t.held == nil {
		return
	}
	t.held.mu.Lock()
	defer t.held.mu.Unlock()
	for pid := range t.held.fds {
		t.held.closeLocked(pid)
	}
}

// Held is how many per-process files the table holds open.
func (t *Table) Held() int {
	if t.held == nil {
		return 0
	}
	t.held.mu.RLock()
	defer t.held.mu.RUnlock()
	return t.held.n
}

// preadAll appends fd's content from offset 0 to buf: reads until one
// comes back short (procfs fills the buffer it is given while it has
// more), growing buf as read does.
func preadAll(fd int, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(4096, cap(buf)))
		}
		free := buf[len(buf):cap(buf)]
		n, err := unix.Pread(fd, free, int64(len(buf)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+n]
		if n < len(free) {
			return buf, nil
		}
	}
}

func pathErr(op, path string, err error) error {
	return &os.PathError{Op: op, Path: path, Err: err}
}
