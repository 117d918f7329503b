package test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/ninep/p9client"
)

// layout is the v1 tree contract as the test knows it, written out
// independently of the daemon's own table: tree prefix -> host path under
// the home.
var layout = []struct{ tree, host string }{
	{"/claude/projects", ".claude/projects"},
	{"/claude/history", ".claude/history.jsonl"},
	{"/claude/skills", ".claude/skills"},
	{"/codex/sessions", ".codex/sessions"},
	{"/codex/session-index", ".codex/session_index.jsonl"},
	{"/codex/history", ".codex/history.jsonl"},
	{"/omp", ".omp/agent"},
	{"/pi", ".pi/agent"},
	{"/hermes", ".hermes"},
	{"/dsh", ".dsh"},
	{"/gemini/tmp", ".gemini/tmp"},
	{"/gemini/projects", ".gemini/projects.json"},
	{"/opencode/storage/session", ".local/share/opencode/storage/session"},
	{"/opencode/storage/message", ".local/share/opencode/storage/message"},
	{"/opencode/storage/part", ".local/share/opencode/storage/part"},
	{"/skills/claude", ".claude/skills"},
	{"/skills/codex", ".codex/skills"},
	{"/skills/omp", ".omp/agent/skills"},
}

// hostOf maps a tree path to the host file it mirrors.
func hostOf(home, treePath string) (string, bool) {
	for _, l := range layout {
		if treePath == l.tree {
			return filepath.Join(home, l.host), true
		}
		if rest, ok := strings.CutPrefix(treePath, l.tree+"/"); ok {
			return filepath.Join(home, l.host, rest), true
		}
	}
	return "", false
}

// treeOf maps a host path to every tree path that serves it.
func treeOf(home, hostPath string) []string {
	rel, err := filepath.Rel(home, hostPath)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range layout {
		if rel == l.host {
			out = append(out, l.tree)
		} else if rest, ok := strings.CutPrefix(rel, l.host+"/"); ok {
			out = append(out, l.tree+"/"+rest)
		}
	}
	return out
}

// walk lists the whole tree through the client: directories end in "/".
func walk(t testing.TB, c *client.Client) []string {
	t.Helper()
	var out []string
	var rec func(dir string)
	rec = func(dir string) {
		ents, err := c.ReadDir(dir)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir, err)
		}
		for _, e := range ents {
			p := strings.TrimSuffix(dir, "/") + "/" + e.Name
			if e.QID.IsDir() {
				out = append(out, p+"/")
				rec(p)
			} else {
				out = append(out, p)
			}
		}
	}
	out = append(out, "/")
	rec("/")
	sort.Strings(out)
	return out
}

