package harness

// Fuzz targets for every on-disk format the harnesses parse. Each target
// writes the input where the harness would find it, runs the real reader
// (through saferoot, with the real bounds), and checks a property that
// holds for any input, not only "no panic". Seeds come from the fixture
// home (../../testdata/home) and from testdata/fuzz/<Target>/.
//
// `make test` runs only the seeds; `make torture` fuzzes each target for
// FUZZTIME.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// fuzzHome is a harness root and a fixture proc table in a temp dir made
// once per fuzz process; put rewrites one file in the root per input.
type fuzzHome struct {
	t     testing.TB
	dir   string
	root  *saferoot.Root
	procs *proc.Table
}

const fuzzPID = 4242

func newFuzzHome(f *testing.F) *fuzzHome {
	base := f.TempDir()
	h := &fuzzHome{t: f, dir: filepath.Join(base, "root"), procs: proc.New(filepath.Join(base, "proc"))}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		f.Fatal(err)
	}
	h.root = saferoot.New(h.dir)
	err := proctest.Write(filepath.Join(base, "proc"), proctest.Proc{
		PID: fuzzPID, PPID: 1, UID: 1000, Start: 12000,
		Argv: []string{"/usr/bin/python3", "/home/goblin/.local/bin/hermes"},
		Cwd:  "/home/goblin/src/x",
	})
	if err != nil {
		f.Fatal(err)
	}
	return h
}

func (h *fuzzHome) put(t *testing.T, rel string, b []byte) {
	p := filepath.Join(h.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (h *fuzzHome) proc(t *testing.T) proc.Proc {
	p, err := h.procs.Stat(fuzzPID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// seedFiles adds every fixture file matching one of the globs (relative to
// the repository's testdata/home) as a seed.
func seedFiles(f *testing.F, globs ...string) {
	n := 0
	for _, g := range globs {
		ms, _ := filepath.Glob(filepath.Join("../../testdata/home", g))
		for _, m := range ms {
			b, err := os.ReadFile(m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no fixture matches %q", globs)
	}
}

// checkTitle: a title is one cleaned line of at most 200 characters.
func checkTitle(t *testing.T, what, s string) {
	t.Helper()
	if s != cleanTitle(s) {
		t.Fatalf("%s %q is not clean", what, s)
	}
	if utf8.RuneCountInString(s) > 200 {
		t.Fatalf("%s has %d characters, more than 200", what, utf8.RuneCountInString(s))
	}
}

// zstdOf compresses b as one frame (for seeds).
func zstdOf(f *testing.F, parts ...string) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		f.Fatal(err)
	}
	defer enc.Close()
	var out []byte
	for _, p := range parts {
		out = enc.EncodeAll([]byte(p), out)
	}
	return out
}

// FuzzClaudeRegistry: ~/.claude/sessions/<pid>.json. A record is believed
// only when it names this pid (or none) and a UUID session id.
func FuzzClaudeRegistry(f *testing.F) {
	seedFiles(f, ".claude/sessions/*.json")
	f.Add([]byte(`{"pid":4242,"sessionId":"776cd19e-24b2-42a4-b1de-792f056ae0eb","procStart":"12000"}`))
	f.Add([]byte(`{"pid":4242,"sessionId":"776cd19e-24b2-42a4-b1de-792f056ae0eb","procStart":12000,"pidDomain":"linux::pid:[1]"}`))
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "sessions/4242.json", b)
		p := h.proc(t)
		env := Env{Procs: h.procs, Root: h.root, PIDDomain: "linux::pid:[4026531836]"}
		reg, why := claudeRegistry(env, p)
		if reg == nil {
			if why == "" {
				t.Fatal("refused without a reason")
			}
			return
		}
		if !isUUID(reg.SessionID) || (reg.PID != 0 && reg.PID != p.PID) {
			t.Fatalf("believed %+v", reg)
		}
		if len(b) > smallFile {
			t.Fatalf("believed a %d-byte record, bound %d", len(b), smallFile)
		}
	})
}

// FuzzClaudeTranscript: a Claude transcript (JSONL) read for title and model.
func FuzzClaudeTranscript(f *testing.F) {
	seedFiles(f, ".claude/projects/*/*.jsonl", ".claude/projects/*/*/subagents/*.jsonl")
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "projects/p/s.jsonl", b)
		title, model := claudeFacts(h.root, "projects/p/s.jsonl")
		checkTitle(t, "title", title)
		if model != "" && !bytes.Contains(b, []byte(`"`)) {
			t.Fatalf("model %q from input without JSON strings", model)
		}
		_ = claudeSubModel(h.root, "projects/p/s.jsonl")
	})
}

