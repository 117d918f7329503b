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
