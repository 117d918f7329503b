package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
)

// TestMessagesTranscript: a harness with no Messages of its own gets the
// generic rendering of its JSON-lines transcript's last 256 KiB, at most
// MessagesMax messages, each cut, within MessagesBytes; a harness whose
// transcript is not JSON lines, or an agent with none yet, has no
// messages; the read is charged to the budget, and refused past it.
func TestMessagesTranscript(t *testing.T) {
	f := newFx(t)
	var b strings.Builder
	b.WriteString(`{"type":"user","message":{"role":"user","content":"lost in the cut ` + strings.Repeat("x", MessagesSpan) + `"}}` + "\n")
	for i := range 30 {
		fmt.Fprintf(&b, `{"type":"user","message":{"role":"user","content":"ask %d \u001b[31m"}}`+"\n", i)
		fmt.Fprintf(&b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"answer %d"},{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}`+"\n", i)
	}
	b.WriteString(`{"type":"assistant","message":{"role":"assistant","content":"` + strings.Repeat("y", 5000) + `"}}` + "\n")
	f.write(".claude/projects/-x/s.jsonl", b.String(), time.Now())
	env := f.env(".claude")
	a := Agent{Harness: "claude", Transcript: "projects/-x/s.jsonl"}
	got, err := Messages(env, a, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MessagesMax {
		t.Fatalf("%d messages, want %d: %q", len(got), MessagesMax, got)
	}
	if got[0] != "assistant: answer 20 [tool Bash]" || got[1] != "user: ask 21 ?[31m" {
		t.Errorf("the oldest kept: %q", got[:2])
	}
	if last := got[len(got)-1]; last != "assistant: "+strings.Repeat("y", messageRunes-len("assistant: ")) {
		t.Errorf("the long answer is not cut to %d runes: %d bytes", messageRunes, len(last))
	}
	if got, _ := Messages(env, a, 2, false); len(got) != 2 || got[0] != "assistant: answer 29 [tool Bash]" {
		t.Errorf("the last 2: %q", got)
	}

	if HasMessages(Agent{Harness: "claude"}) || HasMessages(Agent{Harness: "gemini", Transcript: "tmp/x/chats/session-1.json"}) {
		t.Error("no transcript, or one that is not JSON lines, has messages")
	}
	if got, err := Messages(env, Agent{Harness: "claude", Transcript: "projects/-x/gone.jsonl"}, 5, false); err != nil || got == nil || len(got) != 0 {
		t.Errorf("a vanished transcript: %q, %v; want none and no error", got, err)
	}

	// A grantee's read refuses a transcript with two links, on the
	// descriptor it reads.
	if err := os.Link(filepath.Join(f.home, ".claude/projects/-x/s.jsonl"), filepath.Join(f.home, "elsewhere.jsonl")); err != nil {
		t.Fatal(err)
	}
	if got, err := Messages(env, a, 5, true); err != nil || len(got) != 0 {
		t.Errorf("a grantee's read of a transcript with two links: %q, %v", got, err)
	}
	if got, _ := Messages(env, a, 5, false); len(got) != 5 {
		t.Errorf("the owner's read of a transcript with two links: %q", got)
	}

	pool := budget.New("test", MessagesSpan-1)
	env.Budget = pool
	if _, err := Messages(env, a, 5, false); err == nil {
		t.Error("a read past the budget was not refused")
	}
	pool = budget.New("test", MessagesSpan)
	env.Budget = pool
	if got, err := Messages(env, a, 5, false); err != nil || len(got) != 5 || pool.Used() != 0 || pool.Peak() != MessagesSpan {
		t.Errorf("within the budget: %d messages, %v; used %d, peak %d", len(got), err, pool.Used(), pool.Peak())
	}
}

// TestMessagesZstd: a zstd-compressed JSON-lines transcript (dsh's
// .jsonl.zstd, Codex's .jsonl.zst) is decoded within the zstd bounds and
// rendered the same; a frame per record, as the harnesses write them.
func TestMessagesZstd(t *testing.T) {
	f := newFx(t)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var b []byte
	for _, l := range []string{
		`{"type":"session","id":"s","cwd":"/w"}`,
		`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"compress me"}]}}`,
		`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}`,
	} {
		b = enc.EncodeAll([]byte(l+"\n"), b)
	}
	f.writeBytes(".dsh/sessions/x/session-1/session.jsonl.zstd", b, time.Now())
	for _, a := range []Agent{{Harness: "dsh", Transcript: "sessions/x/session-1/session.jsonl.zstd"}} {
		got, err := Messages(f.env(".dsh"), a, 5, false)
		if want := []string{"user: compress me", "assistant: done"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", a.Transcript, got, err, want)
		}
	}
	if !HasMessages(Agent{Harness: "codex", Transcript: "sessions/r.jsonl.zst"}) || HasMessages(Agent{Harness: "codex", Transcript: "x.zst"}) {
		t.Error("a compressed transcript is JSON lines by the name beneath the compression's")
	}
}

// TestMessagesBytes: the output is bounded by MessagesBytes, the newest
// kept.
func TestMessagesBytes(t *testing.T) {
	in := make([]string, MessagesMax)
	for i := range in {
		in[i] = fmt.Sprintf("assistant: %d %s", i, strings.Repeat("z", 8000))
	}
	got := boundMessages(in, MessagesMax)
	total := 0
	for _, l := range got {
		total += len(l) + 1
	}
	if total > MessagesBytes || len(got) == 0 || !strings.HasPrefix(got[len(got)-1], fmt.Sprintf("assistant: %d ", MessagesMax-1)) {
		t.Errorf("%d lines, %d bytes (bound %d), last %.20q", len(got), total, MessagesBytes, got[len(got)-1])
	}
}

// TestMessagesOpencode: opencode's messages come from opencode.db's
// message and part tables (the fixture's real schema): each message's
// role and its parts in order, text parts' text but not the synthetic
// ones, a tool part as "[tool NAME]", reasoning and step parts left out;
// the newest n messages, oldest first. A session with no message has
// none; an agent with no session has no messages file.
func TestMessagesOpencode(t *testing.T) {
	f := newFx(t)
	db := ocWriter(t, f)
	ocInsert(t, db,
		ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30, answered: []string{"mock-oc", "mock-oc"}},
		ocRow{id: ocSID2, dir: f.cwd(), title: "empty", model: "mock-oc", created: 21, updated: 31},
	)
	parts := map[string][]string{
		"msg_" + ocSID + "_0_0": {`{"type":"text","text":"say\nhello \u001b]0;x\u0007"}`, `{"type":"text","text":"<system-reminder>","synthetic":true}`},
		"msg_" + ocSID + "_0_1": {`{"type":"step-start"}`, `{"type":"reasoning","text":"thinking"}`, `{"type":"text","text":"Hello."}`,
			`{"type":"tool","callID":"c1","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"` + strings.Repeat("o", 100000) + `"}}`, `{"type":"step-finish"}`},
		"msg_" + ocSID + "_1_0": {`{"type":"text","text":"again"}`},
		"msg_" + ocSID + "_1_1": {`{"type":"text","text":"` + strings.Repeat("w", 20000) + `"}`},
	}
	for mid, ps := range parts {
		for i, d := range ps {
			ocExec(t, db, `INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, 0, 0, ?)`,
				fmt.Sprintf("prt_%s_%02d", mid, i), mid, ocSID, d)
		}
	}
	env := f.env(ocRoot)
	a := Agent{Harness: "opencode", Session: ocSID}
	got, err := Messages(env, a, 20, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user: say hello ?]0;x?", "assistant: Hello. [tool bash]", "user: again", "assistant: " + strings.Repeat("w", messageRunes-len("assistant: "))}
	if !slices.Equal(got, want) {
		t.Errorf("opencode messages:\n got %.200q\nwant %.200q", got, want)
	}
	if got, _ := Messages(env, a, 1, false); len(got) != 1 || got[0] != want[3] {
		t.Errorf("the last 1: %.40q", got)
	}
	if got, err := Messages(env, Agent{Harness: "opencode", Session: ocSID2}, 20, false); err != nil || len(got) != 0 {
		t.Errorf("a session with no message: %q, %v", got, err)
	}
	if HasMessages(Agent{Harness: "opencode"}) || !HasMessages(a) || !HasMessages(Agent{Harness: "kilo", Session: "ses_x"}) {
		t.Error("opencode and kilo have messages exactly when they have a session")
	}
	if got, err := Messages(f.env(".local/share/nothing"), a, 20, false); err != nil || len(got) != 0 {
		t.Errorf("no database: %q, %v", got, errs.KindOf(err))
	}
}
