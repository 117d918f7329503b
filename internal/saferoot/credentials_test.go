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

// backupForms are the backup, temporary and editor copies of name the
// table must hide with it.
func backupForms(name string) []string {
	return []string{
		name + "~", name + ".bak", name + ".old", name + ".orig", name + ".swp",
		name + ".tmp", name + ".", name + " ", name + ". ", name + "-wal", name + "-shm",
		"#" + name + "#", name + ".bak~", strings.ToUpper(name) + ".BAK",
		"." + name + ".swp", "." + name + ".swo",
		name + ".1", name + ".12", name + ".backup", name + ".save", name + ".~1~", name + ".~12~",
		name + ".tmp.12345", name + ".tmp-x1y2z3", name + ".tmp.1234.5678", "." + name + ".un~",
		name + ".0a1b2c3d.tmp", name + ".backup.1733400000000", name + ".bak.2",
		".#" + name, strings.ToUpper(name) + ".SAVE",
	}
}

// TestCredentialRules: every rule of the table hides a name it describes,
// in any case; every exact and suffix rule hides its backup and editor
// copies; at a slug position only the store rules apply.
//
// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestCredentialRules(t *testing.T) {
	stores := 0
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
				for _, v := range backupForms(name) {
					if !Excluded(v) {
						t.Errorf("Excluded(%q) = false: a copy of %q", v, name)
					}
				}
			}
			// A slug: a store's name is still a store; any other name,
			// and a project's path holding the rule, is a project.
			if got := ExcludedSlug(name); got != r.store {
				t.Errorf("ExcludedSlug(%q) = %v, want %v (store rule: %v)", name, got, r.store, r.store)
			}
			if !r.store {
				slug := "-home-u-src-" + strings.Trim(name, "*") + "-server"
				if ExcludedSlug(slug) {
					t.Errorf("ExcludedSlug(%q) = true: a project's path is no credential", slug)
				}
			}
		})
		if r.store {
			stores++
		}
	}
	if stores == 0 || stores == len(credentialRules) {
		t.Errorf("%d store rules of %d", stores, len(credentialRules))
	}
}

// kindNames are names of every kind the table covers, each also hidden in
// every backup form: the cloud, ssh, gpg, keystore, terraform, database
// and package-manager secrets, and the harnesses' own stores.
var kindNames = []string{
	// GCP and other JSON keys
	"service-account.json", "service-account-key.json", "gcp-key.json", "sa-key.json",
	"private_key.json", "signing-key.json", "service_account.json", "deploy.key.json", "sa_key.json",
	// ssh: every key type, security keys, host keys
	"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_xmss", "id_ecdsa_sk", "id_ed25519_sk",
	"id_foo_sk", "ssh_host_rsa_key", "ssh_host_ed25519_key", "ssh_host_ecdsa_key.pub",
	// gpg
	"secring.gpg", "private.asc", "secret-key.asc", "pubring.gpg", "private-keys-v1.d", "privkey.pem",
	// keystores
	"keystore.jks", "release.keystore", "debug.keystore", "vault.kdbx", "keys.kdb", "login.keychain-db",
	"truststore.jceks", "AuthKey_ABC123.p8", "client.ovpn",
	// terraform
	"terraform.tfstate", "terraform.tfstate.backup", "terraform.tfvars", "prod.auto.tfvars",
	"vars.tfvars.json", ".terraformrc", "terraform.rc", ".terraform",
	// databases, package managers
	".my.cnf", ".mylogin.cnf", ".yarnrc.yml", ".yarnrc", ".pgpass", ".npmrc", ".pypirc",
	// bare names
	"credential", "key", "credentials", ".git-credentials",
	// the ones backups were found of
	"settings.json", "tls.key", "server.pem", ".netrc", "hosts.yml", "config.toml",
}

// TestCredentialKinds: each name of every kind, and each of its backup
// forms, is hidden, in any case.
//
// Guards rule 2: no credential listed or read.
func TestCredentialKinds(t *testing.T) {
	for _, n := range kindNames {
		for _, v := range append([]string{n, strings.ToUpper(n)}, backupForms(n)...) {
			if !Excluded(v) {
				t.Errorf("Excluded(%q) = false (a form of %q)", v, n)
			}
		}
	}
}

