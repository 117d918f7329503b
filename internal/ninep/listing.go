package ninep

import (
	"encoding/binary"
	"sort"
	"sync"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/tree"
)

// listing is a directory's entries in Rreaddir's wire form, one after
// another, each with its offset filled in (entry i has offset i+1, so a
// Treaddir at offset i resumes after entry i-1).
//
// A big directory is listed as it is read (tree.Batches), by a goroutine of
// its own, while the client works through the replies already sent: the
// entries grow at the end, batch by batch, and a reply waits only for the
// first entry it starts with. Bytes once published are never written
// again, so a reply may be a slice of them.
type listing struct {
	mu   sync.Mutex
	grew sync.Cond // broadcast when entries are published or the listing ends
	enc  []byte    // qid[13] offset[8] type[1] name[s], per entry
	at   []uint32  // at[i]: where entry i starts in enc; entry i ends at at[i+1], or len(enc)
	done bool
	err  error // why the listing ended before the directory did
	stop bool  // the fid was clunked or listed anew: the reader stops

	// The writer's own: enc and at as they grow, published by publish.
	wenc []byte
	wat  []uint32

	// The listing's bytes (the capacity of wenc and wat) are charged to
	// bytes as they grow, before they are allocated; werr is the charge
	// the writer was refused, which ends the listing. charged is the
	// writer's until the listing is done, and released once when it is
	// both done and closed (released).
	bytes    *charger
	charged  int64
	werr     error
	released bool
}

// direntSize is the encoded size of one entry without its name: qid[13]
// offset[8] type[1] name length[2].
const direntSize = 13 + 8 + 1 + 2

// Linux dirent types: v9fs hands the entry's type to dir_emit unchanged, so
// it must be a DT_* value, not the qid type hugelgupf's own servers put
// there.
const (
	dtDir = 4
	dtReg = 8
)

// lListers bounds the listings a connection reads in the background at
// once: each holds its directory open and two getdents64 buffers (128 KiB,
// one being read while the other is parsed) until the directory is read. A listing beyond it is read whole before its
// first reply, as a listing of a small directory always is. Two: one
// client lists one directory at a time, and a second is for ls -R.
const lListers = 2

// listDir lists d. A directory that fits one read is listed whole, sorted,
// before listDir returns; a bigger one goes on being read in the
// background, when a slot in listers (the connection's) is free.
func listDir(d tree.Dir, listers chan struct{}, bytes *charger) (*listing, error) {
	l := &listing{bytes: bytes}
	l.grew.L = &l.mu
	b, ok, err := tree.OpenBatches(d)
	if !ok {
		return listAll(l, d)
	}
	if err != nil {
		return nil, err
	}
	if h := b.Hint(); h > 0 {
		if l.werr = l.grow(h*(direntSize+8), h); l.werr != nil {
			b.Close()
			return nil, l.werr
		}
	}
	more, err := b.Next(l.add)
	if err == nil {
		err = l.werr
	}
	if err != nil || !more {
		b.Close()
		if err != nil {
			l.unchargeWriter()
			return nil, err
		}
		l.publish(true, nil)
		return l, nil
	}
	l.publish(false, nil)
	select {
	case listers <- struct{}{}:
		go func() {
			l.fill(b)
			<-listers
		}()
	default:
		l.fill(b)
	}
	return l, nil
}

// fill reads the rest of b into l and closes it, unless l is stopped.
func (l *listing) fill(b *tree.Batches) {
	defer b.Close()
	for {
		more, err := b.Next(l.add)
		if err == nil {
			err = l.werr
		}
		if !l.publish(!more || err != nil, err) {
			return
		}
	}
}

// grow makes room for enc bytes more in wenc and at entries more in wat,
// charging the bigger arrays before they are made (and letting the old
// ones' charge go: a reply may still be writing from the old enc, for
// as long as one write takes). Growth doubles up to 1 MiB and adds a
// quarter beyond, as append's does, so that what is charged stays near
// what the listing needs.
func (l *listing) grow(enc, at int) error {
	var more int64
	newEnc, newAt := cap(l.wenc), cap(l.wat)
	if len(l.wenc)+enc > newEnc {
		newEnc = max(growCap(newEnc), len(l.wenc)+enc, 4096)
		more += int64(newEnc - cap(l.wenc))
	}
	if len(l.wat)+at > newAt {
		newAt = max(growCap(newAt*4)/4, len(l.wat)+at, 256)
		more += 4 * int64(newAt-cap(l.wat))
	}
	if more == 0 {
		return nil
	}
	if err := l.bytes.charge(more, "a directory listing"); err != nil {
		return err
	}
	l.charged += more
	if newEnc != cap(l.wenc) {
		b := make([]byte, len(l.wenc), newEnc)
		copy(b, l.wenc)
		l.wenc = b
	}
	if newAt != cap(l.wat) {
		a := make([]uint32, len(l.wat), newAt)
		copy(a, l.wat)
		l.wat = a
	}
	return nil
}

