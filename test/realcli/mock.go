// Package realcli is the real-CLI tier: the agent CLIs as published on npm
// (Claude Code, Codex, pi), installed once into a cache, run interactively
// in a private tmux server with a scratch HOME, talking to the mock model
// server of this file on 127.0.0.1; the real 9harnessd then serves that
// HOME, and every fact it shows is checked against what the CLI wrote and
// what /proc says. Only the real programs show what the fakes of ../ cannot:
// a format or a process shape that changed.
//
// Knobs, all optional:
//
//	REALCLI_CACHE=DIR        where the CLIs are installed (default: the
//	                         user's cache dir/9harness-realcli)
//	REALCLI_VERSIONS=latest  run the newest published CLIs instead of the
//	                         pinned ones; the summary at the end names every
//	                         /active fact that differs from what they wrote
//	REALCLI_NODE=npm         use Node from npm's node package even when the
//	                         machine's own is new enough
//	REALCLI_KEEP=1           keep a failed test's scratch area
//
// Under CI=true a missing component (tmux, Node, a failed install) fails
// the tier; elsewhere it is skipped, saying why.
//
// The mock answers every conversation turn with "mock answer N" (N counts
// the turns it answered, from 1) and every title request with "Mock title N"
// (its own count), and a prompt with SubagentWord to Claude with a call of
// its Agent tool, so a test knows the exact text to wait for on screen and
// in a transcript. It speaks just enough of three wire APIs for a turn and a
// title: Anthropic Messages (Claude), OpenAI Responses (Codex) and OpenAI
// Chat Completions (pi), all streamed as server-sent events.
package realcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is one request the mock received, kept for assertions.
type Request struct {
	API       string // "messages", "responses", "chat", or "unknown"
	Method    string
	Path      string
	Model     string
	Kind      string // "turn", "title", or "tool" (a tool call answered)
	Answer    string // the text answered
	UserAgent string
	Body      []byte
}

// Mock is the model server. Its zero value is not usable: use StartMock.
type Mock struct {
	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	reqs []Request
	// turns and titles count the answers given, so the texts are
	// deterministic in the order the CLIs ask.
	turns, titles int
	// hold, when set, keeps the answer to a turn that asks its word
	// until the test releases it (mock_hold.go).
	hold *Hold
	// limitHeaders are sent with every Responses answer
	// (mock_limits.go).
	limitHeaders http.Header
}

// StartMock listens on a fresh port of 127.0.0.1 (never another address:
// the tier needs no network, and nothing else may reach the mock).
func StartMock() (*Mock, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mock: listen: %w", err)
	}
	m := &Mock{ln: ln}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// URL is the server's base URL, with no path.
func (m *Mock) URL() string { return "http://" + m.ln.Addr().String() }

// Close stops the server and drops its connections.
func (m *Mock) Close() error { return m.srv.Close() }

// Requests is a copy of the requests received so far, in order.
func (m *Mock) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.reqs...)
}

// Turns is how many conversation turns the mock has answered.
func (m *Mock) Turns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns
}

// answer counts one more answer of the kind and returns its text.
func (m *Mock) answer(r Request) Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch r.Kind {
	case "title":
		m.titles++
		r.Answer = fmt.Sprintf("Mock title %d", m.titles)
	case "turn":
		m.turns++
		r.Answer = fmt.Sprintf("mock answer %d", m.turns)
	}
	m.reqs = append(m.reqs, r)
	return r
}

