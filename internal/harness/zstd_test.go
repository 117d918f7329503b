package harness

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/saferoot"
)

// bombLog is a multi-frame log, a real header frame and then the same
// frame of a few kilobytes that inflates to 16 MiB of one, repeated past
// the head and tail windows.
func bombLog(t *testing.T, one []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(1<<20), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	out := enc.EncodeAll([]byte(`{"type":"session","id":"s","createdAt":1,"cwd":"/w"}`+"\n"), nil)
	frame := enc.EncodeAll(one, nil)
	t.Logf("a frame of %d bytes inflates to %d", len(frame), len(one))
	for len(out) < 2*(zHeadWindow+zTailWindow) {
		out = append(out, frame...)
	}
	return out
}

// spent is what w decoded.
func spent(w *zwork) int64 { return zMaxWork - w.left }

// A log whose frames each inflate to 16 MiB: reading its facts decodes at
// most the per-resolve bound, stops at the first frame that is not the
// harness's JSON lines (one frame's work, not one per candidate), charges
// the pool while it holds the output and gives all of it back.
func TestZstdBomb(t *testing.T) {
	const frame = 16 << 20
	cases := []struct {
		name string
		one  []byte
		max  int64 // decoded at most, head and tail windows together
	}{
		// Not JSON at all: the first candidate's first bytes end it.
		{"zeros", make([]byte, frame), 2 * (zChunk + 1<<10)},
		// "{" and then no end of line: ended by zMaxLine.
		{"one long line", append([]byte("{"), bytes.Repeat([]byte("a"), frame-1)...), 2 * (zMaxLine + zChunk + 1<<10)},
		// Lines shaped like records, 16 MiB of them a frame: ended by the
		// work bound, and the tail is then unknown, not an old one.
		{"record-shaped", bytes.Repeat([]byte(`{"type":"session/title","data":{"title":"t"}}`+"\n"), frame/47), zMaxWork},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := bombLog(t, c.one)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "session.jsonl.zstd"), log, 0o644); err != nil {
				t.Fatal(err)
			}
			root := saferoot.New(dir)
			pool := budget.New("test", 256<<20)

			w := newZWork(pool, nil)
			title, _ := dshFacts(w, root, "session.jsonl.zstd", true)
			if n := spent(w); n > c.max {
				t.Errorf("decoded %d bytes, want at most %d", n, c.max)
			}
			if strings.HasPrefix(title, "t") && c.name == "record-shaped" {
				// A title from the head is the head's; the tail's is unknown.
				t.Logf("title %q (from the head)", title)
			}
			if u := pool.Used(); u != 0 {
				t.Errorf("%d bytes still charged after the read", u)
			}
			if pk := pool.Peak(); pk > zDecoderBytes+zKeep+2*(zKeep+zSlack) {
				t.Errorf("charged %d bytes at once", pk)
			}
			t.Logf("decoded %d bytes, charged at most %d", spent(w), pool.Peak())

			// The tail window alone, from inside the frames: the search for
			// a frame start stops at the first one that decodes.
			w = newZWork(nil, nil)
			tail := log[len(log)-zTailWindow:]
			out, cut := ztail(w, &budget.Hold{}, tail, zKeep)
			if n := spent(w); n > c.max {
				t.Errorf("tail: decoded %d bytes, want at most %d", n, c.max)
			}
			if c.name == "record-shaped" && (!cut || out != nil) {
				t.Errorf("tail cut short by the work bound: %d bytes, cut %v; want none, cut", len(out), cut)
			}
		})
	}
}

// A tail window of a real log (many small frames of records) keeps its
// latest lines, and a tiny pool gives no lines and charges nothing.
func TestZstdTailKept(t *testing.T) {
	var parts []string
	parts = append(parts, `{"type":"session","id":"s","createdAt":1,"cwd":"/w"}`+"\n")
	for i := 0; i < 20000; i++ {
		parts = append(parts, fmt.Sprintf(`{"type":"session/title","data":{"title":"title %d %x"}}`+"\n", i, i*7919))
	}
	log := zframes(t, parts...)
	if len(log) <= zHeadWindow+zTailWindow {
		t.Fatalf("log of %d bytes fits the windows", len(log))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "session.jsonl.zstd"), log, 0o644); err != nil {
		t.Fatal(err)
	}
	root := saferoot.New(dir)
	pool := budget.New("test", 64<<20)
	title, _ := dshFacts(newZWork(pool, nil), root, "session.jsonl.zstd", true)
	if title != "title 19999 "+fmt.Sprintf("%x", 19999*7919) {
		t.Errorf("title %q, want the last one", title)
	}
	if pool.Used() != 0 {
		t.Errorf("%d bytes still charged", pool.Used())
	}

	tiny := budget.New("tiny", 64<<10)
	if title, _ := dshFacts(newZWork(tiny, nil), root, "session.jsonl.zstd", true); title != "" {
		t.Errorf("title %q read past a pool too small to decode", title)
	}
	if tiny.Used() != 0 {
		t.Errorf("%d bytes still charged", tiny.Used())
	}
}

