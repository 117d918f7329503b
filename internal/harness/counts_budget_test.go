package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// usageLine is a Claude assistant line of message id with n input tokens.
func usageLine(id string, n int) string {
	return fmt.Sprintf(`{"type":"assistant","message":{"id":%q,"model":"x","content":[],"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`+"\n", id, n)
}

// TestOpenIDBytes: a transcript of long message ids keeps at most
// maxOpenIDBytes of them (and each still counts once while kept), so a
// count's state is bounded in bytes whatever the ids.
func TestOpenIDBytes(t *testing.T) {
	var c claudeTokens
	long := strings.Repeat("i", 8<<10)
	for i := range 100 {
		c.line([]byte(strings.TrimSpace(usageLine(fmt.Sprintf("%s%03d", long, i), 1))))
	}
	if got := c.byID.held(); got > maxOpenIDBytes+maxOpenIDs*idCost {
		t.Errorf("held %d bytes, over %d", got, maxOpenIDBytes+maxOpenIDs*idCost)
	}
	if in := *c.tokens(true).Input; in != 100 {
		t.Errorf("input %d, want 100 (each id once)", in)
	}
}

// TestCountsBudget: the counts kept are charged to Budget while kept and
// never past its ceiling; one whose running state does not fit keeps its
// totals alone, which an unchanged file still gives, and a grown file of
// it is counted afresh, right.
func TestCountsBudget(t *testing.T) {
	dir := t.TempDir()
	pool := budget.New("counts", 64<<10)
	counts := &Counts{Budget: pool}
	env := Env{Root: saferoot.New(dir), Counts: counts}
	// Ids of 1 KiB: 100 of them are a running state of about 116 KiB.
	var b strings.Builder
	for i := range 100 {
		b.WriteString(usageLine(fmt.Sprintf("%01024d", i), 2))
	}
	p := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	a := Agent{Harness: "claude", Transcript: "t.jsonl"}
	want := "context 2\ninput 200\noutput 100\ncache_read 0\ncache_write 0"
	if got := Count(env, a).String(); got != want {
		t.Fatalf("count %q, want %q", got, want)
	}
	if u := pool.Used(); u == 0 || u > pool.Limit() || pool.Peak() > pool.Limit() {
		t.Fatalf("charged %d (peak %d) of %d: want the totals kept, within the ceiling", u, pool.Peak(), pool.Limit())
	}
	if tk, complete := CountNow(env, a); !complete || tk.String() != want {
		t.Fatalf("unchanged, its totals kept: %q complete %v", tk, complete)
	}
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(usageLine("x", 5))
	f.Close()
	if tk, complete := CountNow(env, a); complete {
		t.Fatalf("grown, no state to read on from: %q complete, want pending", tk)
	}
	if got := Count(env, a).String(); got != "context 5\ninput 205\noutput 101\ncache_read 0\ncache_write 0" {
		t.Fatalf("grown, counted afresh: %q", got)
	}
	// With room, the state is kept and charged, and a growth reads on.
	big := budget.New("counts", 8<<20)
	counts2 := &Counts{Budget: big}
	env.Counts = counts2
	Count(env, a)
	if u := big.Used(); u < 60<<10 {
		t.Fatalf("charged %d: want the running state's ids", u)
	}
	f, _ = os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(usageLine("y", 6))
	f.Close()
	if tk, complete := CountNow(env, a); !complete || tk.String() != "context 6\ninput 211\noutput 102\ncache_read 0\ncache_write 0" {
		t.Fatalf("grown with its state kept: %q complete %v", tk, complete)
	}
}

// TestLaterBudget: a derivation Later queues is charged while queued and
// while it runs; what does not fit is dropped (its facts stay pending),
// named in the log once, and the queue still settles with nothing left
// charged but the counts kept.
func TestLaterBudget(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("t%d.jsonl", i)), []byte(usageLine("a", 3)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var logged []string
	pool := budget.New("counts", workCost+8<<10)
	counts := &Counts{Budget: pool, Logf: func(f string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, args...))
		mu.Unlock()
	}}
	env := Env{Root: saferoot.New(dir), Counts: counts}
	// The readers hold the worker still while the queue fills.
	done := counts.Reading()
	old := yieldMax
	yieldMax = time.Hour
	defer func() { yieldMax = old }()
	// A long argv is the agent's to make: its derivation is refused.
	counts.Later(env, nil, proc.Proc{Argv: []string{"claude", strings.Repeat("x", 64<<10)}}, Agent{Harness: "claude", Transcript: "t0.jsonl"})
	for i := 1; i < 20; i++ {
		counts.Later(env, nil, proc.Proc{Argv: []string{"claude"}}, Agent{Harness: "claude", Transcript: fmt.Sprintf("t%d.jsonl", i)})
	}
	if pool.Peak() > pool.Limit() {
		t.Fatalf("peak %d over the ceiling %d", pool.Peak(), pool.Limit())
	}
	select {
	case <-counts.Settled():
		t.Fatal("settled while a read was in progress: the worker does not wait for reads")
	case <-time.After(200 * time.Millisecond):
	}
	done()
	select {
	case <-counts.Settled():
	case <-time.After(5 * time.Second):
		t.Fatal("never settled")
	}
	mu.Lock()
	n, first := len(logged), strings.Join(logged, "\n")
	mu.Unlock()
	if n != 1 || !strings.Contains(first, "t0.jsonl") {
		t.Errorf("logged %d lines, want one naming the first dropped: %q", n, first)
	}
	if tk, complete := CountNow(env, Agent{Harness: "claude", Transcript: "t0.jsonl"}); complete {
		t.Errorf("the dropped derivation: %q complete, want pending", tk)
	}
	// The queue crowds out the counts kept while it is full; once it
	// drains, what was derived is kept.
	derived := 0
	for i := 1; i < 20; i++ {
		if tk, complete := CountNow(env, Agent{Harness: "claude", Transcript: fmt.Sprintf("t%d.jsonl", i)}); complete && strings.Contains(tk.String(), "input 3") {
			derived++
		}
	}
	if derived == 0 {
		t.Errorf("no queued derivation was kept")
	}
	if pool.Peak() > pool.Limit() {
		t.Errorf("peak %d over the ceiling %d", pool.Peak(), pool.Limit())
	}
	var kept int64
	counts.mu.Lock()
	for _, e := range counts.m {
		kept += e.cost
	}
	counts.mu.Unlock()
	if pool.Used() != kept {
		t.Errorf("charged %d once settled, want the counts kept alone, %d", pool.Used(), kept)
	}
}
