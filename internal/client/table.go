package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// parseTable decodes /active/table's JSON Lines, one Agent per line that
// is not blank, as json.Unmarshal of each line into an Agent would.
//
// json.Unmarshal, by reflection and with an allocation per string, was
// the largest cost of ps after the process's start: ten times this
// decoder's, on a table of hundreds of agents. So a line of the shape the
// daemon writes (an object whose values are strings, integers and, for
// agents, an array of strings) is decoded by hand, its strings slices of
// s; any other line, and any line the hand decoder is unsure of, goes to
// json.Unmarshal, which also makes the error of a malformed line.
func parseTable(s string) ([]Agent, error) {
	out := make([]Agent, 0, strings.Count(s, "\n")+1)
	for s != "" {
		var ln string
		ln, s, _ = strings.Cut(s, "\n")
		if strings.TrimSpace(ln) == "" {
			continue
		}
		out = append(out, Agent{})
		a := &out[len(out)-1]
		if decodeAgent(ln, a) {
			continue
		}
		*a = Agent{}
		if err := json.Unmarshal([]byte(ln), a); err != nil {
			return nil, fmt.Errorf("%s: %w", TablePath, err)
		}
	}
	return out, nil
}

// chunksLen is the length of the chunks together.
func chunksLen(chunks [][]byte) int {
	n := 0
	for _, ch := range chunks {
		n += len(ch)
	}
	return n
}

// agentKeys are the JSON names of Agent's fields: a key that equals none
// of them, even ignoring case (json.Unmarshal matches a key to a field
// without regard to case), is skipped.
var agentKeys = []string{
	"harness", "pid", "ppid", "started", "cwd", "name", "title", "session",
	"model", "via", "status", "state", "waiting", "since", "state.via", "zmx",
	"tmux", "transcript", "agents", "tokens", "limits", "reach", "attach", "pending",
}

// decodeAgent decodes one line into a, which is zero, and tells whether
// it could. It accepts only valid JSON that it decodes exactly as
// json.Unmarshal does; on false, a is half filled and the line is for
// json.Unmarshal.
func decodeAgent(s string, a *Agent) bool {
	d := lineDecoder{s: s}
	d.space()
	if !d.byte('{') {
		return false
	}
	d.space()
	if d.byte('}') {
		return d.end()
	}
	for {
		key, ok := d.string()
		if !ok {
			return false
		}
		d.space()
		if !d.byte(':') {
			return false
		}
		d.space()
		if !d.value(key, a) {
			return false
		}
		d.space()
		if d.byte('}') {
			return d.end()
		}
		if !d.byte(',') {
			return false
		}
		d.space()
	}
}

// lineDecoder reads one line of JSON from s at i.
type lineDecoder struct {
	s string
	i int
}

// value reads the value of key into its field of a.
func (d *lineDecoder) value(key string, a *Agent) bool {
	var dst *string
	switch key {
	case "harness":
		dst = &a.Harness
	case "cwd":
		dst = &a.Cwd
	case "name":
		dst = &a.Name
	case "title":
		dst = &a.Title
	case "session":
		dst = &a.Session
	case "model":
		dst = &a.Model
	case "via":
		dst = &a.Via
	case "status":
		dst = &a.Status
	case "state":
		dst = &a.State
	case "waiting":
		dst = &a.Waiting
	case "since":
		dst = &a.Since
	case "state.via":
		dst = &a.StateVia
	case "zmx":
		dst = &a.Zmx
	case "tmux":
		dst = &a.Tmux
	case "transcript":
		dst = &a.Transcript
	case "reach":
		dst = &a.Reach
	case "attach":
		dst = &a.Attach
	case "pid", "ppid":
		n, ok := d.integer()
		if !ok || int64(int(n)) != n {
			return false
		}
		if key == "pid" {
			a.PID = int(n)
		} else {
			a.PPID = int(n)
		}
		return true
	case "started":
		n, ok := d.integer()
		a.Started = n
		return ok
	case "tokens":
		// The table carries the tokens file's text; the object form
		// (ps --json's) is left to json.Unmarshal.
		v, ok := d.string()
		a.Tokens = ParseTokens(v)
		return ok
	case "limits":
		// As tokens: the file's text here, the object to json.Unmarshal.
		v, ok := d.string()
		a.Limits = ParseLimits(v)
		return ok
	case "agents":
		return d.stringArray(&a.Agents)
	case "pending":
		return d.stringArray(&a.Pending)
	default:
		return d.skip(key)
	}
	v, ok := d.string()
	*dst = v
	return ok
}

