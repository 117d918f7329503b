package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/saferoot"
)

// Read bounds. A transcript is never read whole: its head and tail windows
// together stay near a megabyte, which holds the header, the first prompt,
// and the latest title and model of any real session.
const (
	smallFile  = 64 << 10  // a registry record, a sidecar, a header probe
	headWindow = 256 << 10 // the start of a transcript
	tailWindow = 768 << 10 // the end of a transcript
	subTail    = 256 << 10 // the end of a sub-agent's transcript (its model)
	indexTail  = 1 << 20   // the end of an append-only index (session_index.jsonl)

	zHeadWindow = 256 << 10 // compressed bytes read from the start of a zstd log
	zTailWindow = 1 << 20   // compressed bytes read from the end of a zstd log
)

// readSmall reads at most max bytes of rel.
func readSmall(r *saferoot.Root, rel string, max int64) ([]byte, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// readJSON decodes a small JSON file; false when it is absent, too big to
// be whole, or not (yet) valid JSON, as a record caught mid-write is.
func readJSON(r *saferoot.Root, rel string, max int64, v any) bool {
	b, err := readSmall(r, rel, max+1)
	if err != nil || int64(len(b)) > max {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// windows reads the head and tail windows of rel: everything when the file
// fits in both, else up to head bytes from the start and tail bytes from the
// end, each cut to whole lines. The lines come back in file order, head
// first; tail is empty when head holds the whole file.
func windows(r *saferoot.Root, rel string, head, tail int64) (headLines, tailLines [][]byte) {
	whole, hb, tb := rawWindows(r, rel, head, tail)
	if whole != nil {
		return lines(whole), nil
	}
	if i := bytes.LastIndexByte(hb, '\n'); i >= 0 {
		headLines = lines(hb[:i+1])
	}
	if i := bytes.IndexByte(tb, '\n'); i >= 0 {
		tailLines = lines(tb[i+1:])
	}
	return headLines, tailLines
}

// rawWindows reads rel's bytes for windows and zwindows: the whole file
// when it fits in head+tail, else the first head and the last tail bytes.
// A file that cannot be read gives nothing.
func rawWindows(r *saferoot.Root, rel string, head, tail int64) (whole, headBytes, tailBytes []byte) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, nil, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, nil
	}
	size := st.Size()
	if size <= head+tail {
		b, _ := io.ReadAll(io.LimitReader(f, head+tail))
		if b == nil {
			b = []byte{}
		}
		return b, nil, nil
	}
	if head > 0 {
		b := make([]byte, head)
		n, _ := io.ReadFull(f, b)
		headBytes = b[:n]
	}
	if tail > 0 {
		b := make([]byte, tail)
		n, _ := f.ReadAt(b, size-tail)
		tailBytes = b[:n]
	}
	return nil, headBytes, tailBytes
}

// lines splits b into its non-empty lines.
func lines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		var ln []byte
		if i < 0 {
			ln, b = b, nil
		} else {
			ln, b = b[:i], b[i+1:]
		}
		ln = bytes.TrimSpace(ln)
		if len(ln) > 0 {
			out = append(out, ln)
		}
	}
	return out
}

