package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Confinement is what the kernel shows of the restrictions a process
// runs under, beyond its uid: its namespaces, the no_new_privs and
// seccomp lines of its status file, and its LSM labels. Landlock shows
// nowhere in /proc, but an unprivileged process can enter a Landlock
// domain only with no_new_privs set (as it can install a seccomp filter
// only so), and that shows. What stays unseen: a process with
// CAP_SYS_ADMIN in the initial user namespace (an owner who is root)
// may enter a Landlock domain without no_new_privs; one with it only in
// a user namespace of its own is in another user namespace, which shows.
// A cgroup is not a restriction here: a cgroup path is the user's to
// arrange, and limits no file or process.
type Confinement struct {
	NS         NS
	NoNewPrivs bool
	// Seccomp is the mode: 0 none, 1 strict, 2 filter.
	Seccomp uint8
	// SeccompFilters is the number of filters attached, -1 where the
	// kernel does not say (before Linux 5.9).
	SeccompFilters int32
	// LSM is the process's labels, one "FILE=LABEL" line per attr file
	// the kernel answers (attr/current, attr/<lsm>/current); "" where no
	// LSM gives labels.
	LSM string
}

// Restriction names a restriction a process has that the reference does
// not; "" is none.
type Restriction string

const (
	UserNS     Restriction = "user namespace"
	MntNS      Restriction = "mount namespace"
	PIDNS      Restriction = "pid namespace"
	Seccomp    Restriction = "seccomp filter"
	NoNewPrivs Restriction = "no_new_privs"
	LSMLabel   Restriction = "LSM label"
	// Unknown: the process's confinement, or the reference's, could
	// not be read. Never taken for no restriction.
	Unknown Restriction = "unknown"
)

// Phrase says what r is, for a reason or a log line, of a subject the
// caller names before it ("the peer ", "the agent "), against ref, the
// reference's name ("the daemon's reference").
func (r Restriction) Phrase(ref string) string {
	switch r {
	case UserNS, MntNS, PIDNS:
		return fmt.Sprintf("is in another %s than %s", string(r), ref)
	case Seccomp:
		return fmt.Sprintf("runs under a seccomp filter %s does not have", ref)
	case NoNewPrivs:
		return fmt.Sprintf("runs with no_new_privs (which a Landlock or an unprivileged seccomp sandbox needs), which %s does not have", ref)
	case LSMLabel:
		return fmt.Sprintf("runs under another LSM label than %s", ref)
	case "":
		return "has no restriction " + ref + " does not have"
	}
	return fmt.Sprintf("cannot be compared with %s", ref)
}

// Restriction names the first restriction c shows that ref does not
// have, "" when none: another user, mount or pid namespace; no_new_privs
// where ref has none; a seccomp filter where ref has none, or more
// filters than ref has; an LSM label other than ref's. A zero namespace
// on either side (unread) is Unknown. This is the one judgement of
// "sandboxed", for peers and agents alike.
func (c Confinement) Restriction(ref Confinement) Restriction {
	if c.NS.User == 0 || c.NS.Mnt == 0 || c.NS.PID == 0 || ref.NS.User == 0 || ref.NS.Mnt == 0 || ref.NS.PID == 0 {
		return Unknown
	}
	switch c.NS.Differs(ref.NS) {
	case "user":
		return UserNS
	case "mnt":
		return MntNS
	case "pid":
		return PIDNS
	}
	if c.Seccomp != 0 {
		switch {
		case ref.Seccomp == 0, c.Seccomp == 1 && ref.Seccomp != 1:
			return Seccomp
		case c.SeccompFilters < 0 || ref.SeccompFilters < 0:
			// Both filtered, and the kernel does not count: which has
			// more cannot be told.
			return Seccomp
		case c.SeccompFilters > ref.SeccompFilters:
			return Seccomp
		}
	}
	if c.NoNewPrivs && !ref.NoNewPrivs {
		return NoNewPrivs
	}
	if c.LSM != ref.LSM {
		return LSMLabel
	}
	return ""
}

// Judge is Restriction for a confinement read with err: an error is
// Unknown.
func Judge(c Confinement, err error, ref Confinement) Restriction {
	if err != nil {
		return Unknown
	}
	return c.Restriction(ref)
}

