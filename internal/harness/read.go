package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

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
	zMaxOut     = 16 << 20  // decompressed bytes kept from one window
	zMaxTries   = 64        // frame-start candidates tried in a tail window
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

// unzstd decodes every zstd frame in b (skippable frames skipped), keeping
// at most max bytes of output. A torn or corrupt frame ends the output where
// it broke: what came before it is kept.
func unzstd(b []byte, max int64) []byte {
	d, err := zstd.NewReader(bytes.NewReader(b),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20),
		zstd.WithDecoderMaxMemory(uint64(max)+(64<<20)))
	if err != nil {
		return nil
	}
	defer d.Close()
	var out bytes.Buffer
	io.Copy(&out, io.LimitReader(d, max))
	return out.Bytes()
}

// unzstdTail decodes a window cut from the end of a multi-frame log: it
// starts at the first frame magic from which the frames decode into JSON
// lines. A magic number inside compressed data decodes to nothing (or not
// to a line starting "{"), so the next one is tried.
func unzstdTail(b []byte, max int64) []byte {
	off := 0
	for tries := 0; tries < zMaxTries; tries++ {
		i := bytes.Index(b[off:], zstdMagic)
		if i < 0 {
			return nil
		}
		if out := unzstd(b[off+i:], max); len(out) > 0 && out[0] == '{' {
			return out
		}
		off += i + 1
	}
	return nil
}

// zwindows is windows for a zstd-compressed JSONL log: the head and tail
// windows are cut from the compressed file and decoded, so the cost is
// bounded however long the log is.
func zwindows(r *saferoot.Root, rel string, head, tail int64) (headLines, tailLines [][]byte) {
	whole, hb, tb := rawWindows(r, rel, head, tail)
	if whole != nil {
		return lines(unzstd(whole, zMaxOut)), nil
	}
	if hb != nil {
		out := unzstd(hb, zMaxOut)
		if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
			headLines = lines(out[:i+1])
		}
	}
	if tb != nil {
		tailLines = lines(unzstdTail(tb, zMaxOut))
	}
	return headLines, tailLines
}

// zfirstLine decodes only as much of a zstd log as its first line needs.
func zfirstLine(r *saferoot.Root, rel string) []byte {
	b, err := readSmall(r, rel, smallFile)
	if err != nil {
		return nil
	}
	out := unzstd(b, 1<<20)
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
		for _, q := range quoted {
			if bytes.HasPrefix(ln[i:], []byte(q)) {
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
