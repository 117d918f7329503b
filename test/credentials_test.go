package test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/saferoot"
)

// Guards rule 2: the credential table holds at every depth, in every
// root, for the owner and for a grantee, through 9P2000.L, 9P2000 and the
// FUSE mount; a grantee sees session state only.

// credentialFiles are the harnesses' real credential stores and the
// classic homes of secrets, by kind, and the backup forms the table strips.
// shape marks a name only a generic shape (*creds*, *secret*, ...) catches.
// A directory where a harness names directories after working directories
// is judged by the harnesses' store rules alone (a slug is a project), so
// a name no store rule catches is planted as a file there (a file is never
// a slug).
var credentialFiles = []struct {
	name  string
	shape bool
}{
	{"agent.db", false}, {"agent.db-wal", false}, {"agent.db-shm", false}, // omp
	{"models.json", false},                                                                       // pi
	{"creds.json", false}, {"app-state-sync-key-AAAAAQ.json", false}, {"pre-key-17.json", false}, // hermes whatsapp
	{"oauth_creds.json", false}, {"google_accounts.json", false}, // Gemini CLI
	{"auth.json", false}, {"account.json", false}, {"service.json", false}, // opencode
	{"opencode.db", false}, {"opencode-dev.db", false}, {"opencode.db-wal", false}, {"opencode.db-shm", false},
	{"cli-config.json", false}, {"store.db", false}, // Cursor
	{".credentials.json", false}, {"settings.json", false}, {"config.toml", false}, {"config.yml", false},
	{".env", false}, {".env.local", false}, {".env.production", false}, {".envrc", false}, {".env.bak", false},
	{".env~", false}, {".env.swp", false}, {".env ", false}, {".env.", false}, {"prod.env", false},
	{".netrc", false}, {".netrc.bak", false}, {"_netrc", false}, {".npmrc", false}, {".npmrc~", false},
	{".pypirc~", false}, {".pgpass.old", false}, {".htpasswd", false}, {".boto", false}, {".s3cfg", false},
	{".dockercfg", false}, {"kubeconfig", false}, {"hosts.yml", false}, {"putty.ppk", false},
	{"x.key", false}, {"x.key~", false}, {"x.key.bak", false}, {"server.pem.bak", false}, {"server.pem", false},
	{"mcp.json", false}, {".mcp.json", false}, {"keys.json", false}, {"api_key", false}, {"apikey.txt", false},
	{"passwords.txt", false}, {"id_ed25519", false}, {"id_rsa.pub", false},
	{".settings.json.swp", false}, {"#config.toml#", false}, {"hosts.yml.orig", false}, {"store.db.tmp", false},
	// by kind: cloud keys, ssh, gpg, keystores, terraform, databases,
	// package managers, bare names
	{"service-account.json", false}, {"service-account-key.json", false}, {"gcp-key.json", false},
	{"sa-key.json", false}, {"private_key.json", false}, {"signing-key.json", false},
	{"ssh_host_rsa_key", false}, {"id_xmss", false}, {"id_ed25519_sk", false},
	{"secring.gpg", false}, {"private.asc", false}, {"keystore.jks", false}, {"release.keystore", false},
	{"vault.kdbx", false}, {"terraform.tfstate", false}, {"terraform.tfvars", false}, {".terraformrc", false},
	{".my.cnf", false}, {".mylogin.cnf", false}, {".yarnrc.yml", false}, {"credential", false}, {"key", false},
	// generic shapes
	{"my-creds-backup", true}, {"db_password.txt", true}, {"OPENAI_API_KEY", true}, {"stripe-apikey", true},
	{"client_secret_1.json", true}, {"refresh-token", true}, {"oauth-state", true}, {"aws-credentials-old", true},
}

