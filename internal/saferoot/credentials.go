package saferoot

import (
	"bytes"
	"math/bits"
	"slices"
	"strings"
	"sync"
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
// The rules are written by kind of secret, not by file found: a kind's
// every spelling (all ssh key types, every keystore format, every
// terraform state) is one rule, so the next file of a known kind is hidden
// before anyone meets it.
//
// Backup and editor copies: a name is also matched with these taken off its
// end, one after another, each stage matched again: trailing dots and
// spaces; "~"; ".bak", ".old", ".orig", ".backup", ".save"; a numeric
// suffix (".1", logrotate's and write-file-atomic's ".12345"); emacs's
// numbered ".~N~" and its "#...#" around a name (and ".#" before one);
// ".tmp", and a temporary copy's ".tmp.<anything>" or ".tmp-<anything>"
// (and the ".<id>" a ".tmp" follows); vim's swap ".swp" ".swo" ".swx" and
// undo ".un~", which also put a '.' in front (".auth.json.swp",
// ".settings.json.un~"); SQLite's "-wal", "-shm" and "-journal". So
// "x.key~", "server.pem.bak", ".netrc.1", "config.toml.tmp.12345",
// "agent.db-wal" and "#mcp.json#" are all hidden.
//
// Each rule is of a class. A store rule names a credential store itself: a
// harness's own ("auth.json", "agent.db") or a classic home of secrets
// (".ssh", ".aws"); a name rule a credential-shaped name of any origin
// ("*.pem", "id_rsa*", "key"); a shape a substring ("*token*").
//
// Working-directory slugs. The directories a harness names after a working
// directory (Claude's projects/-home-u-src-oauth-server, Gemini's
// tmp/kubeconfig-gen, pi's and omp's agent/sessions/-src-certs.pem, dsh's
// sessions/--...--) are where an agent's transcripts live, and a project's
// path is no credential, whatever its shape. A Root told where those
// directories are (SetSlugDirs) judges a directory in that position by the
// store rules alone: never by a name rule or a shape. A file in that
// position, and everything inside a slug, is judged by the whole table.
//
// Over-exclusion is the price of never guessing wrong: "author-notes" is
// hidden by "*auth*", "passwords-policy.md" by "*passw*", a skill's
// "release.asc" by "*.asc".
var credentialRules = append(classed(false, nameRules), classed(true, storeRules)...)

// Rule is one rule of the credential table as a caller declares it: a
// pattern (the syntax above) and where the secret comes from.
type Rule struct{ Pattern, From string }

// AddStoreRules joins rules to the credential table as store rules: the
// harnesses declare their own stores this way, so the table knows them
// without knowing any harness. A pattern already in the table as a store
// rule is not added again (its From grows). It is for package
// initialization: the table is compiled at its first use, and a rule
// added after that panics rather than be missing from it.
func AddStoreRules(add ...Rule) {
	if compiledAt.Load() {
		panic("saferoot: AddStoreRules after the credential table was first used")
	}
	for _, r := range add {
		if i := slices.IndexFunc(credentialRules, func(c credentialRule) bool { return c.store && c.pattern == r.Pattern }); i >= 0 {
			credentialRules[i].from += "; " + r.From
			continue
		}
		credentialRules = append(credentialRules, credentialRule{r.Pattern, r.From, true})
	}
}

type credentialRule struct {
	pattern string
	from    string // the harness or ecosystem whose secret the rule catches
	store   bool   // a credential store itself: applied at a slug position too
}

type ruleDoc struct{ pattern, from string }

func classed(store bool, docs []ruleDoc) []credentialRule {
	out := make([]credentialRule, len(docs))
	for i, d := range docs {
		out[i] = credentialRule{d.pattern, d.from, store}
	}
	return out
}

// nameRules are the shapes and the credential-shaped names.
var nameRules = []ruleDoc{
	// Generic shapes: substrings anywhere in the name.
	{"*credential*", "OAuth credentials files (.credentials.json); cloud CLIs' credentials files; git's credential store"},
	{"*token*", "token caches: token.json, .token, tokens.db, mcp-oauth-tokens.json"},
	{"*auth*", "auth.json and mcp-auth.json of many CLIs, oauth stores"},
	{"*secret*", "secrets.json, client_secret*.json, .secrets; amp secrets.json"},
	{"*creds*", "creds.json (Baileys), oauth_creds.json"},
	{"*passw*", "passwords.txt, .htpasswd, password stores"},
	{"*api_key*", "api_key files"},
	{"*apikey*", "apikey.txt"},

	// Private keys and key containers, by format.
	{"*.key", "private keys; peer tokens (sessions/<pid>.<hash>.key)"},
	{"*.pem", "PEM certificates and private keys"},
	{"*.p12", "PKCS#12 bundles"},
	{"*.pfx", "PKCS#12 bundles"},
	{"*.p8", "PKCS#8 private keys (Apple and App Store Connect keys)"},
	{"*.ppk", "PuTTY private keys"},
	{"*.jks", "Java keystores"},
	{"*.jceks", "Java keystores (JCEKS)"},
	{"*.bks", "BouncyCastle keystores"},
	{"*.keystore", "Java and Android keystores: release.keystore, debug.keystore"},
	{"*.kdbx", "KeePass databases"},
	{"*.kdb", "KeePass 1 databases"},
	{"*.keychain", "macOS keychains"},
	{"*.keychain-db", "macOS keychains"},
	{"*.ovpn", "OpenVPN profiles with their embedded keys"},
	{"*.asc", "ASCII-armoured OpenPGP keys: private.asc, secret-key.asc"},
	{"*.gpg", "OpenPGP keyrings (secring.gpg) and encrypted files (pass's store)"},
	{"secring*", "GnuPG 1 private keyring: secring.gpg, secring.skr"},
	{"private-keys-v1.d", "GnuPG 2 private keys"},
	{"private_key*", "private_key.json, private_key.pem"},
	{"private-key*", "private-key.json, private-key.pem"},
	{"privkey*", "privkey.pem (certbot), privkey.asc"},
	{"key", "a key under no other name"},

	// Cloud service-account keys.
	{"*-key.json", "GCP and other JSON keys: service-account-key.json, gcp-key.json, sa-key.json, signing-key.json"},
	{"*_key.json", "JSON keys: private_key.json, sa_key.json"},
	{"*.key.json", "JSON keys: deploy.key.json"},
	{"service-account*", "GCP service-account keys: service-account.json"},
	{"service_account*", "GCP service-account keys: service_account.json"},

	// ssh: every key type's default name, the security-key forms, host keys.
	{"id_rsa*", "ssh private keys and their .pub twins"},
	{"id_dsa*", "ssh private keys"},
	{"id_ecdsa*", "ssh private keys (and id_ecdsa_sk)"},
	{"id_ed25519*", "ssh private keys (and id_ed25519_sk)"},
	{"id_xmss*", "ssh private keys (XMSS)"},
	{"id_*_sk", "ssh FIDO security-key handles of any type"},
	{"ssh_host_*", "sshd host keys: ssh_host_rsa_key, ssh_host_ed25519_key"},

	// Dotfiles that hold passwords or registry tokens.
	{"*.env", "dotenv files (prod.env); aider ~/.aider/oauth-keys.env"},
	{".env*", "the dotenv family: .env.local .env.production .envrc (direnv) .env~"},
	{"kubeconfig*", "Kubernetes kubeconfig files"},
	{".netrc", "netrc (curl, git, ftp)"},
	{"_netrc", "netrc, Windows spelling"},
	{".npmrc", "npm registry tokens"},
	{".yarnrc", "yarn 1 registry tokens"},
	{".yarnrc.yml", "yarn 2+ npmAuthToken"},
	{".pypirc", "PyPI upload tokens"},
	{".pgpass", "PostgreSQL passwords"},
	{".my.cnf", "MySQL client passwords"},
	{".mylogin.cnf", "MySQL login paths (obfuscated passwords)"},
	{".htpasswd", "Apache password files"},
	{".boto", "boto / gsutil credentials"},
	{".s3cfg", "s3cmd credentials"},
	{".dockercfg", "Docker's legacy auth file"},
	{"hosts.yml", "gh ~/.config/gh/hosts.yml: oauth_token"},
	{".terraformrc", "Terraform CLI: registry tokens"},
	{"terraform.rc", "Terraform CLI (Windows name)"},
	{"*.tfstate", "Terraform state: every resource's secrets in clear (terraform.tfstate, .backup)"},
	{"*.tfvars", "Terraform variables: terraform.tfvars, prod.auto.tfvars"},
	{"*.tfvars.json", "Terraform variables in JSON"},
	{".terraform", "Terraform's working directory: backend configuration and its credentials"},
	{"api_key", "api_key files"},
	{"apikey.txt", "apikey files"},
	{"passwords.txt", "password lists"},
	{"keys.json", "key stores"},
	{"mcp.json", "MCP server definitions (env blocks with keys)"},
	{".mcp.json", "MCP server definitions (env blocks with keys)"},
}

// storeRules are the credential stores themselves, by name: the classic
// homes of secrets and the harnesses' own stores and config files.
var storeRules = []ruleDoc{
	// The classic homes of secrets. A directory's rule hides its whole
	// subtree (every component of a path is judged).
	{".ssh", "ssh"},
	{".gnupg", "GnuPG"},
	{".password-store", "pass"},
	{".aws", "AWS CLI credentials and config"},
	{".kube", "Kubernetes"},
	{".docker", "Docker config.json auths"},

	// Other tools' own stores and config files. The stores of the
	// harnesses 9harness serves are declared by each harness and joined
	// to this table (AddStoreRules).
	{"settings.yaml", "harness settings"},
	{"secrets.json", "amp ~/.local/share/amp/secrets.json"},
	{"auth.json", "Cursor and other CLIs' OAuth stores"},
	{"cli-config.json", "Cursor ~/.cursor/cli-config.json: authInfo"},
	{"store.db", "Cursor ~/.cursor/chats/*/*/store.db: blobEncryptionKey"},
	{"statsig-cache.json", "Cursor: account identity"},
	{".aider.conf.yml", "aider: API keys"},
}

// ruleKind is how a pattern matches, decided once from its stars.
type ruleKind uint8

const (
	kindExact ruleKind = iota
	kindPrefix
	kindSuffix
	kindBoth
	kindShape // *part*
)

type compiled struct {
	kind     ruleKind
	store    bool
	pre, suf string
}

// credTable is credentialRules compiled: rules, and shapes its generic
// shapes. The tables index them, so that a name costs a table load per
// byte and a comparison only with the rules that could match it: shapeAt
// maps a byte to the bit set of the shapes that start with it, exact an
// exact rule's name to whether a store rule names it, byFirst a name's
// first byte to the prefix and prefix-suffix rules starting with it,
// byLast its last byte to the suffix rules ending with it. exactFirst and
// exactMax say which names can be an exact rule's at all (its first byte,
// its length), so that most names cost no map lookup.
type credTable struct {
	rules           []compiled
	shapes          []string
	shapeAt         [256]uint32
	exact           map[string]bool
	byFirst, byLast [256][]uint8
	exactFirst      [256]bool
	exactMax        int
}

// table is the compiled table, made at its first use: after every
// package's initialization has added its rules (AddStoreRules), so that
// a process compiles it once, not once per harness.
var table = sync.OnceValue(compile)

// compiledAt says the table was made: a rule added after that would not
// be in it.
var compiledAt atomic.Bool

func compile() *credTable {
	compiledAt.Store(true)
	t := &credTable{exact: map[string]bool{}}
	for _, r := range credentialRules {
		p := r.pattern
		var c compiled
		switch {
		case len(p) > 2 && p[0] == '*' && p[len(p)-1] == '*':
			c = compiled{kind: kindShape, pre: p[1 : len(p)-1]}
			t.shapeAt[c.pre[0]] |= 1 << len(t.shapes)
			t.shapes = append(t.shapes, c.pre)
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
		c.store = r.store
		if indexStar(c.pre) >= 0 || indexStar(c.suf) >= 0 || len(t.shapes) > 32 || len(t.rules) > 255 ||
			(c.kind != kindSuffix && c.pre == "") || (c.kind == kindSuffix && c.suf == "") ||
			(c.kind == kindShape && c.store) || p != string(fold(nil, p)) {
			panic("saferoot: bad credential pattern " + p)
		}
		switch c.kind {
		case kindExact:
			t.exact[c.pre] = t.exact[c.pre] || c.store
		case kindPrefix, kindBoth:
			t.byFirst[c.pre[0]] = append(t.byFirst[c.pre[0]], uint8(len(t.rules)))
		case kindSuffix:
			t.byLast[c.suf[len(c.suf)-1]] = append(t.byLast[c.suf[len(c.suf)-1]], uint8(len(t.rules)))
		}
		t.rules = append(t.rules, c)
	}
	for k := range t.exact {
		t.exactFirst[k[0]], t.exactMax = true, max(t.exactMax, len(k))
	}
	return t
}

func indexStar(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' {
			return i
		}
	}
	return -1
}

