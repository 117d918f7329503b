package realcli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Hold keeps the mock's answer to the conversation turns that ask a word
// until Release: a test then sees the agent in the middle of a turn for as
// long as it needs, instead of racing a reply that takes milliseconds.
type Hold struct {
	word     string
	once     sync.Once
	arrived  chan struct{} // closed when the first held request came
	release  chan struct{}
	released sync.Once
}

// holdLimit bounds a hold the test never released (it failed first): the
// mock answers then, so the agent's turn ends before its cleanup.
const holdLimit = 5 * time.Minute

// Hold makes the mock hold every conversation turn whose newest user
// message has word, until the hold is released. One hold at a time.
func (m *Mock) Hold(word string) *Hold {
	h := &Hold{word: word, arrived: make(chan struct{}), release: make(chan struct{})}
	m.mu.Lock()
	m.hold = h
	m.mu.Unlock()
	return h
}

// Arrived is closed once a held request has come.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held requests, and any later ones, be answered.
func (h *Hold) Release() { h.released.Do(func() { close(h.release) }) }

// held blocks a turn request while the mock's hold names a word it asks
// (asks tells, per wire API), until the release or holdLimit. It is false
// when the request ended first (the agent interrupted the turn): then it
// is not answered, nor counted.
func (m *Mock) held(ctx context.Context, asks func(word string) bool) bool {
	m.mu.Lock()
	h := m.hold
	m.mu.Unlock()
	if h == nil || !asks(h.word) {
		return true
	}
	h.once.Do(func() { close(h.arrived) })
	t := time.NewTimer(holdLimit)
	defer t.Stop()
	select {
	case <-h.release:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// BashWord in a user's prompt to Claude makes the mock answer with a call
// of Claude's Bash tool running BashCommand, which Claude's default
// permission mode asks the user to approve (it writes a file, so it is
// not one of the read-only commands Claude runs unasked). Once the tool's
// result comes back, the mock's text answer ends the turn.
const (
	BashWord    = "BASHPROBE"
	BashCommand = "touch realcli-permission-probe"
)

// bashCall streams an Anthropic answer that calls the Bash tool.
func (m *Mock) bashCall(w http.ResponseWriter, r Request) {
	n := len(m.Requests())
	input, _ := json.Marshal(obj{"command": BashCommand, "description": "Create the probe file"})
	w.Header().Set("request-id", fmt.Sprintf("req_mock_%d", n))
	sseHeaders(w)
	sse(w, "message_start", obj{"type": "message_start", "message": obj{
		"id": fmt.Sprintf("msg_mock_%d", n), "type": "message", "role": "assistant", "model": r.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	sse(w, "content_block_start", obj{"type": "content_block_start", "index": 0,
		"content_block": obj{"type": "tool_use", "id": fmt.Sprintf("toolu_mock_%d", n), "name": "Bash", "input": obj{}}})
	sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "input_json_delta", "partial_json": string(input)}})
	sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": obj{"output_tokens": 8}})
	sse(w, "message_stop", obj{"type": "message_stop"})
}
