package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