func expectedTree(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("../testdata/home.tree")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

func diffSets(want, got []string) (missing, extra []string) {
	w := map[string]bool{}
	for _, x := range want {
		w[x] = true
	}
	g := map[string]bool{}
	for _, x := range got {
		g[x] = true
		if !w[x] {
			extra = append(extra, x)
		}
	}
	for _, x := range want {
		if !g[x] {
			missing = append(missing, x)
		}
	}
	return
}

// isErrno tells whether err is the daemon's answer e, through the client
// (a syscall.Errno) or through a raw fid of the 9P library (a linux.Errno).
func isErrno(err error, e linux.Errno) bool {
	if got, ok := client.Errno(err); ok {
		return got == syscall.Errno(e)
	}
	var got linux.Errno
	return errors.As(err, &got) && got == e
}

// TestFixtureTree: the fixture home is served exactly as testdata/home.tree
// says, and every file reads back byte-identical through the project's
// client and through diodcat; diodls lists exactly the expected names.
func TestFixtureTree(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	fixturePIDDomain(t, home) // the registry records are this machine's: /stale judges them
	d := startDaemon(t, home, "--proc", emptyProc(t))
	c := d.client()

	got := walk(t, c)
	want := expectedTree(t)
	if missing, extra := diffSets(want, got); len(missing)+len(extra) > 0 {
		t.Fatalf("tree differs from testdata/home.tree:\n missing: %q\n extra: %q", missing, extra)
	}

	files, dirs := 0, 0
	for _, p := range got {
		if p == "/pid" || p == "/uptime" {
			continue
		}
		if strings.HasSuffix(p, "/") {
			dirs++
			continue
		}
		files++
		if strings.HasPrefix(p, "/stale/") {
			continue // derived, not mirrored: checkStale reads them
		}
		host, ok := hostOf(home, p)
		if !ok {
			t.Errorf("%s: no host mapping", p)
			continue
		}
		wantBytes, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		gotBytes, err := c.ReadFile(p)
		if err != nil {
			t.Errorf("client read %s: %v", p, err)
			continue
		}
		if !bytes.Equal(gotBytes, wantBytes) {
			t.Errorf("client read %s: %d bytes differ from the host's %d", p, len(gotBytes), len(wantBytes))
		}
		if bytes.Contains(gotBytes, []byte("NEVER-SERVED")) {
			t.Errorf("%s: served a credential marker", p)
		}
		diodBytes, err := d.diod("diodcat", strings.TrimPrefix(p, "/"))
		if err != nil {
			t.Errorf("diodcat %s: %v", p, err)
			continue
		}
		if !bytes.Equal(diodBytes, wantBytes) {
			t.Errorf("diodcat %s: %d bytes differ from the host's %d", p, len(diodBytes), len(wantBytes))
		}
	}
	t.Logf("%d files and %d directories byte-identical through the client and diodcat", files, dirs)
	checkStale(t, c)

	// diodls of every directory lists exactly the expected children.
	children := map[string][]string{}
	for _, p := range want {
		if p == "/" {
			continue
		}
		q := strings.TrimSuffix(p, "/")
		parent := q[:strings.LastIndex(q, "/")+1]
		children[parent] = append(children[parent], q[len(parent):])
	}
	for dir, names := range children {
		arg := strings.TrimPrefix(dir, "/")
		if arg == "" {
			arg = "/"
		}
		out, err := d.diod("diodls", arg)
		if err != nil {
			t.Errorf("diodls %s: %v", dir, err)
			continue
		}
		listed := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		sort.Strings(names)
		sort.Strings(listed)
		if missing, extra := diffSets(names, listed); len(missing)+len(extra) > 0 {
			t.Errorf("diodls %s: missing %q, extra %q", dir, missing, extra)
		}
	}
}

// TestCredentialsNeverServed: every credential-shaped file of the fixture
// home, at any depth, in every root, is neither listed nor readable, by the
// client or by diod's tools.
//
// Guards rule 2: no credential is listed or read.
func TestCredentialsNeverServed(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	// An empty process table: the walk covers the mirrors, and the
	// machine's own agents (another test's, a developer's) come and go
	// under /active while it runs.
	d := startDaemon(t, home, "--proc", emptyProc(t))
	c := d.client()
	served := map[string]bool{}
	for _, p := range walk(t, c) {
		served[strings.TrimSuffix(p, "/")] = true
	}
	checked := 0
	filepath.WalkDir(home, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("NEVER-SERVED")) {
			return nil
		}
		for _, tp := range treeOf(home, p) {
			checked++
			if served[tp] {
				t.Errorf("%s is listed", tp)
			}
			if _, _, err := c.Stat(tp); !isErrno(err, linux.ENOENT) {
				t.Errorf("stat %s: got %v, want ENOENT", tp, err)
			}
			if _, err := c.ReadFile(tp); !isErrno(err, linux.ENOENT) {
				t.Errorf("read %s: got %v, want ENOENT", tp, err)
			}
			if out, err := d.diod("diodcat", strings.TrimPrefix(tp, "/")); err == nil || bytes.Contains(out, []byte("NEVER-SERVED")) {
				t.Errorf("diodcat %s succeeded", tp)
			}
		}
		return nil
	})
	if checked < 20 {
		t.Fatalf("only %d credential files under served paths: the fixture lost its teeth", checked)
	}
	t.Logf("%d credential-shaped tree paths refused", checked)
}