// ---- zstd ----

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// Bounds of decoding a zstd log (rule 10: decompressed data is bounded in
// memory and in work, whatever the frames claim). A peer that can read an
// agent's facts makes the daemon decode that agent's logs, and an agent
// writes them: a frame of a few hundred bytes can claim gigabytes.
//
//   - zMaxWindow: the history one frame may need. The harnesses' writers
//     use 2 MiB at most (zstd's default level; Node's one-shot
//     zstdCompress shrinks it to the batch); a frame that needs more is not
//     decoded, which ends the decode there as a corrupt frame does.
//   - zKeep: the decoded bytes kept of one window: the first (a head) or
//     the last (a tail: its latest records are what the facts come from).
//   - zMaxWork: the decoded bytes one resolve of one agent may decode in
//     all, kept or not (tens of milliseconds of CPU); a tail whose decode
//     it cuts short is unknown, not taken from what came before (that
//     would be stale).
//   - zMaxRequestWork: the same for all the agents one request resolves
//     (a table read, which shares a Memo), so a request's CPU is bounded
//     however many agents with compressed logs there are.
//   - zMaxLine: the longest line the decoder accepts as a harness record.
//
// The decode checks as it goes that the output is what the harnesses
// write, JSON lines: each line begins with "{", ends with "}", and is at
// most zMaxLine long. It stops at the first byte that is not (what came
// before is kept, to the last whole line), so a frame of anything else
// costs at most a block's decoding, and a tail's search for its first
// frame stops at the first candidate that decodes to anything else.
//
// The bytes a decode holds (the decoder's history, the kept output) are
// charged to the pool of the zwork, the daemon's; a decode that does not
// fit gives nothing (the facts are absent).
const (
	zMaxWindow = 4 << 20
	zKeep      = 2 << 20
	zMaxWork   = 32 << 20
	// zMaxRequestWork is eight agents' worth: a table of hundreds of
	// agents with honest logs decodes far less (a tail window each).
	zMaxRequestWork = 256 << 20
	zMaxLine        = 1 << 20
	zMaxTries       = 64 // frame-start candidates that fail to decode at all, tried in a tail window

	zDecoderBytes = zMaxWindow + 2*(128<<10+64) + zChunk // the decoder's history ring at most, and the read buffer
	zChunk        = 64 << 10                             // decoded per read
	zSlack        = 512 << 10                            // a tail's room past zKeep before it is compacted
)

// zwork is what one resolve may still decode, and the pool the decoded
// bytes are charged to while held; its request's zwork (nil: none) bounds
// it too. A nil *zwork gives each decode a zMaxWork of its own and
// charges nothing.
type zwork struct {
	mu      sync.Mutex
	left    int64
	pool    *budget.Pool
	request *zwork
}

// newZWork is the work of one resolve, within its request's (nil: the
// resolve is the request).
func newZWork(pool *budget.Pool, request *zwork) *zwork {
	return &zwork{left: zMaxWork, pool: pool, request: request}
}

// spend takes up to n bytes of decoding from w (and its request's) and
// says how many.
func (w *zwork) spend(n int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	n = min(n, w.left)
	if w.request != nil {
		n = w.request.spend(n)
	}
	w.left -= n
	return n
}

// refund gives back n bytes spent but not decoded.
func (w *zwork) refund(n int64) {
	w.mu.Lock()
	w.left += n
	w.mu.Unlock()
	if w.request != nil {
		w.request.refund(n)
	}
}

// zsink keeps the output of a decode: all of it while it fits keepHead +
// keepTail; past that, the first keepHead bytes (head) and the last
// keepTail bytes (ring). It checks the shape of the lines as they come.
type zsink struct {
	keepHead, keepTail int
	ch                 *budget.Hold
	head               []byte // the first keepHead bytes, once the ring dropped any
	ring               []byte
	ringAt             int64 // the offset of ring[0] in the output
	total              int64

	// Shape: the offset after the last whole, well-formed line; whether
	// the next byte begins a line; the current line's length and its last
	// byte that is not a space.
	goodEnd  int64
	midLine  bool
	lineLen  int
	lastByte byte
	bad      bool // a byte that is not a harness's JSON line
	refused  bool // the budget refused room
}

// write keeps p, after checking its shape: a bad line keeps what came
// before it and stops the sink.
func (s *zsink) write(p []byte) {
	n := s.shape(p)
	if !s.keep(p[:n]) {
		s.refused = true
	}
}

