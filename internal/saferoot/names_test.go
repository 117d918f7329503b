package saferoot

import (
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/errs"
)

// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestExcluded(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		// substrings
		{".credentials.json", true},
		{"CREDENTIALS", true},
		{"aws-Credentials-backup", true},
		{"token", true},
		{"refresh_TOKEN.txt", true},
		{"tokens.db", true},
		{"auth.json", true},
		{"Auth.JSON", true},
		{"oauth_creds.json", true},
		{"author-notes", true}, // deliberately: "auth" hides it too
		{"authorship.md", true},
		{"secret", true},
		{"client_SECRET_123.json", true},
		{".secrets", true},
		// suffixes
		{"12345.0a1b2c3d.key", true},
		{"server.KEY", true},
		{"cert.pem", true},
		{"cert.Pem", true},
		{"prod.env", true},
		{"bundle.p12", true},
		{"bundle.PFX", true},
		// exact names
		{"settings.json", true},
		{"Settings.JSON", true},
		{"settings.yaml", true},
		{"settings.local.json", true},
		{"config.yml", true},
		{"config.yaml", true},
		{"CONFIG.TOML", true},
		{"models.yml", true},
		{"models.yaml", true},
		{".ssh", true},
		{".SSH", true},
		{".netrc", true},
		{".npmrc", true},
		{".pypirc", true},
		{".pgpass", true},
		{".env", true},
		{".ENV", true},
		// prefixes
		{"id_rsa", true},
		{"id_rsa.pub", true},
		{"ID_DSA", true},
		{"id_ecdsa_sk", true},
		{"id_ed25519", true},
		{"Id_Ed25519.pub", true},
		// Unicode spellings a casefolded directory resolves to the same file
		{"ſettings.json", true},       // long s
		{"to\u212aen", true},          // Kelvin sign
		{"conﬁg.toml", true},          // fi ligature
		{".ßh", true},                 // sharp s -> ss
		{".pgpaẞ", true},              // capital sharp s
		{"sett\u200bings.json", true}, // zero-width space
		{"to\ufeffken", true},         // BOM
		{"ıd_rsa", true},              // dotless i
		// near misses: allowed
		{"settings.json.bak", true}, // a backup of an exact rule
		{"my-settings.json", false},
		{"config.json", false},
		{"config", false},
		{"models.json", true}, // pi's provider keys
		{"history.jsonl", false},
		{"keys", false},
		{"monkey.txt", false},
		{"key", true}, // a key under no other name
		{"monkey", false},
		{"a.keys", false},
		{"environment", false},
		{"x.envelope", false},
		{".envrc", true}, // direnv: the .env family by prefix
		{"ssh", false},
		{".sshd", false},
		{"my_id_rsa", false},
		{"id_rs", false},
		{"aut", false},
		{"tokén", false},
		{"sessions", false},
		{"projects", false},
		{"rollout-2025-01-01T00-00-00-0195.jsonl", false},
		{"", false},
		{"\xff\xfe", false},
		{"a\xffuth", false},
		{"p12", false},
	}
	for _, c := range cases {
		if got := Excluded(c.name); got != c.want {
			t.Errorf("Excluded(%q) = %v, want %v", c.name, got, c.want)
		}
	}
	long := strings.Repeat("x", 400) + "token"
	if !Excluded(long) {
		t.Errorf("Excluded(400 x + token) = false")
	}
	if Excluded(strings.Repeat("x", 400)) {
		t.Errorf("Excluded(400 x) = true")
	}
}

func TestValidName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"a.txt", true},
		{"...", true},
		{".hidden", true},
		{"..x", true},
		{"ünïcode", true},
		{strings.Repeat("x", 255), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"/", false},
		{"a\x00b", false},
		{"\x00", false},
		{strings.Repeat("x", 256), false},
	}
	for _, c := range cases {
		err := ValidName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errs.Is(err, errs.Invalid) {
			t.Errorf("ValidName(%q) kind %v, want Invalid", c.name, errs.KindOf(err))
		}
	}
}

// invalidRels are refused by CheckRel, with their kind (0 for valid).
var invalidRels = []struct {
	rel  string
	kind errs.Kind
}{
	{"..", errs.Invalid},
	{"a/../b", errs.Invalid},
	{"a/..", errs.Invalid},
	{"../a", errs.Invalid},
	{"/etc", errs.Invalid},
	{"/", errs.Invalid},
	{"a//b", errs.Invalid},
	{"a/", errs.Invalid},
	{".", errs.Invalid},
	{"./a", errs.Invalid},
	{"a/./b", errs.Invalid},
	{"a\x00b", errs.Invalid},
	{"a/b\x00", errs.Invalid},
	{strings.Repeat("x", 256), errs.Invalid},
	{"auth.json", errs.Private},
	{"a/b/.credentials.json", errs.Private},
	{"a/SECRETS/b", errs.Private},
	{"x/../auth", errs.Invalid},
	{"auth/..", errs.Private},
}

func TestCheckRel(t *testing.T) {
	for _, ok := range []string{"", "a", "a/b", "a/b/c.txt", "...", ".a/.b", strings.Repeat("x", 255) + "/y"} {
		if err := CheckRel(ok); err != nil {
			t.Errorf("CheckRel(%q) = %v", ok, err)
		}
	}
	for _, c := range invalidRels {
		err := CheckRel(c.rel)
		if err == nil || errs.KindOf(err) != c.kind {
			t.Errorf("CheckRel(%q) = %v (kind %v), want kind %v", c.rel, err, errs.KindOf(err), c.kind)
		}
	}
}

func TestExcludedAllocs(t *testing.T) {
	for _, name := range []string{
		"rollout-2025-01-01T00-00-00-0195c3f1-aaaa-bbbb-cccc-1234567890ab.jsonl",
		".credentials.json",
		"Ünïcödé-nämé.txt",
	} {
		n := testing.AllocsPerRun(1000, func() { Excluded(name) })
		t.Logf("Excluded(%q): %v allocs/op", name, n)
	}
}

func BenchmarkExcluded(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Excluded("rollout-2025-01-01T00-00-00-0195c3f1-aaaa-bbbb-cccc-1234567890ab.jsonl")
	}
}
