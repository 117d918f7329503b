package saferoot

import (
	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// A DirReader lists a directory batch by batch, as it is read, for a
// caller that can hand the first entries on while the rest are still being
// read (a 9P listing: the client works through one reply while the next is
// read). It lists what ReadDir lists; only the order and the pace differ.
//
// A directory that fits one getdents64 buffer (the first read filled less
// than half of it, about 1,000 short names) comes as one batch, sorted by
// name as ReadDir sorts it. A bigger one comes one buffer at a time, in the
// filesystem's order: sorting it would mean reading all of it before the
// first name could be handed on, and reading is most of what a big listing
// costs (ext4: about 300 ns a name). For the same reason the rest of a big
// directory is read one buffer ahead, by a goroutine of the DirReader's
// own, while the caller parses and hands on the last: the kernel's reads
// then follow one another without a gap.
//
// A DirReader holds the directory open until Close, and is not safe for
// concurrent use.
type DirReader struct {
	op, rel string
	fd      int
	dev     uint64
	hint    int
	s       *scratch
	ahead   *ahead // reads the next buffer while the last is parsed and handed on
	cur     []byte // the buffer last parsed
	done    bool
}

// OpenDir opens rel ("" for the root) for a listing by batches; the caller
// closes it.
func (r *Root) OpenDir(rel string) (*DirReader, error) {
	const op = "saferoot.OpenDir"
	fd, st, err := r.openDir(op, rel)
	if err != nil {
		return nil, err
	}
	s := getScratch()
	s.slug, s.hide = r.atSlug(rel), r.copyChildren(rel)
	return &DirReader{op: op, rel: rel, fd: fd, dev: uint64(st.Dev), hint: sizeHint(&st), s: s}, nil
}

// Dev is the listed directory's device, as ReadDirFunc passes it.
func (d *DirReader) Dev() uint64 { return d.dev }

// Hint is about how many entries the directory holds, from its size.
func (d *DirReader) Hint() int { return d.hint }

// Next passes each entry of the next batch to each, its name valid only
// during the call, and reports whether another batch may follow. At the
// end it reports false with no entries; after an error or false, Next
// hands over nothing more.
func (d *DirReader) Next(each func(name []byte, dir bool, ino uint64)) (more bool, err error) {
	if d.done {
		return false, nil
	}
	s := d.s
	s.names, s.recs = s.names[:0], s.recs[:0]
	if d.ahead != nil {
		b, err := d.ahead.next(d.cur)
		if err != nil || len(b) == 0 {
			d.done = true
			return false, d.wrap(err)
		}
		return d.batch(b, each)
	}
	n, err := getdents(d.fd, s.buf)
	if err != nil || n <= 0 {
		d.done = true
		return false, d.wrap(err)
	}
	if n <= len(s.buf)/2 {
		// The whole directory, likely: read any rest and sort it.
		d.done = true
		if err := s.appendDirents(d.fd, s.buf[:n]); err != nil {
			return false, d.wrap(err)
		}
		if err := s.readDirents(d.fd); err != nil {
			return false, d.wrap(err)
		}
		s.sort()
		s.each(func(r *rec) { each(s.names[r.off:r.off+uint32(r.n)], r.dir, r.ino) })
		return false, nil
	}
	// A full buffer: the rest streams, read one buffer ahead, so that the
	// kernel's reading of the next batch (most of what a batch costs) runs
	// beside the parse of this one and the caller's use of it.
	d.ahead = s.startAhead(d.fd)
	return d.batch(s.buf[:n], each)
}

// batch parses b, one buffer of the directory, and passes each entry on.
func (d *DirReader) batch(b []byte, each func(name []byte, dir bool, ino uint64)) (more bool, err error) {
	s := d.s
	d.cur = b
	if err := s.appendDirents(d.fd, b); err != nil {
		d.done = true
		return false, d.wrap(err)
	}
	for i := range s.recs {
		r := &s.recs[i]
		each(s.names[r.off:r.off+uint32(r.n)], r.dir, r.ino)
	}
	return true, nil
}

func (d *DirReader) wrap(err error) error {
	if err == nil {
		return nil
	}
	return errs.E(d.op, kindOf(err), d.rel, err)
}

// Close closes the directory. It may be called more than once.
func (d *DirReader) Close() {
	if d.s == nil {
		return
	}
	if d.ahead != nil {
		d.ahead.stop()
	}
	unix.Close(d.fd)
	putScratch(d.s)
	d.s = nil
	d.done = true
}
