package peer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/proc"
)

// The reads below judge a peer (is it the daemon, is it in a sandbox), so
// they look only at the live /proc, never at a fixture table, and only
// through the pinned pidfd: while the pidfd is open the kernel does not
// hand the pid to another process, so /proc/<pid> is either the peer's
// or absent, and a peer that exits during a read is caught by Alive.

// FileID names a file by device and inode: the same file whatever path,
// bind mount or mount namespace it was reached through.
type FileID struct{ Dev, Ino uint64 }

// ErrNotPinned means the kernel gave no pidfd for the peer (before Linux
// 6.5), or the peer has no pid in the reader's pid namespace: nothing
// read of its /proc entry could be trusted to be its own.
var ErrNotPinned = errors.New("the peer process is not pinned by a pidfd")

func (p *Peer) pinned(what string, read func(dir string) error) error {
	if p.PID <= 0 || p.pidfd < 0 {
		return fmt.Errorf("peer %s: %w", what, ErrNotPinned)
	}
	if err := read("/proc/" + strconv.Itoa(int(p.PID))); err != nil {
		return fmt.Errorf("peer %s: %w", what, err)
	}
	if !p.Alive() {
		return fmt.Errorf("peer %s: pid %d exited while it was read", what, p.PID)
	}
	return nil
}

// Namespaces returns the pinned peer's user, mount and pid namespaces.
// The kernel refuses them (EACCES) to a reader that may not ptrace the
// peer: another uid, or the peer outside the reader's user namespace.
func (p *Peer) Namespaces() (proc.NS, error) {
	var ns proc.NS
	err := p.pinned("namespaces", func(dir string) error {
		var err error
		ns, err = proc.ReadNS(dir)
		return err
	})
	return ns, err
}

// NamespacesAgainst is Namespaces, and where the kernel refuses them (a
// non-dumpable peer, such as sshd's session process forwarding a socket
// for the user) it decides them from the peer's world-readable files
// against the reference process at refDir, whose namespaces are ref
// (proc.ReadNSAgainst). The files are read through the pinned /proc
// entry, so they are the peer's own.
func (p *Peer) NamespacesAgainst(refDir string, ref proc.NS) (proc.NS, error) {
	var ns proc.NS
	err := p.pinned("namespaces", func(dir string) error {
		var err error
		ns, err = proc.ReadNSAgainst(dir, refDir, ref)
		return err
	})
	return ns, err
}

// Exe identifies the pinned peer's executable: the file /proc/<pid>/exe
// opens, which is the file the kernel mapped, whatever its path says (a
// renamed or deleted binary is still that file).
func (p *Peer) Exe() (FileID, error) {
	var id FileID
	err := p.pinned("executable", func(dir string) error {
		var st unix.Stat_t
		if err := unix.Stat(dir+"/exe", &st); err != nil {
			return &os.PathError{Op: "stat", Path: dir + "/exe", Err: err}
		}
		id = FileID{Dev: st.Dev, Ino: st.Ino}
		return nil
	})
	return id, err
}

// SelfExe identifies this process's own executable, as Exe does a peer's.
func SelfExe() (FileID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return FileID{}, &os.PathError{Op: "stat", Path: "/proc/self/exe", Err: err}
	}
	return FileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// Cgroup returns the pinned peer's cgroup (CgroupPath of its
// /proc/<pid>/cgroup): under systemd, the unit it runs in.
func (p *Peer) Cgroup() (string, error) {
	var cg string
	err := p.pinned("cgroup", func(dir string) error {
		b, err := os.ReadFile(dir + "/cgroup")
		if err != nil {
			return err
		}
		cg = CgroupPath(b)
		return nil
	})
	return cg, err
}

// CgroupPath picks the path that names a process's systemd unit from a
// /proc/<pid>/cgroup file: the unified hierarchy's ("0::PATH"), or, where
// that is the root (a hybrid or legacy setup that tracks units elsewhere),
// the name=systemd hierarchy's. "/" when neither says more.
func CgroupPath(b []byte) string {
	unified, named := "", ""
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			unified = string(rest)
			continue
		}
		// "ID:name=systemd:PATH"
		if _, rest, ok := bytes.Cut(line, []byte(":name=systemd:")); ok {
			named = string(rest)
		}
	}
	switch {
	case unified != "" && unified != "/":
		return unified
	case named != "":
		return named
	}
	return "/"
}

// UserNSParent returns the inode of the pinned peer's user namespace's
// parent and that namespace's owner (the uid that created it). For a peer
// in the initial user namespace the kernel has no parent to give (EPERM).
func (p *Peer) UserNSParent() (parent uint64, owner uint32, err error) {
	err = p.pinned("user namespace", func(dir string) error {
		fd, err := unix.Open(dir+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: dir + "/ns/user", Err: err}
		}
		defer unix.Close(fd)
		if owner, err = unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID); err != nil {
			return fmt.Errorf("NS_GET_OWNER_UID: %w", err)
		}
		pfd, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		if err != nil {
			return fmt.Errorf("NS_GET_PARENT: %w", err)
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return err
		}
		parent = st.Ino
		return nil
	})
	return parent, owner, err
}

// Sandbox names the namespace in which the pinned peer differs from ref,
// this process's own namespaces (ReadNS of /proc/self): "user", "mnt" or
// "pid", "" when it shares all three, and "unknown" when they can be
// neither read nor proven from the peer's other files against
// /proc/self (NamespacesAgainst): a peer that cannot be placed is never
// taken for one outside any sandbox.
func (p *Peer) Sandbox(ref proc.NS) string {
	ns, err := p.NamespacesAgainst("/proc/self", ref)
	return Compare(ns, err, ref)
}

// Compare is Sandbox for namespaces read elsewhere (the proc helper's peer
// op): a zero NS, or an error, is "unknown".
func Compare(ns proc.NS, err error, ref proc.NS) string {
	if err != nil || ns.User == 0 || ns.Mnt == 0 || ns.PID == 0 || ref == (proc.NS{}) {
		return "unknown"
	}
	return ns.Differs(ref)
}

// Confinement returns the pinned peer's confinement: its namespaces as
// NamespacesAgainst decides them (refDir, ref), and the limits of its
// status and attr files (proc.ReadLimits), all read through the pinned
// /proc entry. status and attr/current are world-readable, so a peer the
// kernel refuses the namespaces of still shows them.
func (p *Peer) Confinement(refDir string, ref proc.NS) (proc.Confinement, error) {
	var c proc.Confinement
	err := p.pinned("confinement", func(dir string) error {
		ns, err := proc.ReadNSAgainst(dir, refDir, ref)
		if err != nil {
			return err
		}
		c.NS = ns
		return proc.ReadLimits(dir, &c)
	})
	if err != nil {
		return proc.Confinement{}, err
	}
	return c, nil
}

// Restriction names the restriction the pinned peer has that ref, this
// process's reference (proc.ReadReference), does not: "" when none,
// proc.Unknown when the peer cannot be read or placed (never taken for
// an unrestricted one).
func (p *Peer) Restriction(ref proc.Confinement) proc.Restriction {
	c, err := p.Confinement("/proc/self", ref.NS)
	return proc.Judge(c, err, ref)
}