// TestLive: nothing is cached. An appended transcript is longer on the next
// read, a new file and directory appear in the next listing, a removed file
// answers ENOENT.
func TestLive(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	c := d.client()
	const p = "/codex/history"
	host, _ := hostOf(home, p)
	before, err := c.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(host, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"session_id":"x","ts":1790013999,"text":"appended"}` + "\n")
	f.Write(line)
	f.Close()
	after, err := c.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, append(before, line...)) {
		t.Fatalf("append not visible: %d bytes before, %d after", len(before), len(after))
	}

	dir := filepath.Join(home, ".dsh", "sessions", "--tmp-new--")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "new.jsonl"), []byte("new\n"), 0o644)
	got, err := c.ReadFile("/dsh/sessions/--tmp-new--/new.jsonl")
	if err != nil || string(got) != "new\n" {
		t.Fatalf("new file: %q, %v", got, err)
	}
	ents, err := c.ReadDir("/dsh/sessions")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ents {
		found = found || e.Name == "--tmp-new--"
	}
	if !found {
		t.Fatal("new directory not listed")
	}
	os.Remove(filepath.Join(dir, "new.jsonl"))
	if _, _, err := c.Stat("/dsh/sessions/--tmp-new--/new.jsonl"); !isErrno(err, linux.ENOENT) {
		t.Fatalf("removed file: %v, want ENOENT", err)
	}
	// A whole root that vanishes takes its mirrors with it, and comes back.
	if err := os.Rename(filepath.Join(home, ".hermes"), filepath.Join(home, "hermes.away")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Stat("/hermes"); !isErrno(err, linux.ENOENT) {
		t.Fatalf("vanished root: %v, want ENOENT", err)
	}
	os.Rename(filepath.Join(home, "hermes.away"), filepath.Join(home, ".hermes"))
	if _, _, err := c.Stat("/hermes/state.db"); err != nil {
		t.Fatalf("root back: %v", err)
	}
}

// TestReadOnly: every mutating operation is refused.
//
// Guards rule 4: read-only by absence.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	c := d.client()
	cf, err := c.Walk("/codex/history")
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	f := p9client.Fid(cf) // the library's fid: the messages the client does not send
	for _, mode := range []p9.OpenFlags{p9.WriteOnly, p9.ReadWrite, p9.ReadOnly | p9.OpenFlags(0o1000)} {
		g, _ := c.Walk("/codex/history")
		if _, _, err := p9client.Fid(g).Open(mode); !isErrno(err, linux.EROFS) {
			t.Errorf("open %v: %v, want EROFS", mode, err)
		}
		g.Close()
	}
	if err := f.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 0}); !isErrno(err, linux.EROFS) {
		t.Errorf("setattr: %v, want EROFS", err)
	}
	cdir, _ := c.Walk("/dsh")
	defer cdir.Close()
	dir := p9client.Fid(cdir)
	if _, err := dir.Mkdir("x", 0o755, 0, 0); !isErrno(err, linux.EROFS) {
		t.Errorf("mkdir: %v", err)
	}
	if err := dir.UnlinkAt("cordis.patch.yml", 0); !isErrno(err, linux.EROFS) {
		t.Errorf("unlinkat: %v", err)
	}
	if _, err := dir.Symlink("/etc/passwd", "x", 0, 0); !isErrno(err, linux.EROFS) {
		t.Errorf("symlink: %v", err)
	}
	if err := dir.RenameAt("cordis.patch.yml", dir, "y"); !isErrno(err, linux.EROFS) {
		t.Errorf("renameat: %v", err)
	}
	if _, _, _, err := dir.Create("new", p9.ReadWrite, 0o644, 0, 0); !isErrno(err, linux.EROFS) && !isErrno(err, linux.EPERM) {
		t.Errorf("create: %v", err)
	}
	// The host is untouched.
	if _, err := os.Stat(filepath.Join(home, ".dsh", "cordis.patch.yml")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".dsh", "new")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("create reached the host: %v", err)
	}
}

// checkStale: on an empty process table, the fixture home's two Claude
// registry records name pids that do not run, so /stale/claude derives
// each one's facts (never the record file itself).
func checkStale(t *testing.T, c *client.Client) {
	t.Helper()
	for p, want := range map[string]string{
		"/stale/claude/registry-4189/pid":       "4189\n",
		"/stale/claude/registry-4189/why":       "pid 4189 is not running\n",
		"/stale/claude/registry-4189/session":   "776cd19e-24b2-42a4-b1de-792f056ae0eb\n",
		"/stale/claude/registry-4189/claim":     "registry: session 776cd19e-24b2-42a4-b1de-792f056ae0eb (interactive)\n",
		"/stale/claude/registry-4189/since":     "2026-03-30T19:46:40Z\n",
		"/stale/claude/registry-345104/claim":   "registry: session 1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55 busy (interactive)\n",
		"/stale/claude/registry-345104/why":     "pid 345104 is not running\n",
		"/stale/claude/registry-345104/since":   "2026-09-21T17:51:40Z\n",
		"/stale/claude/registry-345104/session": "1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55\n",
	} {
		if b, err := c.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", p, b, err, want)
		}
	}
}