func growCap(c int) int {
	if c < 1<<20 {
		return 2 * c
	}
	return c + c/4
}

// unchargeWriter releases what a listing that was never published
// charged.
func (l *listing) unchargeWriter() {
	l.bytes.release(l.charged)
	l.charged = 0
}

// publish makes what was added visible to replies, and ends the listing if
// end; it reports whether to go on reading.
func (l *listing) publish(end bool, err error) bool {
	l.mu.Lock()
	l.enc, l.at = l.wenc, l.wat
	if end || l.stop {
		// A stopped listing ends where it is, so that a reply waiting on
		// it is answered.
		l.done, l.err = true, err
	}
	l.releaseLocked()
	goOn := !l.done
	l.mu.Unlock()
	l.grew.Broadcast()
	return goOn
}

// close stops the reading of l, if it is still being read.
func (l *listing) close() {
	l.mu.Lock()
	l.stop = true
	l.releaseLocked()
	l.mu.Unlock()
}

// releaseLocked gives back the listing's charge once it is both done
// (the writer charges no more) and closed (no reply is cut from it any
// more). Called with l.mu held.
func (l *listing) releaseLocked() {
	if l.done && l.stop && !l.released {
		l.released = true
		l.bytes.release(l.charged)
	}
}

// listAll lists a directory that is not read in batches, whole.
func listAll(l *listing, d tree.Dir) (*listing, error) {
	ents, err := tree.ListAs(d, func(e tree.Entry) tree.Entry { return e })
	if err != nil {
		return nil, err
	}
	size := 0
	for _, e := range ents {
		size += direntSize + len(e.Name)
	}
	if err := l.grow(size, len(ents)); err != nil {
		return nil, err
	}
	for _, e := range ents {
		addEntry(l, e.Name, e.Dir, e.Path)
	}
	l.publish(true, nil)
	return l, nil
}

// add adds an entry the directory's reader found, unless the listing was
// refused its bytes.
func (l *listing) add(name []byte, dir bool, path uint64) {
	if l.werr != nil {
		return
	}
	if l.werr = l.grow(direntSize+len(name), 1); l.werr == nil {
		addEntry(l, name, dir, path)
	}
}

// addEntry encodes the next entry at the end of l's writer's buffers.
func addEntry[N string | []byte](l *listing, name N, dir bool, path uint64) {
	i := len(l.wat)
	l.wat = append(l.wat, uint32(len(l.wenc)))
	qt, dt := p9.TypeRegular, uint8(dtReg)
	if dir {
		qt, dt = p9.TypeDir, dtDir
	}
	b := l.wenc
	b = append(b, uint8(qt))
	b = binary.LittleEndian.AppendUint32(b, 0) // qid version: not kept in a listing
	b = binary.LittleEndian.AppendUint64(b, path)
	b = binary.LittleEndian.AppendUint64(b, uint64(i)+1)
	b = append(b, dt)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	l.wenc = append(b, name...)
}

// ready reports whether a reply from offset can be cut without waiting.
func (l *listing) ready(offset uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done || offset < uint64(len(l.at))
}

// window is the run of whole entries from offset that fits in count bytes,
// of those read so far; it waits until the entry at offset is read, or the
// listing has ended (nil then, or the error that ended it).
func (l *listing) window(offset uint64, count uint32) ([]byte, error) {
	l.mu.Lock()
	for !l.done && offset >= uint64(len(l.at)) {
		l.grew.Wait()
	}
	enc, at, err := l.enc, l.at, l.err
	l.mu.Unlock()
	if offset >= uint64(len(at)) {
		return nil, err
	}
	start := at[offset]
	n := len(at)
	endOf := func(i int) uint32 { // where entry i ends
		if i+1 < n {
			return at[i+1]
		}
		return uint32(len(enc))
	}
	// The first entry that does not fit ends the window.
	k := sort.Search(n-int(offset), func(k int) bool { return endOf(int(offset)+k)-start > count })
	if k == 0 {
		return nil, nil
	}
	end := endOf(int(offset) + k - 1)
	return enc[start:end:end], nil
}

// decodeDirents turns a window back into p9's form, for p9's own Readdir
// path. Names share one string.
func decodeDirents(b []byte) p9.Dirents {
	if len(b) == 0 {
		return nil
	}
	names := string(b)
	var out p9.Dirents
	for i := 0; i+direntSize <= len(b); {
		nl := int(binary.LittleEndian.Uint16(b[i+22:]))
		out = append(out, p9.Dirent{
			QID: p9.QID{
				Type:    p9.QIDType(b[i]),
				Version: binary.LittleEndian.Uint32(b[i+1:]),
				Path:    binary.LittleEndian.Uint64(b[i+5:]),
			},
			Offset: binary.LittleEndian.Uint64(b[i+13:]),
			Type:   p9.QIDType(b[i+21]),
			Name:   names[i+direntSize : i+direntSize+nl],
		})
		i += direntSize + nl
	}
	return out
}