// credentialCopies are backup, temporary and editor copies of credential
// names, each a form the table strips. They are planted at every depth of
// every base like credentialFiles, but with no further variant: each is
// one already.
var credentialCopies = []string{
	"settings.json.1", "settings.json.backup", "settings.json.save", "settings.json.~1~",
	"settings.json.tmp.12345", ".settings.json.un~", "settings.json.tmp-a1b2", "tls.key.1",
	"tls.key.backup", "tls.key.save", "tls.key.~1~", "tls.key.tmp.12345", ".tls.key.un~",
	".tls.key.swp", "server.pem.1", "server.pem.backup", "server.pem.save", "server.pem.~1~",
	"server.pem.tmp.12345", ".server.pem.un~", ".netrc.1", ".netrc.backup", ".netrc.save",
	".netrc.~1~", ".netrc.tmp.12345", "..netrc.un~", ".netrc.tmp-a1b2", "hosts.yml.1",
	"hosts.yml.backup", "hosts.yml.save", "hosts.yml.~1~", "hosts.yml.tmp.12345", ".hosts.yml.un~",
	"config.toml.1", "config.toml.backup", "config.toml.save", "config.toml.~1~",
	"config.toml.tmp.12345", ".config.toml.un~", ".config.toml.swp", "config.toml.tmp-a1b2",
	"tls.key.tmp-a1b2", "server.pem.tmp-a1b2", "hosts.yml.tmp-a1b2", ".server.pem.swp", ".hosts.yml.swp",
}

// credentialDirs are hidden with their whole subtree.
var credentialDirs = []string{".kube", ".aws", ".docker", ".gnupg", ".ssh"}

// variants are the case and backup spellings each name is also planted
// under, one variant per depth so the fixture stays small.
func variants(name string) []string {
	up := strings.ToUpper(name)
	return []string{up, name + "~", name + ".bak", "#" + name + "#", name + ".", strings.ToUpper(name[:1]) + name[1:] + ".OLD", name + " ", "." + name + ".swp",
		name + ".1", name + ".backup", name + ".save", name + ".~1~", name + ".tmp.12345", "." + name + ".un~", name + ".tmp-a1b2"}
}

// credentialBases are the host directories planting starts from: in every
// root, a directory a grantee may see (so both views are probed at depth
// 8), and each root's own top at depth 0. slugParent marks a directory
// whose entries are working-directory slugs.
var credentialBases = []struct {
	dir        string
	slugParent bool
	depth      int // planted at depths 0..depth
}{
	{".claude/projects", true, maxDepth}, // d1 is a slug, d2.. inside it
	{".claude/skills", false, maxDepth},  // also /skills/claude
	{".codex/sessions", false, maxDepth},
	{".omp/agent/sessions/-src-app", false, maxDepth},
	{".pi/agent/sessions", true, maxDepth},
	{".hermes/sessions", false, maxDepth},
	{".dsh/sessions/--root-src-app--", false, maxDepth},
	{".gemini/tmp", true, maxDepth},
	{".local/share/opencode/storage/session", false, maxDepth},
	{".omp/agent", false, 0},
	{".pi/agent", false, 0},
	{".hermes", false, 0},
	{".dsh", false, 0},
}

const maxDepth = 8

