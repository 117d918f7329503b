package saferoot

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/freelist"
)

// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
const (
	direntIno    = 0
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// A listing is parsed into two pooled scratch buffers, so that listing a
// directory of n names costs two allocations whatever n is (the caller's
// result slice and one string holding every name), not one per name:
//
//   - names: every kept name, back to back;
//   - recs: one fixed-size record per kept name (its place in names, its
//     type and inode, and a sort key).
//
// The result's names are substrings of one string made from names at the
// end. Why not keep the getdents buffers themselves and point into them: each
// would be a fresh allocation of the full buffer size per call however small
// the directory, and would carry 19 bytes of header and padding per name for
// as long as the listing is held (a 9P readdir snapshot lives until the fid is
// clunked).
type rec struct {
	key uint64 // the name's first 8 bytes after the listing's common prefix, big-endian, zero-padded
	ino uint64
	off uint32 // in names
	n   uint8  // name length (NAME_MAX is 255)
	dir bool
}

type scratch struct {
	buf   []byte // getdents64 buffer
	buf2  []byte // the second, for a directory read one buffer ahead
	names []byte
	recs  []rec
	tmp   []rec    // the radix sort's other half
	slug  bool     // the listed directory's entries are working-directory slugs
	hide  []string // the copy stores among the listed directory's entries (store.go)
	split int      // after sort: recs[:split] and recs[split:] are each in order
	lcp   int      // after sort: the length of the prefix every name shares
}

// getdentsBuf is the size of each getdents64 buffer. 64 KiB returns about
// 2,000 short names per call; larger buffers measured no faster (the
// kernel's cost is per entry), and the buffers are pooled, so their size is
// paid once.
const getdentsBuf = 64 << 10

// maxPooled bounds what a kept scratch may hold in each of names, recs and
// tmp between listings, so one listing of a huge directory does not pin its
// buffers for good: the three fit a directory of about 20,000 names.
const maxPooled = 512 << 10

// keptScratch is how many scratches are kept between listings: one per CPU
// of the machines this runs on is plenty, since a listing holds one only
// while it runs. The bound on what they keep is keptScratch*(2*64 KiB +
// 3*maxPooled), 3.25 MiB.
//
// Why not a sync.Pool (freelist says): a busy listing loop allocates
// enough to collect about once per listing, so the pool was almost always
// empty and the profile showed the buffers regrown every time (a fifth of
// the bytes allocated per listing).
const keptScratch = 2

var kept = freelist.List[*scratch]{Max: keptScratch}

func getScratch() *scratch {
	if s, ok := kept.Get(); ok {
		return s
	}
	return &scratch{buf: make([]byte, getdentsBuf)}
}

func putScratch(s *scratch) {
	if cap(s.names) > maxPooled {
		s.names = nil
	}
	if cap(s.recs)*int(unsafe.Sizeof(rec{})) > maxPooled {
		s.recs = nil
	}
	if cap(s.tmp)*int(unsafe.Sizeof(rec{})) > maxPooled {
		s.tmp = nil
	}
	s.names, s.recs, s.hide = s.names[:0], s.recs[:0], nil
	kept.Put(s)
}

// readDirents lists the open directory fd with getdents64 until it is
// exhausted, keeping every regular file and directory whose name is valid
// and not Excluded, in the kernel's order.
//
// A directory that does not fit one buffer is read by a second goroutine,
// one buffer ahead of the parse: the kernel's getdents64 is most of a big
// listing's cost (ext4: about 280 ns a name), and the parse and the checks
// of each name then run beside it instead of after it.
func (s *scratch) readDirents(fd int) error {
	for {
		n, err := getdents(fd, s.buf)
		if err != nil || n <= 0 {
			return err
		}
		if n > len(s.buf)/2 {
			// A full buffer: more is likely to follow.
			return s.readAhead(fd, n)
		}
		if err := s.appendDirents(fd, s.buf[:n]); err != nil {
			return err
		}
	}
}

// readAhead is readDirents once s.buf holds n bytes of a directory that
// does not fit one buffer: the rest is read one buffer ahead of the parse.
func (s *scratch) readAhead(fd, n int) error {
	a := s.startAhead(fd)
	defer a.stop()
	cur := s.buf[:n]
	for {
		if err := s.appendDirents(fd, cur); err != nil {
			return err
		}
		var err error
		if cur, err = a.next(cur); err != nil || len(cur) == 0 {
			return err
		}
	}
}

// ahead is a goroutine reading a directory with getdents64 one buffer ahead
// of its parse, between the two buffers of a scratch.
type ahead struct {
	free    chan []byte // a parsed buffer, for the reader to fill
	full    chan filled // a filled one, for the parse; closed when the reader is done
	done    bool        // the end, or an error, was handed on: next returns nothing
	stopped bool
}

type filled struct {
	b   []byte
	err error
}

// startAhead starts reading fd into s.buf2 while the caller parses s.buf.
func (s *scratch) startAhead(fd int) *ahead {
	if s.buf2 == nil {
		s.buf2 = make([]byte, getdentsBuf)
	}
	free, full := make(chan []byte, 1), make(chan filled, 1)
	free <- s.buf2
	go func() {
		defer close(full)
		for b := range free {
			n, err := getdents(fd, b)
			full <- filled{b[:max(n, 0)], err}
			if err != nil || n <= 0 {
				return
			}
		}
	}()
	return &ahead{free: free, full: full}
}

// next hands back parsed, the buffer last returned (or s.buf), and returns
// the next one read: empty at the end of the directory.
func (a *ahead) next(parsed []byte) ([]byte, error) {
	if a.done {
		return nil, nil
	}
	a.free <- parsed[:cap(parsed)]
	f := <-a.full
	if f.err != nil || len(f.b) == 0 {
		a.done = true
	}
	return f.b, f.err
}

// stop returns once the reader is done with fd, so that the caller may
// close it. It may be called more than once.
func (a *ahead) stop() {
	if a.stopped {
		return
	}
	a.stopped, a.done = true, true
	close(a.free)
	for range a.full {
	}
}

// getdents is one getdents64 call, retried on EINTR.
func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// appendDirents parses one getdents64 buffer.
func (s *scratch) appendDirents(fd int, b []byte) error {
	for len(b) > 0 {
		if len(b) < direntName {
			return unix.EIO
		}
		reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
		if reclen < direntName || reclen > len(b) {
			return unix.EIO
		}
		r := b[:reclen]
		b = b[reclen:]
		name := r[direntName:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		dir, ino, ok := classifyAt(fd, name, r[direntType], binary.NativeEndian.Uint64(r[direntIno:]), s.slug)
		if !ok || s.hide != nil && hiddenCopy(s.hide, name) {
			continue
		}
		if len(name) > maxName || len(s.names)+len(name) > 1<<32-1 {
			return unix.EIO
		}
		s.recs = append(s.recs, rec{ino: ino, off: uint32(len(s.names)), n: uint8(len(name)), dir: dir})
		s.names = append(s.names, name...)
	}
	return nil
}

// classify decides whether a directory entry is listed, and whether it is a
// directory. The type comes from d_type; only DT_UNKNOWN (some filesystems
// never fill it) costs an fstatat(AT_SYMLINK_NOFOLLOW). An entry that
// vanished meanwhile, or cannot be stat'd, is not listed. The inode is ino
// (d_ino), or the stat's.
func classify(dirfd int, name []byte, dtype uint8, ino uint64) (dir bool, _ uint64, ok bool) {
	return classifyAt(dirfd, name, dtype, ino, false)
}

// classifyAt is classify, judging name as a working-directory slug if slug.
//
// A slug is a directory: an entry only a slug may be named (slug, and
// excluded by the whole table) is listed only if it is one.
func classifyAt(dirfd int, name []byte, dtype uint8, ino uint64, slug bool) (dir bool, _ uint64, ok bool) {
	if len(name) == 0 || len(name) > maxName || bytes.IndexByte(name, '/') >= 0 || excludedBytes(name, slug) {
		return false, 0, false
	}
	dir, ino, ok = typeOf(dirfd, name, dtype, ino)
	if ok && !dir && slug && excludedBytes(name, false) {
		return false, 0, false
	}
	return dir, ino, ok
}

// typeOf is classify without the name checks.
func typeOf(dirfd int, name []byte, dtype uint8, ino uint64) (dir bool, _ uint64, ok bool) {
	switch dtype {
	case unix.DT_REG:
		return false, ino, true
	case unix.DT_DIR:
		return true, ino, true
	case unix.DT_UNKNOWN:
		var st unix.Stat_t
		for {
			err := unix.Fstatat(dirfd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return false, 0, false
			}
			break
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			return false, uint64(st.Ino), true
		case unix.S_IFDIR:
			return true, uint64(st.Ino), true
		}
	}
	return false, 0, false
}

// sort orders recs by name in byte order (strings.Compare's order), as
// two runs when there are many: recs[:s.split] and recs[s.split:], each
// sorted, merged as they are read (each).
//
// Each record carries a key: the first 8 bytes of its name after the prefix
// that every name of the listing shares, big-endian, zero-padded. Names that
// differ early (f000123, UUIDs) are then ordered by their keys alone, and
// names that share a long prefix (Claude's -home-user-src-... project
// directories) are keyed where they start to differ. The keys are sorted by
// an LSD radix sort, one pass per key byte that is not the same in every
// record (a counting pass and a scatter); only runs of equal keys are then
// sorted by comparing the rest of their names. The profile of a 10,000-entry
// listing had a comparison sort of the strings at a quarter of the server's
// time; this is about a tenth of that.
//
// A listing of more than parallelSort names is sorted as two halves on two
// goroutines: a big listing's client is waiting for it, and the second CPU
// is otherwise idle.
func (s *scratch) sort() {
	recs := s.recs
	s.split = len(recs)
	if len(recs) < 2 {
		return
	}
	names := s.names
	name := func(r *rec) []byte { return names[r.off : r.off+uint32(r.n)] }
	first := name(&recs[0])
	lcp := len(first)
	for i := 1; i < len(recs) && lcp > 0; i++ {
		nm := name(&recs[i])
		j := 0
		for j < lcp && j < len(nm) && nm[j] == first[j] {
			j++
		}
		lcp = j
	}
	s.lcp = lcp

	if cap(s.tmp) < len(recs) {
		s.tmp = make([]rec, len(recs))
	}
	tmp := s.tmp[:len(recs)]
	if len(recs) <= parallelSort {
		s.sortRun(recs, tmp)
		return
	}
	h := len(recs) / 2
	done := make(chan struct{})
	go func() {
		s.sortRun(recs[:h], tmp[:h])
		close(done)
	}()
	s.sortRun(recs[h:], tmp[h:])
	<-done
	s.split = h
}

// parallelSort is the listing size above which sort uses two goroutines:
// below it a goroutine's start and the merge cost more than they save.
const parallelSort = 16 << 10

// sortRun sorts recs, using tmp (as long) as the radix sort's other half.
func (s *scratch) sortRun(recs, tmp []rec) {
	names, lcp := s.names, s.lcp
	for i := range recs {
		var k [8]byte
		r := &recs[i]
		copy(k[:], names[r.off+uint32(lcp):r.off+uint32(r.n)])
		r.key = binary.BigEndian.Uint64(k[:])
	}
	src, dst := recs, tmp
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for i := range src {
			count[byte(src[i].key>>shift)]++
		}
		if count[byte(src[0].key>>shift)] == len(src) {
			continue // every key has this byte: the pass would not move anything
		}
		pos := 0
		for b, c := range count {
			count[b] = pos
			pos += c
		}
		for i := range src {
			b := byte(src[i].key >> shift)
			dst[count[b]] = src[i]
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &recs[0] {
		copy(recs, src)
	}
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].key == recs[i].key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(recs[i:j], s.cmpRest)
		}
		i = j
	}
}

// cmpRest compares two records of equal keys by the rest of their names.
func (s *scratch) cmpRest(a, b rec) int {
	return bytes.Compare(s.rest(&a), s.rest(&b))
}

// rest is r's name after its key's bytes.
func (s *scratch) rest(r *rec) []byte {
	return s.names[r.off+uint32(min(s.lcp+8, int(r.n))) : r.off+uint32(r.n)]
}

// less orders two sorted records: by key, then by the rest of the name.
func (s *scratch) less(a, b *rec) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return bytes.Compare(s.rest(a), s.rest(b)) < 0
}

// each calls f for every record in name order, merging sort's two runs.
func (s *scratch) each(f func(r *rec)) {
	a, b := s.recs[:s.split], s.recs[s.split:]
	for len(a) > 0 && len(b) > 0 {
		if s.less(&b[0], &a[0]) {
			f(&b[0])
			b = b[1:]
		} else {
			f(&a[0])
			a = a[1:]
		}
	}
	for i := range a {
		f(&a[i])
	}
	for i := range b {
		f(&b[i])
	}
}
