package realcli

import (
	"context"
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
	m.toolCall(w, r, "Bash", obj{"command": BashCommand, "description": "Create the probe file"})
}