// FuzzCodexRollout: a plain Codex rollout; its first line (session_meta,
// possibly cut) and the facts from its windows.
func FuzzCodexRollout(f *testing.F) {
	seedFiles(f, ".codex/sessions/*/*/*/rollout-*.jsonl", ".codex/session_index.jsonl")
	f.Add([]byte(`{"type":"session_meta","payload":{"source":{"subagent":{"thread_spawn":{"parent_thread_id":"019e763f-ff0c-7683-a4e9-a17e2bf964fb","agent_nickname":"x`))
	h := newFuzzHome(f)
	const rel = "sessions/2026/09/20/rollout-2026-09-20T12-00-00-019e763f-ff0c-7683-a4e9-a17e2bf964fb.jsonl"
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, rel, b)
		if m := codexReadMeta(h.root, rel); m.parent != "" && !bytes.Contains(b, []byte("parent_thread_id")) {
			t.Fatalf("parent %q from a first line that names none", m.parent)
		}
		model, title := codexFacts(nil, h.root, rel)
		checkTitle(t, "title", title)
		_ = model
		h.put(t, "session_index.jsonl", b)
		checkTitle(t, "index title", codexIndexTitle(h.root, "019e763f-ff0c-7683-a4e9-a17e2bf964fb"))
	})
}

// FuzzZstd: the multi-frame zstd decoder every compressed log goes through
// (Codex .jsonl.zst, dsh .jsonl.zstd). The output never exceeds the bound
// it is given, whatever the frames claim; and the readers built on it hold
// their properties.
func FuzzZstd(f *testing.F) {
	seedFiles(f, ".codex/sessions/*/*/*/*.zst", ".dsh/sessions/*/*/*.zstd")
	f.Add(zstdOf(f, "{\"type\":\"session\",\"id\":\"x\"}\n", "{\"type\":\"session/title\",\"data\":{\"title\":\"t\"}}\n"))
	f.Add(append([]byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}, zstdOf(f, "{}\n")...)) // skippable frame first
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, max := range []int64{0, 1, 100, 4096} {
			if out := unzstd(b, max); int64(len(out)) > max {
				t.Fatalf("unzstd gave %d bytes, bound %d", len(out), max)
			}
			if out := unzstdTail(b, max); int64(len(out)) > max || (len(out) > 0 && out[0] != '{') {
				t.Fatalf("unzstdTail gave %d bytes (bound %d) starting %q", len(out), max, out[:min(len(out), 8)])
			}
		}
		h.put(t, "log.jsonl.zstd", b)
		hd, tl, done, _ := zwindows(nil, h.root, "log.jsonl.zstd", 64, 64)
		if n := lineBytes(hd) + lineBytes(tl); n > zKeep+zKeep/4 {
			t.Fatalf("zwindows kept %d bytes", n)
		}
		done()
		if ln := zfirstLine(h.root, "log.jsonl.zstd"); len(ln) > 1<<20 || bytes.IndexByte(ln, '\n') >= 0 {
			t.Fatalf("zfirstLine gave %d bytes", len(ln))
		}
		if hdr, ok := dshLog(h.root, "log.jsonl.zstd"); ok && hdr.Type != "session" {
			t.Fatalf("dsh header of type %q accepted", hdr.Type)
		}
		title, _ := dshFacts(nil, h.root, "log.jsonl.zstd", true)
		checkTitle(t, "dsh title", title)
		_, _ = dshFacts(nil, h.root, "log.jsonl.zstd", false)
		h.put(t, "r.jsonl.zst", b)
		_ = codexReadMeta(h.root, "r.jsonl.zst")
		_, title = codexFacts(nil, h.root, "r.jsonl.zst")
		checkTitle(t, "codex title", title)
	})
}

// FuzzZstdRoundTrip: text cut into frames at any point decodes back whole,
// and a tail window cut at a frame start decodes to the text after it.
func FuzzZstdRoundTrip(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), uint16(8))
	f.Add([]byte("{}\n"), uint16(0))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { enc.Close() })
	f.Fuzz(func(t *testing.T, text []byte, cut uint16) {
		k := int(cut) % (len(text) + 1)
		first := enc.EncodeAll(text[:k], nil)
		all := enc.EncodeAll(text[k:], bytes.Clone(first))
		if got := unzstd(all, int64(len(text))); !bytes.Equal(got, text) {
			t.Fatalf("round trip: got %q, want %q", got, text)
		}
		if got := unzstd(all, int64(len(text)/2)); !bytes.Equal(got, text[:len(text)/2]) {
			t.Fatalf("bounded round trip: got %q, want %q", got, text[:len(text)/2])
		}
		// A tail keeps the harness's lines: those of rest up to the first
		// that is not one ("{" to "}", no longer than zMaxLine).
		if rest := text[k:]; len(rest) > 0 && rest[0] == '{' {
			got := unzstdTail(all[len(first):], int64(len(rest)))
			if want := jsonLinesPrefix(rest); !bytes.Equal(got, want) {
				t.Fatalf("tail from the second frame: got %q, want %q", got, want)
			}
		}
	})
}

