package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// The kernel refuses /proc/PID/ns/* (EACCES) to a reader that may not
// ptrace the process, and a non-dumpable process (sshd's per-user session
// process, say) may not be ptraced even by its own uid. Three other files
// of such a process stay world-readable: status, uid_map and mountinfo.
// ReadNSAgainst decides each namespace from them, comparing with a
// reference process read through the same procfs at the same time. Each
// rule concludes "same" only where that is proven; a namespace that
// cannot be decided keeps the peer unknown.

// Proof is what a fallback rule concludes about one namespace.
type Proof int

const (
	Unproven Proof = iota // neither the same nor another is proven
	Same                  // the peer is in the reference's namespace
	Other                 // the peer is in another namespace (or, for mnt, taken to be)
)

func (p Proof) String() string {
	switch p {
	case Same:
		return "same"
	case Other:
		return "other"
	}
	return "unproven"
}

// otherNS fills a field of an NS whose namespace is proven not to be the
// reference's: not zero (which Compare counts as unknown) and not an
// inode a reference can have (procfs gives namespace inodes far below).
const otherNS = ^uint64(0)

// ReadNSAgainst reads the namespaces of the process whose /proc directory
// is dir, as ReadNS does. When the kernel refuses them for permission (not
// when the process is gone), it decides each namespace by comparing dir's
// status, uid_map and mountinfo with those of refDir, the reference
// process, whose namespaces are ref; refDir must be in the same procfs as
// dir (/proc/self beside /proc/PID). A namespace proven the reference's
// gets ref's inode, one proven another gets a value no reference has; if
// any stays unproven the permission error is returned, so the peer stays
// unknown. A zero ref proves nothing.
func ReadNSAgainst(dir, refDir string, ref NS) (NS, error) {
	ns, err := ReadNS(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return ns, err
	}
	return proveNS(dir, refDir, ref, err)
}

// proveNS is ReadNSAgainst once the kernel has refused dir's namespaces
// with refusal.
func proveNS(dir, refDir string, ref NS, refusal error) (NS, error) {
	if ref.User == 0 || ref.Mnt == 0 || ref.PID == 0 {
		return NS{}, refusal
	}
	var ns NS
	var unproven []string
	for _, r := range []struct {
		name   string
		file   string
		read   func(string) ([]byte, error)
		decide func(peer, ref []byte) Proof
		dst    *uint64
		refIno uint64
	}{
		{"user", "uid_map", os.ReadFile, UserNSProof, &ns.User, ref.User},
		// The reference's file is read first: the mount on its first line
		// stays live, as only a process privileged over the reference's
		// mount namespace could unmount it, so no mount of another
		// namespace can have its ID when the peer's file is read.
		{"mnt", "mountinfo", readFirstLine, MntNSProof, &ns.Mnt, ref.Mnt},
		{"pid", "status", os.ReadFile, PIDNSProof, &ns.PID, ref.PID},
	} {
		rb, rerr := r.read(refDir + "/" + r.file)
		pb, perr := r.read(dir + "/" + r.file)
		p := Unproven
		if rerr == nil && perr == nil {
			p = r.decide(pb, rb)
		}
		switch p {
		case Same:
			*r.dst = r.refIno
		case Other:
			*r.dst = otherNS
		default:
			if g := gone(perr); errors.Is(g, ErrGone) {
				return NS{}, g
			}
			unproven = append(unproven, r.name)
		}
	}
	if len(unproven) > 0 {
		return NS{}, fmt.Errorf("%w (nor do %s/{uid_map,mountinfo,status} prove the %s namespace)", refusal, dir, strings.Join(unproven, ", "))
	}
	return ns, nil
}

// readFirstLine reads the first line of a file, newline included, or
// nothing if the file has no complete first line: mountinfo may be long,
// and only its first line is compared.
func readFirstLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := bufio.NewReader(io.LimitReader(f, 1<<20)).ReadBytes('\n')
	if err == io.EOF {
		return nil, nil
	}
	return b, err
}

// PIDNSProof decides the pid namespace from two status files read through
// one procfs. Its NSpid line lists the process's pid in each pid namespace
// from the procfs's own down to the process's: one field means the
// process is in the procfs's pid namespace, so two such are in the same
// one; different counts mean different depths, hence different
// namespaces. Equal counts above one prove nothing (siblings have them).
func PIDNSProof(peer, ref []byte) Proof {
	p, r := nspidDepth(peer), nspidDepth(ref)
	switch {
	case p == 0 || r == 0:
		return Unproven
	case p == 1 && r == 1:
		return Same
	case p != r:
		return Other
	}
	return Unproven
}

// nspidDepth is the number of pids on the one NSpid line of a status
// file, or 0 when there is no such line, more than one, or it is not a
// list of positive pids.
func nspidDepth(status []byte) int {
	n := 0
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		if n != 0 {
			return 0
		}
		f := strings.Fields(string(rest))
		for _, s := range f {
			if v, err := strconv.ParseUint(s, 10, 32); err != nil || v == 0 {
				return 0
			}
		}
		if n = len(f); n == 0 {
			return 0
		}
	}
	return n
}

// UserNSProof decides the user namespace from two uid_map files read by
// one process. Both reading "0 0 4294967295" (the whole range, mapped to
// itself) is the initial user namespace, or one a process with CAP_SETUID
// there made with the same map: an unprivileged user cannot write a
// full-range map, and newuidmap grants only /etc/subuid ranges. The same
// namespace read by the same reader reads the same, so when the
// reference's map is the full one and the peer's (well formed) is not,
// the peer is in another namespace. Anything else proves nothing.
func UserNSProof(peer, ref []byte) Proof {
	r, ok := fullUIDMap(ref)
	if !ok || !r {
		return Unproven
	}
	p, ok := fullUIDMap(peer)
	switch {
	case !ok:
		return Unproven
	case p:
		return Same
	}
	return Other
}

// fullUIDMap says whether a uid_map is exactly the one line "0 0
// 4294967295" (in any spacing); ok is false when it is not lines of three
// unsigned numbers (an unwritten map is empty, and well formed).
func fullUIDMap(b []byte) (full, ok bool) {
	var lines [][]string
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return false, false
		}
		for _, s := range f {
			if _, err := strconv.ParseUint(s, 10, 32); err != nil {
				return false, false
			}
		}
		lines = append(lines, f)
	}
	full = len(lines) == 1 && lines[0][0] == "0" && lines[0][1] == "0" && lines[0][2] == "4294967295"
	return full, true
}

// MntNSProof decides the mount namespace from the first lines of two
// mountinfo files read now. The first field is the mount's ID; a mount is
// in exactly one mount namespace and no two live mounts share an ID, so
// the same first line is the same live mount, hence the same namespace.
// A different first line is taken for another namespace, conservatively:
// a peer chrooted or remounted differently is judged sandboxed too. A
// line that is missing, unterminated or does not start with a mount ID
// proves nothing.
func MntNSProof(peer, ref []byte) Proof {
	p, r := mountinfoFirst(peer), mountinfoFirst(ref)
	switch {
	case p == nil || r == nil:
		return Unproven
	case bytes.Equal(p, r):
		return Same
	}
	return Other
}

// mountinfoFirst is the first line of a mountinfo file, without its
// newline, when it is complete and starts with a mount ID and its
// parent's; else nil.
func mountinfoFirst(b []byte) []byte {
	line, _, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil
	}
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return nil
	}
	for _, s := range f[:2] {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return nil
		}
	}
	return line
}
