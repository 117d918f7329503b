//go:build !linux

package p9

// splicer is empty where there is no splice(2): every Tread is read and
// copied.
type splicer struct{}

func (s *splicer) close() {}

func (cs *connState) spliceRead(*fidRef, uint64, uint32) message { return nil }