// jsonLinesPrefix is b up to the end of its last line before the first
// line that does not begin with "{" and end with "}" (spaces aside).
func jsonLinesPrefix(b []byte) []byte {
	end := 0
	for end < len(b) {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			break
		}
		ln := b[end : end+i]
		if len(ln) > 0 {
			t := bytes.TrimRight(ln, " \t\r")
			if ln[0] != '{' || len(t) == 0 || t[len(t)-1] != '}' || len(ln) > zMaxLine {
				break
			}
		}
		end += i + 1
	}
	return b[:end]
}

func lineBytes(ls [][]byte) int {
	n := 0
	for _, l := range ls {
		n += len(l)
	}
	return n
}

// FuzzWindows: the head and tail windows never hand back more than head+tail
// bytes, and every line they give is a line of the file.
func FuzzWindows(f *testing.F) {
	seedFiles(f, ".claude/projects/*/*.jsonl")
	f.Add([]byte("a\nb\nc\n"))
	f.Add([]byte("no newline at all"))
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "w", b)
		for _, w := range [][2]int64{{0, 0}, {1, 1}, {16, 0}, {0, 16}, {7, 9}, {64, 64}} {
			hd, tl := windows(h.root, "w", w[0], w[1])
			if n := lineBytes(hd) + lineBytes(tl); int64(n) > w[0]+w[1] {
				t.Fatalf("windows(%d, %d) gave %d bytes", w[0], w[1], n)
			}
			for _, ln := range append(hd, tl...) {
				if len(ln) == 0 || !bytes.Contains(b, ln) || bytes.IndexByte(ln, '\n') >= 0 {
					t.Fatalf("windows(%d, %d) gave line %q", w[0], w[1], ln)
				}
			}
		}
	})
}

// FuzzOmpHeader: an omp/pi transcript: the optional 256-byte title slot,
// the session header, then entries. The header and id read with and
// without full agree (both windows hold a small file whole).
func FuzzOmpHeader(f *testing.F) {
	seedFiles(f, ".omp/agent/sessions/*/*.jsonl", ".omp/agent/sessions/*/*/*.jsonl", ".pi/agent/sessions/*/*.jsonl")
	slot := `{"type":"title","title":"fix the build"}`
	f.Add([]byte(slot + strings.Repeat(" ", 255-len(slot)) + "\n" + `{"type":"session","id":"x","cwd":"/src/x","title":"old"}` + "\n"))
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "s/t_x.jsonl", b)
		full := readPiFacts(h.root, "s/t_x.jsonl", true)
		short := readPiFacts(h.root, "s/t_x.jsonl", false)
		checkTitle(t, "title", full.title)
		if !full.header && (full.id != "" || full.cwd != "") {
			t.Fatalf("no header, but id %q cwd %q", full.id, full.cwd)
		}
		if len(b) <= smallFile && (full.header != short.header || full.id != short.id || full.cwd != short.cwd) {
			t.Fatalf("full %+v and short %+v disagree", full, short)
		}
		_ = piModel(h.root, "s/t_x.jsonl")
	})
}

// FuzzHermesLeases: ~/.hermes/runtime/active_sessions.json. A session is
// taken only from a lease naming this pid, and only a safe argument.
func FuzzHermesLeases(f *testing.F) {
	seedFiles(f, ".hermes/runtime/active_sessions.json")
	f.Add([]byte(`{"entries":[{"pid":4242,"process_start_time":1790000120.0,"session_id":"20260920_100000_a1b2c3","updated_at":"2026-09-20T10:00:00Z"}]}`))
	f.Add([]byte(`{"entries":[{"pid":4242,"process_start_time":"1790000120","session_id":"--evil","updated_at":1e308}]}`))
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "runtime/active_sessions.json", b)
		a := hermes{}.Resolve(Env{Procs: h.procs, Root: h.root}, h.proc(t))
		if a.Session != "" && (!safeArg(a.Session) || !strings.HasPrefix(a.Via, "registry")) {
			t.Fatalf("session %q via %q", a.Session, a.Via)
		}
		if a.Session != "" && !bytes.Contains(b, []byte("4242")) {
			t.Fatalf("session %q from leases that never name pid 4242", a.Session)
		}
	})
}

// FuzzDshHeader: a plain dsh log's header line and facts.
func FuzzDshHeader(f *testing.F) {
	f.Add([]byte(`{"type":"session","id":"5b0e2c1a-7d3f-4e9a-8c21-9f0a1b2c3d4e","createdAt":1790000120000,"cwd":"/home/goblin/src/x","origin":"subagent","delegationDepth":1}` + "\n" + `{"type":"session/title","data":{"title":"t"}}` + "\n"))
	h := newFuzzHome(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h.put(t, "d/session.jsonl", b)
		hdr, ok := dshLog(h.root, "d/session.jsonl")
		if ok && hdr.Type != "session" {
			t.Fatalf("header of type %q accepted", hdr.Type)
		}
		if ok && bytes.IndexByte(b, '\n') < 0 {
			t.Fatal("a header accepted from a file without a complete line")
		}
		title, _ := dshFacts(nil, h.root, "d/session.jsonl", true)
		checkTitle(t, "title", title)
	})
}
