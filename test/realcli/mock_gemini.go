package realcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// gemini answers the Gemini API (generativelanguage v1beta) as Gemini CLI
// uses it: POST /v1beta/models/<model>:streamGenerateContent?alt=sse for a
// conversation turn, streamed as one SSE data event, and the non-streamed
// POST /v1beta/models/<model>:generateContent its Auto model router sends
// first (a JSON instance of the schema it asks for as the candidate's text).
// Any other non-streamed call (a side request) gets a short text.
func (m *Mock) gemini(w http.ResponseWriter, req *http.Request, r Request) {
	r.API = "gemini"
	model, method, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v1beta/models/"), ":")
	r.Model = model
	var text string
	switch method {
	case "streamGenerateContent":
		r.Kind = "turn"
		r = m.answer(r)
		text = r.Answer
	case "generateContent":
		r.Kind = "side"
		text = "mock"
		if bytes.Contains(r.Body, []byte("Task Routing AI")) {
			r.Kind = "route"
			text = `{"complexity_reasoning":"mock","complexity_score":0}`
		}
		r = m.answer(r)
	default:
		m.answer(r)
		http.NotFound(w, req)
		return
	}
	n := len(m.Requests())
	resp := obj{
		"candidates":    []any{obj{"content": obj{"role": "model", "parts": []any{obj{"text": text}}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": obj{"promptTokenCount": 10, "candidatesTokenCount": 8, "totalTokenCount": 18},
		"modelVersion":  model,
		"responseId":    fmt.Sprintf("mock-gemini-%d", n),
	}
	if method == "generateContent" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	sseHeaders(w)
	sse(w, "", resp)
}
