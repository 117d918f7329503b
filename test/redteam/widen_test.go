//go:build redteam

package redteam

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The attackers of rule 9 (never widen) and rule 2 (no credential) cheap
// enough for a standing tier: each a few seconds. They run the same rig,
// so the table has their daemon's figures too.

// shortDir is a private directory with a short path (a tmux socket path
// must fit in 107 bytes).
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", prefix)
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestRedteamConfinedPeer: a client of the daemon's own uid, in the same
// namespaces, confined by Landlock (with NoNewPrivs) or by a seccomp
// filter (without NoNewPrivs). Before the fix it was taken for the
// owner: it got the full view and moved (killed and relaunched) an agent,
// while the kernel refused it the home directly. It must get the
// session-only view (none of the owner's own files of the mirrors, no zmx
// or tmux file) and its move must be refused, the agent left alive.
//
// The third peer, in a user namespace of its own, is the sandbox the
// daemon already told apart: it held before the fix, and it shows that
// these checks pass where the daemon sees the sandbox.
//
// Guards rule 9: every restriction the kernel shows is a sandbox.
func TestRedteamConfinedPeer(t *testing.T) {
	for _, mode := range []string{"landlock", "seccomp", "userns"} {
		t.Run(mode, func(t *testing.T) { testConfined(t, mode) })
	}
}

