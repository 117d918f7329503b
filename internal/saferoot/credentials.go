package saferoot

import (
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/9harness/9harness/internal/errs"
)

// The credential table: every name 9harness never lists or resolves, at any
// depth, in any root, for any peer. A name is matched after folding (see
// fold in names.go: ASCII case, and the Unicode spellings a casefolding
// directory takes for the same name), so every rule is case-insensitive.
//
// A pattern is a name with at most two '*', each matching any run of bytes:
//
//	"name"    exact: the name itself, or a backup or editor copy of it
//	"pre*"    prefix
//	"*suf"    suffix (also of a backup or editor copy)
//	"pre*suf" prefix and suffix
//	"*part*"  a generic shape: part anywhere in the name
//
// Backup and editor copies: a name is also matched with these taken off its
// end, repeatedly: trailing dots and spaces, "~", ".bak", ".old", ".orig",
// ".tmp", ".swp" ".swo" ".swx" (vim, which also puts a '.' in front:
// ".auth.json.swp"), SQLite's "-wal", "-shm" and "-journal", and emacs's
// "#...#" around it. So "x.key~", "server.pem.bak", ".netrc.bak",
// "agent.db-wal" and "#mcp.json#" are all hidden.
//
// Working-directory slugs. The directories a harness names after a working
// directory (Claude's projects/-home-u-src-oauth-server, pi's and omp's
// agent/sessions/--home-u-src-secret-sauce--, dsh's sessions/--...--) are
// where an agent's transcripts live, and "oauth" or "secret" in a project's
// path is no credential. A Root told where those directories are
// (SetSlugDirs) judges a directory in that position by every rule except the
// generic shapes (exact names, prefixes and suffixes still apply); a file in
// that position, and everything inside a slug, by the whole table.
//
// Over-exclusion is the price of never guessing wrong: "author-notes" is
// hidden by "*auth*", "passwords-policy.md" by "*passw*".
var credentialRules = []struct {
	pattern string
	from    string // the harness or ecosystem whose store the rule catches
}{
	// Generic shapes: substrings anywhere in the name.
	{"*credentials*", "Claude Code ~/.claude/.credentials.json (OAuth); cloud CLIs' credentials files"},
	{"*token*", "token caches: token.json, .token, tokens.db; gemini mcp-oauth-tokens.json"},
	{"*auth*", "Codex auth.json, pi agent/auth.json, opencode auth.json/mcp-auth.json, Cursor auth.json, oauth stores"},
	{"*secret*", "secrets.json, client_secret*.json, .secrets; amp secrets.json"},
	{"*creds*", "hermes whatsapp/session/creds.json (Baileys), Gemini CLI oauth_creds.json, creds.json"},
	{"*passw*", "passwords.txt, .htpasswd, password stores"},
	{"*api_key*", "api_key files"},
	{"*apikey*", "apikey.txt"},

	// Suffixes: key material whatever the name.
	{"*.key", "private keys; Claude Code ~/.claude/sessions/<pid>.<hash>.key peer tokens"},
	{"*.pem", "PEM certificates and private keys"},
	{"*.p12", "PKCS#12 bundles"},
	{"*.pfx", "PKCS#12 bundles"},
	{"*.ppk", "PuTTY private keys"},
	{"*.env", "dotenv files (prod.env); aider ~/.aider/oauth-keys.env"},

	// Prefixes.
	{".env*", "the dotenv family: .env.local .env.production .envrc (direnv) .env~"},
	{"id_rsa*", "ssh private keys and their .pub twins"},
	{"id_dsa*", "ssh private keys"},
	{"id_ecdsa*", "ssh private keys (and id_ecdsa_sk)"},
	{"id_ed25519*", "ssh private keys (and id_ed25519_sk)"},
	{"kubeconfig*", "Kubernetes kubeconfig files"},
	{"app-state-sync-key-*", "hermes whatsapp/session (Baileys): app state sync keys"},
	{"pre-key-*", "hermes whatsapp/session (Baileys): Signal pre-keys"},
	{"sender-key-*", "hermes whatsapp/session (Baileys): Signal sender keys"},
	{"opencode*.db", "opencode ~/.local/share/opencode/opencode*.db: access and refresh tokens"},

	// Exact names: the harnesses' own stores and config files.
	{"settings.json", "Claude Code, Gemini CLI (may hold API keys, MCP env)"},
	{"settings.local.json", "Claude Code"},
	{"settings.yaml", "harness settings"},
	{"config.toml", "Codex (MCP env)"},
	{"config.yml", "omp, hermes, dsh"},
	{"config.yaml", "omp, hermes, dsh"},
	{"models.yml", "omp provider definitions with keys"},
	{"models.yaml", "omp provider definitions with keys"},
	{"models.json", "pi ~/.pi/agent/models.json: custom providers with apiKey"},
	{"agent.db", "omp ~/.omp/agent/agent.db: auth_credentials table"},
	{"auth.json", "Codex ~/.codex/auth.json, pi ~/.pi/agent/auth.json, opencode, Cursor"},
	{".credentials.json", "Claude Code ~/.claude/.credentials.json"},
	{"mcp-auth.json", "opencode ~/.local/share/opencode/mcp-auth.json"},
	{"secrets.json", "amp ~/.local/share/amp/secrets.json"},
	{"mcp-oauth-tokens.json", "Gemini CLI"},
	{"a2a-oauth-tokens.json", "Gemini CLI"},
	{"gemini-credentials.json", "Gemini CLI (keychain fallback file)"},
	{".claude.json", "Claude Code ~/.claude.json: oauthAccount, MCP env"},
	{"oauth_creds.json", "Gemini CLI ~/.gemini/oauth_creds.json"},
	{"google_accounts.json", "Gemini CLI ~/.gemini/google_accounts.json: account identity"},
	{"installation_id", "Gemini CLI, Codex: installation identity"},
	{"account.json", "opencode ~/.local/share/opencode/account.json"},
	{"service.json", "opencode ~/.local/state/opencode/service.json: server password"},
	{"cli-config.json", "Cursor ~/.cursor/cli-config.json: authInfo"},
	{"store.db", "Cursor ~/.cursor/chats/*/*/store.db: blobEncryptionKey"},
	{"statsig-cache.json", "Cursor: account identity"},
	{".aider.conf.yml", "aider: API keys"},
	{"mcp.json", "MCP server definitions (env blocks with keys)"},
	{".mcp.json", "MCP server definitions (env blocks with keys)"},
	{"keys.json", "key stores"},
	{"hosts.yml", "gh ~/.config/gh/hosts.yml: oauth_token"},

	// Exact names: the classic homes of secrets. A directory's rule hides
	// its whole subtree (every component of a path is judged).
	{".ssh", "ssh"},
	{".gnupg", "GnuPG"},
	{".aws", "AWS CLI credentials and config"},
	{".kube", "Kubernetes"},
	{".docker", "Docker config.json auths"},
	{".netrc", "netrc (curl, git, ftp)"},
	{"_netrc", "netrc, Windows spelling"},
	{".npmrc", "npm registry tokens"},
	{".pypirc", "PyPI upload tokens"},
	{".pgpass", "PostgreSQL passwords"},
	{".htpasswd", "Apache password files"},
	{".boto", "boto / gsutil credentials"},
	{".s3cfg", "s3cmd credentials"},
	{".dockercfg", "Docker's legacy auth file"},
	{"api_key", "api_key files"},
	{"apikey.txt", "apikey files"},
	{"passwords.txt", "password lists"},
	{"creds.json", "credential stores"},
}

