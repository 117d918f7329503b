package daemon

import (
	"net"
	"strings"
	"testing"
)

// slotConn is a distinct key for the connection table; track never uses
// the connection itself.
type slotConn struct {
	net.Conn
	n int
}

// TestTrackSlots: the owner's reserve and the per-uid cap. Guards rule 10:
// no other uid, nor all of them together, can take the owner's last slots,
// and one uid cannot take every slot the others share.
func TestTrackSlots(t *testing.T) {
	const owner = 1000
	type step struct {
		uid  uint32 // owner: the owner's uid outside a sandbox
		want string // "" admitted; else a word of the refusal
		drop int    // before this step, release the connection of this step (1-based; 0: none)
	}
	tests := []struct {
		name            string
		max, reserve    int
		perUID          int
		steps           []step
		wantOwners, oth int
	}{
		{"others stop at the reserve", 8, 4, 8, []step{
			{uid: 1}, {uid: 1}, {uid: 2}, {uid: 3},
			{uid: 4, want: "kept for the owner"},
			{uid: owner}, {uid: owner}, {uid: owner}, {uid: owner},
			{uid: owner, want: "the cap"},
		}, 4, 4},
		{"one uid stops at its own cap", 64, 16, 3, []step{
			{uid: 7}, {uid: 7}, {uid: 7},
			{uid: 7, want: "uid 7 already holds 3"},
			{uid: 8},
		}, 0, 4},
		{"a released slot is free again", 64, 16, 2, []step{
			{uid: 7}, {uid: 7},
			{uid: 7, want: "uid 7"},
			{uid: 7, drop: 1},
		}, 0, 2},
		{"the owner may fill every slot", 4, 2, 8, []step{
			{uid: owner}, {uid: owner}, {uid: owner}, {uid: owner},
			{uid: 5, want: "the cap"},
		}, 4, 0},
		{"the reserve is at most half the cap", 2, 16, 8, []step{
			{uid: 5},
			{uid: 6, want: "kept for the owner"},
			{uid: owner},
		}, 1, 1},
		{"no reserve when asked for none", 2, -1, 8, []step{
			{uid: 5}, {uid: 6},
			{uid: owner, want: "the cap"},
		}, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{MaxConns: tc.max, OwnerReserve: tc.reserve, MaxConnsPerUID: tc.perUID}
			held := map[int]net.Conn{}
			for i, st := range tc.steps {
				if st.drop > 0 {
					s.untrack(held[st.drop])
					delete(held, st.drop)
				}
				c := &slotConn{n: i + 1}
				ok, why := s.track(c, slot{owner: st.uid == owner, uid: st.uid})
				switch {
				case st.want == "" && !ok:
					t.Errorf("step %d (uid %d): refused (%s), want admitted", i+1, st.uid, why)
				case st.want != "" && ok:
					t.Errorf("step %d (uid %d): admitted, want refused (%s)", i+1, st.uid, st.want)
				case st.want != "" && !strings.Contains(why, st.want):
					t.Errorf("step %d (uid %d): refused with %q, want %q in it", i+1, st.uid, why, st.want)
				}
				if ok {
					held[i+1] = c
				}
			}
			owners := len(s.conns) - s.others
			if owners != tc.wantOwners || s.others != tc.oth {
				t.Errorf("held: %d owner, %d other; want %d, %d", owners, s.others, tc.wantOwners, tc.oth)
			}
			for _, c := range held {
				s.untrack(c)
			}
			if s.Conns() != 0 || s.others != 0 || len(s.perUID) != 0 {
				t.Errorf("after releasing all: %d conns, %d others, per uid %v", s.Conns(), s.others, s.perUID)
			}
		})
	}
}