// shape returns how much of p is well-formed so far, setting s.bad at the
// first byte that is not.
func (s *zsink) shape(p []byte) int {
	i := 0
	for i < len(p) {
		if !s.midLine {
			if p[i] == '\n' {
				i++
				s.goodEnd = s.total + int64(i)
				continue
			}
			if p[i] != '{' {
				s.bad = true
				return i
			}
			s.midLine, s.lineLen, s.lastByte = true, 0, '{'
		}
		j := bytes.IndexByte(p[i:], '\n')
		seg := p[i:]
		if j >= 0 {
			seg = p[i : i+j]
		}
		s.lineLen += len(seg)
		if t := bytes.TrimRight(seg, " \t\r"); len(t) > 0 {
			s.lastByte = t[len(t)-1]
		}
		if s.lineLen > zMaxLine {
			s.bad = true
			return i
		}
		if j < 0 {
			return len(p)
		}
		if s.lastByte != '}' {
			s.bad = true
			return i
		}
		i += j + 1
		s.midLine = false
		s.goodEnd = s.total + int64(i)
	}
	return i
}

// keep appends p to the ring, dropping its oldest bytes past keepTail
// (with keepTail 0, keeping only the first keepHead bytes).
func (s *zsink) keep(p []byte) bool {
	n := int64(len(p))
	defer func() { s.total += n }()
	limit := s.keepHead + s.keepTail
	if s.keepTail == 0 {
		p = p[:min(len(p), max(limit-len(s.ring), 0))]
	}
	if s.ringAt == 0 && len(s.ring)+len(p) <= limit {
		if !s.grow(len(s.ring)+len(p), limit) {
			return false
		}
		s.ring = append(s.ring, p...)
		return true
	}
	if s.head == nil && s.keepHead > 0 {
		// Past keepHead+keepTail: the head is kept apart from now on.
		if s.ch.Take(int64(s.keepHead)) != nil {
			return false
		}
		s.head = append(make([]byte, 0, s.keepHead), s.ring[:min(len(s.ring), s.keepHead)]...)
	}
	if !s.grow(s.keepTail+zSlack, s.keepTail+zSlack) {
		return false
	}
	if len(s.ring)+len(p) > cap(s.ring) {
		drop := len(s.ring) + len(p) - s.keepTail
		if drop >= len(s.ring) {
			p = p[drop-len(s.ring):]
			s.ring = s.ring[:0]
		} else {
			copy(s.ring, s.ring[drop:])
			s.ring = s.ring[:len(s.ring)-drop]
		}
		s.ringAt += int64(drop)
	}
	s.ring = append(s.ring, p...)
	return true
}

// grow gives the ring room for n bytes (at most limit), charged first.
func (s *zsink) grow(n, limit int) bool {
	if n <= cap(s.ring) {
		return true
	}
	c := min(max(2*cap(s.ring), n, zChunk), limit)
	if s.ch.Take(int64(c)) != nil {
		return false
	}
	r := make([]byte, len(s.ring), c)
	copy(r, s.ring)
	s.ch.Give(int64(cap(s.ring)))
	s.ring = r
	return true
}

// zresult is a decode's kept output, cut to whole well-formed lines.
type zresult struct {
	whole      []byte // everything decoded, when all of it was kept
	head, tail []byte // else the first and the last bytes kept
	started    bool   // the input decoded to at least one byte
	cut        bool   // a bound stopped the decode before the end of its input
}

