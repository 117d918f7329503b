package tree

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

func readNode(t *testing.T, d Dir, p string) string {
	t.Helper()
	n, err := lookupPath(d, p)
	if err != nil {
		t.Fatalf("lookup %s: %v", p, err)
	}
	h, err := n.(File).Open()
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer h.Close()
	b, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStaleAndAttach: /stale/claude shows a registry record whose pid is
// gone as derived facts (never the record), to the owner and a grantee
// alike; a Claude background worker is listed with its attach file, for a
// grantee too; an unclaimed spare is not listed.
func TestStaleAndAttach(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	procDir := filepath.Join(dir, "proc")
	uid := uint32(os.Getuid())
	spare := []string{"claude bg-spare", "--bg-spare", "/tmp/cc-daemon-0/x/spare/a.claim.sock"}
	if err := proctest.Write(procDir,
		proctest.Proc{PID: 200, PPID: 1, UID: uid, Start: 70, Argv: []string{"/x/claude.exe", "daemon", "run", "--origin", "transient"}, Cwd: "/"},
		proctest.Proc{PID: 201, PPID: 200, UID: uid, Start: 71, Argv: []string{"claude bg-pty-host", "--bg-pty-host", "/tmp/p.sock", "200", "50", "--", "/x/claude.exe", "--bg-spare", "/tmp/a.claim.sock"}, Cwd: "/"},
		proctest.Proc{PID: 202, PPID: 201, UID: uid, Start: 72, Argv: spare, Cwd: "/"},
		proctest.Proc{PID: 203, PPID: 201, UID: uid, Start: 73, Argv: spare, Cwd: "/"},
	); err != nil {
		t.Fatal(err)
	}
	write := func(rel, s string) {
		p := filepath.Join(home, ".claude", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const sid = "3d289299-6937-4726-8e41-b2da2cdacfa6"
	write("sessions/202.json", fmt.Sprintf(`{"pid":202,"sessionId":%q,"cwd":"/","startedAt":1796555131195,"procStart":"72","kind":"bg","jobId":"3d289299","name":"say hello bg","status":"idle","statusUpdatedAt":1796555133401}`, sid))
	write("sessions/4668.json", `{"pid":4668,"sessionId":"5ca8b210-abd8-4d5b-9996-78342b3fe993","cwd":"/","startedAt":1796130598341,"procStart":"125170","kind":"interactive","status":"busy","updatedAt":1796130600140}`)
	write("sessions/4668.ab12.key", "NEVER-SERVED")
	tb := proc.New(procDir)
	roots := map[string]*saferoot.Root{}
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		roots[h] = saferoot.New(filepath.Join(home, "."+h))
		envs[h] = harness.Env{Procs: tb, Root: roots[h], Home: home, TmpDir: dir}
	}
	for _, grantee := range []bool{false, true} {
		root := New(Config{Roots: roots, PID: 42, Start: time.Unix(1000, 0), Grantee: grantee,
			Active: &ActiveConfig{Procs: tb, UID: uid, Envs: envs}})
		var all []string
		walkAll(t, root, "", &all)
		var stale, agents []string
		for _, p := range all {
			if m, _ := filepath.Match("/stale/*/*/*", p); m {
				stale = append(stale, p)
			}
			if m, _ := filepath.Match("/active/claude/*", p); m {
				agents = append(agents, p)
			}
		}
		want := []string{"/stale/claude/registry-4668/claim", "/stale/claude/registry-4668/pid", "/stale/claude/registry-4668/session",
			"/stale/claude/registry-4668/since", "/stale/claude/registry-4668/why"}
		if !slices.Equal(stale, want) {
			t.Errorf("grantee %v: /stale holds %q, want %q", grantee, stale, want)
		}
		if !slices.Equal(agents, []string{"/active/claude/202"}) {
			t.Errorf("grantee %v: /active/claude holds %q, want the claimed worker only", grantee, agents)
		}
		for p, want := range map[string]string{
			"/stale/claude/registry-4668/why":   "pid 4668 is not running\n",
			"/stale/claude/registry-4668/claim": "registry: session 5ca8b210-abd8-4d5b-9996-78342b3fe993 busy (interactive)\n",
			"/stale/claude/registry-4668/since": "2026-12-01T13:10:00Z\n",
			"/active/claude/202/attach":         "claude attach 3d289299\n",
			"/active/claude/202/session":        sid + "\n",
		} {
			if got := readNode(t, root, p); got != want {
				t.Errorf("grantee %v: %s = %q, want %q", grantee, p, got, want)
			}
		}
	}
}
