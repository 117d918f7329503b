package audit

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

type recorder struct{ events []Event }

func (r *recorder) Send(e Event) error { r.events = append(r.events, e); return nil }

func TestLogfmt(t *testing.T) {
	var b bytes.Buffer
	l := &Logfmt{W: &b}
	l.Send(Event{ID: IDConnRefused, Priority: PriWarning, Message: "refused a peer",
		Fields: map[string]string{"PEER_UID": "1001", "REASON": `uid 1001 "holds" no grant`}})
	got := b.String()
	want := `audit message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51 priority=4 message="refused a peer" peer_uid=1001 reason="uid 1001 \"holds\" no grant"` + "\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestLimiter(t *testing.T) {
	r := &recorder{}
	now := time.Unix(0, 0)
	l := &Limiter{Sink: r, Rate: 1, Burst: 3, Now: func() time.Time { return now }}
	for i := 0; i < 100; i++ {
		l.Send(Event{ID: IDConnRefused})
	}
	if len(r.events) != 3 {
		t.Fatalf("a flood of 100 passed %d, want the burst of 3", len(r.events))
	}
	now = now.Add(2 * time.Second)
	l.Send(Event{ID: IDConnRefused})
	if len(r.events) != 5 || r.events[3].ID != IDConnSuppressed || r.events[3].Fields["SUPPRESSED"] != "97" {
		t.Fatalf("after the pause: %+v", r.events[3:])
	}
	if !strings.Contains(r.events[3].Message, "97 refused") {
		t.Fatal(r.events[3].Message)
	}
}

// TestLogfmtControlBytes: a value a peer chose (its comm) cannot carry a
// raw control byte into the stderr log, where CR would let it overwrite the
// line on a terminal and ESC would drive the terminal. Every byte below 0x20
// and 0x7f appears escaped, in every field, and the line stays one line.
func TestLogfmtControlBytes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ok\rforged", `"ok\rforged"`},
		{"\x1b[2Jx", `"\x1b[2Jx"`},
		{"a\x00b", `"a\x00b"`},
		{"del\x7f", `"del\x7f"`},
		{"tab\there", `"tab\there"`},
		{"bidi\u202egnp", `"bidi\u202egnp"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"plain-comm", `plain-comm`},
		{"", `""`},
	} {
		var b bytes.Buffer
		l := &Logfmt{W: &b}
		l.Send(Event{ID: IDConnRefused, Priority: PriWarning, Message: tc.in,
			Fields: map[string]string{"PEER_COMM": tc.in}})
		line := b.String()
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Errorf("%q: not one line: %q", tc.in, line)
		}
		for i := 0; i < len(line)-1; i++ {
			if c := line[i]; c < 0x20 || c == 0x7f {
				t.Errorf("%q: raw byte %#x in %q", tc.in, c, line)
			}
		}
		for _, f := range []string{" message=" + tc.want + " ", " peer_comm=" + tc.want + "\n"} {
			if !strings.Contains(line, f) {
				t.Errorf("%q: %q lacks %q", tc.in, line, f)
			}
		}
	}
}