// zdecode decodes the frames of b from its start into a sink of keepHead
// and keepTail bytes, spending w's work. With keepTail 0 it stops once the
// head is full.
func zdecode(w *zwork, ch *budget.Hold, b []byte, keepHead, keepTail int) zresult {
	if w == nil {
		w = newZWork(nil, nil)
	}
	if ch.Take(zDecoderBytes) != nil {
		return zresult{cut: true}
	}
	defer ch.Give(zDecoderBytes)
	d, err := zReader(b)
	if err != nil {
		return zresult{cut: true}
	}
	defer d.Close()
	s := &zsink{keepHead: keepHead, keepTail: keepTail, ch: ch}
	buf := make([]byte, zChunk)
	var r zresult
	for idle := 0; idle < 64; {
		want := w.spend(zChunk)
		if want == 0 {
			r.cut = true
			break
		}
		n, err := d.Read(buf[:want])
		w.refund(want - int64(n))
		if n > 0 {
			r.started = true
			s.write(buf[:n])
		} else {
			idle++ // a reader may return nothing now and then; not forever
		}
		if s.refused {
			r.cut = true
			break
		}
		if s.bad || err != nil {
			break // not the harness's lines, or the end, or a torn frame: kept up to there
		}
		if keepTail == 0 && s.total >= int64(keepHead) {
			break
		}
	}
	// The ring keeps zSlack more than keepTail between compactions.
	if over := len(s.ring) - s.keepTail; s.keepTail > 0 && over > 0 && (s.ringAt > 0 || len(s.ring) > s.keepHead+s.keepTail) {
		s.ring = s.ring[over:]
		s.ringAt += int64(over)
	}
	// Cut to the last whole line.
	if s.ringAt == 0 {
		r.whole = upToLine(s.ring, s.goodEnd)
		return r
	}
	r.head = upToLine(s.head, s.goodEnd)
	if end := s.goodEnd - s.ringAt; end > 0 {
		t := s.ring[:min(end, int64(len(s.ring)))]
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			r.tail = t[i+1:]
		}
	}
	return r
}

// upToLine is b up to end, or up to its last newline before end.
func upToLine(b []byte, end int64) []byte {
	if end <= int64(len(b)) {
		return b[:end]
	}
	return b[:bytes.LastIndexByte(b, '\n')+1]
}

// zReader is a decoder of the zstd frames in b, on one goroutine and
// with its window and memory bounded by zMaxWindow.
func zReader(b []byte) (*zstd.Decoder, error) {
	return zstd.NewReader(bytes.NewReader(b),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zMaxWindow),
		zstd.WithDecoderMaxMemory(zMaxWindow))
}

// unzstd decodes every zstd frame in b (skippable frames skipped), keeping
// at most max bytes of output, whatever they are. A torn or corrupt frame
// ends the output where it broke: what came before it is kept. For the
// first bytes of a log (max small): the decode stops at max.
func unzstd(b []byte, max int64) []byte {
	d, err := zReader(b)
	if err != nil {
		return nil
	}
	defer d.Close()
	var out bytes.Buffer
	io.Copy(&out, io.LimitReader(d, max))
	return out.Bytes()
}

// ztail decodes a window cut from the end of a multi-frame log: from the
// first frame magic that decodes at all, the last keep bytes of its JSON
// lines. A magic number inside compressed data rarely begins a frame that
// decodes, so the next one is tried; one that decodes to anything but the
// harness's lines ends the search (nil). cut says a bound stopped it: the
// tail is then unknown.
func ztail(w *zwork, ch *budget.Hold, b []byte, keep int) (out []byte, cut bool) {
	off := 0
	for tries := 0; tries < zMaxTries; tries++ {
		i := bytes.Index(b[off:], zstdMagic)
		if i < 0 {
			return nil, false
		}
		r := zdecode(w, ch, b[off+i:], 0, keep)
		if r.cut {
			return nil, true
		}
		if r.started {
			if r.whole != nil {
				return r.whole, false
			}
			return r.tail, false
		}
		off += i + 1
	}
	return nil, false
}

// unzstdTail is ztail with its own work bound, keeping at most max bytes.
func unzstdTail(b []byte, max int64) []byte {
	out, _ := ztail(nil, &budget.Hold{}, b, int(max))
	return out
}