// strip takes one backup or editor decoration (see the table's comment)
// off the folded name f. afterTmp says the last one taken was ".tmp", so
// that the id a temporary copy's name carries before it (name.<id>.tmp) is
// taken too. It reports the rest; vim, when the decoration was vim's
// (whose copy of "name" is ".name.swp"); tmp, when it was ".tmp"; and ok,
// whether anything was taken. It never returns an empty rest. It runs for
// every name listed, so it looks at the last byte before anything else.
func strip(f []byte, afterTmp bool) (rest []byte, vim, tmp, ok bool) {
	if len(f) < 2 {
		return f, false, false, false
	}
	if rest, vim, tmp, ok := stripEnding(f); ok {
		return rest, vim, tmp, true
	}
	if rest, ok := stripVarying(f, afterTmp); ok {
		return rest, false, false, true
	}
	return f, false, false, false
}

// stripEnding is strip of the decorations that are a fixed ending, told
// apart by the last byte of f (at least 2 bytes long).
func stripEnding(f []byte) (rest []byte, vim, tmp, ok bool) {
	n := len(f)
	has := func(suf string) bool { return n > len(suf) && string(f[n-len(suf):]) == suf }
	switch c := f[n-1]; c {
	case '.', ' ':
		i := n
		for i > 0 && (f[i-1] == '.' || f[i-1] == ' ') {
			i--
		}
		if i == 0 {
			return f, false, false, false // dots and spaces only: nor does stripVarying take any
		}
		return f[:i], false, false, true
	case '#':
		if f[0] == '#' && n > 2 {
			return f[1 : n-1], false, false, true
		}
	case '~':
		if has(".un~") {
			return f[:n-4], true, false, true
		}
		// emacs's numbered backups: name.~12~
		i := n - 1
		for i > 0 && isDigit(f[i-1]) {
			i--
		}
		if i < n-1 && i >= 3 && f[i-1] == '~' && f[i-2] == '.' {
			return f[:i-2], false, false, true
		}
		return f[:n-1], false, false, true
	case 'k':
		if has(".bak") {
			return f[:n-4], false, false, true
		}
	case 'd':
		if has(".old") {
			return f[:n-4], false, false, true
		}
	case 'e':
		if has(".save") {
			return f[:n-5], false, false, true
		}
	case 'g':
		if has(".orig") {
			return f[:n-5], false, false, true
		}
	case 'p':
		switch {
		case has(".tmp"):
			return f[:n-4], false, true, true
		case has(".swp"):
			return f[:n-4], true, false, true
		case has(".backup"):
			return f[:n-7], false, false, true
		}
	case 'o':
		if has(".swo") {
			return f[:n-4], true, false, true
		}
	case 'x':
		if has(".swx") {
			return f[:n-4], true, false, true
		}
	case 'l':
		switch {
		case has("-wal"):
			return f[:n-4], false, false, true
		case has("-journal"):
			return f[:n-8], false, false, true
		}
	case 'm':
		if has("-shm") {
			return f[:n-4], false, false, true
		}
	}
	return f, false, false, false
}