func (m *Mock) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	r := Request{Method: req.Method, Path: req.URL.Path, UserAgent: req.UserAgent(), Body: body, API: "unknown"}
	var head struct {
		Model string          `json:"model"`
		Tools json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &head)
	r.Model = head.Model
	if req.Method != http.MethodPost {
		m.answer(r)
		http.NotFound(w, req)
		return
	}
	switch {
	case strings.HasSuffix(req.URL.Path, "/v1/messages"):
		r.API = "messages"
		r.Kind = "turn"
		// Claude's title request: a small model, no tools, a system
		// prompt that asks for JSON with a "title" field.
		if strings.HasPrefix(r.Model, "claude-haiku") && !bytes.Contains(body, []byte(`"tools":[{`)) &&
			bytes.Contains(body, []byte(`\"title\"`)) {
			r.Kind = "title"
		}
		if r.Kind == "turn" && lastUserAsks(body, SubagentWord) {
			r.Kind = "tool"
			m.answer(r)
			m.agentCall(w, r)
			return
		}
		if r.Kind == "turn" && lastUserAsks(body, BashWord) {
			r.Kind = "tool"
			m.answer(r)
			m.bashCall(w, r) // mock_hold.go
			return
		}
		if r.Kind == "turn" && !m.held(req.Context(), func(word string) bool { return lastUserAsks(body, word) }) {
			return // the agent gave up the held request
		}
		r = m.answer(r)
		text := r.Answer
		if r.Kind == "title" {
			text = fmt.Sprintf(`{"title":%q}`, r.Answer)
		}
		m.messages(w, r, text)
	case strings.HasSuffix(req.URL.Path, "/v1/responses"):
		r.API = "responses"
		r.Kind = "turn"
		if bytes.Contains(body, []byte("Generate a concise, single-line task title")) {
			r.Kind = "title"
		}
		if r.Kind == "turn" && !m.held(req.Context(), func(word string) bool { return bytes.Contains(body, []byte(word)) }) {
			return // the agent gave up the held request
		}
		r = m.answer(r)
		m.responses(w, r)
	case strings.HasSuffix(req.URL.Path, "/v1/chat/completions"):
		r.API = "chat"
		r.Kind = "turn"
		// opencode's title request: its title agent's system prompt.
		if bytes.Contains(body, []byte("You are a title generator")) {
			r.Kind = "title"
		}
		if qwenSide(body) {
			r.Kind = "side" // mock_qwen.go
		}
		r = m.answer(r)
		m.chat(w, r)
	case strings.HasPrefix(req.URL.Path, "/v1beta/models/"):
		m.gemini(w, req, r) // mock_gemini.go
	default:
		m.answer(r)
		http.NotFound(w, req)
	}
}

// SubagentWord in a user's prompt to Claude makes the mock answer with a
// call of Claude's Agent tool, so Claude runs a sub-agent (its own turn,
// with SubagentPrompt) and then the mock's answer to the tool's result
// ends the turn.
const (
	SubagentWord   = "SUBAGENT"
	SubagentPrompt = "mock sub task, answer briefly"
)

// lastUserAsks tells whether the last user message of a Messages request
// (after the last assistant one) has word in a text block, outside system
// reminders, and holds no tool result.
func lastUserAsks(body []byte, word string) bool {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return false
	}
	// The last user message: 2.1.332 sends a system message after it.
	last := req.Messages[len(req.Messages)-1]
	for i := len(req.Messages) - 1; i >= 0 && last.Role != "user"; i-- {
		if req.Messages[i].Role == "assistant" {
			return false
		}
		last = req.Messages[i]
	}
	if last.Role != "user" {
		return false
	}
	var s string
	if json.Unmarshal(last.Content, &s) == nil {
		return strings.Contains(withoutReminders(s), word)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(last.Content, &blocks) != nil {
		return false
	}
	found := false
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return false
		}
		if b.Type == "text" && strings.Contains(withoutReminders(b.Text), word) {
			found = true
		}
	}
	return found
}

// withoutReminders drops Claude's <system-reminder> sections, which quote
// earlier prompts, from a text block.
func withoutReminders(s string) string {
	for {
		i := strings.Index(s, "<system-reminder>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</system-reminder>")
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len("</system-reminder>"):]
	}
}

// agentCall streams an Anthropic answer that calls the Agent tool.
func (m *Mock) agentCall(w http.ResponseWriter, r Request) {
	m.toolCall(w, r, "Agent", obj{"description": "mock sub task", "subagent_type": "general-purpose", "prompt": SubagentPrompt})
}

