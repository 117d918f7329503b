package prochelper

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/9harness/9harness/internal/peer"
	"github.com/9harness/9harness/internal/proc"
)

// Gate is what the helper knows of the one peer it answers, the daemon
// (see the package doc, "Who is answered").
type Gate struct {
	UID  uint32      // the daemon's uid: the helper's own
	Exe  peer.FileID // the daemon's executable: the helper's own
	Self proc.NS     // the helper's namespaces
	// Unit is the cgroup the daemon runs in, when the helper runs under
	// systemd: its sibling unit. Empty when the helper was started by
	// hand; the daemon must then share Self entirely.
	Unit string
}

// errOtherExe marks a refusal for the executable alone.
var errOtherExe = errors.New("its executable is not the helper's own (9harnessd)")

// NewGate builds the gate from this process: its uid, executable,
// namespaces and cgroup. daemonUnit names the daemon's unit when it is not
// derived from the helper's own (see DaemonUnit).
func NewGate(uid uint32, daemonUnit string) (*Gate, error) {
	exe, err := peer.SelfExe()
	if err != nil {
		return nil, fmt.Errorf("prochelper: %w", err)
	}
	self, err := proc.ReadNS("/proc/self")
	if err != nil {
		return nil, fmt.Errorf("prochelper: own namespaces: %w", err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("prochelper: own cgroup: %w", err)
	}
	return &Gate{UID: uid, Exe: exe, Self: self, Unit: DaemonUnit(peer.CgroupPath(cg), daemonUnit)}, nil
}

// DaemonUnit returns the cgroup of the daemon's unit given the helper's
// own cgroup: when the helper runs in a systemd service NAME-proc.service,
// the daemon is its sibling NAME.service (9harness-proc.service and
// 9harness.service); override, if set, names the sibling instead. It
// returns "" when the helper is not in a service (started by hand, or in
// a scope), or in one whose sibling cannot be derived.
func DaemonUnit(own, override string) string {
	dir, unit := path.Split(own)
	if dir == "" || !strings.HasSuffix(unit, ".service") {
		return ""
	}
	if override != "" {
		if strings.Contains(override, "/") || !strings.HasSuffix(override, ".service") {
			return ""
		}
		return dir + override
	}
	name, ok := strings.CutSuffix(unit, "-proc.service")
	if !ok || name == "" {
		return ""
	}
	return dir + name + ".service"
}

func (g *Gate) String() string {
	mode := "started by hand: a peer in the helper's own user, mount and pid namespaces"
	if g.Unit != "" {
		mode = "under systemd: a peer in the unit " + g.Unit + " and the helper's pid namespace"
	}
	return fmt.Sprintf("uid %d running the helper's own executable (%d:%d), %s", g.UID, g.Exe.Dev, g.Exe.Ino, mode)
}

// Check says why p is not the daemon, or nil when it is. Every fact is
// read through p's pidfd (package peer).
func (g *Gate) Check(p *peer.Peer) error {
	if p.UID != g.UID {
		return fmt.Errorf("its uid is %d and only uid %d is served", p.UID, g.UID)
	}
	ns, err := p.Namespaces()
	if err != nil {
		return fmt.Errorf("its namespaces cannot be read: %w", err)
	}
	if ns.PID != g.Self.PID {
		return fmt.Errorf("it is in another pid namespace than the helper's")
	}
	if g.Unit == "" {
		if d := ns.Differs(g.Self); d != "" {
			return fmt.Errorf("it is in another %s namespace than the helper's (started by hand, the helper answers only a daemon in its own namespaces)", d)
		}
	} else {
		cg, err := p.Cgroup()
		if err != nil {
			return fmt.Errorf("its cgroup cannot be read: %w", err)
		}
		if cg != g.Unit {
			return fmt.Errorf("it runs in the cgroup %q, not in the daemon's unit %q", cg, g.Unit)
		}
		if ns.User != g.Self.User {
			parent, owner, err := p.UserNSParent()
			if err != nil {
				return fmt.Errorf("its user namespace cannot be placed: %w", err)
			}
			if parent != g.Self.User || owner != g.UID {
				return fmt.Errorf("its user namespace is not one that uid %d made directly in the helper's", g.UID)
			}
		}
	}
	exe, err := p.Exe()
	if err != nil {
		return fmt.Errorf("its executable cannot be read: %w", err)
	}
	if exe != g.Exe {
		return fmt.Errorf("%w: %d:%d, not %d:%d", errOtherExe, exe.Dev, exe.Ino, g.Exe.Dev, g.Exe.Ino)
	}
	return nil
}