// stripVarying is strip of the decorations whose text varies: a number
// (or after ".tmp" an id), a temporary copy's tail, emacs's lock prefix.
func stripVarying(f []byte, afterTmp bool) ([]byte, bool) {
	n := len(f)
	// ".<digits>", or after ".tmp" any ".<id>".
	if c := f[n-1]; isDigit(c) || afterTmp && isIDByte(c) {
		i := n
		for i > 0 && (isDigit(f[i-1]) || afterTmp && isIDByte(f[i-1])) {
			i--
		}
		if i > 1 && f[i-1] == '.' {
			return f[:i-1], true
		}
	}
	// A temporary copy: name.tmp.<anything>, name.tmp-<anything>.
	if bytes.Contains(f[1:], tmpDot) {
		for i := n - 5; i > 0; i-- {
			if f[i] == '.' && string(f[i+1:i+4]) == "tmp" && (f[i+4] == '.' || f[i+4] == '-') {
				return f[:i], true
			}
		}
	}
	// emacs's lock file, .#name.
	if n > 2 && f[0] == '.' && f[1] == '#' {
		return f[2:], true
	}
	return f, false
}

var tmpDot = []byte(".tmp")

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIDByte(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' || c == '_' || c == '-' }

// credential reports whether the folded name f is in the table. At a slug
// position only the store rules apply.
func credential(f []byte, slug bool) bool {
	t := table()
	if !slug {
		for i, c := range f {
			for set := t.shapeAt[c]; set != 0; set &= set - 1 {
				p := t.shapes[bits.TrailingZeros32(set)]
				if len(f)-i >= len(p) && string(f[i:i+len(p)]) == p {
					return true
				}
			}
		}
	}
	return t.decorated(f, slug, 0)
}

// decorated matches f and each stage of its undecoration against the
// exact, prefix and suffix rules (only the store rules if storeOnly).
// Once a vim decoration is taken, the rest is also tried without its
// leading '.' (vim's ".name.swp"; "..name.swp.swp" of that), depth bounding
// the recursion.
func (t *credTable) decorated(f []byte, storeOnly bool, depth int) bool {
	afterTmp := false
	for range 32 {
		if t.matchFixed(f, storeOnly) {
			return true
		}
		rest, vim, tmp, ok := strip(f, afterTmp)
		if !ok {
			return false
		}
		if vim && depth < 4 && len(rest) > 1 && rest[0] == '.' && t.decorated(rest[1:], storeOnly, depth+1) {
			return true
		}
		f, afterTmp = rest, tmp
	}
	return false
}

// matchFixed matches the exact, prefix and suffix rules (only the store
// rules if storeOnly).
func (t *credTable) matchFixed(f []byte, storeOnly bool) bool {
	if len(f) == 0 {
		return false
	}
	if len(f) <= t.exactMax && t.exactFirst[f[0]] {
		if store, ok := t.exact[string(f)]; ok && (store || !storeOnly) {
			return true
		}
	}
	for _, i := range t.byFirst[f[0]] {
		r := &t.rules[i]
		if storeOnly && !r.store {
			continue
		}
		switch r.kind {
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
	for _, i := range t.byLast[f[len(f)-1]] {
		if r := &t.rules[i]; (!storeOnly || r.store) && len(f) >= len(r.suf) && string(f[len(f)-len(r.suf):]) == r.suf {
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
// judged by the store rules of the credential table alone, so a project
// in ~/src/oauth-server or ~/src/certs.pem keeps its transcripts.
// Everything inside such an entry, and every other component, is judged
// by the whole table. It is safe to call while r is in use; the last call
// wins.
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
	if err := checkRelAt(op, rel, r.atSlug); err != nil {
		return err
	}
	if r.inCopyStore(rel) {
		return errs.E(op, errs.Private, rel, nil)
	}
	return nil
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
