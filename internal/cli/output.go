package cli

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/9harness/9harness/internal/fleet"
)

// ErrWriter is standard output that remembers its first write error, so a
// command can say "write error" once (as coreutils does) instead of going
// on silently into a full disk or a closed file. After an error every
// write fails at once with it.
type ErrWriter struct {
	w   io.Writer
	err error
}

func NewErrWriter(w io.Writer) *ErrWriter { return &ErrWriter{w: w} }

func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// Err is the first write error, or nil.
func (e *ErrWriter) Err() error { return e.err }

// Report prints the write error, if there was one, as "9harness CMD: write
// error: CAUSE" and tells whether there was.
func (e *ErrWriter) Report(stderr io.Writer, cmd string) bool {
	if e.err == nil {
		return false
	}
	fmt.Fprintf(stderr, "9harness %s: write error: %v\n", cmd, UnwrapSyscall(e.err))
	return true
}

// TextWriter is the standard error of every command: what it is handed is
// shown as text, each line made printable (control characters, C1 controls
// and the bidirectional overrides become '?'), so that nothing a remote
// host, its ssh, its relay or its daemon says (an error's last line, a
// move's reason) can steer the terminal: no title, clipboard (OSC 52) or
// clear-screen escape gets through. A multi-byte character split across
// two writes is held until its end comes.
type TextWriter struct {
	mu   sync.Mutex
	w    io.Writer
	part []byte // the start of a character the next write completes
}

func NewTextWriter(w io.Writer) *TextWriter { return &TextWriter{w: w} }

func (t *TextWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := append(t.part, p...)
	t.part = nil
	// Hold back an incomplete UTF-8 sequence at the end (at most 3 bytes).
	if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
		t.part = append([]byte(nil), b[i:]...)
		b = b[:i]
	}
	var out []byte
	for len(b) > 0 {
		line, rest, nl := bytes.Cut(b, []byte{'\n'})
		out = append(out, fleet.Printable(string(line))...)
		if nl {
			out = append(out, '\n')
		}
		b = rest
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lastRuneStart is the index of the first byte of the last character of b
// when b ends within 3 bytes of a multi-byte character's start, else -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if c := b[i]; c >= 0xc0 {
			return i
		} else if c < 0x80 {
			return -1
		}
	}
	return -1
}
