package realcli

import "bytes"

// qwenSide tells Qwen Code's side requests from its turns. Qwen speaks
// Chat Completions and sends, beside each turn, requests of its own on
// the same endpoint and model: the managed-memory extraction after a
// turn, and the next-prompt suggestion. Answered as turns they would take
// the turn's number, so they are answered, and kept, as side requests.
func qwenSide(body []byte) bool {
	return bytes.Contains(body, []byte("managed memory extraction subagent")) ||
		bytes.Contains(body, []byte("[SUGGESTION MODE:"))
}