// ruleKind is how a pattern matches, decided once from its stars.
type ruleKind uint8

const (
	kindExact ruleKind = iota
	kindPrefix
	kindSuffix
	kindBoth
	kindShape // *part*: skipped at a working-directory slug
)

type compiled struct {
	kind     ruleKind
	pre, suf string
}

// rules is credentialRules compiled and shapes its generic shapes. The
// tables index them by a byte, so that a name costs a table load per byte
// and a comparison only with the rules that could match it: shapeAt maps
// a byte to the bit set of the shapes that start with it, byFirst a name's
// first byte to the exact, prefix and prefix-suffix rules starting with it,
// byLast its last byte to the suffix rules ending with it.
var rules, shapes, shapeAt, byFirst, byLast = compile()

func compile() ([]compiled, []string, [256]uint32, [256][]uint8, [256][]uint8) {
	var out []compiled
	var at [256]uint32
	var first, last [256][]uint8
	var shapes []string
	for _, r := range credentialRules {
		p := r.pattern
		var c compiled
		switch {
		case len(p) > 2 && p[0] == '*' && p[len(p)-1] == '*':
			c = compiled{kind: kindShape, pre: p[1 : len(p)-1]}
			at[c.pre[0]] |= 1 << len(shapes)
			shapes = append(shapes, c.pre)
		case p[0] == '*':
			c = compiled{kind: kindSuffix, suf: p[1:]}
		case p[len(p)-1] == '*':
			c = compiled{kind: kindPrefix, pre: p[:len(p)-1]}
		default:
			if i := indexStar(p); i >= 0 {
				c = compiled{kind: kindBoth, pre: p[:i], suf: p[i+1:]}
			} else {
				c = compiled{kind: kindExact, pre: p}
			}
		}
		if indexStar(c.pre) >= 0 || indexStar(c.suf) >= 0 || len(shapes) > 32 || len(out) > 255 ||
			(c.kind != kindSuffix && c.pre == "") || (c.kind == kindSuffix && c.suf == "") {
			panic("saferoot: bad credential pattern " + p)
		}
		switch c.kind {
		case kindExact, kindPrefix, kindBoth:
			first[c.pre[0]] = append(first[c.pre[0]], uint8(len(out)))
		case kindSuffix:
			last[c.suf[len(c.suf)-1]] = append(last[c.suf[len(c.suf)-1]], uint8(len(out)))
		}
		out = append(out, c)
	}
	return out, shapes, at, first, last
}