// toolCall streams an Anthropic answer that calls the tool name with input.
func (m *Mock) toolCall(w http.ResponseWriter, r Request, name string, in obj) {
	n := len(m.Requests())
	input, _ := json.Marshal(in)
	w.Header().Set("request-id", fmt.Sprintf("req_mock_%d", n))
	sseHeaders(w)
	sse(w, "message_start", obj{"type": "message_start", "message": obj{
		"id": fmt.Sprintf("msg_mock_%d", n), "type": "message", "role": "assistant", "model": r.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	sse(w, "content_block_start", obj{"type": "content_block_start", "index": 0,
		"content_block": obj{"type": "tool_use", "id": fmt.Sprintf("toolu_mock_%d", n), "name": name, "input": obj{}}})
	sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "input_json_delta", "partial_json": string(input)}})
	sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": obj{"output_tokens": 8}})
	sse(w, "message_stop", obj{"type": "message_stop"})
}

// sse writes one event (an empty name writes a data-only event) and
// flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

type obj = map[string]any

// messages streams an Anthropic Messages answer of one text block.
func (m *Mock) messages(w http.ResponseWriter, r Request, text string) {
	n := len(m.Requests())
	w.Header().Set("request-id", fmt.Sprintf("req_mock_%d", n))
	sseHeaders(w)
	sse(w, "message_start", obj{"type": "message_start", "message": obj{
		"id": fmt.Sprintf("msg_mock_%d", n), "type": "message", "role": "assistant", "model": r.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	sse(w, "content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
	sse(w, "ping", obj{"type": "ping"})
	sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": text}})
	sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": obj{"output_tokens": 8}})
	sse(w, "message_stop", obj{"type": "message_stop"})
}

// responses streams an OpenAI Responses answer of one output_text message.
func (m *Mock) responses(w http.ResponseWriter, r Request) {
	n := len(m.Requests())
	rid, mid := fmt.Sprintf("resp_mock_%d", n), fmt.Sprintf("msg_mock_%d", n)
	seq := 0
	ev := func(typ string, fields obj) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sse(w, typ, fields)
	}
	resp := func(status string, output []any) obj {
		o := obj{"id": rid, "object": "response", "created_at": time.Now().Unix(), "model": r.Model, "output": output, "status": status}
		if status == "completed" {
			o["usage"] = obj{"input_tokens": 10, "input_tokens_details": obj{"cached_tokens": 0}, "output_tokens": 8,
				"output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": 18}
		}
		return o
	}
	part := obj{"type": "output_text", "text": r.Answer, "annotations": []any{}}
	item := obj{"type": "message", "id": mid, "role": "assistant", "status": "completed", "content": []any{part}}
	m.sendLimitHeaders(w)
	sseHeaders(w)
	ev("response.created", obj{"response": resp("in_progress", []any{})})
	ev("response.in_progress", obj{"response": resp("in_progress", []any{})})
	ev("response.output_item.added", obj{"output_index": 0, "item": obj{"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []any{}}})
	ev("response.content_part.added", obj{"item_id": mid, "output_index": 0, "content_index": 0, "part": obj{"type": "output_text", "text": "", "annotations": []any{}}})
	ev("response.output_text.delta", obj{"item_id": mid, "output_index": 0, "content_index": 0, "delta": r.Answer})
	ev("response.output_text.done", obj{"item_id": mid, "output_index": 0, "content_index": 0, "text": r.Answer})
	ev("response.content_part.done", obj{"item_id": mid, "output_index": 0, "content_index": 0, "part": part})
	ev("response.output_item.done", obj{"output_index": 0, "item": item})
	ev("response.completed", obj{"response": resp("completed", []any{item})})
}

// chat streams an OpenAI Chat Completions answer, data-only lines.
func (m *Mock) chat(w http.ResponseWriter, r Request) {
	id := fmt.Sprintf("chatcmpl-mock%d", len(m.Requests()))
	created := time.Now().Unix()
	chunk := func(choices []any) obj {
		return obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": r.Model, "choices": choices}
	}
	sseHeaders(w)
	sse(w, "", chunk([]any{obj{"index": 0, "delta": obj{"role": "assistant", "content": ""}, "finish_reason": nil}}))
	sse(w, "", chunk([]any{obj{"index": 0, "delta": obj{"content": r.Answer}, "finish_reason": nil}}))
	sse(w, "", chunk([]any{obj{"index": 0, "delta": obj{}, "finish_reason": "stop"}}))
	u := chunk([]any{})
	u["usage"] = obj{"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}
	sse(w, "", u)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
