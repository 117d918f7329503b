package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/saferoot"
)

// everyLineDecoded is the transcript b with an escape added to each
// object line (an unused key, "_":"\u0020"), so that mayHold lets every
// line through: claudeFacts then decodes every line, as it did before
// mayHold, and is the oracle of the same file without the escapes.
func everyLineDecoded(b []byte) []byte {
	var out []byte
	for _, ln := range strings.SplitAfter(string(b), "\n") {
		if rest, ok := strings.CutPrefix(ln, "{"); ok && !strings.HasPrefix(rest, "}") {
			ln = `{"_":"\u0020",` + rest
		}
		out = append(out, ln...)
	}
	return out
}

// TestClaudeFactsDecodesOnlyWhatMayCount checks that claudeFacts, which
// decodes only the lines mayHold lets through, finds the title and model
// the decoding of every line finds: on every Claude transcript of
// testdata, and on lines made to fool a plain search (a type spelled with
// a \u escape, a title word inside a prompt's text, the model of a
// synthetic or escaped assistant line, a big file whose head and tail are
// read apart).
func TestClaudeFactsDecodesOnlyWhatMayCount(t *testing.T) {
	dir := t.TempDir()
	r := saferoot.New(dir)
	var rels []string
	add := func(name string, lines ...string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, name)
	}
	user := func(text string) string {
		return `{"type":"user","message":{"role":"user","content":` + jsonQuote(text) + `}}`
	}
	asst := func(model string) string {
		return `{"type":"assistant","message":{"model":"` + model + `","content":[{"type":"text","text":"ok"}]}}`
	}
	add("escaped-type.jsonl", user("first prompt"), `{"type":"summ\u0061ry","summary":"escaped summary"}`, asst("m1"))
	add("escaped-assistant.jsonl", user("p"), asst("m1"), `{"type":"assist\u0061nt","message":{"model":"m2","content":[]}}`)
	add("synthetic-last.jsonl", user("p"), asst("m1"), asst("<synthetic>"))
	add("title-word-in-text.jsonl", user(`say "summary" and "ai-title"`), asst("m1"))
	add("meta-then-prompt.jsonl", `{"type":"user","isMeta":true,"message":{"content":"caveat"}}`, user("the real prompt"), asst("m1"))
	add("titles.jsonl", user("p"), `{"type":"ai-title","aiTitle":"ai one"}`, asst("m1"),
		`{"type":"custom-title","customTitle":"custom"}`, `{"type":"ai-title","aiTitle":"ai two"}`, `{"type":"custom-title","customTitle":"  "}`)
	add("torn.jsonl", user("p"), asst("m1"), `{"type":"assistant","message":{"model":"m9"`)
	add("empty.jsonl")
	// Bigger than both windows: the head's prompt and the tail's model and
	// title, a megabyte of assistant lines between.
	filler := asst("middle") + strings.Repeat(" ", 900)
	lines := []string{user("head prompt")}
	for range (headWindow + tailWindow) / len(filler) {
		lines = append(lines, filler)
	}
	lines = append(lines, `{"type":"last-prompt","lastPrompt":"tail prompt"}`, asst("tail-model"))
	add("big.jsonl", lines...)

	fixtures, _ := filepath.Glob("testdata/*/*.jsonl")
	more, _ := filepath.Glob("testdata/*/*/*.jsonl")
	for _, f := range append(fixtures, more...) {
		if !strings.Contains(f, "claude") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(f, "/", "_")
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, name)
	}
	if len(rels) < 15 {
		t.Fatalf("only %d transcripts: the testdata globs found no fixture", len(rels))
	}
	for _, rel := range rels {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "all-"+rel), everyLineDecoded(b), 0o644); err != nil {
			t.Fatal(err)
		}
		gotT, gotM := claudeFacts(r, rel)
		wantT, wantM := claudeFacts(r, "all-"+rel)
		if gotT != wantT || gotM != wantM {
			t.Errorf("%s: claudeFacts = %q, %q; decoding every line gives %q, %q", rel, gotT, gotM, wantT, wantM)
		}
	}
	// And what the made-up lines must give, so that both cannot be wrong
	// alike.
	for rel, want := range map[string][2]string{
		"escaped-type.jsonl":       {"escaped summary", "m1"},
		"escaped-assistant.jsonl":  {"p", "m2"},
		"synthetic-last.jsonl":     {"p", "m1"},
		"meta-then-prompt.jsonl":   {"the real prompt", "m1"},
		"titles.jsonl":             {"custom", "m1"},
		"torn.jsonl":               {"p", "m1"},
		"big.jsonl":                {"tail prompt", "tail-model"},
		"title-word-in-text.jsonl": {`say "summary" and "ai-title"`, "m1"},
	} {
		if gotT, gotM := claudeFacts(r, rel); gotT != want[0] || gotM != want[1] {
			t.Errorf("%s: claudeFacts = %q, %q, want %q, %q", rel, gotT, gotM, want[0], want[1])
		}
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
