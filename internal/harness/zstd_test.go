package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

			w := newZWork(pool)
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
			w = newZWork(nil)
			tail := log[len(log)-zTailWindow:]
			out, cut := ztail(w, &zcharge{}, tail, zKeep)
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
	title, _ := dshFacts(newZWork(pool), root, "session.jsonl.zstd", true)
	if title != "title 19999 "+fmt.Sprintf("%x", 19999*7919) {
		t.Errorf("title %q, want the last one", title)
	}
	if pool.Used() != 0 {
		t.Errorf("%d bytes still charged", pool.Used())
	}

	tiny := budget.New("tiny", 64<<10)
	if title, _ := dshFacts(newZWork(tiny), root, "session.jsonl.zstd", true); title != "" {
		t.Errorf("title %q read past a pool too small to decode", title)
	}
	if tiny.Used() != 0 {
		t.Errorf("%d bytes still charged", tiny.Used())
	}
}
