package confine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil && ABI() > 0 {
		return p
	}
	why := tool + " is not installed"
	if ABI() == 0 {
		why = "the kernel has no Landlock"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: %s", why)
	}
	t.Skip(why)
	return ""
}

// A confined child can open no file: not read one, not write one, not
// create one, not list a directory, not exec another program.
func TestConfinedOpensNoFile(t *testing.T) {
	cat, sh := need(t, "cat"), need(t, "sh")
	dir := t.TempDir()
	canary := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(canary, []byte("CANARY-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unconfined, the same command reads it: the refusal is the domain's.
	if out, err := exec.Command(cat, canary).Output(); err != nil || string(out) != "CANARY-SECRET" {
		t.Fatalf("unconfined cat: %q %v", out, err)
	}
	out, err := Output(exec.Command(cat, canary), nil)
	if err == nil || strings.Contains(string(out), "CANARY") {
		t.Fatalf("confined cat read the canary: %q %v", out, err)
	}
	if ee, ok := err.(*exec.ExitError); !ok || !strings.Contains(string(ee.Stderr), "Permission denied") {
		t.Errorf("confined cat: %v, want a permission error", err)
	}
	// A shell's builtins open files too; and the shell cannot exec cat.
	for _, script := range []string{
		"echo x > " + filepath.Join(dir, "new"),
		"echo x >> " + canary,
		"read l < " + canary + "; echo $l",
		cat + " " + canary,
		"cd " + dir + " && echo *",
	} {
		out, _ := Output(exec.Command(sh, "-c", script), nil)
		if strings.Contains(string(out), "CANARY") || strings.Contains(string(out), "id_ed25519") {
			t.Errorf("%q: %q", script, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a confined shell created a file")
	}
	if b, _ := os.ReadFile(canary); string(b) != "CANARY-SECRET" {
		t.Errorf("a confined shell changed the canary: %q", b)
	}
	// The daemon's thread that forked is unaffected: it can still read.
	if _, err := os.ReadFile(canary); err != nil {
		t.Errorf("the parent lost access: %v", err)
	}
}

// A rule grants exactly its file.
func TestConfinedRule(t *testing.T) {
	cat := need(t, "cat")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("A"), 0o600)
	os.WriteFile(b, []byte("B"), 0o600)
	if out, err := Output(exec.Command(cat, a), []Rule{{Path: a, Access: Read}}); err != nil || string(out) != "A" {
		t.Errorf("granted file: %q %v", out, err)
	}
	if out, err := Output(exec.Command(cat, b), []Rule{{Path: a, Access: Read}}); err == nil {
		t.Errorf("ungranted file read: %q", out)
	}
}

// A confined tmux client still talks to its server through the socket
// descriptor it is given, and a file request of that server fails in the
// client: load-buffer and save-buffer are carried out by the client.
func TestConfinedTmuxClient(t *testing.T) {
	tm := need(t, "tmux")
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	srv := exec.Command(tm, "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "sleep 60")
	srv.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "SHELL=/bin/sh"}
	if out, err := srv.CombinedOutput(); err != nil {
		t.Fatalf("tmux server: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(tm, "-S", sock, "kill-server").Run() })
	canary := filepath.Join(dir, "id_ed25519")
	os.WriteFile(canary, []byte("CANARY-SECRET"), 0o600)

	fd, err := unix.Open(sock, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), sock)
	defer f.Close()
	client := func(args ...string) ([]byte, error) {
		cmd := exec.Command(tm, append([]string{"-S", "/proc/self/fd/3"}, args...)...)
		cmd.ExtraFiles = []*os.File{f}
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "SHELL=/bin/sh"}
		return Output(cmd, []Rule{{Path: "/usr/lib/locale", Access: ReadTree}, {Path: "/usr/share/locale/locale.alias", Access: Read}})
	}
	out, err := client("list-sessions", "-F", "#{session_name}")
	if err != nil || strings.TrimSpace(string(out)) != "w" {
		t.Fatalf("confined list-sessions: %q %v", out, err)
	}
	// Unconfined, the client reads the file for the server: the refusal
	// below is the domain's.
	if out, err := exec.Command(tm, "-S", sock, "load-buffer", "-b", "control", canary).CombinedOutput(); err != nil {
		t.Fatalf("unconfined load-buffer: %v %s", err, out)
	}
	if _, err := client("load-buffer", "-b", "stolen", canary); err == nil {
		t.Error("a confined client read a file for its server")
	}
	if out, _ := exec.Command(tm, "-S", sock, "show-buffer", "-b", "stolen").Output(); strings.Contains(string(out), "CANARY") {
		t.Error("the canary reached the server")
	}
	exec.Command(tm, "-S", sock, "set-buffer", "-b", "planted", "PLANTED").Run()
	written := filepath.Join(dir, "written")
	if _, err := client("save-buffer", "-b", "planted", written); err == nil {
		t.Error("a confined client wrote a file for its server")
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(written); err == nil {
		t.Error("the file was written")
	}
}

// TestProgramRulesShared: the rules of a program are one cached slice,
// shared by every caller; each gets it with no spare capacity, so that
// callers appending their own rules at once (Start does) each get a copy
// instead of writing into the same array.
func TestProgramRulesShared(t *testing.T) {
	// A dynamically linked program: its rules are built by appends,
	// which leave spare capacity.
	const prog = "/bin/sh"
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				rules, err := ProgramRules(prog)
				if err != nil {
					t.Error(err)
					return
				}
				if cap(rules) != len(rules) {
					t.Errorf("ProgramRules: %d rules with capacity %d: an append writes into the cache", len(rules), cap(rules))
					return
				}
				mine := Rule{Path: fmt.Sprintf("/nonexistent/%d", i)}
				if all := append(rules, mine); all[len(all)-1] != mine {
					t.Errorf("goroutine %d's rule was overwritten: %v", i, all[len(all)-1])
					return
				}
			}
		}()
	}
	wg.Wait()
}
