package authz

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type fakePolkit struct {
	ok  bool
	err error
}

func (f fakePolkit) Check(context.Context, Subject, string) (bool, string, error) {
	return f.ok, "rule says so", f.err
}

// TestPolicy is the policy as a table: peer x flags x action -> decision
// and reason.
//
// Guards rule 3: a peer the kernel does not allow gets nothing; Tattach is never trusted; a client talks only to its own uid's server.
// Guards rule 4: read-only by absence.
func TestPolicy(t *testing.T) {
	const owner = 1000
	self := Subject{UID: owner, GID: owner, PID: 10, StartTime: 5}
	root := Subject{UID: 0, GID: 0, Groups: []uint32{0}, PID: 11, StartTime: 5}
	friend := Subject{UID: 1001, GID: 1001, PID: 12, StartTime: 5}
	member := Subject{UID: 1002, GID: 1002, Groups: []uint32{1002, 50}, PID: 13, StartTime: 5}
	primary := Subject{UID: 1003, GID: 50, PID: 14, StartTime: 5}
	stranger := Subject{UID: 1004, GID: 1004, Groups: []uint32{1004}, PID: 15, StartTime: 5}
	grants := Policy{Owner: owner, AllowUIDs: []uint32{1001}, AllowGroups: []uint32{50}}
	moves := Policy{Owner: owner, AllowUIDs: []uint32{1001, 0}, AllowGroups: []uint32{50}, AllowMove: true}
	pkYes := moves
	pkYes.Polkit = fakePolkit{ok: true}
	pkNo := moves
	pkNo.Polkit = fakePolkit{ok: false}
	pkDown := moves
	pkDown.Polkit = fakePolkit{err: errors.New("no such file or directory")}
	sandboxed := func(r string) Subject { s := self; s.Sandbox = r; return s }

	for _, tc := range []struct {
		name   string
		policy Policy
		s      Subject
		a      Action
		allow  bool
		reason string
	}{
		{"owner reads", Policy{Owner: owner}, self, Read, true, "daemon's own uid"},
		{"stranger cannot read", Policy{Owner: owner}, stranger, Read, false, "holds no grant"},
		{"root is a stranger to a user daemon", Policy{Owner: owner}, root, Read, false, "uid 0 is not the daemon's uid"},
		{"root reads when granted", moves, root, Read, true, "--allow-uid"},
		{"granted uid reads", grants, friend, Read, true, "uid 1001 is granted"},
		{"supplementary group reads", grants, member, Read, true, "group 50 of uid 1002"},
		{"primary group reads", grants, primary, Read, true, "primary group 50"},
		{"ungranted still cannot", grants, stranger, Read, false, "holds no grant"},
		{"moves off by default", Policy{Owner: owner}, self, Move, false, "without --allow-move"},
		{"owner moves with --allow-move", moves, self, Move, true, "--allow-move is set"},
		{"granted reader cannot move", moves, friend, Move, false, "only the daemon's own uid"},
		{"group member cannot move", moves, member, Move, false, "only the daemon's own uid"},
		{"root cannot move a user's agents", moves, root, Move, false, "peer is uid 0"},
		{"polkit allows", pkYes, self, Move, true, "polkit authorized"},
		{"polkit denies", pkNo, self, Move, false, "polkit denied org.ninep.harness.move: rule says so"},
		{"polkit unreachable", pkDown, self, Move, false, "polkit could not be asked"},
		{"polkit cannot widen", pkYes, friend, Move, false, "only the daemon's own uid"},
		{"unknown action", moves, self, Action("chmod"), false, "unknown action"},
		// Rule 9: the owner's uid in a sandbox reads (as a grantee) and
		// never moves, and the reason names the restriction.
		{"a sandbox reads", moves, sandboxed("seccomp filter"), Read, true, "daemon's own uid"},
		{"seccomp cannot move", pkYes, sandboxed("seccomp filter"), Move, false,
			"the peer runs under a seccomp filter the daemon's reference does not have: a sandbox may never move"},
		{"no_new_privs cannot move", pkYes, sandboxed("no_new_privs"), Move, false, "the peer runs with no_new_privs"},
		{"a namespace cannot move", moves, sandboxed("mount namespace"), Move, false, "the peer is in another mount namespace than the daemon's reference"},
		{"an LSM label cannot move", moves, sandboxed("LSM label"), Move, false, "another LSM label"},
		{"unknown cannot move", moves, sandboxed("unknown"), Move, false, "cannot be compared with the daemon's reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s.Sandbox != "" && tc.policy.IsOwner(tc.s) {
				t.Errorf("%q: a sandbox is the owner", tc.name)
			}
			d := tc.policy.Decide(context.Background(), tc.s, tc.a)
			if d.Allow != tc.allow || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("%q: got %v %q, want %v containing %q", tc.name, d.Allow, d.Reason, tc.allow, tc.reason)
			}
		})
	}
}

// With the system bus unreachable, a move under --polkit is refused and the
// reason says why.
func TestPolkitUnreachable(t *testing.T) {
	p := Policy{Owner: 7, AllowMove: true, Polkit: &Polkit{Bus: "unix:path=/nonexistent/9harness-test-bus"}}
	d := p.Decide(context.Background(), Subject{UID: 7, PID: 1, StartTime: 1}, Move)
	if d.Allow || !strings.Contains(d.Reason, "polkit could not be asked") || !strings.Contains(d.Reason, "system bus") {
		t.Fatalf("%+v", d)
	}
	d = p.Decide(context.Background(), Subject{UID: 7}, Move)
	if d.Allow || !strings.Contains(d.Reason, "start time are unknown") {
		t.Fatalf("unknown process: %+v", d)
	}
}