func indexStar(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' {
			return i
		}
	}
	return -1
}

// decorations are what backup files and editors append to a name.
var decorations = [...]string{"~", ".bak", ".old", ".orig", ".tmp", ".swp", ".swo", ".swx", "-wal", "-shm", "-journal"}

// decoEnd says which bytes a decorated name can end with.
var decoEnd = func() (t [256]bool) {
	for _, d := range decorations {
		t[d[len(d)-1]] = true
	}
	t['.'], t[' '], t['#'] = true, true, true
	return t
}()

// undecorate returns f without its backup and editor decorations (see the
// table's comment), and whether a vim swap suffix was among them.
func undecorate(f []byte) (core []byte, swap bool) {
	if len(f) == 0 || !decoEnd[f[len(f)-1]] {
		return f, false
	}
	for range 16 {
		n := len(f)
		for len(f) > 0 && (f[len(f)-1] == '.' || f[len(f)-1] == ' ') {
			f = f[:len(f)-1]
		}
		for _, d := range decorations {
			if len(f) > len(d) && string(f[len(f)-len(d):]) == d {
				f = f[:len(f)-len(d)]
				swap = swap || d == ".swp" || d == ".swo" || d == ".swx"
				break
			}
		}
		if len(f) > 2 && f[0] == '#' && f[len(f)-1] == '#' {
			f = f[1 : len(f)-1]
		}
		if len(f) == n {
			break
		}
	}
	return f, swap
}

