package tree

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// granteeHome is a home with session state and everything else a harness
// keeps beside it, and a hardlink to a "key" outside the roots.
func granteeHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	files := []string{
		".claude/projects/-home-u-src-oauth-server/s1.jsonl",
		".claude/projects/-home-u-src-x/s2.jsonl",
		".claude/history.jsonl",
		".claude/skills/a/SKILL.md",
		".claude/todos/t.json",
		".codex/sessions/2026/01/01/rollout-x.jsonl",
		".codex/session_index.jsonl",
		".codex/history.jsonl",
		".codex/log/codex-tui.log",
		".omp/agent/sessions/-src-x/t.jsonl",
		".omp/agent/skills/s/SKILL.md",
		".omp/agent/agent.db",
		".omp/agent/notes.txt",
		".omp/agent/logs/omp.log",
		".pi/agent/sessions/--home-u-src-secret-sauce--/t.jsonl",
		".pi/agent/models.json",
		".pi/agent/prompts/p.md",
		".hermes/sessions/s.jsonl",
		".hermes/state.db",
		".hermes/runtime/active_sessions.json",
		".hermes/runtime/gateway.pid",
		".hermes/whatsapp/session/creds.json",
		".hermes/memories/MEMORY.md",
		".dsh/sessions/--home-u-src-x--/session-1/session.jsonl.zstd",
		".dsh/storages/workspace.json",
		".dsh/storages/other.json",
		".dsh/profiles/p/package.json",
		"ssh/id_ed25519",
	}
	for _, f := range files {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A hardlink inside an allowed directory, under an innocent name.
	if err := os.Link(filepath.Join(home, "ssh/id_ed25519"), filepath.Join(home, ".claude/projects/-home-u-src-x/notes.jsonl")); err != nil {
		t.Fatal(err)
	}
	// Excluded subdirectories of an allowed one, which st_nlink would count.
	for _, d := range []string{".aws", ".gnupg", "secrets", ".kube"} {
		if err := os.MkdirAll(filepath.Join(home, ".claude/projects/-home-u-src-x", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func views(home string) (owner, grantee Dir) {
	roots := map[string]*saferoot.Root{}
	for _, h := range Harnesses {
		roots[h] = saferoot.New(filepath.Join(home, "."+h))
	}
	cfg := Config{Roots: roots, PID: 42, Start: time.Unix(1000, 0), Now: func() time.Time { return time.Unix(1100, 0) }}
	owner = New(cfg)
	cfg.Grantee = true
	return owner, New(cfg)
}

// walkAll lists every path of d (files and directories), depth first.
func walkAll(t *testing.T, d Dir, prefix string, out *[]string) {
	t.Helper()
	ents, err := d.List()
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	for _, e := range ents {
		p := prefix + "/" + e.Name
		*out = append(*out, p)
		if e.Dir {
			n, err := d.Lookup(e.Name)
			if err != nil {
				t.Fatalf("lookup %s: %v", p, err)
			}
			walkAll(t, n.(Dir), p, out)
		}
	}
}

func lookupPath(d Dir, p string) (Node, error) {
	var n Node = d
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		dd, ok := n.(Dir)
		if !ok {
			return nil, errs.E("test", errs.NotDir, p, nil)
		}
		var err error
		if n, err = dd.Lookup(c); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestGranteeView(t *testing.T) {
	home := granteeHome(t)
	owner, grantee := views(home)
	var got []string
	walkAll(t, grantee, "", &got)
	want := []string{
		"/claude", "/claude/history", "/claude/projects",
		"/claude/projects/-home-u-src-oauth-server", "/claude/projects/-home-u-src-oauth-server/s1.jsonl",
		"/claude/projects/-home-u-src-x", "/claude/projects/-home-u-src-x/s2.jsonl",
		"/claude/skills", "/claude/skills/a", "/claude/skills/a/SKILL.md",
		"/codex", "/codex/history", "/codex/session-index", "/codex/sessions", "/codex/sessions/2026",
		"/codex/sessions/2026/01", "/codex/sessions/2026/01/01", "/codex/sessions/2026/01/01/rollout-x.jsonl",
		"/dsh", "/dsh/sessions", "/dsh/sessions/--home-u-src-x--", "/dsh/sessions/--home-u-src-x--/session-1",
		"/dsh/sessions/--home-u-src-x--/session-1/session.jsonl.zstd",
		"/dsh/storages", "/dsh/storages/workspace.json",
		"/hermes", "/hermes/runtime", "/hermes/runtime/active_sessions.json", "/hermes/sessions",
		"/hermes/sessions/s.jsonl", "/hermes/state.db",
		"/omp", "/omp/sessions", "/omp/sessions/-src-x", "/omp/sessions/-src-x/t.jsonl",
		"/omp/skills", "/omp/skills/s", "/omp/skills/s/SKILL.md",
		"/pi", "/pi/sessions", "/pi/sessions/--home-u-src-secret-sauce--",
		"/pi/sessions/--home-u-src-secret-sauce--/t.jsonl",
		"/pid",
		"/skills", "/skills/claude", "/skills/claude/a", "/skills/claude/a/SKILL.md",
		"/skills/omp", "/skills/omp/s", "/skills/omp/s/SKILL.md",
		"/uptime",
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("grantee tree:\n got %q\nwant %q", got, want)
	}
	for _, p := range []string{
		"/omp/agent.db", "/omp/notes.txt", "/omp/logs", "/pi/models.json", "/pi/prompts",
		"/hermes/runtime/gateway.pid", "/hermes/whatsapp", "/hermes/memories", "/dsh/storages/other.json",
		"/dsh/profiles", "/claude/projects/-home-u-src-x/notes.jsonl", "/claude/projects/-home-u-src-x/.aws",
	} {
		if _, err := lookupPath(grantee, p); !errs.Is(err, errs.NotExist) && !errs.Is(err, errs.Private) {
			t.Errorf("grantee lookup %s: %v, want NotExist", p, err)
		}
	}
	// The owner sees the rest (minus credentials), the hardlink included.
	for _, p := range []string{"/omp/notes.txt", "/omp/logs/omp.log", "/pi/prompts/p.md", "/hermes/memories/MEMORY.md",
		"/claude/projects/-home-u-src-x/notes.jsonl", "/claude/projects/-home-u-src-oauth-server/s1.jsonl"} {
		if _, err := lookupPath(owner, p); err != nil {
			t.Errorf("owner lookup %s: %v", p, err)
		}
	}
	for _, p := range []string{"/omp/agent.db", "/pi/models.json", "/hermes/whatsapp/session/creds.json"} {
		if _, err := lookupPath(owner, p); err == nil {
			t.Errorf("owner served %s", p)
		}
	}
	// st_nlink: 2 + visible subdirectories for the grantee.
	n, err := lookupPath(grantee, "/claude/projects/-home-u-src-x")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := n.Attr(); a.Nlink != 2 {
		t.Errorf("grantee nlink of a dir with 4 excluded subdirs = %d, want 2", a.Nlink)
	}
	if _, a, _ := LookupAttr(n.(Dir), "s2.jsonl"); a.Nlink != 1 {
		t.Errorf("nlink of s2.jsonl = %d", a.Nlink)
	}
	for p, want := range map[string]uint64{"/claude/projects": 4, "/hermes": 4, "/omp": 4, "/dsh/storages": 2} {
		n, err := lookupPath(grantee, p)
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := n.Attr(); a.Nlink != want {
			t.Errorf("grantee nlink %s = %d, want %d", p, a.Nlink, want)
		}
	}
	// The hardlink's open is refused too, should a link appear after lookup.
	n, err = lookupPath(grantee, "/claude/projects/-home-u-src-x/s2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(home, ".claude/projects/-home-u-src-x/s2.jsonl"), filepath.Join(home, "s2-link")); err != nil {
		t.Fatal(err)
	}
	if h, err := n.(File).Open(); err == nil {
		h.Close()
		t.Errorf("grantee opened a file with two links")
	}
}

// TestCopyStoresHidden: each harness's store of copies of project files,
// planted in a fixture with a copy of a key, is absent from the owner's
// and a grantee's tree, by listing and by walk, and from the harness's
// root itself; the session state beside it is served.
//
// Guards rule 2: no credential is listed or read.
func TestCopyStoresHidden(t *testing.T) {
	home := t.TempDir()
	stores := map[string][]string{ // harness -> host paths inside a store
		"hermes": {
			".hermes/checkpoints/0123456789abcdef/objects/ab/cdef0123",
			".hermes/checkpoints/0123456789abcdef/HERMES_WORKDIR",
			".hermes/Checkpoints/x",
			".hermes/profiles/work/checkpoints/fedcba9876543210/objects/12/3456",
		},
		"claude":   {".claude/file-history/0a1b2c3d-4e5f/3f2a1b@v2"},
		"gemini":   {".gemini/history/9f86d081884c7d65/objects/ab/cd"},
		"opencode": {".local/share/opencode/snapshot/global/objects/ab/cd"},
	}
	served := []string{".hermes/sessions/s.jsonl", ".hermes/profiles/work/sessions/s.jsonl", ".claude/projects/-x/s.jsonl"}
	var all []string
	for _, ps := range stores {
		all = append(all, ps...)
	}
	for _, f := range append(all, served...) {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("COPY OF deploy.key\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roots := map[string]*saferoot.Root{}
	for _, h := range Harnesses {
		roots[h] = saferoot.New(filepath.Join(home, "."+h))
	}
	roots["opencode"] = saferoot.New(filepath.Join(home, ".local/share/opencode"))
	cfg := Config{Roots: roots, PID: 42, Start: time.Unix(1000, 0)}
	owner := New(cfg)
	cfg.Grantee = true
	grantee := New(cfg)
	for who, d := range map[string]Dir{"owner": owner, "grantee": grantee} {
		var got []string
		walkAll(t, d, "", &got)
		for _, p := range got {
			for _, c := range strings.Split(p, "/") {
				switch strings.ToLower(c) {
				case "checkpoints", "file-history", "history", "snapshot":
					if p != "/claude/history" && p != "/codex/history" {
						t.Errorf("%s: walk serves %s", who, p)
					}
				}
			}
		}
		for _, p := range []string{"/hermes/checkpoints", "/hermes/Checkpoints", "/hermes/checkpoints/0123456789abcdef/HERMES_WORKDIR",
			"/hermes/profiles/work/checkpoints", "/hermes/profiles/work/checkpoints/fedcba9876543210/objects/12/3456"} {
			if _, err := lookupPath(d, p); err == nil {
				t.Errorf("%s: lookup %s served", who, p)
			}
		}
	}
	if _, err := lookupPath(owner, "/hermes/profiles/work/sessions/s.jsonl"); err != nil {
		t.Errorf("owner: the profile's sessions: %v", err)
	}
	// The roots themselves refuse the stores, whatever a layout mirrors.
	for h, ps := range stores {
		r := roots[h]
		for _, p := range ps {
			rel := strings.TrimPrefix(p, "."+h+"/")
			rel = strings.TrimPrefix(rel, ".local/share/opencode/")
			if _, err := r.Stat(rel); !errs.Is(err, errs.Private) {
				t.Errorf("%s root: Stat(%s) = %v, want Private", h, rel, err)
			}
		}
	}
}

// TestGranteeNlinkFresh: a grantee directory's link count, counted once
// and kept while the directory is unchanged, follows every change: a
// subdirectory made or removed after a count is counted at the next stat.
func TestGranteeNlinkFresh(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "d")
	for _, sub := range []string{"d/a", "d/.ssh"} {
		if err := os.MkdirAll(filepath.Join(base, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := saferoot.New(base)
	nlink := func() uint64 {
		t.Helper()
		n, err := mirrorAs(root, "d", wantDir, true)
		if err != nil {
			t.Fatal(err)
		}
		a, err := n.Attr()
		if err != nil {
			t.Fatal(err)
		}
		return a.Nlink
	}
	if got := nlink(); got != 3 {
		t.Fatalf("nlink %d, want 3 (d/a; .ssh is excluded)", got)
	}
	// Past the settling time the count is kept; each change is seen.
	time.Sleep(subdirSettle + 100*time.Millisecond)
	for i, step := range []struct {
		change func() error
		want   uint64
	}{
		{func() error { return nil }, 3},
		{func() error { return os.Mkdir(filepath.Join(dir, "b"), 0o755) }, 4},
		{func() error { return os.Mkdir(filepath.Join(dir, "c"), 0o755) }, 5},
		{func() error { return os.Remove(filepath.Join(dir, "a")) }, 4},
		{func() error { return os.WriteFile(filepath.Join(dir, "f"), nil, 0o644) }, 4},
	} {
		if err := step.change(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if got := nlink(); got != step.want {
				t.Errorf("step %d: nlink %d, want %d", i, got, step.want)
			}
		}
	}
}