// zwindows is windows for a zstd-compressed JSONL log: the head and tail
// windows are cut from the compressed file and decoded, so the cost is
// bounded however long the log is. The lines are charged to w's pool
// until done is called. A tail that a bound cut short is empty, not nil
// (nil means the head holds the whole file), and keep is false: what is
// derived from the lines is not the file's to keep.
func zwindows(w *zwork, r *saferoot.Root, rel string, head, tail int64) (headLines, tailLines [][]byte, done func(), keep bool) {
	ch := &budget.Hold{}
	if w != nil {
		ch = budget.NewHold(w.pool)
	}
	whole, hb, tb := rawWindows(r, rel, head, tail)
	if whole != nil {
		d := zdecode(w, ch, whole, zKeep/4, zKeep)
		switch {
		case d.whole != nil && !d.cut:
			return lines(d.whole), nil, ch.Release, true
		case d.whole != nil:
			return lines(d.whole), [][]byte{}, ch.Release, false // the end is unknown
		case d.cut:
			return lines(d.head), [][]byte{}, ch.Release, false
		}
		return lines(d.head), nonNil(lines(d.tail)), ch.Release, true
	}
	ok := true
	if hb != nil {
		d := zdecode(w, ch, hb, zKeep, 0)
		headLines = lines(d.whole)
		ok = ok && (!d.cut || d.whole != nil)
	}
	if tb != nil {
		out, cut := ztail(w, ch, tb, zKeep)
		tailLines = lines(out)
		ok = ok && !cut
	}
	return headLines, nonNil(tailLines), ch.Release, ok
}

func nonNil(ls [][]byte) [][]byte {
	if ls == nil {
		return [][]byte{}
	}
	return ls
}

// zfirstLine decodes only as much of a zstd log as its first line needs.
func zfirstLine(r *saferoot.Root, rel string) []byte {
	b, err := readSmall(r, rel, smallFile)
	if err != nil {
		return nil
	}
	out := unzstd(b, smallFile)
	if i := bytes.IndexByte(out, '\n'); i >= 0 {
		return out[:i]
	}
	return nil
}

// firstLine is the first complete line of a plain file, read within max.
func firstLine(r *saferoot.Root, rel string, max int64) []byte {
	b, err := readSmall(r, rel, max)
	if err != nil {
		return nil
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return nil
}

// ---- small parsing helpers ----

// mayHold reports whether the JSON line ln may hold one of the strings
// (each given with its quotes, `"summary"`): a line that holds none is
// not worth decoding for a field with one of those values. A JSON string
// can spell any character as \uXXXX, so a line with such an escape may
// hold anything; Claude writes \u only for control characters and lone
// surrogates, so most lines are told apart by a plain search: one pass
// over the line's quotes, each compared with every string.
func mayHold(ln []byte, quoted ...string) bool {
	if bytes.Contains(ln, []byte(`\u`)) {
		return true
	}
	for i := 0; ; i++ {
		j := bytes.IndexByte(ln[i:], '"')
		if j < 0 {
			return false
		}
		i += j
		// The byte after the quote first: most quotes begin a key or a
		// value that is none of the strings, told apart without a call.
		next, after := byte(0), byte(0)
		if i+2 < len(ln) {
			next, after = ln[i+1], ln[i+2]
		} else if i+1 < len(ln) {
			next = ln[i+1]
		}
		for _, q := range quoted {
			if (len(q) < 2 || q[1] == next && (len(q) < 3 || q[2] == after)) && bytes.HasPrefix(ln[i:], []byte(q)) {
				return true
			}
		}
	}
}

// cleanTitle makes a title one line: whitespace runs become one space, and
// it is cut to 200 characters.
func cleanTitle(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 200 {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:200]))
	}
	return s
}

// parseTime reads an ISO timestamp.
func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// byMtime is a file and its modification time, for newest-first choices.
type byMtime struct {
	rel   string
	mtime time.Time
}

// newestFirst sorts files newest first (ties by name, for determinism).
func newestFirst(fs []byMtime) {
	slices.SortFunc(fs, func(a, b byMtime) int {
		if c := b.mtime.Compare(a.mtime); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
}

// number reads a JSON number or numeric string as a float.
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if t, ok := parseTime(s); ok {
			return float64(t.UnixNano()) / 1e9, true
		}
	}
	return 0, false
}
