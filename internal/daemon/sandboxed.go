package daemon

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxedPIDs remembers the processes of the owner's uid that were
// last judged sandboxed, each pinned by a pidfd, so that the accept loop
// can count a new connection of such a process against the bound of the
// sandboxed (a grantee's) without the full identification: a process in
// the owner's uid flooding from a sandbox is then refused, once its class
// is full, for the cost of an SO_PEERCRED read and a pidfd signal 0, as a
// flood of another uid is. It never admits anyone: a connection it lets
// through is identified in full, and judged on that.
//
// While the pinned process lives, its pid is its own, so a connection
// from that pid made after it was judged is its own connection. (One made
// before it, by a process that had the pid and exited, is counted as the
// sandbox's at worst: refused when the sandbox's class is full.)
type sandboxedPIDs struct {
	mu   sync.Mutex
	pids map[int32]*pinnedPID
}

type pinnedPID struct {
	pidfd int
	seen  time.Time
}

const (
	// sandboxedKeep is how many such processes are remembered: a flood
	// from more processes than this costs each its full identification,
	// and the flooder a fork each.
	sandboxedKeep = 64
	// sandboxedFor is how long one is remembered after its last
	// connection.
	sandboxedFor = 5 * time.Second
)

// note remembers the process pid, pinned by pidfd (which stays the
// caller's), as sandboxed.
func (m *sandboxedPIDs) note(pid int32, pidfd int, now time.Time) {
	if pid <= 0 || pidfd < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pids[pid]; e != nil && alive(e.pidfd) {
		e.seen = now
		return
	}
	fd, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	if m.pids == nil {
		m.pids = make(map[int32]*pinnedPID)
	}
	if old := m.pids[pid]; old != nil {
		unix.Close(old.pidfd)
		delete(m.pids, pid)
	}
	if len(m.pids) >= sandboxedKeep {
		m.expireLocked(now)
	}
	if len(m.pids) >= sandboxedKeep {
		var oldest int32
		var at time.Time
		for pid, e := range m.pids {
			if at.IsZero() || e.seen.Before(at) {
				oldest, at = pid, e.seen
			}
		}
		unix.Close(m.pids[oldest].pidfd)
		delete(m.pids, oldest)
	}
	m.pids[pid] = &pinnedPID{pidfd: fd, seen: now}
}

// is reports whether pid was judged sandboxed and is still that process.
func (m *sandboxedPIDs) is(pid int32, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pids[pid]
	if e == nil {
		return false
	}
	if now.Sub(e.seen) > sandboxedFor || !alive(e.pidfd) {
		unix.Close(e.pidfd)
		delete(m.pids, pid)
		return false
	}
	e.seen = now
	return true
}

func (m *sandboxedPIDs) expireLocked(now time.Time) {
	for pid, e := range m.pids {
		if now.Sub(e.seen) > sandboxedFor || !alive(e.pidfd) {
			unix.Close(e.pidfd)
			delete(m.pids, pid)
		}
	}
}

// closeAll forgets every process.
func (m *sandboxedPIDs) closeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, e := range m.pids {
		unix.Close(e.pidfd)
		delete(m.pids, pid)
	}
}

// alive is signal 0 through the pidfd: ESRCH when the process is gone.
func alive(pidfd int) bool {
	err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM
}
