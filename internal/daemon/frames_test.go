package daemon

import "github.com/9harness/9harness/internal/ninep/ninetest"

// The leak test speaks raw 9P through these, and replays the FuzzConn
// seeds and corpus, which live with the 9P layer (internal/ninep).
var (
	frame  = ninetest.Frame
	u16    = ninetest.U16
	u32    = ninetest.U32
	u64    = ninetest.U64
	str    = ninetest.Str
	concat = ninetest.Concat
	seeds  = ninetest.Seeds()
)

// fuzzCorpus is the FuzzConn corpus, relative to this package.
const fuzzCorpus = "../ninep/testdata/fuzz/FuzzConn/*"
