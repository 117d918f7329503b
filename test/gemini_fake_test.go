package test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestActiveGeminiFake: the fake Gemini CLI's launcher and relaunched
// child. The child is listed with the facts of the chat it wrote, the
// launcher never is; the chat is byte-identical through /active and the
// /gemini mirror; the launcher ignores SIGTERM as the real one does, and
// exits when its child does.
func TestActiveGeminiFake(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "gemproj")
	must(t, os.MkdirAll(cwd, 0o755))
	const sid = "7c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"
	l := startHarness(t, "gemini", home, cwd, nil, "FAKE_SESSION="+sid)
	chat := waitFile(t, filepath.Join(home, ".gemini", "tmp", "gemproj", "chats", "session-*-7c1d2e3f.jsonl"))
	var child int
	eventually(t, func() bool {
		for _, c := range childrenOf(l.pid()) {
			child = c
		}
		return child != 0
	}, "the fake gemini's relaunched child")
	// Runs before startHarness's cleanup: the launcher ignores SIGTERM,
	// so its child is stopped first, by pid.
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGTERM) })

	d := startDaemon(t, home)
	c := d.client()
	dir := "/active/gemini/" + strconv.Itoa(child)
	eventually(t, func() bool { return contains(listNames(t, c, "/active/gemini"), strconv.Itoa(child)) }, "the child listed")
	if names := listNames(t, c, "/active/gemini"); contains(names, strconv.Itoa(l.pid())) {
		t.Errorf("the launcher %d is listed: %v", l.pid(), names)
	}
	for path, want := range map[string]string{
		dir + "/session": sid,
		dir + "/via":     "dir",
		dir + "/cwd":     cwd,
		dir + "/ppid":    strconv.Itoa(l.pid()),
		dir + "/model":   "gemini-2.5-pro",
		dir + "/title":   "fix the build",
	} {
		if got, err := readField(c, path); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", path, got, err, want)
		}
	}
	host, _ := os.ReadFile(chat)
	for _, p := range []string{dir + "/transcript", "/gemini/tmp/gemproj/chats/" + filepath.Base(chat)} {
		if b, err := c.ReadFile(p); err != nil || !bytes.Equal(b, host) {
			t.Errorf("%s: %d bytes (%v), want the %d bytes of %s", p, len(b), err, len(host), chat)
		}
	}
	if got := listNames(t, c, "/gemini"); strings.Join(got, " ") != "projects tmp" {
		t.Errorf("/gemini lists %v, want [projects tmp]", got)
	}

	// The launcher ignores SIGTERM; the child does not, and takes the
	// launcher with it.
	syscall.Kill(l.pid(), syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	if l.exited() {
		t.Error("the launcher exited on SIGTERM")
	}
	syscall.Kill(child, syscall.SIGTERM)
	eventually(t, l.exited, "the launcher to exit with its child")
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			c, _ := strconv.Atoi(e.Name())
			out = append(out, c)
		}
	}
	return out
}
