package ninep

import (
	"testing"
	"time"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// A Tversion in mid-session resets it, as version(5) says: the read still
// blocked is aborted without a reply reaching the client, every fid is
// freed (a Tstat of an old fid fails, and fid 0 and 1 can be attached
// again), and the Rversion is the only reply the client sees. srv9p alone
// answers the Tversion and keeps everything. Each wait fails after 10 s.
func TestPlan9VersionResets(t *testing.T) {
	h := newBlockHandle()
	cli, done := blockedRead(t, h)
	defer func() { cli.Close(); <-done }()

	cli.Write(frame(proto.Tversion, proto.NoTag, u32(8192), str(proto.Version2000)))
	select {
	case <-h.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the Tversion did not abort the blocked read within 10 s")
	}
	if r := readReply(t, cli); r.typ != proto.Rversion {
		t.Fatalf("first reply after the Tversion: %+v, want the Rversion alone (the aborted read's reply is not the client's any more)", r)
	}
	cli.Write(frame(proto.Tstat, 1, u32(1)))
	if r := readReply(t, cli); r.tag != 1 || r.typ != proto.Rerror {
		t.Fatalf("Tstat of a fid of the old session: %+v, want an Rerror", r)
	}
	cli.Write(concat(
		frame(proto.Tattach, 2, u32(0), u32(proto.NoFid), str("u"), str("")),
		frame(proto.Tattach, 3, u32(1), u32(proto.NoFid), str("u"), str("")),
	))
	for range 2 {
		if r := readReply(t, cli); r.typ != proto.Rattach {
			t.Fatalf("Tattach of an old fid number in the new session: %+v", r)
		}
	}
}
