package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NS names a process's user, mount and pid namespaces by their inode
// numbers (what readlink of /proc/PID/ns/NAME shows as NAME:[INODE]).
type NS struct{ User, Mnt, PID uint64 }

// Differs names the first namespace in which n is not ref ("user", "mnt",
// "pid"), or "" when n shares all three.
func (n NS) Differs(ref NS) string {
	switch {
	case n.User != ref.User:
		return "user"
	case n.Mnt != ref.Mnt:
		return "mnt"
	case n.PID != ref.PID:
		return "pid"
	}
	return ""
}

// Namespaces returns the process's namespaces.
func (t *Table) Namespaces(pid int) (NS, error) {
	if t.guard != nil {
		return t.guard.Namespaces(pid)
	}
	return ReadNS(t.root + "/" + strconv.Itoa(pid))
}

// Reference returns the namespaces that peers and agents are judged
// against: the proc helper's when there is one, else this process's own.
func (t *Table) Reference() (NS, error) {
	if t.guard != nil {
		return t.guard.Reference()
	}
	return ReadNS(t.root + "/self")
}

// ReadNS reads the namespaces of the process whose /proc directory is dir.
func ReadNS(dir string) (NS, error) {
	var n NS
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"user", &n.User}, {"mnt", &n.Mnt}, {"pid", &n.PID}} {
		var st unix.Stat_t
		if err := unix.Stat(dir+"/ns/"+f.name, &st); err != nil {
			return NS{}, gone(fmt.Errorf("namespace %s: %w", f.name, &os.PathError{Op: "stat", Path: dir + "/ns/" + f.name, Err: err}))
		}
		*f.dst = st.Ino
	}
	return n, nil
}

// Exe returns the path of the process's executable.
func (t *Table) Exe(pid int) (string, error) {
	if t.guard != nil {
		return t.guard.Exe(pid)
	}
	s, err := os.Readlink(t.path(pid, "exe"))
	return strings.TrimSuffix(s, " (deleted)"), gone(err)
}

// MoveEnviron returns the whole environment of a process, for a move the
// daemon has authorized. Through a proc helper it is a separate question
// from Environ, which answers only the variables the tree needs.
func (t *Table) MoveEnviron(pid int) ([]string, error) {
	if t.guard != nil {
		return t.guard.MoveEnviron(pid)
	}
	b, err := os.ReadFile(t.path(pid, "environ"))
	if err != nil {
		return nil, gone(err)
	}
	return splitNul(b), nil
}

// TTYSize returns the size of the process's terminal, read from the
// terminal one of its standard descriptors is open on.
func (t *Table) TTYSize(pid int) (cols, rows int, err error) {
	if t.guard != nil {
		return t.guard.TTYSize(pid)
	}
	return ttySize(t.root, pid)
}

func ttySize(root string, pid int) (cols, rows int, err error) {
	for _, fd := range []string{"0", "1", "2"} {
		p := root + "/" + strconv.Itoa(pid) + "/fd/" + fd
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, "/dev/pts/") && !strings.HasPrefix(target, "/dev/tty") {
			continue
		}
		f, err := unix.Open(p, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		ws, err := unix.IoctlGetWinsize(f, unix.TIOCGWINSZ)
		unix.Close(f)
		if err == nil && ws.Col > 0 && ws.Row > 0 {
			return int(ws.Col), int(ws.Row), nil
		}
	}
	return 0, 0, fmt.Errorf("proc.TTYSize: pid %d has no terminal on its standard descriptors", pid)
}
