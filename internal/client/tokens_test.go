package client

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The tokens fact arrives as the file's text (the file, /active/table) or
// as the object ps --json writes; both give the same counts.
func TestTokens(t *testing.T) {
	want := Tokens{"context": 120, "input": 7, "cache_read": 3}
	for _, tc := range []struct{ name, in string }{
		{"table text", `{"tokens":"context 120\ninput 7\ncache_read 3"}`},
		{"object", `{"tokens":{"context":120,"input":7,"cache_read":3}}`},
		{"junk lines skipped", `{"tokens":"context 120\nbogus\ninput x\ninput 7\ncache_read 3\n"}`},
	} {
		var a Agent
		if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(a.Tokens, want) {
			t.Errorf("%s: %v, want %v", tc.name, a.Tokens, want)
		}
		b, _ := json.Marshal(a)
		var back Agent
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Tokens, want) {
			t.Errorf("%s: round trip %s: %v %v", tc.name, b, back.Tokens, err)
		}
	}
	if ParseTokens("") != nil {
		t.Error("no tokens file: want nil (absent from --json)")
	}
}

// The limits fact arrives as the file's text or as ps --json's object;
// both give the same windows, and the tightest is the fullest.
func TestLimits(t *testing.T) {
	want := Limits{"primary": {82.5, 300, "2026-12-01T17:10:00Z"}, "secondary": {21, 10080, "2026-12-06T23:33:20Z"}}
	for _, tc := range []struct{ name, in string }{
		{"table text", `{"limits":"primary 82.5 300 2026-12-01T17:10:00Z\nsecondary 21 10080 2026-12-06T23:33:20Z"}`},
		{"object", `{"limits":{"primary":{"used_percent":82.5,"window_minutes":300,"resets_at":"2026-12-01T17:10:00Z"},"secondary":{"used_percent":21,"window_minutes":10080,"resets_at":"2026-12-06T23:33:20Z"}}}`},
		{"junk lines skipped", `{"limits":"primary 82.5 300 2026-12-01T17:10:00Z\nbogus\nx y z w\nsecondary 21 10080 2026-12-06T23:33:20Z\n"}`},
	} {
		var a Agent
		if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(a.Limits, want) {
			t.Errorf("%s: %v, want %v", tc.name, a.Limits, want)
		}
		b, _ := json.Marshal(a)
		var back Agent
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Limits, want) {
			t.Errorf("%s: round trip %s: %v %v", tc.name, b, back.Limits, err)
		}
	}
	if n, w, ok := want.Tightest(); !ok || n != "primary" || w.UsedPercent != 82.5 {
		t.Errorf("tightest %s %v %v", n, w, ok)
	}
	if got := ParseLimits("primary 19 - -"); !reflect.DeepEqual(got, Limits{"primary": {UsedPercent: 19}}) {
		t.Errorf("unrecorded fields: %v", got)
	}
	if ParseLimits("") != nil {
		t.Error("no limits file: want nil (absent from --json)")
	}
}