// credential reports whether the folded name f is in the table. At a slug
// position the generic shapes are not applied.
func credential(f []byte, slug bool) bool {
	if !slug {
		for i, c := range f {
			for set := shapeAt[c]; set != 0; set &= set - 1 {
				p := shapes[bits.TrailingZeros32(set)]
				if len(f)-i >= len(p) && string(f[i:i+len(p)]) == p {
					return true
				}
			}
		}
	}
	core, swap := undecorate(f)
	if matchFixed(f) || len(core) != len(f) && matchFixed(core) {
		return true
	}
	// vim names the swap file of "name" ".name.swp" (and of that,
	// "..name.swp.swp"): once a swap suffix is seen, leading dots are
	// taken off one by one, what is left undecorated again.
	for swap && len(core) > 1 && core[0] == '.' {
		if core, _ = undecorate(core[1:]); matchFixed(core) {
			return true
		}
	}
	return false
}

// matchFixed matches the exact, prefix and suffix rules.
func matchFixed(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	for _, i := range byFirst[f[0]] {
		r := &rules[i]
		switch r.kind {
		case kindExact:
			if string(f) == r.pre {
				return true
			}
		case kindPrefix:
			if len(f) >= len(r.pre) && string(f[:len(r.pre)]) == r.pre {
				return true
			}
		case kindBoth:
			if len(f) >= len(r.pre)+len(r.suf) && string(f[:len(r.pre)]) == r.pre && string(f[len(f)-len(r.suf):]) == r.suf {
				return true
			}
		}
	}
	for _, i := range byLast[f[len(f)-1]] {
		if r := &rules[i]; len(f) >= len(r.suf) && string(f[len(f)-len(r.suf):]) == r.suf {
			return true
		}
	}
	return false
}

// slugDirs is the set of a Root's directories whose entries are
// working-directory slugs, as rel paths ("projects", "agent/sessions").
type slugDirs = atomic.Pointer[[]string]

// SetSlugDirs tells r which of its directories (rel paths, "" for the root
// itself) name their entries after working directories: an entry there is
// judged without the generic shapes of the credential table, so a project
// in ~/src/oauth-server keeps its transcripts. Everything inside such an
// entry, and every other component, is judged by the whole table. It is
// safe to call while r is in use; the last call wins.
func (r *Root) SetSlugDirs(dirs ...string) {
	d := append([]string(nil), dirs...)
	r.slugs.Store(&d)
}

// atSlug reports whether the entries of the directory rel are slugs.
func (r *Root) atSlug(rel string) bool {
	if r == nil {
		return false
	}
	p := r.slugs.Load()
	if p == nil {
		return false
	}
	for _, d := range *p {
		if d == rel {
			return true
		}
	}
	return false
}

// CheckRel is the package's CheckRel for a path beneath r: the same, except
// that a component in one of r's slug directories is judged as a slug.
func (r *Root) CheckRel(rel string) error { return r.checkRel("saferoot.CheckRel", rel) }

func (r *Root) checkRel(op, rel string) error {
	if r.storeLeaf(rel) {
		return nil // a Store view's own store (store.go)
	}
	return checkRelAt(op, rel, r.atSlug)
}

// A slug is a directory: a file in a slug directory is judged by the whole
// table. checkRelFile is checkRel for a path whose last component must be a
// regular file (Open), and slugDirOnly refuses a Stat that found a file
// under a name only a slug may have.
func (r *Root) checkRelFile(op, rel string) error {
	if err := r.checkRel(op, rel); err != nil {
		return err
	}
	if r.relaxedLeaf(rel) {
		return errs.E(op, errs.Private, rel, nil)
	}
	return nil
}

func (r *Root) slugDirOnly(op, rel string) func(Info, error) (Info, error) {
	return func(info Info, err error) (Info, error) {
		if err == nil && !info.Dir && r.relaxedLeaf(rel) {
			return Info{}, errs.E(op, errs.Private, rel, nil)
		}
		return info, err
	}
}

// relaxedLeaf reports whether the last component of rel is at a slug
// position under a name the whole table excludes.
func (r *Root) relaxedLeaf(rel string) bool {
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	return r.atSlug(dir) && excluded(name, false)
}
