package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/client"
)

// fakeAgent is a fake harness process the test started (and so may signal).
type fakeAgent struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startFake runs the fake harness under name (claude, codex) in cwd with
// HOME=home and the given extra environment.
func startFake(t *testing.T, name, home, cwd string, env ...string) *fakeAgent {
	t.Helper()
	cmd := exec.Command(bin(name))
	cmd.Dir = cwd
	cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/bin:/bin"}, env...)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	a := &fakeAgent{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

func (a *fakeAgent) pid() int { return a.cmd.Process.Pid }

// waitRegistry waits for the fake claude with pid to have written its
// registry record under home (it does so just after it starts), and
// returns the record's path.
func waitRegistry(t *testing.T, home string, pid int) string {
	t.Helper()
	registry := filepath.Join(home, ".claude", "sessions", strconv.Itoa(pid)+".json")
	eventually(t, func() bool { _, err := os.Stat(registry); return err == nil }, "the fake claude's registry record ("+registry+")")
	return registry
}

func (a *fakeAgent) stop(t *testing.T) {
	select {
	case <-a.done:
		return
	default:
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
}

func readField(c *client.Client, path string) (string, error) {
	b, err := c.ReadFile(path)
	return strings.TrimSuffix(string(b), "\n"), err
}

func listNames(t *testing.T, c *client.Client, path string) []string {
	t.Helper()
	ents, err := c.ReadDir(path)
	if err != nil {
		t.Fatalf("ls %s: %v", path, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestActiveLive: real processes shaped like Claude and Codex appear under
// /active with the right fields and via, and disappear when they exit.
func TestActiveLive(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	const claudeSID = "5e3a1c2b-0d4f-4a6b-8c9d-0e1f2a3b4c5d"
	const codexSID = "019e8888-1111-7222-8333-444455556666"
	cl := startFake(t, "claude", home, cwd, "FAKE_SESSION="+claudeSID, "ZMX_SESSION=work")
	cx := startFake(t, "codex", home, cwd, "FAKE_SESSION="+codexSID)
	waitRegistry(t, home, cl.pid())

	d := startDaemon(t, home)
	c := d.client()
	clDir := "/active/claude/" + strconv.Itoa(cl.pid())
	cxDir := "/active/codex/" + strconv.Itoa(cx.pid())
	eventually(t, func() bool {
		return contains(listNames(t, c, "/active/claude"), strconv.Itoa(cl.pid())) &&
			contains(listNames(t, c, "/active/codex"), strconv.Itoa(cx.pid()))
	}, "both agents listed")

	for path, want := range map[string]string{
		clDir + "/pid":     strconv.Itoa(cl.pid()),
		clDir + "/ppid":    strconv.Itoa(os.Getpid()),
		clDir + "/session": claudeSID,
		clDir + "/via":     "registry",
		clDir + "/cwd":     cwd,
		clDir + "/status":  "busy",
		clDir + "/name":    "x",
		clDir + "/title":   "fake claude " + strconv.Itoa(cl.pid()),
		clDir + "/model":   "claude-opus-4-6",
		clDir + "/zmx":     "work",
		cxDir + "/session": codexSID,
		cxDir + "/via":     "fd",
		cxDir + "/cwd":     cwd,
		cxDir + "/model":   "gpt-5.6",
		cxDir + "/zmx":     "",
	} {
		got, err := readField(c, path)
		if err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", path, got, err, want)
		}
	}
	started, err := readField(c, clDir+"/started")
	must(t, err)
	if s, _ := strconv.ParseInt(started, 10, 64); time.Since(time.Unix(s, 0)) > time.Minute || time.Since(time.Unix(s, 0)) < -2*time.Second {
		t.Errorf("started = %s, not about now", started)
	}
	// The transcript is the live file.
	tr, err := c.ReadFile(clDir + "/transcript")
	must(t, err)
	host, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", claudeSID+".jsonl"))
	if len(host) != 1 {
		t.Fatalf("host transcript: %v", host)
	}
	want, _ := os.ReadFile(host[0])
	if !bytes.Equal(tr, want) {
		t.Errorf("transcript differs from %s", host[0])
	}
	// Codex has no status: the file is absent, not empty.
	if _, _, err := c.Stat(cxDir + "/status"); !isErrno(err, linux.ENOENT) {
		t.Errorf("codex status: %v, want ENOENT", err)
	}

	cl.stop(t)
	if contains(listNames(t, c, "/active/claude"), strconv.Itoa(cl.pid())) {
		t.Error("an exited agent is still listed")
	}
	if _, _, err := c.Stat(clDir + "/session"); !isErrno(err, linux.ENOENT) {
		t.Errorf("exited agent's field: %v, want ENOENT", err)
	}
	if !contains(listNames(t, c, "/active/codex"), strconv.Itoa(cx.pid())) {
		t.Error("the other agent vanished")
	}
}

// TestActiveNeverListsOwnAncestry: the daemon runs under a process shaped
// like a harness; that process is never listed, while another one is.
//
// Guards rule 8: the daemon never lists or acts on its own ancestry.
func TestActiveNeverListsOwnAncestry(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "y")
	must(t, os.MkdirAll(cwd, 0o755))
	other := startFake(t, "claude", home, cwd, "FAKE_SESSION=11111111-2222-4333-8444-555555555555")
	sock := filepath.Join(t.TempDir(), "harness.sock")
	daemonArgs := append([]string{bin("9harnessd"), "--unix", sock, "--audit", "stderr"}, rootArgs(home)...)
	parent := startFake(t, "claude", home, cwd, "FAKE_SESSION=66666666-7777-4888-8999-000000000000",
		"FAKE_CHILD="+strings.Join(daemonArgs, "\x1f"))
	d := &daemon{t: t, sock: sock, stderr: &syncBuffer{}}
	deadline := time.Now().Add(15 * time.Second)
	var c *client.Client
	for {
		var err error
		if c, err = client.Dial(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon under the fake claude did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	_ = d
	eventually(t, func() bool { return contains(listNames(t, c, "/active/claude"), strconv.Itoa(other.pid())) }, "the unrelated agent")
	names := listNames(t, c, "/active/claude")
	if contains(names, strconv.Itoa(parent.pid())) {
		t.Fatalf("the daemon's own parent %d is listed: %v", parent.pid(), names)
	}
	if _, _, err := c.Stat("/active/claude/" + strconv.Itoa(parent.pid())); !isErrno(err, linux.ENOENT) {
		t.Fatalf("the daemon's own parent can be looked up: %v", err)
	}
}