func testConfined(t *testing.T, mode string) {
	requireRoot(t)
	tmux := require(t, "tmux")
	// The daemon runs as this process's uid (root), so that the seccomp
	// peer needs no NoNewPrivs; the confined peer is root too.
	w := newWorld(t, 0)
	cwd := filepath.Join(w.home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	tmuxDir := shortDir(t, "rt")
	agent := startAgent(t, 0, cwd, []string{"HOME=" + w.home, "PATH=" + bins + ":/usr/bin:/bin",
		"TMUX_TMPDIR=" + tmuxDir, "FAKE_SESSION=7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d", "LANG=C.UTF-8"}, bin("claude"))
	r := startRig(t, mode+" peer", 0, w, "--allow-move", "--host-path", bins+":/usr/bin:/bin")
	t.Cleanup(func() {
		// Only the tmux server of this test's private directory: where a
		// move that was not refused put the agent. (Before the cgroup is
		// removed: the daemon started it.)
		exec.Command(tmux, "-S", filepath.Join(tmuxDir, "tmux-0", "default"), "kill-server").Run()
	})
	c := dialSelf(t, r) // root: the owner
	agentDir := waitAgent(t, r, c, "claude", agent.Process.Pid)
	for _, f := range []string{"tmux", "resume"} {
		if _, _, err := c.Stat(agentDir + "/" + f); err != nil {
			t.Fatalf("the owner does not see %s/%s: %v", agentDir, f, err)
		}
	}
	// The owner's own files: what the owner's view of a mirror has
	// beyond the session state a grantee sees (tree/grantee.go).
	var ownerOnly []string
	for m, session := range map[string][]string{
		"/omp":    {"sessions", "skills"},
		"/pi":     {"sessions", "skills"},
		"/dsh":    {"sessions", "storages"},
		"/hermes": {"sessions", "state.db", "state.db-wal", "state.db-shm", "runtime", "skills"},
	} {
		ents, err := c.ReadDir(m)
		must(t, err)
		for _, e := range ents {
			if !slices.Contains(session, e.Name) {
				ownerOnly = append(ownerOnly, m+"/"+e.Name)
			}
		}
	}
	if len(ownerOnly) == 0 {
		t.Fatal("the fixture gives the owner nothing a grantee lacks: the check would prove nothing")
	}

	stop := r.ownerLists(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wrap []string
	if mode == "userns" {
		wrap = []string{require(t, "unshare"), "--user", "--map-root-user"}
	}
	cmd := helperCtx(ctx, "TestHelperConfined", wrap, "HELPER_CONFINE="+mode, "HELPER_SOCK="+r.sock,
		"HELPER_HOME="+filepath.Join(w.home, ".claude"), "HELPER_AGENT="+agentDir,
		"HELPER_OWNER_ONLY="+strings.Join(ownerOnly, "\n"),
		"HELPER_READABLE="+strings.Join([]string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys", bins, filepath.Dir(r.sock)}, ":"))
	outb, _ := cmd.CombinedOutput()
	stop()
	out := string(outb)
	t.Logf("the %s peer:\n%s", mode, out)

	// The confinement is real: the kernel shows it and refuses something.
	switch mode {
	case "landlock":
		if !strings.Contains(out, "STATUS NoNewPrivs: 1") || !strings.Contains(out, "KERNEL-REFUSES home") {
			t.Fatalf("the Landlock confinement did not take: %s", out)
		}
	case "seccomp":
		if !strings.Contains(out, "STATUS Seccomp: 2") || !strings.Contains(out, "STATUS NoNewPrivs: 0") || !strings.Contains(out, "KERNEL-REFUSES mkdir") {
			t.Fatalf("the seccomp confinement did not take: %s", out)
		}
	}
	if strings.Contains(out, "DIAL-ERR") {
		// Refused outright: it gets nothing, which widens nothing.
		r.note("the %s peer was refused a connection", mode)
	} else if !strings.Contains(out, "ROOT ") {
		t.Fatalf("the %s peer did not list /: %s", mode, out)
	}
	seen := strings.Count(out, "SEES ")
	moved := strings.Contains(out, "MOVE-DONE")
	alive := agent.ProcessState == nil && syscall.Kill(agent.Process.Pid, 0) == nil
	r.note("%s; the daemon gave it %d of %d owner-only paths and the zmx/tmux/resume files: %v; move %s; agent alive: %v",
		map[string]string{"landlock": "the kernel refuses it the home", "seccomp": "the kernel refuses it mkdir", "userns": "its own user namespace"}[mode], seen-strings.Count(out, "SEES /active/"), len(ownerOnly),
		strings.Contains(out, "SEES "+agentDir+"/"), map[bool]string{true: "done", false: "refused"}[moved], alive)
	if seen > 0 {
		t.Errorf("the %s peer got the owner's view: %d paths only the owner may see", mode, seen)
	}
	if moved || !alive {
		t.Errorf("the %s peer moved the agent (move done: %v, agent alive: %v)", mode, moved, alive)
	}
	r.finish(fmt.Sprintf("owner-uid client confined by %s: view and move", map[string]string{"landlock": "Landlock (NoNewPrivs)", "seccomp": "a seccomp filter (no NoNewPrivs)", "userns": "a user namespace (held before)"}[mode]))
}

// credentialNames are credential-shaped names (and backup forms of
// them) that were served at every depth of every root.
var credentialNames = []string{
	"service-account.json", "service-account-key.json", "gcp-key.json", "sa-key.json", "private_key.json", "signing-key.json",
	"ssh_host_rsa_key", "secring.gpg", "private.asc", "keystore.jks", "release.keystore",
	"terraform.tfstate", "terraform.tfvars", ".terraformrc", ".my.cnf", ".mylogin.cnf", ".yarnrc.yml",
	"id_xmss", "credential", "key",
	"settings.json.1", "tls.key.backup", "server.pem.save", ".netrc.~1~", "hosts.yml.tmp.12345", ".config.toml.un~",
}

// TestRedteamCredentialDepth8: the names of credentialNames at depth 8 of
// the Claude root (projects/<slug>/a/b/c/d/e/f/), where an agent's
// project may put anything, beside a transcript. Before the fix each was
// listed and read by the owner and by a grantee.
//
// Guards rule 2: no credential is listed or read, at any depth.
func TestRedteamCredentialDepth8(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, 0)
	rel := "projects/-home-u-src-deep8/a/b/c/d/e/f"
	dir := filepath.Join(w.home, ".claude", rel)
	must(t, os.MkdirAll(dir, 0o755))
	for _, n := range append(credentialNames, "notes.jsonl") {
		must(t, os.WriteFile(filepath.Join(dir, n), []byte("sk-redteam-canary\n"), 0o644))
	}
	r := startRig(t, "credentials at depth 8", 0, w, "--allow-uid", strconv.Itoa(friendUID))
	path := "/claude/" + rel
	stop := r.ownerLists(time.Second)
	served := map[string][]string{}
	// The owner: this process, through the client library.
	c := dialSelf(t, r)
	ents, err := c.ReadDir(path)
	must(t, err)
	listed := map[string]bool{}
	for _, e := range ents {
		listed[e.Name] = true
	}
	if !listed["notes.jsonl"] {
		t.Fatalf("the owner does not see %s/notes.jsonl: the check would prove nothing", path)
	}
	for _, n := range credentialNames {
		if _, _, err := c.Stat(path + "/" + n); err == nil || listed[n] {
			served["owner"] = append(served["owner"], n)
		}
	}
	// A grantee: another uid, through the real client.
	out, _, err := clientAs(friendUID, r.sock, "", "ls", path)
	if err != nil || !strings.Contains(out, "notes.jsonl") {
		t.Fatalf("the grantee's ls %s: %v: %s", path, err, out)
	}
	glisted := map[string]bool{}
	for _, n := range strings.Fields(out) {
		glisted[n] = true
	}
	for _, n := range credentialNames {
		if _, _, err := clientAs(friendUID, r.sock, "", "stat", path+"/"+n); err == nil || glisted[n] {
			served["grantee"] = append(served["grantee"], n)
		}
	}
	stop()
	r.note("served to the owner: %d of %d, to a grantee: %d of %d", len(served["owner"]), len(credentialNames), len(served["grantee"]), len(credentialNames))
	for who, names := range served {
		t.Errorf("served to the %s at depth 8 (by listing or walk): %s", who, strings.Join(names, " "))
	}
	r.finish(fmt.Sprintf("%d credential names at depth 8, listed and walked by the owner and a grantee", len(credentialNames)))
}

// TestRedteamRemoteControlBytes: a remote host (here an ssh that fails,
// saying on its standard error what a hostile host's sshd or relay may
// say) writes terminal controls: a window title, a clear screen, an OSC 52
// clipboard write, a C1 CSI. Before the fix they reached the terminal
// through `ps --ssh`, `ps --all` and the error paths of events and wait.
// No daemon runs: the row has no daemon figures.
//
// Guards rule 9: whatever a remote host prints is shown as text.
func TestRedteamRemoteControlBytes(t *testing.T) {
	began := time.Now()
	fake := t.TempDir()
	must(t, os.Chmod(fake, 0o755))
	script := "#!/bin/sh\nprintf 'host says \\033]0;pwned\\007\\033[2J\\033]52;c;cHduZWQ=\\007\\302\\2331m\\n' >&2\nexit 255\n"
	must(t, os.WriteFile(filepath.Join(fake, "ssh"), []byte(script), 0o755))
	home := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".config", "9harness"), 0o755))
	must(t, os.WriteFile(filepath.Join(home, ".config", "9harness", "hosts"), []byte("evil\n"), 0o644))
	var leaked []string
	cmds := [][]string{
		{"--ssh", "evil", "ps"},
		{"--ssh", "evil", "--ssh", "evil2", "ps"},
		{"ps", "--all"},
		{"--ssh", "evil", "ls", "/"},
		{"--ssh", "evil", "cat", "/pid"},
		{"--ssh", "evil", "events"},
		{"--ssh", "evil", "wait", "--timeout", "2s"},
		{"wait", "--all", "--timeout", "2s"},
		{"move", "evil:claude/1", "x"},
	}
	for _, args := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		cmd := exec.CommandContext(ctx, bin("9harness"), args...)
		cmd.Env = []string{"PATH=" + fake + ":/usr/bin:/bin", "HOME=" + home, "XDG_RUNTIME_DIR=" + home}
		out, _ := cmd.CombinedOutput()
		cancel()
		if bytes.ContainsAny(out, "\x1b\x07\u009b") || bytes.IndexByte(out, 0x9b) >= 0 {
			leaked = append(leaked, strings.Join(args, " "))
			t.Logf("9harness %s: %q", strings.Join(args, " "), out)
		}
	}
	note := fmt.Sprintf("%d of %d commands let a control byte through", len(leaked), len(cmds))
	if len(leaked) > 0 {
		note += ": " + strings.Join(leaked, ", ")
		t.Errorf("a remote host's control bytes reached the terminal through: %s", strings.Join(leaked, "; "))
	}
	addRow(row{attacker: "remote control bytes", attack: "a host's stderr with ESC, BEL, OSC 52, C1 CSI, through 9 commands", took: time.Since(began), noDaemon: true, notes: note})
}
