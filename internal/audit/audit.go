// Package audit writes the decisions that matter where administrators
// already look: the systemd journal, as structured entries with a fixed
// MESSAGE_ID per kind of event (explained by packaging/systemd/9harness.catalog
// for journalctl -x), with one logfmt line on stderr as the fallback when no
// journal socket is reachable (systemd captures stderr too).
package audit

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/journal"
)

// Message ids, one per kind of event. They never change: administrators
// filter on them (journalctl MESSAGE_ID=...).
const (
	IDConnRefused    = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51" // a peer was refused before any reply
	IDConnSuppressed = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e52" // refusals dropped by the rate limit
	IDMoveRefused    = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53" // a move was refused before anything was touched
	IDMoveStarted    = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54" // a move passed every check and is killing the agent
	IDMoveDone       = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55" // a move completed: the agent runs in its new session
	IDMoveFailed     = "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e56" // a move failed after it started; the entry says how to resume by hand
)

// Priorities, as syslog defines them.
const (
	PriErr     = journal.PriErr
	PriWarning = journal.PriWarning
	PriNotice  = journal.PriNotice
	PriInfo    = journal.PriInfo
)

// Event is one audit entry. Field names are journal field names: upper
// case, digits and underscores.
type Event struct {
	ID       string
	Priority journal.Priority
	Message  string
	Fields   map[string]string
}

// Sink records events.
type Sink interface {
	Send(Event) error
}

// Journal sends events to systemd-journald.
type Journal struct{}

// Send implements Sink.
func (Journal) Send(e Event) error {
	f := make(map[string]string, len(e.Fields)+2)
	for k, v := range e.Fields {
		f[k] = v
	}
	f["MESSAGE_ID"] = e.ID
	f["SYSLOG_IDENTIFIER"] = "9harnessd"
	return journal.Send(e.Message, e.Priority, f)
}

// Logfmt writes one logfmt line per event to W.
type Logfmt struct {
	W  io.Writer
	mu sync.Mutex
}

// Send implements Sink.
func (l *Logfmt) Send(e Event) error {
	var b strings.Builder
	b.WriteString("audit")
	kv := func(k, v string) {
		b.WriteByte(' ')
		b.WriteString(strings.ToLower(k))
		b.WriteByte('=')
		if needsQuote(v) {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	kv("MESSAGE_ID", e.ID)
	kv("PRIORITY", strconv.Itoa(int(e.Priority)))
	kv("MESSAGE", e.Message)
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv(k, e.Fields[k])
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := io.WriteString(l.W, b.String())
	return err
}

// needsQuote reports whether a logfmt value must be quoted: it is empty,
// holds a separator of logfmt (space, '=', '"', '\\'), or holds a byte a
// terminal or a line-oriented reader would act on instead of showing. Values
// come from peers (a comm is whatever the peer's process named itself), so a
// CR or an ESC written raw would let a peer overwrite or forge what an
// administrator sees. Every byte below 0x20 and 0x7f is quoted (strconv.Quote
// writes them as \r, \x1b, \x7f), and so is any rune that is not printable
// or not valid UTF-8 (bidi overrides, U+2028), which Quote escapes too.
func needsQuote(v string) bool {
	if v == "" {
		return true
	}
	for _, r := range v {
		switch {
		case r < 0x20, r == 0x7f, r == ' ', r == '=', r == '"', r == '\\':
			return true
		case r == utf8.RuneError, !unicode.IsPrint(r):
			return true
		}
	}
	return false
}

// Default returns the journal when its socket is reachable, else the
// logfmt fallback on w, and says which.
func Default(w io.Writer) (Sink, string) {
	if journal.Enabled() {
		return Journal{}, "journal"
	}
	return &Logfmt{W: w}, "stderr (no journal socket)"
}

// Limiter passes at most Burst events at once and Rate per second after,
// so a flood of refused connections cannot fill the journal. The events it
// drops are counted and reported by the next event it passes.
type Limiter struct {
	Sink  Sink
	Rate  float64
	Burst float64
	Now   func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

// Send implements Sink.
func (l *Limiter) Send(e Event) error {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	l.mu.Lock()
	t := now()
	if l.last.IsZero() {
		l.tokens = l.Burst
	} else {
		l.tokens = min(l.Burst, l.tokens+t.Sub(l.last).Seconds()*l.Rate)
	}
	l.last = t
	if l.tokens < 1 {
		l.dropped++
		l.mu.Unlock()
		return nil
	}
	l.tokens--
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if dropped > 0 {
		l.Sink.Send(Event{ID: IDConnSuppressed, Priority: PriWarning,
			Message: fmt.Sprintf("%d refused connections were not logged (rate limit)", dropped),
			Fields:  map[string]string{"SUPPRESSED": strconv.Itoa(dropped)}})
	}
	return l.Sink.Send(e)
}