// space skips JSON's white space.
func (d *lineDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// byte reads c, if it is next.
func (d *lineDecoder) byte(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end tells whether only white space is left.
func (d *lineDecoder) end() bool {
	d.space()
	return d.i == len(d.s)
}

// string reads a JSON string. A string without escapes is a slice of s.
// One with a surrogate escaped (\ud83d\ude00: json.Unmarshal pairs them,
// or makes a lone one U+FFFD), with control characters or with invalid
// UTF-8 (which json.Unmarshal also makes U+FFFD) is refused.
func (d *lineDecoder) string() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for i := start; i < len(d.s); {
		switch c := d.s[i]; {
		case c == '"':
			d.i = i + 1
			return d.s[start:i], true
		case c == '\\':
			return d.escaped(start, i)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRuneInString(d.s[i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			i += n
		}
	}
	return "", false
}

// escaped reads the rest of a string that has a backslash at i, from
// start, its first byte.
func (d *lineDecoder) escaped(start, i int) (string, bool) {
	var b strings.Builder
	b.Grow(i - start + 16)
	b.WriteString(d.s[start:i])
	for i < len(d.s) {
		c := d.s[i]
		switch {
		case c == '"':
			d.i = i + 1
			return b.String(), true
		case c == '\\':
			if i+1 == len(d.s) {
				return "", false
			}
			switch e := d.s[i+1]; e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, ok := hex4(d.s[i+2:])
				if !ok || utf16.IsSurrogate(r) {
					return "", false // a surrogate pair, or a lone half
				}
				b.WriteRune(r)
				i += 4
			default:
				return "", false
			}
			i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(d.s[i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			b.WriteString(d.s[i : i+n])
			i += n
		}
	}
	return "", false
}

// hex4 is the rune of the four hex digits s starts with.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// integer reads a JSON number that is an integer without fraction or
// exponent, in int64's range.
func (d *lineDecoder) integer() (int64, bool) {
	start := d.i
	i := start
	if i < len(d.s) && d.s[i] == '-' {
		i++
	}
	digits := i
	for i < len(d.s) && '0' <= d.s[i] && d.s[i] <= '9' {
		i++
	}
	if i == digits || (d.s[digits] == '0' && i > digits+1) {
		return 0, false // no digits, or a leading zero
	}
	if i < len(d.s) && (d.s[i] == '.' || d.s[i] == 'e' || d.s[i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(d.s[start:i], 10, 64)
	if err != nil {
		return 0, false
	}
	d.i = i
	return n, true
}

// stringArray reads a JSON array of strings into *dst: [] is an empty slice,
// not nil, as json.Unmarshal makes it.
func (d *lineDecoder) stringArray(dst *[]string) bool {
	if !d.byte('[') {
		return false
	}
	out := []string{}
	d.space()
	if !d.byte(']') {
		for {
			v, ok := d.string()
			if !ok {
				return false
			}
			out = append(out, v)
			d.space()
			if d.byte(']') {
				break
			}
			if !d.byte(',') {
				return false
			}
			d.space()
		}
	}
	*dst = out
	return true
}

// skip reads the value of a key that is no field of Agent, which
// json.Unmarshal ignores once it is valid JSON. A key that matches a
// field but for case, or that is not ASCII (json.Unmarshal folds some
// other letters to ASCII ones), is refused.
func (d *lineDecoder) skip(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return false
		}
	}
	for _, k := range agentKeys {
		if strings.EqualFold(key, k) {
			return false
		}
	}
	start := d.i
	depth := 0
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case '"':
			if _, ok := d.string(); !ok {
				return false
			}
			if depth == 0 {
				return json.Valid([]byte(d.s[start:d.i]))
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of the object, after a scalar
				return json.Valid([]byte(d.s[start:d.i]))
			}
			depth--
			if depth == 0 {
				d.i++
				return json.Valid([]byte(d.s[start:d.i]))
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return json.Valid([]byte(d.s[start:d.i]))
			}
		}
		d.i++
	}
	return false
}
