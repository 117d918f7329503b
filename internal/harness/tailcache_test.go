package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/saferoot"
)

// TestFileCachedRevalidates checks that a fact is derived once per version
// of its file, and derived again as soon as the file changes.
func TestFileCachedRevalidates(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // still long enough to be kept
	os.Chtimes(p, old, old)
	r := saferoot.New(dir)
	c := NewFileCache()
	calls := 0
	get := func() int {
		return fileCached(NewMemoCache(c), r, "k", "t.jsonl", func() int { calls++; return calls })
	}
	if v, w := get(), get(); v != 1 || w != 1 || calls != 1 {
		t.Fatalf("unchanged file: got %d, %d after %d derivations, want 1, 1 after 1", v, w, calls)
	}
	if err := os.WriteFile(p, []byte("ab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := get(); v != 2 {
		t.Fatalf("grown file: got %d, want a fresh derivation (2)", v)
	}
	// Just written: not kept, since a same-size rewrite within the
	// timestamp granularity would leave the key unchanged.
	if v := get(); v != 3 {
		t.Fatalf("recently modified file: got %d, want a fresh derivation (3)", v)
	}
	os.Chtimes(p, old.Add(time.Minute), old.Add(time.Minute))
	if v, w := get(), get(); v != 4 || w != 4 {
		t.Fatalf("touched file: got %d, %d, want one fresh derivation (4) then kept", v, w)
	}
}

// TestClaudeFillCached checks the tail facts kept per file version: an
// unchanged file is not read again (a same-size rewrite with the same
// mtime still gives the kept state), the settle rule is applied at each
// read to the kept facts (the same version reads working, then idle once
// still for settle), and a file that grew is read afresh.
func TestClaudeFillCached(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	user := `{"type":"user","timestamp":"2026-12-01T00:00:00Z","message":{"role":"user","content":"hi"}}` + "\n"
	reply := `{"type":"assistant","timestamp":"2026-12-01T00:00:01Z","message":{"id":"m1","model":"claude-opus-4-6","content":[{"type":"text","text":"done"}],"stop_reason":null,"usage":{"input_tokens":7,"output_tokens":3}}}` + "\n"
	mtime := time.Date(2026, 12, 1, 0, 0, 2, 0, time.UTC)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(user + reply)
	env := Env{Root: saferoot.New(dir)}
	c := NewFileCache()
	fill := func(now time.Time) Agent {
		env.Memo = NewMemoCache(c) // a new request each time, as a table read
		var a Agent
		claudeFill(env, &a, "s.jsonl", now)
		return a
	}
	if a := fill(mtime.Add(time.Second)); a.State != StateWorking {
		t.Fatalf("text reply, stop_reason null, not settled: state %q (%s), want working", a.State, a.StateVia)
	}
	if a := fill(mtime.Add(settle)); a.State != StateIdle || a.Tokens.String() == "" {
		t.Fatalf("the same file once settled: state %q (%s), tokens %q; want idle with tokens", a.State, a.StateVia, a.Tokens)
	}
	// The same size and mtime: the kept facts answer, the file is not read.
	write(user + strings.Repeat("x", len(reply)-1) + "\n")
	if a := fill(mtime.Add(settle)); a.State != StateIdle {
		t.Fatalf("unchanged version: state %q (%s), want the kept idle", a.State, a.StateVia)
	}
	// Grown: read afresh (the torn reply no longer parses; the prompt is newest).
	mtime = mtime.Add(time.Second)
	write(user + strings.Repeat("x", len(reply)-1) + "\n" + user)
	if a := fill(mtime.Add(time.Hour)); a.State != StateWorking {
		t.Fatalf("grown file: state %q (%s), want working (a fresh read)", a.State, a.StateVia)
	}
}

// TestCountSharedStat checks Count in a table read (env.Memo set): an
// unchanged transcript gives its kept count, and one that grew is counted
// again, never the kept figure.
func TestCountSharedStat(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	line := func(id string, in int) string {
		return fmt.Sprintf(`{"type":"assistant","message":{"id":%q,"model":"claude-opus-4-6","usage":{"input_tokens":%d,"output_tokens":1}}}`+"\n", id, in)
	}
	if err := os.WriteFile(p, []byte(line("m1", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := Env{Root: saferoot.New(dir), Counts: &Counts{}}
	c := NewFileCache()
	a := Agent{Harness: "claude", Transcript: "s.jsonl"}
	count := func() Tokens {
		env.Memo = NewMemoCache(c)
		return Count(env, a)
	}
	first := count().String()
	if again := count().String(); again != first || !strings.Contains(first, "input 10") {
		t.Fatalf("unchanged: %q then %q, want the same count with input 10", first, again)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line("m2", 5))
	f.Close()
	later := time.Now().Add(time.Minute)
	os.Chtimes(p, later, later)
	if got := count().String(); !strings.Contains(got, "input 15") {
		t.Fatalf("grown: %q, want input 15 (counted again)", got)
	}
}

// TestMayHaveDir checks the sub-agent walk is skipped only when the
// project dir's listing shows no directory of the session's name.
func TestMayHaveDir(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "p", "s1", "subagents"), 0o755)
	os.WriteFile(filepath.Join(dir, "p", "s2"), nil, 0o644) // a file, not a directory
	r := saferoot.New(dir)
	for _, c := range []struct {
		memo      *Memo
		dir, name string
		want      bool
	}{
		{NewMemo(), "p", "s1", true},
		{NewMemo(), "p", "s2", false},
		{NewMemo(), "p", "s3", false},
		{NewMemo(), "missing", "s1", true}, // unlistable: may
		{nil, "p", "s3", true},             // no memo: may
	} {
		if got := c.memo.mayHaveDir(r, c.dir, c.name); got != c.want {
			t.Errorf("mayHaveDir(%s, %s), memo %v: %v, want %v", c.dir, c.name, c.memo != nil, got, c.want)
		}
	}
}

// TestDirCachedRevalidates checks that a directory's listing is kept
// across requests while the directory is still, and listed afresh as soon
// as a name is added, removed or renamed (each changes its mtime), and
// always while it was modified within fileCacheStill.
func TestDirCachedRevalidates(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "p")
	os.Mkdir(proj, 0o755)
	old := time.Now().Add(-time.Hour)
	still := func() { os.Chtimes(proj, old, old); old = old.Add(time.Minute) }
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(proj, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := saferoot.New(dir)
	c := NewFileCache()
	names := func() string {
		ents, err := NewMemoCache(c).readDir(r, "p")
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range ents {
			n = append(n, e.Name)
		}
		return strings.Join(n, " ")
	}
	write("a.jsonl")
	still()
	if got := names(); got != "a.jsonl" {
		t.Fatalf("listing: %q", got)
	}
	// Kept: a rename hidden behind the directory's unchanged key (its
	// old mtime put back; a rename keeps a directory's size on every file
	// system) shows that the cache is what answers.
	os.Rename(filepath.Join(proj, "a.jsonl"), filepath.Join(proj, "z.jsonl"))
	os.Chtimes(proj, old.Add(-time.Minute), old.Add(-time.Minute))
	if got := names(); got != "a.jsonl" {
		t.Fatalf("still directory: got %q, want the kept listing", got)
	}
	os.Rename(filepath.Join(proj, "z.jsonl"), filepath.Join(proj, "a.jsonl"))
	for _, change := range []struct {
		name string
		do   func()
		want string
	}{
		{"added", func() { write("b.jsonl") }, "a.jsonl b.jsonl"},
		{"renamed", func() { os.Rename(filepath.Join(proj, "b.jsonl"), filepath.Join(proj, "c.jsonl")) }, "a.jsonl c.jsonl"},
		{"removed", func() { os.Remove(filepath.Join(proj, "a.jsonl")) }, "c.jsonl"},
	} {
		change.do()
		// Just modified: listed afresh on every request.
		if got := names(); got != change.want {
			t.Fatalf("%s: got %q, want %q", change.name, got, change.want)
		}
		still()
		if got := names(); got != change.want {
			t.Fatalf("%s, then still: got %q, want %q", change.name, got, change.want)
		}
	}
}

// TestMemoReleased: a memo released by its request is taken by the next
// one empty: what the first request stat'ed or derived is asked again,
// so a reused memo never answers with an older request's facts. A memo
// that held more than memoKeptMax entries is not kept.
func TestMemoReleased(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := saferoot.New(dir)
	c := NewFileCache()
	m := NewMemoCache(c)
	if info, err := m.Stat(r, "f"); err != nil || info.Size != 3 {
		t.Fatalf("first Stat: %+v, %v", info, err)
	}
	if v := memoGet(m, r, "k", "f", func() int { return 1 }); v != 1 {
		t.Fatalf("first memoGet = %d", v)
	}
	m.Release()
	if err := os.WriteFile(p, []byte("three"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2 := NewMemoCache(c)
	if m2 != m {
		t.Fatalf("the released memo was not reused")
	}
	if info, err := m2.Stat(r, "f"); err != nil || info.Size != 5 {
		t.Errorf("Stat through the reused memo: %+v, %v; want the file as it is now (size 5)", info, err)
	}
	if v := memoGet(m2, r, "k", "f", func() int { return 2 }); v != 2 {
		t.Errorf("memoGet through the reused memo = %d, want 2 (derived again)", v)
	}
	for i := range memoKeptMax {
		memoGet(m2, r, "k", strconv.Itoa(i), func() int { return i })
	}
	m2.Release()
	if m3 := NewMemoCache(c); m3 == m2 {
		t.Errorf("a memo of %d entries was kept", memoKeptMax+2)
	}
}

// TestMemoGetOnce: callers that come while a value is being computed wait
// for it instead of computing it again, and all get the one result; if
// the computation panics, the waiters are released and compute it
// themselves.
func TestMemoGetOnce(t *testing.T) {
	r := saferoot.New(t.TempDir())
	m := NewMemo()
	var calls atomic.Int32
	started := make(chan struct{})
	release := make(chan struct{})
	f := func() int {
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
		return 42
	}
	var wg sync.WaitGroup
	got := make([]int, 8)
	wg.Add(1)
	go func() { defer wg.Done(); got[0] = memoGet(m, r, "k", "once", f) }()
	<-started
	for i := 1; i < len(got); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = memoGet(m, r, "k", "once", f) }()
	}
	time.Sleep(50 * time.Millisecond) // the late callers are waiting now
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("computed %d times, want once", n)
	}
	for i, v := range got {
		if v != 42 {
			t.Errorf("caller %d got %d", i, v)
		}
	}

	// A panic in the first computation releases the waiters.
	blocked := make(chan struct{})
	boom := make(chan struct{})
	go func() {
		defer func() { recover() }()
		memoGet(m, r, "k", "panics", func() int { close(blocked); <-boom; panic("boom") })
	}()
	<-blocked
	done := make(chan int)
	go func() { done <- memoGet(m, r, "k", "panics", func() int { return 7 }) }()
	time.Sleep(20 * time.Millisecond)
	close(boom)
	select {
	case v := <-done:
		if v != 7 {
			t.Errorf("after the panic the waiter got %d, want its own 7", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was left blocked by a panicking computation")
	}
}

// Listings kept across requests are bounded in bytes, however many big
// directories there are.
func TestFileCacheBytes(t *testing.T) {
	dir := t.TempDir()
	root := saferoot.New(dir)
	old := time.Now().Add(-time.Hour)
	big := make([]saferoot.Entry, 4000) // some 1.2 MB of names
	for i := range big {
		big[i] = saferoot.Entry{Name: fmt.Sprintf("%0250d", i)}
	}
	fc := NewFileCache()
	for i := 0; i < 60; i++ {
		d := fmt.Sprintf("d%d", i)
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, d), old, old); err != nil {
			t.Fatal(err)
		}
		m := NewMemoCache(fc)
		cached(m, root, "listing", d, true, func() ([]saferoot.Entry, bool) { return big, true })
		m.Release()
		fc.mu.Lock()
		n, b := len(fc.m), fc.bytes
		fc.mu.Unlock()
		if b > fileCacheMaxBytes {
			t.Fatalf("after %d listings: %d kept, %d bytes, past %d", i+1, n, b, fileCacheMaxBytes)
		}
		if n == 0 {
			t.Fatalf("after %d listings: none kept", i+1)
		}
	}
}