// plantCredentials fills home with every credential name and directory at
// depths 0..8 under every base, plus an innocent "note-<depth>" file at each
// depth (the walk must reach it: the test has teeth). It returns the host
// paths of what must never be served.
func plantCredentials(t *testing.T, home string) []string {
	t.Helper()
	var planted []string
	put := func(p, content string) {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	for bi, b := range credentialBases {
		dir := filepath.Join(home, b.dir)
		for depth := 0; depth <= b.depth; depth++ {
			put(filepath.Join(dir, "note-"+strconv.Itoa(depth)), "innocent\n")
			for i, c := range credentialFiles {
				names := []string{c.name}
				v := variants(c.name)
				names = append(names, v[(i+depth+bi)%len(v)])
				for _, n := range names {
					p := filepath.Join(dir, n)
					if depth == 0 && b.slugParent && !saferoot.ExcludedSlug(n) {
						// A directory here is a slug, and served by design:
						// plant the shape as a file, which is not one.
						put(p, "NEVER-SERVED "+p+"\n")
					} else if depth%2 == 1 && !strings.HasSuffix(n, " ") {
						// Odd depths: the name as a directory, with a file in it.
						// (The inner file is not probed: the whole-subtree
						// rule is probed below, with credentialDirs.)
						put(filepath.Join(p, "inner"), "NEVER-SERVED "+p+"\n")
					} else {
						put(p, "NEVER-SERVED "+p+"\n")
					}
					planted = append(planted, p)
				}
			}
			for _, n := range credentialCopies {
				p := filepath.Join(dir, n)
				if depth%2 == 1 {
					put(filepath.Join(p, "inner"), "NEVER-SERVED "+p+"\n")
				} else {
					put(p, "NEVER-SERVED "+p+"\n")
				}
				planted = append(planted, p)
			}
			for _, d := range credentialDirs {
				for _, n := range []string{d, strings.ToUpper(d)} {
					p := filepath.Join(dir, n, "config")
					put(p, "NEVER-SERVED "+p+"\n")
					put(filepath.Join(dir, n, "sub", "x.json"), "NEVER-SERVED\n")
					planted = append(planted, filepath.Dir(p), p, filepath.Join(dir, n, "sub", "x.json"))
				}
			}
			dir = filepath.Join(dir, "d"+strconv.Itoa(depth+1))
		}
	}
	return planted
}

// credentialHome is a world-readable home with the fixtures and every
// credential planted, a socket directory the owner uid may use, and an
// empty process table both daemons can read.
func credentialHome(t *testing.T, plant bool) (home, run, procDir string, planted []string) {
	u := testUIDs(t)
	t.Helper()
	base, err := os.MkdirTemp("", "9harness-cred-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	home = filepath.Join(base, "home")
	if out, err := exec.Command("cp", "-a", "../testdata/home", home).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if plant {
		planted = plantCredentials(t, home)
	} else {
		must(t, os.MkdirAll(filepath.Join(home, ".claude/projects/-root-src-app/d1/d2"), 0o755))
		must(t, os.MkdirAll(filepath.Join(home, ".omp/agent/sessions/-src-app"), 0o755))
		for _, d := range append(credentialDirs, "secrets", "my-creds") {
			for _, at := range []string{".claude/projects/-root-src-app", ".claude/projects/-root-src-app/d1/d2", ".omp/agent/sessions/-src-app", ".hermes"} {
				must(t, os.MkdirAll(filepath.Join(home, at, d, "sub"), 0o755))
			}
		}
		must(t, os.WriteFile(filepath.Join(home, ".claude/projects/-root-src-app/note-0"), []byte("innocent\n"), 0o644))
	}
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	run = filepath.Join(base, "run")
	must(t, os.Mkdir(run, 0o711))
	must(t, os.Chmod(run, 0o711))
	must(t, os.Chown(run, u.owner, u.owner))
	procDir = filepath.Join(base, "proc")
	must(t, os.Mkdir(procDir, 0o755))
	must(t, os.WriteFile(filepath.Join(procDir, "stat"), []byte("btime 1790000000\n"), 0o644))
	return home, run, procDir, planted
}

// view is one way of reading the tree: a name, a walk of everything it
// serves (directories end in "/"), and probes of one tree path.
type view struct {
	name string
	walk func() []string
	stat func(p string) error
	read func(p string) ([]byte, error)
	done func() // nil, or what ends the view (an unmount)
}

// credentialViews are the six views of the matrix: the owner (this process,
// root, is the uid of daemon own) and a grantee (this process, granted by
// --allow-uid 0 on daemon granted, which runs as another uid), each through
// 9P2000.L, 9P2000 and FUSE. Each is opened by its function when its turn
// comes: a connection of another uid left idle while the others are probed
// would be closed by the daemon's idle bound.
func credentialViews(own, granted *daemon) []viewOpener {
	var vs []viewOpener
	for _, d := range []struct {
		who string
		d   *daemon
	}{{"owner", own}, {"grantee", granted}} {
		vs = append(vs, viewOpener{d.who + "/9P2000.L", func(t *testing.T) view {
			c, err := client.Dial(d.d.sock)
			if err != nil {
				t.Fatalf("dial %s: %v", d.d.sock, err)
			}
			t.Cleanup(func() { c.Close() })
			return view{
				walk: func() []string { return walk(t, c) },
				stat: func(p string) error { _, _, err := c.Stat(p); return err },
				read: c.ReadFile,
			}
		}}, viewOpener{d.who + "/9P2000", func(t *testing.T) view {
			fs9 := mount9(t, d.d.sock)
			return view{
				walk: func() []string { return walk9(t, fs9) },
				stat: func(p string) error { _, err := fs9.Stat(p); return err },
				read: func(p string) ([]byte, error) {
					f, err := fs9.Open(p, plan9.OREAD)
					if err != nil {
						return nil, err
					}
					defer f.Close()
					var out []byte
					buf := make([]byte, 8192)
					for {
						n, err := f.Read(buf)
						out = append(out, buf[:n]...)
						if err == io.EOF {
							return out, nil
						}
						if n == 0 || err != nil {
							return out, err
						}
					}
				},
			}
		}}, viewOpener{d.who + "/FUSE", func(t *testing.T) view {
			m := mountTree(t, d.d.sock)
			return view{
				walk: func() []string { return walkFuse(t, m.dir) },
				stat: func(p string) error { _, err := os.Lstat(m.path(p)); return err },
				read: func(p string) ([]byte, error) { return os.ReadFile(m.path(p)) },
				done: m.umount,
			}
		}})
	}
	return vs
}

// viewOpener names a view and opens it for the (sub)test t, on which its
// failures are reported and its cleanups run.
type viewOpener struct {
	name string
	open func(t *testing.T) view
}

// walkFuse lists a mounted tree as walk does.
func walkFuse(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if de.IsDir() && rel != "/" {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}

// startCredentialDaemons starts the owner's daemon (as root, this process's
// uid) and a daemon of the test's owner uid that grants uid 0, on the same home.
func startCredentialDaemons(t *testing.T, home, run, procDir string) (own, granted *daemon) {
	u := testUIDs(t)
	t.Helper()
	own = startDaemon(t, home, "--proc", procDir)
	granted = startAs(t, u.owner, home, filepath.Join(run, "harness.sock"), "--allow-uid", "0", "--proc", procDir)
	granted.waitReady()
	return own, granted
}

// TestCredentialMatrix: every credential name and directory (and their case
// and backup spellings) at depths 0..8 under every root: none is listed,
// stat'ed or read, by the owner or by a grantee, through 9P2000.L, 9P2000 or
// the FUSE mount.
//
// Guards rule 2: no credential is listed or read.
func TestCredentialMatrix(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	home, run, procDir, planted := credentialHome(t, true)
	own, granted := startCredentialDaemons(t, home, run, procDir)
	t.Logf("%d credential paths planted", len(planted))
	var probes []string
	for _, p := range planted {
		probes = append(probes, treeOf(home, p)...)
	}
	if len(probes) < 5000 {
		t.Fatalf("only %d tree paths to probe: the fixture lost its teeth", len(probes))
	}
	// The six views share nothing but the two daemons, which serve them at
	// once as they would six clients: each walks and probes in a subtest
	// of its own, side by side.
	for _, o := range credentialViews(own, granted) {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			v := o.open(t)
			v.name = o.name
			start := time.Now()
			served := v.walk()
			notes := 0
			for _, p := range served {
				for _, comp := range strings.Split(strings.Trim(p, "/"), "/") {
					if comp != "" && saferoot.Excluded(comp) && !isSlugComponent(p, comp) {
						t.Errorf("%s serves %q (component %q is in the credential table)", v.name, p, comp)
					}
				}
				if strings.Contains(p, "/note-") {
					notes++
					if b, err := v.read(p); err != nil || string(b) != "innocent\n" {
						t.Errorf("%s: read %s: %q %v", v.name, p, b, err)
					}
				}
			}
			// The owner reaches every depth of every mirrored base; the
			// grantee only those in its allowlist.
			wantNotes := 0
			for _, b := range credentialBases {
				for range b.depth + 1 {
					for _, tp := range treeOf(home, filepath.Join(home, b.dir, "x")) {
						if strings.HasPrefix(v.name, "owner") || granteeSees(tp) {
							wantNotes++
						}
					}
				}
			}
			if notes != wantNotes {
				t.Errorf("%s: %d innocent notes served, want %d", v.name, notes, wantNotes)
			}
			failed := probeAll(v, probes, func(format string, args ...any) { t.Errorf(format, args...) })
			if failed > 0 {
				t.Errorf("%s: %d probes served", v.name, failed)
			}
			t.Logf("%s: %d paths walked, %d notes read, %d planted paths probed in %v", v.name, len(served), notes, len(probes), time.Since(start).Round(time.Millisecond))
			if v.done != nil {
				v.done()
			}
		})
	}
}

// probeAll stats and reads every path (four at a time: each is a round
// trip) and reports each one served, the first 20 through errorf. It
// returns how many were.
func probeAll(v view, probes []string, errorf func(string, ...any)) int {
	var mu sync.Mutex
	failed := 0
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if failed++; failed <= 20 {
			errorf(format, args...)
		}
	}
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(probes); i += workers {
				p := probes[i]
				if err := v.stat(p); !isNotExist(err) {
					fail("%s: stat %s: %v, want ENOENT", v.name, p, err)
				}
				if b, err := v.read(p); err == nil || bytes.Contains(b, []byte("NEVER-SERVED")) {
					fail("%s: read %s succeeded", v.name, p)
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// isSlugComponent: a directory right below a slug parent is a project's
// slug, judged by the store rules alone (the fixture's own
// sessions/AUTH_notes is one).
func isSlugComponent(p, comp string) bool {
	for _, parent := range []string{"/claude/projects/", "/omp/sessions/", "/pi/sessions/", "/dsh/sessions/", "/gemini/tmp/"} {
		if rest, ok := strings.CutPrefix(p, parent); ok {
			first, more, _ := strings.Cut(rest, "/")
			isDir := strings.Contains(rest, "/") && (more != "" || strings.HasSuffix(p, "/"))
			return first == comp && isDir && !saferoot.ExcludedSlug(comp)
		}
	}
	return false
}

// granteeSees reports whether tree path p is in the grantee's allowlist
// (granteeAllow in internal/tree/grantee.go), as this test knows it.
func granteeSees(p string) bool {
	for _, pre := range []string{
		"/claude/projects", "/claude/history", "/claude/skills",
		"/codex/sessions", "/codex/session-index", "/codex/history",
		"/omp/sessions", "/omp/skills", "/pi/sessions", "/pi/skills",
		"/hermes/sessions", "/hermes/state.db", "/hermes/runtime/active_sessions.json", "/hermes/skills",
		"/dsh/sessions", "/dsh/storages/workspace.json",
		"/gemini/tmp", "/gemini/projects", "/opencode/storage/",
		"/skills/",
	} {
		if p == pre || strings.HasPrefix(p, strings.TrimSuffix(pre, "/")+"/") {
			return true
		}
	}
	return false
}

// isNotExist: ENOENT in any of the three dialects.
func isNotExist(err error) bool {
	if err == nil {
		return false
	}
	if isErrno(err, linux.ENOENT) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
		return true
	}
	// 9P2000 carries the error as a string.
	s := err.Error()
	return strings.Contains(s, "does not exist") || strings.Contains(s, "no such file") || strings.HasSuffix(s, "not found")
}

// TestGranteeView: a grantee lists each root and sees only the allowlisted
// entries; a hardlink to a key is absent; a directory's st_nlink counts
// only what the grantee sees; /active has no zmx or tmux field. The owner
// sees the whole mirror minus credentials.
//
// Guards rule 2: no credential is listed or read.
func TestGranteeView(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	home, run, procDir, _ := credentialHome(t, false)
	// What a grantee must not see beside the session state.
	extra := []string{
		".omp/agent/notes.md", ".omp/agent/logs/omp.log", ".pi/agent/prompts/p.md",
		".hermes/memories/MEMORY.md", ".hermes/runtime/gateway.pid", ".hermes/whatsapp/session/device.json",
		".dsh/profiles/p/package.json", ".dsh/storages/other.json",
	}
	for _, p := range extra {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(home, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(home, p), []byte("owner only\n"), 0o644))
	}
	for _, p := range []string{".hermes/state.db", ".hermes/runtime/active_sessions.json", ".dsh/storages/workspace.json"} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(home, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(home, p), []byte("session state\n"), 0o644))
	}
	// A key outside the roots, 0600, and a hardlink to it inside an
	// allowed directory under an innocent name.
	key := filepath.Join(filepath.Dir(home), "id_ed25519")
	must(t, os.WriteFile(key, []byte("PRIVATE KEY\n"), 0o600))
	link := filepath.Join(home, ".claude/projects/-root-src-app/notes.jsonl")
	must(t, os.Link(key, link))
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	must(t, os.Chmod(key, 0o644)) // readable by the daemon's uid: only the link rule stops it
	own, granted := startCredentialDaemons(t, home, run, procDir)
	oc, gc := own.client(), granted.client()

	gw := walk(t, gc)
	for _, p := range gw {
		// /active and /stale are derived session state, which a grantee sees.
		if p == "/" || p == "/active/" || strings.HasPrefix(p, "/active/") || p == "/stale/" || strings.HasPrefix(p, "/stale/") || p == "/pid" || p == "/uptime" {
			continue
		}
		if p == "/claude/" || p == "/codex/" || p == "/omp/" || p == "/pi/" || p == "/hermes/" || p == "/dsh/" ||
			p == "/skills/" || p == "/hermes/runtime/" || p == "/dsh/storages/" {
			continue
		}
		if !granteeSees(strings.TrimSuffix(p, "/")) {
			t.Errorf("grantee sees %s, not in its allowlist", p)
		}
	}
	ow := walk(t, oc)
	for _, p := range extra {
		for _, tp := range treeOf(home, filepath.Join(home, p)) {
			if !contains(ow, tp) {
				t.Errorf("the owner does not see %s", tp)
			}
			if contains(gw, tp) {
				t.Errorf("the grantee sees %s", tp)
			}
			if _, _, err := gc.Stat(tp); !isErrno(err, linux.ENOENT) {
				t.Errorf("grantee stat %s: %v, want ENOENT", tp, err)
			}
		}
	}
	for _, tp := range []string{"/hermes/state.db", "/hermes/runtime/active_sessions.json", "/dsh/storages/workspace.json",
		"/claude/history", "/codex/session-index", "/claude/projects/-root-src-app/note-0"} {
		if !contains(gw, tp) {
			t.Errorf("the grantee does not see %s", tp)
		}
	}
	for _, top := range []string{"/", "/claude", "/omp", "/pi", "/hermes", "/dsh"} {
		t.Logf("grantee ls %s: %v", top, listNames(t, gc, top))
	}
	// The hardlink: served to the owner (who may read the key anyway),
	// absent for the grantee.
	lp := "/claude/projects/-root-src-app/notes.jsonl"
	if b, err := oc.ReadFile(lp); err != nil || string(b) != "PRIVATE KEY\n" {
		t.Errorf("owner read %s: %q %v", lp, b, err)
	}
	if contains(gw, lp) {
		t.Errorf("grantee lists the hardlinked key %s", lp)
	}
	if _, _, err := gc.Stat(lp); !isErrno(err, linux.ENOENT) {
		t.Errorf("grantee stat of the hardlinked key: %v, want ENOENT", err)
	}
	if b, err := gc.ReadFile(lp); err == nil || bytes.Contains(b, []byte("PRIVATE")) {
		t.Errorf("grantee read the hardlinked key: %q", b)
	}
	// st_nlink: -root-src-app holds d1 and five excluded directories
	// (.kube .aws .docker .gnupg .ssh, twice in two cases) and more: the
	// grantee is told 2 + its one visible subdirectory.
	for _, p := range []string{"/claude/projects/-root-src-app", "/claude/projects/-root-src-app/d1/d2", "/omp/sessions/-src-app", "/hermes"} {
		_, a, err := gc.Stat(p)
		must(t, err)
		subdirs := subdirCount(t, gc, p)
		if uint64(a.NLink) != uint64(2+subdirs) {
			t.Errorf("grantee st_nlink of %s = %d, want 2 + %d visible subdirectories", p, a.NLink, subdirs)
		}
		_, oa, err := oc.Stat(p)
		must(t, err)
		t.Logf("%s: st_nlink %d for the owner (the host's), %d for the grantee", p, oa.NLink, a.NLink)
	}
}

