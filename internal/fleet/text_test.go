package fleet

import (
	"testing"

	"github.com/rivo/uniseg"
)

func TestTextWidth(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"abc", 3},
		{"🚀", 2},
		{"✅", 2},
		{"日本語", 6},
		{"한국어", 6},
		{"ｆｕｌｌ", 8},
		{"cafe\u0301", 4},   // e + combining acute
		{"👨‍👩‍👧", 2},        // one ZWJ sequence
		{"🇫🇷", 2},           // a flag: two regional indicators
		{"❤️", 2},           // U+2764 with VS16: emoji presentation
		{"👍🏽", 2},           // skin tone modifier
		{"a\u200bb", 2},     // zero width space
		{"…", 1},            // the Ellipsis the table cuts with
		{"🚀 ship ✅ 日本", 15}, // 2+1+4+1+2+1+4
	} {
		if got := TextWidth(tc.s); got != tc.want {
			t.Errorf("TextWidth(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TextWidth's and Printable's shortcut for Printable ASCII agrees with
// uniseg and strings.Map, byte by byte and for strings around each byte
// that does not take it.
func TestPlainASCII(t *testing.T) {
	for c := range 256 {
		for _, s := range []string{string(rune(c)), string([]byte{byte(c)}), "ab" + string([]byte{byte(c)}) + "cd"} {
			plain := true
			for _, b := range []byte(s) {
				plain = plain && b >= 0x20 && b < 0x7f
			}
			if plainASCII(s) != plain {
				t.Errorf("plainASCII(%q) = %v, want %v", s, !plain, plain)
			}
			if got, want := TextWidth(s), uniseg.StringWidth(s); got != want {
				t.Errorf("TextWidth(%q) = %d, uniseg says %d", s, got, want)
			}
			if plain && Printable(s) != s {
				t.Errorf("Printable(%q) = %q", s, Printable(s))
			}
		}
	}
	var all []byte
	for c := byte(0x20); c < 0x7f; c++ {
		all = append(all, c)
	}
	if got, want := TextWidth(string(all)), uniseg.StringWidth(string(all)); got != want || got != len(all) {
		t.Errorf("TextWidth(Printable ASCII) = %d, uniseg says %d, want %d", got, want, len(all))
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s     string
		w     int
		end   string // ClipEnd
		front string // ClipFront
	}{
		{"abcdef", 6, "abcdef", "abcdef"},
		{"abcdef", 4, "abc…", "…def"},
		{"abcdef", 0, "", ""},
		{"日本語", 5, "日本…", "…本語"},
		{"日本語", 4, "日…", "…語"}, // a wide character does not fit the last cell: one cell less
		{"🚀🚀🚀", 4, "🚀…", "…🚀"},
		{"a👨‍👩‍👧b", 3, "a…", "…b"}, // the ZWJ sequence is not split
		{"a👨‍👩‍👧bc", 4, "a👨‍👩‍👧…", "…bc"},
		{"ab👨‍👩‍👧c", 4, "ab…", "…👨‍👩‍👧c"},
		{"cafe\u0301s", 5, "cafe\u0301s", "cafe\u0301s"},
		{"cafe\u0301s", 4, "caf…", "…fe\u0301s"}, // the mark stays on its e
		{"e\u0301e\u0301e\u0301", 2, "e\u0301…", "…e\u0301"},
		{"x🇫🇷🇫🇷", 4, "x🇫🇷…", "…🇫🇷"},
	} {
		if got := ClipEnd(tc.s, tc.w); got != tc.end {
			t.Errorf("ClipEnd(%q, %d) = %q, want %q", tc.s, tc.w, got, tc.end)
		}
		if got := ClipFront(tc.s, tc.w); got != tc.front {
			t.Errorf("ClipFront(%q, %d) = %q, want %q", tc.s, tc.w, got, tc.front)
		}
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain 🚀 日本", "plain 🚀 日本"},
		{"a\tb\nc\rd", "a b c d"},
		{"\x1b]0;pwned\x07title", "?]0;pwned?title"},
		{"\x1b[2Jx\x7f\u0085", "?[2Jx??"},
		{"abc\u202edef\u2066", "abc?def?"},   // bidi controls would reorder the line
		{"👨‍👩‍👧", "👨‍👩‍👧"},                   // the ZWJ stays
		{"bad \xff\xfe byte", "bad ?? byte"}, // not UTF-8
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRouteWord(t *testing.T) {
	for in, want := range map[string]string{
		"registry (2 leases on this pid; the most recently updated)": "registry",
		"none (no rollout open yet)":                                 "none",
		"fd":                                                         "fd",
		"":                                                           "",
	} {
		if got := RouteWord(in); got != want {
			t.Errorf("RouteWord(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCompactCount: TOKENS in at most four characters, rounded to the
// nearest.
func TestCompactCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {812, "812"}, {999, "999"}, {1000, "1k"}, {1049, "1k"}, {1050, "1.1k"}, {9849, "9.8k"},
		{9949, "9.9k"}, {9950, "10k"}, {41_234, "41k"}, {41_500, "42k"}, {999_499, "999k"}, {999_500, "1M"},
		{1_234_567, "1.2M"}, {12_345_678, "12M"}, {999_999_999, "1G"}, {2_500_000_000, "2.5G"}, {-1, ""},
	} {
		if got := CompactCount(tc.n); got != tc.want {
			t.Errorf("CompactCount(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestCutMark: a cut is marked … only where the locale is UTF-8, decided
// by the first of LC_ALL, LC_CTYPE and LANG that is set.
func TestCutMark(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "+"},
		{map[string]string{"LANG": "C.UTF-8"}, "…"},
		{map[string]string{"LANG": "en_US.utf8"}, "…"},
		{map[string]string{"LC_ALL": "C", "LANG": "C.UTF-8"}, "+"},
		{map[string]string{"LC_CTYPE": "de_DE.UTF-8", "LANG": "C"}, "…"},
		{map[string]string{"LC_ALL": "POSIX"}, "+"},
	} {
		if got := cutMark(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}