// ParseStatus fills c's NoNewPrivs and seccomp fields from a status
// file. A line the kernel does not print (NoNewPrivs before 4.10,
// Seccomp without CONFIG_SECCOMP, Seccomp_filters before 5.9) is the
// kernel saying nothing of it: false, 0 and -1.
func (c *Confinement) ParseStatus(status []byte) error {
	c.NoNewPrivs, c.Seccomp, c.SeccompFilters = false, 0, -1
	for line := range bytes.Lines(status) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst func(uint64) error
		switch string(k) {
		case "NoNewPrivs":
			dst = func(n uint64) error {
				if n > 1 {
					return errors.New("NoNewPrivs is not 0 or 1")
				}
				c.NoNewPrivs = n == 1
				return nil
			}
		case "Seccomp":
			dst = func(n uint64) error {
				if n > 2 {
					return errors.New("Seccomp mode is not 0, 1 or 2")
				}
				c.Seccomp = uint8(n)
				return nil
			}
		case "Seccomp_filters":
			dst = func(n uint64) error {
				if n > 1<<20 {
					return errors.New("Seccomp_filters out of range")
				}
				c.SeccompFilters = int32(n)
				return nil
			}
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(v)), 10, 64)
		if err != nil {
			return fmt.Errorf("status: %s: %w", k, err)
		}
		if err := dst(n); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	return nil
}

// lsmFiles are the attr files that carry a process's label: the one the
// kernel's first LSM answers, and each LSM's own (Linux 5.1 and later).
var lsmFiles = []string{"current", "apparmor/current", "selinux/current", "smack/current"}

// readLSM reads the labels of the process whose /proc directory is dir
// (Confinement.LSM). A file that is absent, or that no LSM answers
// (EINVAL), says nothing; any other error is returned.
func readLSM(dir string) (string, error) {
	var b strings.Builder
	for _, f := range lsmFiles {
		v, err := os.ReadFile(dir + "/attr/" + f)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
			continue
		default:
			return "", err
		}
		v = bytes.TrimRight(v, "\x00\n")
		if len(v) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", f, v)
	}
	return b.String(), nil
}

// ReadLimits fills c's fields other than NS from the status and attr
// files of the process whose /proc directory is dir.
func ReadLimits(dir string, c *Confinement) error {
	st, err := os.ReadFile(dir + "/status")
	if err != nil {
		return gone(err)
	}
	if err := c.ParseStatus(st); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if c.LSM, err = readLSM(dir); err != nil {
		return gone(err)
	}
	return nil
}

// ReadConfinement reads the confinement of the process whose /proc
// directory is dir: ReadNS and ReadLimits.
func ReadConfinement(dir string) (Confinement, error) {
	ns, err := ReadNS(dir)
	if err != nil {
		return Confinement{}, err
	}
	c := Confinement{NS: ns}
	if err := ReadLimits(dir, &c); err != nil {
		return Confinement{}, err
	}
	return c, nil
}

// Baseline is the reference a process judges others against, from its
// own confinement and its parent's: its own, except that where it runs
// with no_new_privs or seccomp itself, those two are its parent's. The
// units 9harness ships set NoNewPrivileges= and SystemCallFilter= on the
// daemon and the proc helper; every process of the user would otherwise
// pass for unrestricted beside them. Namespaces and labels stay its own:
// those are what it reads peers' files through.
func Baseline(self, parent Confinement) Confinement {
	if self.NoNewPrivs || self.Seccomp != 0 {
		self.NoNewPrivs, self.Seccomp, self.SeccompFilters = parent.NoNewPrivs, parent.Seccomp, parent.SeccompFilters
	}
	return self
}

