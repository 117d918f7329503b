package render

import (
	"slices"
	"testing"
)

// TestMessages: a transcript's last messages as text, whatever the
// harness's record shape, a tool call on one line, control bytes quoted.
func TestMessages(t *testing.T) {
	lines := `{"type":"user","message":{"role":"user","content":"fix the \u001b[31mbuild\u0007"}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","name":"Bash","input":{"command":"make"}}]}}
{"timestamp":"x","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done:\nall green"}]}}
not json
`
	got := Messages([]byte("partial line\n"+lines), true, 10)
	want := []string{
		"user: fix the ?[31mbuild?",
		"assistant: Looking. [tool Bash]",
		"assistant: Done: all green",
	}
	if !slices.Equal(got, want) {
		t.Errorf("renderMessages:\n got %q\nwant %q", got, want)
	}
	if got := Messages([]byte(lines), false, 1); len(got) != 1 || got[0] != want[2] {
		t.Errorf("the last 1: %q", got)
	}
	// Only the conversation: no attachment, system prompt, meta user
	// record, request shape or event that repeats a message; a tool
	// call by args (Gemini CLI, Qwen Code) is one.
	other := `{"type":"user","message":{"role":"user","content":"say hello"}}
{"type":"attachment","attachment":{"type":"x","content":"You are powered by the model"}}
{"type":"user","isMeta":true,"message":{"role":"user","content":"<system-reminder>today</system-reminder>"}}
{"type":"api-request-shape","system":[{"type":"text","text":"You are Claude Code"}]}
{"type":"system","content":"# Environment"}
{"type":"event_msg","payload":{"type":"agent_message","message":"mock answer 1"}}
{"type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]}}
{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"mock answer 1"}]}}
{"type":"assistant","message":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}}}]}}
{"type":"gemini","content":"mock answer 2"}
`
	want = []string{"user: say hello", "assistant: mock answer 1", "model: [tool run_shell_command]", "gemini: mock answer 2"}
	if got := Messages([]byte(other), false, 10); !slices.Equal(got, want) {
		t.Errorf("renderMessages of the other records:\n got %q\nwant %q", got, want)
	}
}

// TestPrintable: control bytes and bidirectional controls become '?',
// line breaks and tabs a space.
func TestPrintable(t *testing.T) {
	if got, want := Printable("a\tb\nc\x1b[0m\u202e\x7f\xff"), "a b c?[0m???"; got != want {
		t.Errorf("Printable: got %q, want %q", got, want)
	}
}
