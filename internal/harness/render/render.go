// Package render turns the JSON lines of an agent's transcript into the
// lines of its conversation, whatever the harness: the daemon serves them
// as an agent's messages file (internal/harness), and 9harness top renders
// a transcript itself only for a daemon that serves no such file. It
// knows no harness and imports nothing of the project.
package render

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Printable keeps a line from steering a terminal: control characters,
// the bidirectional controls that would reorder the rest of the line and
// bytes that are not UTF-8 become '?', line breaks and tabs a space. It is
// the one such rule, the daemon's for messages and the client's for every
// value it prints.
func Printable(s string) string {
	if plainASCII(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029:
			return ' '
		case r == utf8.RuneError:
			return '?'
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '?'
		case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return '?'
		}
		return r
	}, s)
}

// plainASCII reports whether s is printable ASCII only: nothing for
// Printable to replace, as most of a table is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// Messages renders the JSON lines of a transcript, whatever the
// harness, as one line per message of the conversation: its role, then
// its text; a tool call as "[tool NAME]". It looks for the keys every
// harness's records share (role or type, text or content, name and
// input, arguments or args), and keeps only the records of a conversation
// role (convRoles) or with a tool call, and none marked isMeta: the
// harnesses' other records (attachments, system prompts, request shapes,
// events that repeat a message) would push the conversation out of the
// last n. cut says the first line may be partial.
func Messages(b []byte, cut bool, n int) []string {
	lines := strings.Split(string(b), "\n")
	if cut && len(lines) > 0 {
		lines = lines[1:]
	}
	var out []string
	for _, l := range lines {
		var v any
		if json.Unmarshal([]byte(l), &v) != nil {
			continue
		}
		if obj, ok := v.(map[string]any); ok && obj["isMeta"] == true {
			continue
		}
		role := findString(v, "role", 3)
		if role == "" {
			role = findString(v, "type", 1)
		}
		tool := toolName(v, 0)
		if !slices.Contains(convRoles, role) && tool == "" {
			continue
		}
		var texts []string
		collectText(v, &texts, 0)
		if tool != "" {
			texts = append(texts, "[tool "+tool+"]")
		}
		if len(texts) == 0 {
			continue
		}
		out = append(out, Printable(role+": "+strings.Join(texts, " ")))
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// convRoles are the roles of a conversation's turns in the harnesses'
// transcripts: the person's, and the model's by its several names.
var convRoles = []string{"user", "assistant", "model", "gemini"}

// findString is the first string value of key at most depth levels down.
func findString(v any, key string, depth int) string {
	obj, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := obj[key].(string); ok {
		return s
	}
	if depth == 0 {
		return ""
	}
	for _, k := range []string{"message", "payload", "item", "data"} {
		if s := findString(obj[k], key, depth-1); s != "" {
			return s
		}
	}
	return ""
}

// collectText gathers the strings under "text" keys.
func collectText(v any, out *[]string, depth int) {
	if depth > 6 || len(*out) > 8 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["text"].(string); ok && strings.TrimSpace(s) != "" {
			*out = append(*out, strings.Join(strings.Fields(s), " "))
		}
		if s, ok := v["content"].(string); ok && strings.TrimSpace(s) != "" {
			*out = append(*out, strings.Join(strings.Fields(s), " "))
		}
		for k, x := range v {
			if k != "text" && k != "input" && k != "arguments" {
				collectText(x, out, depth+1)
			}
		}
	case []any:
		for _, x := range v {
			collectText(x, out, depth+1)
		}
	}
}

// toolName is the name of a tool call in v: an object with a name and an
// input, arguments or args.
func toolName(v any, depth int) string {
	if depth > 6 {
		return ""
	}
	switch v := v.(type) {
	case map[string]any:
		if name, ok := v["name"].(string); ok {
			if _, in := v["input"]; in {
				return name
			}
			if _, in := v["arguments"]; in {
				return name
			}
			if _, in := v["args"]; in {
				return name
			}
		}
		for _, x := range v {
			if s := toolName(x, depth+1); s != "" {
				return s
			}
		}
	case []any:
		for _, x := range v {
			if s := toolName(x, depth+1); s != "" {
				return s
			}
		}
	}
	return ""
}