// subdirCount counts the directories a listing of p shows.
func subdirCount(t *testing.T, c *client.Client, p string) int {
	t.Helper()
	ents, err := c.ReadDir(p)
	must(t, err)
	n := 0
	for _, e := range ents {
		if e.QID.IsDir() {
			n++
		}
	}
	return n
}

// TestOauthServerTranscript: a Claude agent working in ~/src/oauth-server
// has its transcript in the tree, in the mirror (for the owner and a
// grantee) and under /active, though "oauth" is in its project's name.
//
// Guards rule 2: no credential is listed or read.
func TestOauthServerTranscript(t *testing.T) {
	t.Parallel()
	u := testUIDs(t)
	requireRoot(t)
	home, run, procDir, _ := credentialHome(t, false)
	cwd := filepath.Join(home, "src", "oauth-server")
	must(t, os.MkdirAll(cwd, 0o755))
	const sid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	cl := startFake(t, "claude", home, cwd, "FAKE_SESSION="+sid)
	waitRegistry(t, home, cl.pid())
	host := waitFile(t, filepath.Join(home, ".claude", "projects", "*oauth-server", sid+".jsonl"))
	want, err := os.ReadFile(host)
	must(t, err)
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	slug := filepath.Base(filepath.Dir(host))
	mirror := "/claude/projects/" + slug + "/" + sid + ".jsonl"

	own := startDaemon(t, home)
	granted := startAs(t, u.owner, home, filepath.Join(run, "harness.sock"), "--allow-uid", "0", "--proc", procDir)
	granted.waitReady()
	for who, c := range map[string]interface {
		ReadFile(string) ([]byte, error)
	}{"owner": own.client(), "grantee": granted.client()} {
		if b, err := c.ReadFile(mirror); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: %s: %v, %d bytes, want the transcript (%d bytes)", who, mirror, err, len(b), len(want))
		}
	}
	oc := own.client()
	if !contains(listNames(t, oc, "/claude/projects"), slug) {
		t.Errorf("/claude/projects does not list %s", slug)
	}
	active := fmt.Sprintf("/active/claude/%d/transcript", cl.pid())
	eventually(t, func() bool {
		b, err := oc.ReadFile(active)
		return err == nil && bytes.Equal(b, want)
	}, active+" reads the transcript")
}

