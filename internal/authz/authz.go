// Package authz decides what a peer may do, in the manner of polkit:
// subjects (the kernel-attested peer), actions (read, move), implicit
// authorizations (the daemon's own uid), explicit grants (--allow-uid,
// --allow-group), and optionally the system's polkitd, which can only
// narrow what the local policy allows, never widen it.
//
// Every answer carries a reason an administrator can read in the journal.
package authz

import (
	"context"
	"fmt"
	"slices"

	"github.com/9harness/9harness/internal/proc"
)

// Action is something a peer asks to do.
type Action string

const (
	Read Action = "read" // see the tree
	Move Action = "move" // write a session name into an agent's zmx/tmux file
)

// PolkitAction is the polkit action id shipped in packaging/polkit.
const PolkitAction = "org.ninep.harness.move"

// Subject is the peer as the kernel named it. Nothing in it comes from the
// peer's own words: the 9P uname and n_uname never reach this package.
type Subject struct {
	UID       uint32
	GID       uint32
	Groups    []uint32 // supplementary groups, read from the pinned peer; nil if unknown
	PID       int32
	StartTime uint64 // field 22 of the peer's stat, for polkit's unix-process subject
	// Sandbox names the restriction the kernel shows on the peer that
	// the daemon's reference does not have (a proc.Restriction: another
	// user, mount or pid namespace, a seccomp filter, no_new_privs, an
	// LSM label, or "unknown"; the reference is the proc helper, or the
	// daemon itself when it runs without one); empty when none. A
	// sandboxed peer is a grantee whatever its uid (rule 9): it sees only
	// session state and may never move.
	Sandbox string
}

// IsOwner reports whether s gets the owner's view: the daemon's own uid,
// outside any sandbox.
func (p *Policy) IsOwner(s Subject) bool { return s.UID == p.Owner && s.Sandbox == "" }

// Checker asks an outside authority (polkitd) about a subject. It returns
// whether the action is authorized and, when not, why.
type Checker interface {
	Check(ctx context.Context, s Subject, actionID string) (ok bool, reason string, err error)
}

// Policy is the local policy.
type Policy struct {
	Owner       uint32   // the daemon's uid
	AllowUIDs   []uint32 // --allow-uid: may read
	AllowGroups []uint32 // --allow-group: members may read
	AllowMove   bool     // --allow-move: the owner may move
	Polkit      Checker  // --polkit: consulted before any move the local policy allows; nil = not consulted
}

// Decision is an answer with its reason.
type Decision struct {
	Allow  bool
	Reason string
}

func allow(format string, args ...any) Decision {
	return Decision{Allow: true, Reason: fmt.Sprintf(format, args...)}
}

func deny(format string, args ...any) Decision {
	return Decision{Allow: false, Reason: fmt.Sprintf(format, args...)}
}

// Decide answers whether s may perform a.
func (p *Policy) Decide(ctx context.Context, s Subject, a Action) Decision {
	switch a {
	case Read:
		return p.read(s)
	case Move:
		return p.move(ctx, s)
	}
	return deny("unknown action %q", a)
}

func (p *Policy) read(s Subject) Decision {
	if s.UID == p.Owner {
		return allow("uid %d is the daemon's own uid", s.UID)
	}
	if slices.Contains(p.AllowUIDs, s.UID) {
		return allow("uid %d is granted read by --allow-uid", s.UID)
	}
	if slices.Contains(p.AllowGroups, s.GID) {
		return allow("primary group %d of uid %d is granted read by --allow-group", s.GID, s.UID)
	}
	for _, g := range s.Groups {
		if slices.Contains(p.AllowGroups, g) {
			return allow("group %d of uid %d is granted read by --allow-group", g, s.UID)
		}
	}
	return deny("uid %d is not the daemon's uid %d and holds no grant", s.UID, p.Owner)
}

// move is the one escalation in the tree: it kills and relaunches the
// user's processes. Only the daemon's own uid may ever move, whatever is
// granted for reading: a grant names who may look, never who may act.
func (p *Policy) move(ctx context.Context, s Subject) Decision {
	if !p.AllowMove {
		return deny("moves are off (the daemon was started without --allow-move)")
	}
	if s.UID != p.Owner {
		return deny("only the daemon's own uid %d may move; the peer is uid %d", p.Owner, s.UID)
	}
	if s.Sandbox != "" {
		return deny("the peer %s: a sandbox may never move", proc.Restriction(s.Sandbox).Phrase("the daemon's reference"))
	}
	if p.Polkit == nil {
		return allow("uid %d is the daemon's own uid and --allow-move is set", s.UID)
	}
	ok, why, err := p.Polkit.Check(ctx, s, PolkitAction)
	if err != nil {
		return deny("polkit could not be asked, so the move is refused: %v", err)
	}
	if !ok {
		return deny("polkit denied %s: %s", PolkitAction, why)
	}
	return allow("uid %d is the daemon's own uid, --allow-move is set and polkit authorized %s", s.UID, PolkitAction)
}