// projectSlugs are directories harnesses name after working directories
// whose names hold a rule's prefix, suffix or shape: each is a project,
// and served.
var projectSlugs = []string{
	"kubeconfig-gen", "id_rsa-parser", ".envoy-config", "certs.pem", "-src-certs.pem",
	"oauth-server", "secret-santa", "authz-proxy", "password-reset", "credentials-ui", "apikey-rotator",
	"-home-u-src-kubeconfig-gen", "--home-u-src-id_rsa-parser--", "terraform.tfstate-viewer", "my.keystore",
	"key", "credential", ".ssh-tools", "x.pem", "keys.kdbx", "tokenizer", "-home-u-src-private.asc",
}

// TestSlugNames: no project slug is hidden for its name at a slug
// position, and each is hidden anywhere else a rule catches it.
func TestSlugNames(t *testing.T) {
	for _, s := range projectSlugs {
		if ExcludedSlug(s) {
			t.Errorf("ExcludedSlug(%q) = true: a directory named after a working directory", s)
		}
	}
	for _, s := range []string{"auth.json", "agent.db", ".credentials.json", "opencode.db", "settings.json.bak"} {
		if !ExcludedSlug(s) {
			t.Errorf("ExcludedSlug(%q) = false: a harness's store is a store anywhere", s)
		}
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
		"keys", "monkey.txt", "a.keys", "store.dbx", "mystore.db", "opencode.json",
		"config.json", "environment", "x.envelope", "kube", "aws", "docker", "netrc",
		"models.jsonl", "account.jsonl", "agent.dbg", "pre-keys.md", "mcp.jsonl", "session-1.json",
		"rollout-2026-01-01T00-00-00-0195.jsonl", "2026-09-20T10-00-00-000Z_0199a1b2.jsonl",
		"#notes#", "notes.bak", "a~", "~", ".bak", "#", "notes.1", "session.jsonl.tmp.12345",
		".history.jsonl.swp", "state.db-wal", "monkey.json", "keyboard.md", "ssh-notes", "id_map",
		"asc", "gpg", "tfstate", "my.cnf.md", "jks", "yarnrc", "service.md", "1", ".1", "..", "a.~1~",
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
		"projects/kubeconfig-gen/x",
		"projects/certs.pem/x",
		"projects/agent.db/x",
		"projects/x-secret-y", // a file where slugs are: not a slug
		"projects/x.pem",      // likewise
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
		"projects/.env.local/x",
		"projects/kubeconfig-gen/x",
		"projects/certs.pem/x",
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
		"projects/agent.db/x",
		"projects/x.pem",
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
	if got, want := names(ents), []string{"-home-u-src-oauth-server", "-home-u-src-ok", "-home-u-src-secret-sauce", ".env.local", "certs.pem", "kubeconfig-gen"}; !slices.Equal(got, want) {
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

// TestSlugDirsServed: every project slug, in a slug directory, is listed,
// stat'ed and walked into, and its transcript opens; a file of the same
// name beside it, and a credential inside it, are not.
func TestSlugDirsServed(t *testing.T) {
	base := t.TempDir()
	for _, s := range projectSlugs {
		write(t, filepath.Join(base, "tmp", s, "chats", "session-1.json"), "{}")
		write(t, filepath.Join(base, "tmp", s, "tls.key"), "secret")
	}
	r := New(base)
	r.SetSlugDirs("tmp")
	ents, err := r.ReadDir("tmp")
	if err != nil {
		t.Fatal(err)
	}
	listed := names(ents)
	for _, s := range projectSlugs {
		if !slices.Contains(listed, s) {
			t.Errorf("ReadDir(tmp) does not list %q", s)
		}
		p := "tmp/" + s + "/chats/session-1.json"
		if f, err := r.Open(p); err != nil {
			t.Errorf("Open(%q) = %v", p, err)
		} else {
			f.Close()
		}
		if _, err := r.Stat("tmp/" + s + "/tls.key"); !errs.Is(err, errs.Private) {
			t.Errorf("Stat of a key inside slug %q = %v, want Private", s, err)
		}
	}
}

// TestAddStoreRulesAfterUse: the table is compiled at its first use; a
// rule added after that would be missing from it, so AddStoreRules
// panics and adds nothing.
func TestAddStoreRulesAfterUse(t *testing.T) {
	table()
	n := len(credentialRules)
	defer func() {
		if recover() == nil {
			t.Error("AddStoreRules after the table's first use did not panic")
		}
		if len(credentialRules) != n || table().exact["late-store.json"] {
			t.Error("the late rule was added")
		}
	}()
	AddStoreRules(Rule{"late-store.json", "a test"})
}
