package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// TestClaudeContextIsTheTails: the context claudeContext reads from a
// transcript's end is the one the whole tail gives, and where the end
// does not tell (the newest usage line is further back, or cut by the
// window) it says so rather than give an older one.
func TestClaudeContextIsTheTails(t *testing.T) {
	dir := t.TempDir()
	r := saferoot.New(dir)
	usage := func(n int) string {
		return fmt.Sprintf(`{"type":"assistant","message":{"id":"m%d","model":"x","content":[],"usage":{"input_tokens":1,"cache_creation_input_tokens":2,"cache_read_input_tokens":%d,"output_tokens":3}}}`+"\n", n, n)
	}
	plain := `{"type":"user","message":{"content":"` + strings.Repeat("y", 1000) + `"}}` + "\n"
	for _, tc := range []struct {
		name, body string
		found      bool
	}{
		{"usage last", usage(1) + strings.Repeat(plain, 40) + usage(2), true},
		{"small file, no usage", plain, true},
		{"usage before the end's window", usage(1) + strings.Repeat(plain, 40), false},
		{"usage cut by the window", usage(1) + strings.Repeat("z", contextEnd) + "\n" + plain, false},
	} {
		p := filepath.Join(dir, "t.jsonl")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := claudeContext(r, "t.jsonl")
		if c.found != tc.found {
			t.Errorf("%s: found %v, want %v", tc.name, c.found, tc.found)
			continue
		}
		s := scanFile(r, "t.jsonl")
		var whole claudeTokens
		for i := len(s.tail) - 1; i >= 0 && whole.newest == nil; i-- {
			whole.line(s.tail[i])
		}
		if c.found && c.tokens.String() != whole.tokens(false).String() {
			t.Errorf("%s: context %q, the tail's %q", tc.name, c.tokens, whole.tokens(false))
		}
	}
}

// TestCountNow: CountNow gives the sums only where a count of the file
// as it is now is kept, or one that a short read brings up to date;
// otherwise the context alone, never an older count's sums; and Later
// derives them for the next read.
func TestCountNow(t *testing.T) {
	dir := t.TempDir()
	counts := &Counts{}
	env := Env{Root: saferoot.New(dir), Counts: counts}
	line := func(id string, n int) string {
		return fmt.Sprintf(`{"type":"assistant","message":{"id":%q,"model":"x","content":[],"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`+"\n", id, n)
	}
	p := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(p, []byte(line("a", 10)+line("b", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := Agent{Harness: "claude", Transcript: "t.jsonl", Tokens: Tokens{Context: i64(20)}}
	if tk, complete := CountNow(env, a); complete || tk.String() != "context 20" {
		t.Fatalf("never counted: %q complete %v, want the context alone, not complete", tk, complete)
	}
	counts.Later(env, nil, proc.Proc{}, a)
	<-counts.Settled()
	if tk, complete := CountNow(env, a); !complete || tk.String() != "context 20\ninput 30\noutput 2\ncache_read 0\ncache_write 0" {
		t.Fatalf("after Later: %q complete %v", tk, complete)
	}
	// It grew by a line: read on from the count kept.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(line("c", 5))
	f.Close()
	a.Tokens = Tokens{Context: i64(5)}
	if tk, complete := CountNow(env, a); !complete || tk.String() != "context 5\ninput 35\noutput 3\ncache_read 0\ncache_write 0" {
		t.Fatalf("grown: %q complete %v", tk, complete)
	}
	// Rewritten: the kept count is not the file's any more.
	if err := os.WriteFile(p, []byte(line("d", 7)+strings.Repeat(" ", 400)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Tokens = Tokens{Context: i64(7)}
	if tk, complete := CountNow(env, a); complete || tk.String() != "context 7" {
		t.Fatalf("rewritten: %q complete %v, want the context alone", tk, complete)
	}
	if tk := Count(env, a); tk.String() != "context 7\ninput 7\noutput 1\ncache_read 0\ncache_write 0" {
		t.Fatalf("Count after a rewrite: %q", tk)
	}
}