// issueSlugs are projects whose names hold a credential rule's prefix,
// suffix or shape: each harness names a directory after such a working
// directory, and its transcripts in it must be served.
var issueSlugs = []string{
	"kubeconfig-gen", "id_rsa-parser", ".envoy-config", "certs.pem",
	"oauth-server", "secret-santa", "authz-proxy", "password-reset", "credentials-ui", "apikey-rotator",
}

// TestSlugsServed: a project named like a credential keeps its
// transcripts, in every harness that names a directory after a working
// directory and in each of its spellings of the slug (Gemini's bare name,
// omp's -src-NAME, Claude's -root-src-NAME, pi's and dsh's --root-src-NAME--),
// for the owner and a grantee, by listing, by walk, by stat and by read;
// a key inside the slug is still hidden.
//
// Guards rule 2: no credential is listed or read, and a slug is no credential.
func TestSlugsServed(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	home, run, procDir, _ := credentialHome(t, false)
	type planted struct{ tree, host, dir, slug string }
	var want, keys []planted
	for _, name := range issueSlugs {
		for _, c := range []struct{ host, tree, slug, file string }{
			{".gemini/tmp", "/gemini/tmp", name, "chats/session-2026-12-06T07-00-0a1b2c3d.json"},
			{".omp/agent/sessions", "/omp/sessions", "-src-" + name, "2026-12-06T07-00-00-000Z_0199.jsonl"},
			{".claude/projects", "/claude/projects", "-root-src-" + name, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl"},
			{".pi/agent/sessions", "/pi/sessions", "--root-src-" + name + "--", "2026-12-06T07-00-00-000Z_0199.jsonl"},
			{".dsh/sessions", "/dsh/sessions", "--root-src-" + name + "--", "session-1/session.jsonl.zstd"},
			{".claude/projects", "/claude/projects", name, "s.jsonl"},
		} {
			p := planted{c.tree + "/" + c.slug + "/" + c.file, filepath.Join(home, c.host, c.slug, c.file), c.tree, c.slug}
			must(t, os.MkdirAll(filepath.Dir(p.host), 0o755))
			must(t, os.WriteFile(p.host, []byte("transcript of "+name+"\n"), 0o644))
			want = append(want, p)
			k := planted{c.tree + "/" + c.slug + "/deploy.key", filepath.Join(home, c.host, c.slug, "deploy.key"), c.tree, c.slug}
			must(t, os.WriteFile(k.host, []byte("NEVER-SERVED\n"), 0o644))
			keys = append(keys, k)
		}
	}
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	own, granted := startCredentialDaemons(t, home, run, procDir)
	for who, c := range map[string]*client.Client{"owner": own.client(), "grantee": granted.client()} {
		served := walk(t, c)
		for _, p := range want {
			if !contains(served, p.tree) {
				t.Errorf("%s: the walk does not reach %s", who, p.tree)
			}
			if !contains(listNames(t, c, p.dir), p.slug) {
				t.Errorf("%s: ls %s does not list %s", who, p.dir, p.slug)
			}
			if b, err := c.ReadFile(p.tree); err != nil || !strings.HasPrefix(string(b), "transcript of ") {
				t.Errorf("%s: read %s: %q %v", who, p.tree, b, err)
			}
		}
		for _, k := range keys {
			if contains(served, k.tree) {
				t.Errorf("%s: the walk serves %s", who, k.tree)
			}
			if _, _, err := c.Stat(k.tree); !isErrno(err, linux.ENOENT) {
				t.Errorf("%s: stat %s: %v, want ENOENT", who, k.tree, err)
			}
		}
	}
}

// TestCopyStoresServedNowhere: hermes's checkpoint store (a shadow git
// repository of a working directory: a copy of its deploy.key under the
// object's hash), also under a profile, and Claude's file-history are
// absent for the owner and a grantee, by listing, walk, stat and read;
// the sessions beside them are served.
//
// Guards rule 2: no credential is listed or read.
func TestCopyStoresServedNowhere(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	home, run, procDir, _ := credentialHome(t, false)
	stores := []string{
		".hermes/checkpoints/0123456789abcdef/objects/3b/18e512dba79e4c8300dd08aeb37f8e728b8dad",
		".hermes/checkpoints/0123456789abcdef/HERMES_WORKDIR",
		".hermes/profiles/work/checkpoints/fedcba9876543210/objects/3b/18e512dba79e4c8300dd08aeb37f8e728b8dad",
		".claude/file-history/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/3f2a1b0c9d8e7f6a@v1",
		".gemini/history/9f86d081884c7d65/objects/3b/18e512",
	}
	for _, f := range append(stores, ".hermes/profiles/work/sessions/s.jsonl") {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(home, f)), 0o755))
		must(t, os.WriteFile(filepath.Join(home, f), []byte("NEVER-SERVED deploy.key copy\n"), 0o644))
	}
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	own, granted := startCredentialDaemons(t, home, run, procDir)
	for who, c := range map[string]*client.Client{"owner": own.client(), "grantee": granted.client()} {
		served := walk(t, c)
		for _, p := range served {
			if strings.Contains(p, "checkpoints") || strings.Contains(p, "file-history") || strings.Contains(p, "/gemini/history") {
				t.Errorf("%s: the walk serves %s", who, p)
			}
		}
		for _, p := range []string{"/hermes/checkpoints", "/hermes/checkpoints/0123456789abcdef/HERMES_WORKDIR",
			"/hermes/checkpoints/0123456789abcdef/objects/3b/18e512dba79e4c8300dd08aeb37f8e728b8dad",
			"/hermes/profiles/work/checkpoints", "/hermes/CHECKPOINTS"} {
			if _, _, err := c.Stat(p); !isErrno(err, linux.ENOENT) {
				t.Errorf("%s: stat %s: %v, want ENOENT", who, p, err)
			}
			if b, err := c.ReadFile(p); err == nil || bytes.Contains(b, []byte("NEVER-SERVED")) {
				t.Errorf("%s: read %s succeeded", who, p)
			}
		}
	}
	if b, err := own.client().ReadFile("/hermes/profiles/work/sessions/s.jsonl"); err != nil || len(b) == 0 {
		t.Errorf("owner: a profile's session beside its checkpoints: %q %v", b, err)
	}
}
