package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// unmarshalTable is what parseTable must equal: json.Unmarshal of each
// line that is not blank.
func unmarshalTable(b []byte) ([]Agent, error) {
	out := make([]Agent, 0)
	for len(b) > 0 {
		var ln []byte
		ln, b, _ = bytes.Cut(b, []byte("\n"))
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var a Agent
		if err := json.Unmarshal(ln, &a); err != nil {
			return nil, fmt.Errorf("%s: %w", TablePath, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkTable fails t unless parseTable and unmarshalTable agree on b:
// the same agents, or the same error.
func checkTable(t *testing.T, b []byte) {
	t.Helper()
	got, gerr := parseTable(string(b))
	want, werr := unmarshalTable(b)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q: error %v, want %v", b, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
	}
}

// tableLines are lines of the shapes the table has, and lines that stray
// from it in every way the hand decoder must leave to json.Unmarshal.
var tableLines = []string{
	// What the daemon writes.
	`{"harness":"claude","pid":9086,"ppid":1,"started":1796191645,"cwd":"/w/0","title":"make the tests pass","session":"00000000-0000-4000-8000-00000000237e","model":"claude-opus-4-6","via":"registry","status":"busy","state":"working","state.via":"registry","zmx":"","tmux":"","transcript":"/active/claude/9086/transcript"}`,
	`{"harness":"codex","pid":7,"name":"n","waiting":"approve Bash","since":"2026-01-02T03:04:05Z","state":"waiting","zmx":"z","tmux":"t","agents":["a","b"],"tokens":"context 120\ninput 7\ncache_read 3"}`,
	`{"harness":"pi","pid":8,"agents":[],"tokens":""}`,
	`{"harness":"codex","pid":9,"tokens":"context 1","limits":"primary 82.5 300 2026-12-01T17:10:00Z\nsecondary 21 10080 2026-12-06T23:33:20Z","zmx":"","tmux":"","reach":"detached"}`,
	`{"harness":"pi","pid":8,"title":"quote \" slash \\ \/ \b\f\n\r\t end"}`,
	`{"harness":"pi","pid":8,"title":"wide 日本語 🙂 e\u0301 \u00e9"}`,
	`{"harness":"pi","pid":8,"title":"\ud83d\ude00 \ud800 x"}`,
	`{"harness":"pi","pid":8,"title":"\ud83d\ude00"}`,
	`{"harness":"pi","pid":8,"title":"\ude00\ud83d"}`,
	`{"harness":"pi","pid":8,"title":"\ud83d"}`,
	`{"harness":"pi","pid":8,"title":"\u12"}`,
	`{"harness":"pi","pid":8,"title":"\u12g4"}`,
	`{"harness":"pi","pid":8,"title":"\u001b[31m \u2028 \uFFFD \u0000"}`,
	`{"harness":"pi","pid":8,"title":"bidi ` + "\u202e\u2028" + `"}`,
	`  { "harness" : "a" , "pid" : -0 , "started" : -12 }  ` + "\r",
	`{}`,
	`null`,
	`{"pid":9223372036854775807,"started":-9223372036854775808}`,
	// Duplicates: the last wins.
	`{"title":"a","title":"b","agents":["x","y"],"agents":["z"],"tokens":"input 1","tokens":"output 2"}`,
	// Case: json.Unmarshal matches a key to a field regardless of it.
	`{"HARNESS":"a","Pid":3,"State.Via":"x","ſession":"s","Kwd":"k"}`,
	// Keys of no field, with values of every kind.
	`{"harness":"a","extra":"x","n":1.5e3,"t":true,"f":false,"z":null,"o":{"a":[1,{"b":"}"}]},"arr":[],"e":{}}`,
	`{"extra":"\u0041","pid":1}`,
	`{"extra":01,"pid":1}`,
	`{"extra":[1,],"pid":1}`,
	`{"extra":tru}`,
	`{"extra":}`,
	`{"extra":"x"]`,
	// Values of the wrong kind, or numbers that are no integer.
	`{"pid":"1"}`,
	`{"pid":1.0}`,
	`{"pid":1e2}`,
	`{"pid":01}`,
	`{"pid":-}`,
	`{"pid":99999999999999999999}`,
	`{"started":1E2}`,
	`{"title":null,"agents":null,"tokens":null}`,
	`{"title":1}`,
	`{"agents":"a"}`,
	`{"agents":["a",1]}`,
	`{"agents":["a",]}`,
	`{"tokens":{"context":5,"input":2}}`,
	`{"tokens":"context 5\u000ainput 2"}`,
	`{"limits":{"primary":{"used_percent":5,"window_minutes":300}}}`,
	`{"limits":"primary 5 - -","reach":1}`,
	`{"limits":null,"reach":null}`,
	// Malformed.
	`{"harness":"a"`,
	`{"harness":"a",}`,
	`{"harness":"a"} x`,
	`{"harness":"a"}{}`,
	`{"harness" "a"}`,
	`{harness:"a"}`,
	`{"harness":"a` + "\t" + `"}`,
	`{"harness":"a` + "\xff" + `"}`,
	`{"harness":"` + "\xed\xa0\x80" + `"}`,
	`{"harness":"a\x"}`,
	`{"harness":"a\`,
	`[1]`,
	`"x"`,
	`{"harness":"a","pid":1}` + "\u00a0",
	"\u00a0",
	"\x00",
}

func TestParseTable(t *testing.T) {
	for _, ln := range tableLines {
		checkTable(t, []byte(ln))
		checkTable(t, []byte(ln+"\n"))
	}
	checkTable(t, []byte(strings.Join(tableLines[:3], "\n")+"\n\n \n"+tableLines[3]))
	checkTable(t, nil)
	// The daemon's shapes, escapes and all, take the hand decoder's way.
	for _, ln := range tableLines[:5] {
		if !decodeAgent(ln, &Agent{}) {
			t.Errorf("%s: left to json.Unmarshal", ln)
		}
	}
	if got, err := parseTable(""); err != nil || got == nil {
		t.Errorf("empty table: %#v, %v; want an empty list", got, err)
	}
}

// The strings of a line the hand decoder takes are slices of the table,
// not copies; this is what the decoder is for.
func TestParseTableAllocs(t *testing.T) {
	var b []byte
	for i := range 100 {
		b = fmt.Appendf(b, `{"harness":"claude","pid":%d,"cwd":"/w/%d","title":"t","state":"working","zmx":"","tmux":""}`+"\n", i+1, i)
	}
	s := string(b)
	n := testing.AllocsPerRun(10, func() { parseTable(s) })
	if n > 3 {
		t.Errorf("parseTable of 100 rows: %v allocations, want at most 3", n)
	}
}

func FuzzParseTable(f *testing.F) {
	for _, ln := range tableLines {
		f.Add([]byte(ln))
	}
	f.Add([]byte(strings.Join(tableLines, "\n")))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkTable(t, b)
	})
}

// TestParseTablePending: the names of the facts a row left pending are
// read, by the hand decoder as by json.Unmarshal.
func TestParseTablePending(t *testing.T) {
	ln := `{"harness":"claude","pid":7,"tokens":"context 12","zmx":"","tmux":"","pending":["title","model","tokens"]}`
	got, err := parseTable(ln + "\n")
	if err != nil {
		t.Fatal(err)
	}
	var want Agent
	if err := json.Unmarshal([]byte(ln), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], want) || !reflect.DeepEqual(got[0].Pending, []string{"title", "model", "tokens"}) {
		t.Errorf("parsed %+v, want %+v", got[0], want)
	}
	if !decodeAgent(ln, &Agent{}) {
		t.Error("the hand decoder refused a row with pending")
	}
}