// ReadReference returns this process's Baseline, read from the live
// /proc.
//
// The parent is the one process that started this one. Under systemd,
// socket activation or not, it is the user's manager (systemd --user):
// the manager forks each unit's main process and execs ExecStart= in it
// directly. The kernel names the parent (getppid), and no other process
// can become it: a parent changes only when it exits, and the manager
// exiting stops its units. The parent is pinned by a pidfd across the
// read, so a pid reused in between is caught. The other way to find the
// manager, the SO_PEERCRED of its control socket
// $XDG_RUNTIME_DIR/systemd/private, would trust a path in a directory
// every process of the user may write (a sandbox sharing it could bind
// its own socket there), and opens a D-Bus handshake with the manager
// for nothing.
//
// Started by hand, the parent is whoever started it (a shell, a test),
// and it is read only where this process has no_new_privs or seccomp
// itself: a process that is then given the same by its parent passes
// for as restricted as that parent.
func ReadReference() (Confinement, error) {
	self, err := ReadConfinement("/proc/self")
	if err != nil {
		return Confinement{}, fmt.Errorf("own confinement: %w", err)
	}
	if !self.NoNewPrivs && self.Seccomp == 0 {
		return self, nil
	}
	parent, err := readParent()
	if err != nil {
		return Confinement{}, fmt.Errorf("the parent's no_new_privs and seccomp (this process has them itself): %w", err)
	}
	return Baseline(self, parent), nil
}

// readParent reads the limits of this process's parent, pinned by a
// pidfd.
func readParent() (Confinement, error) {
	ppid := unix.Getppid()
	fd, err := unix.PidfdOpen(ppid, 0)
	if err != nil {
		return Confinement{}, fmt.Errorf("pidfd_open of the parent %d: %w", ppid, err)
	}
	defer unix.Close(fd)
	// Still the parent once the pidfd holds it: not reparented between.
	if unix.Getppid() != ppid {
		return Confinement{}, fmt.Errorf("reparented while the parent %d was pinned", ppid)
	}
	var c Confinement
	if err := ReadLimits("/proc/"+strconv.Itoa(ppid), &c); err != nil {
		return Confinement{}, err
	}
	if Exited(fd) {
		return Confinement{}, fmt.Errorf("the parent %d exited while it was read", ppid)
	}
	return c, nil
}

// Exited says whether the process a pidfd refers to has exited: the
// pidfd polls readable then. It needs no permission over the process.
func Exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0
	}
}

// Confinement returns the process's confinement.
func (t *Table) Confinement(pid int) (Confinement, error) {
	if t.guard != nil {
		return t.guard.Confinement(pid)
	}
	return ReadConfinement(t.root + "/" + strconv.Itoa(pid))
}

// ReferenceConfinement returns the confinement peers and agents are
// judged against: the proc helper's Baseline when there is one, else
// this process's own (ReadReference; a fixture root's "self" as it is).
func (t *Table) ReferenceConfinement() (Confinement, error) {
	if t.guard != nil {
		return t.guard.ReferenceConfinement()
	}
	if t.root == "/proc" {
		return ReadReference()
	}
	return ReadConfinement(t.root + "/self")
}

// Sandboxed names the restriction the agent p has that the reference
// does not (Confinement.Restriction), "" when none. On the live /proc
// the agent is pinned by a pidfd across the reads and its start time
// checked once the pidfd holds it, so no other process that took its pid
// is judged in its place; an agent that is gone is ErrGone.
func (t *Table) Sandboxed(p Proc) (Restriction, error) {
	ref, err := t.ReferenceConfinement()
	if err != nil {
		return Unknown, fmt.Errorf("the reference's confinement: %w", err)
	}
	return t.SandboxedAgainst(ref, p)
}

// SandboxedAgainst is Sandboxed against ref, a ReferenceConfinement read
// once for many agents.
func (t *Table) SandboxedAgainst(ref Confinement, p Proc) (Restriction, error) {
	var err error
	pidfd := -1
	if t.root == "/proc" {
		if pidfd, err = unix.PidfdOpen(p.PID, 0); err != nil {
			return Unknown, gone(pathErr("pidfd_open", t.path(p.PID, ""), err))
		}
		defer unix.Close(pidfd)
	}
	if !t.Alive(p.PID, p.Start) {
		return Unknown, fmt.Errorf("pid %d: %w", p.PID, ErrGone)
	}
	c, err := t.Confinement(p.PID)
	if err != nil {
		return Unknown, err
	}
	if pidfd >= 0 && Exited(pidfd) {
		return Unknown, fmt.Errorf("pid %d exited while it was read: %w", p.PID, ErrGone)
	}
	return c.Restriction(ref), nil
}