// zdecode against the text it decodes, for random logs of JSON lines cut
// into random frames and random bounds: a whole output is the text; a
// head is a prefix of it ending a line, within keepHead; a tail is a
// suffix of it starting a line, within keepTail and missing at most a
// line and a compaction's worth of it; a bad line ends the output before
// it.
func TestZdecodeRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	for iter := 0; iter < 200; iter++ {
		var text []byte
		for n := rnd.IntN(2000); n > 0; n-- {
			text = fmt.Appendf(text, `{"n":%d,"pad":"%s"}`+"\n", n, strings.Repeat("x", rnd.IntN(300)))
		}
		bad := -1
		if rnd.IntN(4) == 0 && len(text) > 0 {
			// A line that is not the harness's, at a line start.
			cuts := bytes.Split(text, []byte("\n"))
			k := rnd.IntN(len(cuts))
			off := 0
			for _, c := range cuts[:k] {
				off += len(c) + 1
			}
			if off < len(text) {
				text = append(text[:off:off], append([]byte("not json\n"), text[off:]...)...)
				bad = off
			} else {
				bad = -1
			}
		}
		var z []byte
		for rest := text; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(20000))
			z = enc.EncodeAll(rest[:n], z)
			rest = rest[n:]
		}
		want := text
		if bad >= 0 {
			want = text[:bad]
		}
		keepHead, keepTail := rnd.IntN(64<<10), rnd.IntN(64<<10)
		if rnd.IntN(3) == 0 {
			keepTail = 0
		}
		if keepTail == 0 && keepHead == 0 {
			keepHead = 1
		}
		r := zdecode(nil, &budget.Hold{}, z, keepHead, keepTail)
		name := fmt.Sprintf("iter %d (text %d, bad %d, head %d, tail %d)", iter, len(text), bad, keepHead, keepTail)
		switch {
		case r.whole != nil:
			if keepTail == 0 {
				if !bytes.HasPrefix(want, r.whole) || len(r.whole) > keepHead || (len(r.whole) > 0 && r.whole[len(r.whole)-1] != '\n') {
					t.Fatalf("%s: head-only %d bytes is not a prefix of whole lines within the bound", name, len(r.whole))
				}
			} else if !bytes.Equal(r.whole, want) {
				t.Fatalf("%s: whole %d bytes, want %d", name, len(r.whole), len(want))
			}
		default:
			if len(want) <= keepHead+keepTail {
				t.Fatalf("%s: %d bytes fit the bounds, but not kept whole", name, len(want))
			}
			if !bytes.HasPrefix(want, r.head) || len(r.head) > keepHead {
				t.Fatalf("%s: head %d bytes", name, len(r.head))
			}
			if !bytes.HasSuffix(want, r.tail) || len(r.tail) > keepTail || (len(r.tail) > 0 && r.tail[0] != '{') {
				t.Fatalf("%s: tail %d bytes is not a suffix of whole lines within the bound", name, len(r.tail))
			}
			if len(r.tail) < keepTail-400 {
				t.Fatalf("%s: tail %d bytes, of %d kept", name, len(r.tail), keepTail)
			}
		}
	}
}

// What is derived from a decode that a bound cut short is not kept for
// the file's version: the next read, with room to decode, derives it.
func TestZstdCutNotKept(t *testing.T) {
	dir := t.TempDir()
	log := zframes(t, `{"type":"session","id":"s","createdAt":1,"cwd":"/w"}`+"\n",
		`{"type":"user/message","time":1000,"data":{}}`+"\n")
	path := filepath.Join(dir, "session.jsonl.zstd")
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	fc := NewFileCache()
	env := Env{Root: saferoot.New(dir)}
	for i, left := range []int64{0, zMaxWork} {
		env.Memo = NewMemoCache(fc)
		env.zw = &zwork{left: left}
		var a Agent
		dshFill(env, &a, "session.jsonl.zstd")
		env.Memo.Release()
		want := map[int]string{0: "", 1: StateWorking}[i]
		if a.State != want {
			t.Errorf("read %d (room %d): state %q, want %q", i, left, a.State, want)
		}
	}
}

// TestZWorkRequest: the agents one request resolves share its bound on
// decoding: each has zMaxWork of its own, and together no more than
// zMaxRequestWork; a memo released for the next request starts afresh.
func TestZWorkRequest(t *testing.T) {
	m := NewMemo()
	req := m.decodeWork()
	var total int64
	for range 2 * zMaxRequestWork / zMaxWork {
		w := newZWork(nil, m.decodeWork())
		got := w.spend(zMaxWork + 1)
		if got > zMaxWork {
			t.Fatalf("one resolve decoded %d, over its own %d", got, zMaxWork)
		}
		total += got
	}
	if total != zMaxRequestWork || req.left != 0 {
		t.Fatalf("the request's resolves decoded %d in all (left %d), want %d", total, req.left, zMaxRequestWork)
	}
	w := newZWork(nil, req)
	w.refund(0)
	if got := w.spend(1); got != 0 {
		t.Fatalf("a resolve past the request's bound decoded %d", got)
	}
	var none *Memo
	if none.decodeWork() != nil {
		t.Fatal("a nil memo has a request bound")
	}
}
