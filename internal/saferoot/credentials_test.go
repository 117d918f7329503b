package saferoot

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/errs"
)

// instance is a name a pattern matches: each '*' made "x".
func instance(pattern string) string { return strings.ReplaceAll(pattern, "*", "x") }

// TestCredentialRules: every rule of the table hides a name it describes,
// in any case; every exact and suffix rule hides its backup and editor
// copies; at a slug position only the generic shapes stop applying.
//
// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestCredentialRules(t *testing.T) {
	for _, r := range credentialRules {
		t.Run(r.pattern, func(t *testing.T) {
			name := instance(r.pattern)
			for _, v := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
				if !Excluded(v) {
					t.Errorf("Excluded(%q) = false (rule %q, %s)", v, r.pattern, r.from)
				}
			}
			shape := strings.HasPrefix(r.pattern, "*") && strings.HasSuffix(r.pattern, "*")
			if !shape {
				for _, v := range []string{
					name + "~", name + ".bak", name + ".old", name + ".orig", name + ".swp",
					name + ".tmp", name + ".", name + " ", name + ". ", name + "-wal", name + "-shm",
					"#" + name + "#", name + ".bak~", strings.ToUpper(name) + ".BAK",
					"." + name + ".swp", "." + name + ".swo",
				} {
					if !Excluded(v) {
						t.Errorf("Excluded(%q) = false: a copy of %q", v, name)
					}
				}
				if !ExcludedSlug(name) {
					t.Errorf("ExcludedSlug(%q) = false: only the generic shapes stop at a slug", name)
				}
			} else {
				// A slug made of nothing but the shape is served.
				slug := "-home-u-src-" + r.pattern[1:len(r.pattern)-1] + "-server"
				if ExcludedSlug(slug) {
					t.Errorf("ExcludedSlug(%q) = true: a project's path is no credential", slug)
				}
				if !Excluded(slug) {
					t.Errorf("Excluded(%q) = false", slug)
				}
			}
		})
	}
}

// credentialNames are the real credential stores and secret homes of the
// harnesses 9harness serves, each a name the exclusion must catch.
var credentialNames = []string{
	// omp, pi, hermes (Baileys)
	"agent.db", "agent.db-wal", "agent.db-shm", "models.json",
	"creds.json", "app-state-sync-key-AAAAAQ.json", "pre-key-17.json", "sender-key-g1.json",
	// Gemini CLI, opencode, Cursor
	"oauth_creds.json", "google_accounts.json", "auth.json", "account.json", "service.json",
	"opencode.db", "opencode-dev.db", "opencode.db-wal", "opencode.db-shm",
	"cli-config.json", "store.db", "store.db-wal",
	// the .env family
	".env", ".env.local", ".env.production", ".envrc", ".env.bak", ".env~", ".env.swp", ".env ", ".env.",
	// classic homes
	".netrc.bak", "_netrc", ".npmrc~", ".pypirc~", ".pgpass.old", ".htpasswd", ".boto", ".s3cfg",
	".dockercfg", "kubeconfig", ".kube", ".aws", ".docker", ".gnupg", "hosts.yml",
	"putty.ppk", "x.key~", "x.key.bak", "server.pem.bak", "mcp.json", ".mcp.json",
	"keys.json", "api_key", "apikey.txt", "passwords.txt",
	// vim and emacs
	".settings.json.swp", "#config.toml#", ".netrc.swp", "id_ed25519.orig",
	".#config.toml#.swp", "..settings.json.swp.swp", ".hosts.yml.swp~",
	// case and look-alikes
	"AGENT.DB", "Models.Json", ".ENV.LOCAL", "ＭCP.json", "ſervice.json", ".kUbe", "Kubeconfig.yaml",
	"store.db\u200b", "ACCOUNT.JSON~",
}

// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestCredentialStores(t *testing.T) {
	for _, n := range credentialNames {
		if n == "ＭCP.json" { // fullwidth M does not fold to ASCII: not the same file anywhere
			if Excluded(n) {
				t.Errorf("Excluded(%q) = true", n)
			}
			continue
		}
		if !Excluded(n) {
			t.Errorf("Excluded(%q) = false", n)
		}
	}
	// Near misses stay served: innocent names a rule must not swallow.
	for _, n := range []string{
		"history.jsonl", "session_index.jsonl", "state.db", "sessions", "projects", "skills",
		"keys", "key", "monkey.txt", "a.keys", "store.dbx", "mystore.db", "opencode.json",
		"config.json", "environment", "x.envelope", "kube", "aws", "docker", "netrc",
		"models.jsonl", "account.jsonl", "agent.dbg", "pre-keys.md", "mcp.jsonl", "session-1.json",
		"rollout-2026-01-01T00-00-00-0195.jsonl", "2026-09-20T10-00-00-000Z_0199a1b2.jsonl",
		"#notes#", "notes.bak", "a~", "~", ".bak", "#",
	} {
		if Excluded(n) {
			t.Errorf("Excluded(%q) = true", n)
		}
	}
}

// Slug positions: a Root's slug directories serve a project whose path
// holds a generic shape, and nothing else.
func TestSlugDirs(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{
		"projects/-home-u-src-oauth-server/s1.jsonl",
		"projects/-home-u-src-secret-sauce/s2.jsonl",
		"projects/-home-u-src-oauth-server/token.txt", // inside a slug: the whole table
		"projects/-home-u-src-oauth-server/oauth-sub/x.jsonl",
		"projects/-home-u-src-ok/s3.jsonl",
		"other/-home-u-src-oauth-server/s4.jsonl",
		"agent/sessions/--home-u-src-my-creds--/t.jsonl",
		"agent/sessions/--home-u-src-my-creds--/t.jsonl",
		"projects/.env.local/x",
		"projects/agent.db/x",
		"projects/x-secret-y", // a file where slugs are: not a slug
		"projects/auth.json",
	} {
		write(t, filepath.Join(base, p), "x")
	}
	r := New(base)
	// Without slug directories: the substring rules hide the projects.
	if _, err := r.Stat("projects/-home-u-src-oauth-server/s1.jsonl"); !errs.Is(err, errs.Private) {
		t.Fatalf("no slug dirs: Stat = %v, want Private", err)
	}
	r.SetSlugDirs("projects", "agent/sessions")
	for _, ok := range []string{
		"projects/-home-u-src-oauth-server/s1.jsonl",
		"projects/-home-u-src-secret-sauce/s2.jsonl",
		"projects/-home-u-src-ok/s3.jsonl",
		"agent/sessions/--home-u-src-my-creds--/t.jsonl",
	} {
		if _, err := r.Stat(ok); err != nil {
			t.Errorf("Stat(%q) = %v", ok, err)
		}
		if err := r.CheckRel(ok); err != nil {
			t.Errorf("CheckRel(%q) = %v", ok, err)
		}
		if f, err := r.Open(ok); err != nil {
			t.Errorf("Open(%q) = %v", ok, err)
		} else {
			f.Close()
		}
		if CheckRel(ok) == nil && ok != "projects/-home-u-src-ok/s3.jsonl" {
			t.Errorf("package CheckRel(%q) = nil: it knows no slug dirs", ok)
		}
	}
	for _, bad := range []string{
		"projects/-home-u-src-oauth-server/token.txt",
		"projects/-home-u-src-oauth-server/oauth-sub/x.jsonl",
		"other/-home-u-src-oauth-server/s4.jsonl",
		"projects/.env.local/x",
		"projects/agent.db/x",
		"projects/-home-u-src-oauth-server/s1.jsonl/..",
		"projects/x-secret-y",
		"projects/auth.json",
	} {
		if _, err := r.Stat(bad); err == nil {
			t.Errorf("Stat(%q) served", bad)
		}
	}
	if f, err := r.Open("projects/x-secret-y"); err == nil {
		f.Close()
		t.Errorf("Open of a file at a slug position under a shape name succeeded")
	}
	ents, err := r.ReadDir("projects")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(ents), []string{"-home-u-src-oauth-server", "-home-u-src-ok", "-home-u-src-secret-sauce"}; !slices.Equal(got, want) {
		t.Errorf("ReadDir(projects) = %v, want %v", got, want)
	}
	ents, err = r.ReadDir("projects/-home-u-src-oauth-server")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(ents), []string{"s1.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("ReadDir(slug) = %v, want %v", got, want)
	}
	ents, err = r.ReadDir("other")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("ReadDir(other) = %v: not a slug dir", names(ents))
	}
}
