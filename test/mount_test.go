package test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of `9harness mount`: the tree through FUSE, read by ordinary
// programs and system calls, and the one write (a move) through it.

// requireFuse is for tests that mount as root: the kernel's FUSE device.
func requireFuse(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing(t, "no /dev/fuse: the kernel has no FUSE (modprobe fuse)")
	}
}

// fuseMount is a `9harness mount -f DIR` this test started.
type fuseMount struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// mountTree mounts the tree of the daemon at sock on a fresh directory
// with `9harness mount -f` and waits until it says so.
func mountTree(t *testing.T, sock string) *fuseMount {
	t.Helper()
	m := &fuseMount{t: t, dir: t.TempDir(), out: &syncBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(bin("9harness"), "-s", sock, "mount", "-f", m.dir)
	// Its exit is waited for: without the race runtime's exit sleep.
	m.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	must(t, m.cmd.Start())
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(m.cleanup)
	want := fmt.Sprintf("mounted %s on %s\n", sock, m.dir)
	deadline := time.Now().Add(60 * time.Second) // a bound on a hang
	for !strings.Contains(m.out.String(), want) {
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("9harness mount exited: %v\n%s", err, m.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 60 s:\n%s", m.out.String())
		}
	}
	if !isMounted(t, m.dir) {
		t.Fatalf("%s said it mounted, but /proc/self/mountinfo has no %s", m.cmd, m.dir)
	}
	return m
}

func (m *fuseMount) path(treePath string) string { return filepath.Join(m.dir, treePath) }

// umount runs `9harness umount DIR` and waits for the mount process to
// end by itself: unmounted from outside, it exits 0.
func (m *fuseMount) umount() {
	m.t.Helper()
	out, err := exec.Command(bin("9harness"), "umount", m.dir).CombinedOutput()
	if err != nil || string(out) != "unmounted "+m.dir+"\n" {
		m.t.Fatalf("9harness umount: %v %q", err, out)
	}
	select {
	case err := <-m.done:
		m.done <- err
		if err != nil {
			m.t.Errorf("the mount process ended with %v after umount:\n%s", err, m.out.String())
		}
	case <-time.After(60 * time.Second):
		// A bound on a hang, not a timing: a race-built process that has
		// left its main can take tens of seconds to end under heavy load.
		//
		// A mount namespace made while the tree was mounted (another
		// test's unshare) holds a copy of the mount, and the kernel keeps
		// serving it to that namespace: umount here cannot end it.
		if pid := heldElsewhere(m.dir); pid != 0 {
			m.t.Logf("%s is still mounted in the mount namespace of pid %d, made while it was mounted here; ending the mount process", m.dir, pid)
			m.cmd.Process.Kill()
			err := <-m.done
			m.done <- err
			return
		}
		// Its goroutines say where it waits: SIGQUIT makes a Go program
		// print them as it exits.
		m.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err := <-m.done:
			m.done <- err
		case <-time.After(5 * time.Second):
		}
		m.t.Fatalf("the mount process still runs 20 s after umount:\n%s", m.out.String())
	}
	if isMounted(m.t, m.dir) {
		m.t.Errorf("%s is still in /proc/self/mountinfo after umount", m.dir)
	}
}

// cleanup unmounts (lazily: a failed test may hold files open) and ends
// the mount process, which is this test's own.
func (m *fuseMount) cleanup() {
	if m.t.Failed() {
		m.t.Logf("the mount process's output:\n%s", m.out.String())
	}
	if isMounted(m.t, m.dir) {
		syscall.Unmount(m.dir, syscall.MNT_DETACH)
	}
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		m.t.Errorf("the mount process did not end when unmounted:\n%s", m.out.String())
	}
}

// isMounted reports whether dir is a mount point in this mount namespace.
func isMounted(t testing.TB, dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// mountinfoLine is dir's line of /proc/self/mountinfo.
func mountinfoLine(t testing.TB, dir string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return l
		}
	}
	return ""
}

// TestMountRead: the fixture tree through the mount is exactly the tree,
// every file byte-identical to its host file; a directory of 10,000 names
// lists completely; a line appended on the host is visible through the
// mount at once, also to tail -f; nothing can be written; umount is clean.
func TestMountRead(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	home := fixtureHome(t)
	fixturePIDDomain(t, home) // as TestFixtureTree: /stale judges the records
	d := startDaemon(t, home, "--proc", emptyProc(t))
	m := mountTree(t, d.sock)

	if l := mountinfoLine(t, m.dir); !strings.Contains(l, " - fuse.9harness 9harness:"+d.sock+" ") {
		t.Errorf("mount table line %q: want type fuse.9harness, source 9harness:%s", l, d.sock)
	} else if strings.Contains(l, "allow_other") {
		t.Errorf("mounted with allow_other: %q", l)
	}

	// The whole tree, through readdir and stat of the kernel.
	var got []string
	must(t, filepath.WalkDir(m.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		tp := "/" + strings.TrimPrefix(strings.TrimPrefix(p, m.dir), "/")
		if e.IsDir() {
			if tp != "/" {
				tp += "/"
			}
		} else if !e.Type().IsRegular() {
			t.Errorf("%s: type %v through the mount", tp, e.Type())
		}
		got = append(got, tp)
		return nil
	}))
	sort.Strings(got)
	if missing, extra := diffSets(expectedTree(t), got); len(missing)+len(extra) > 0 {
		t.Fatalf("the mounted tree differs from testdata/home.tree:\n missing: %q\n extra: %q", missing, extra)
	}
	files := 0
	for _, p := range got {
		if strings.HasSuffix(p, "/") || p == "/pid" || p == "/uptime" || strings.HasPrefix(p, "/stale/") {
			continue
		}
		host, ok := hostOf(home, p)
		if !ok {
			t.Errorf("%s: no host mapping", p)
			continue
		}
		want, err := os.ReadFile(host)
		must(t, err)
		b, err := os.ReadFile(m.path(p))
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s through the mount: %d bytes (%v), the host has %d", p, len(b), err, len(want))
		}
		fi, err := os.Stat(m.path(p))
		if err != nil || fi.Size() != int64(len(want)) || fi.Mode() != 0o444 {
			t.Errorf("%s: stat %v %v", p, fi, err)
		}
		files++
	}
	if b, err := os.ReadFile(m.path("/pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(d.cmd.Process.Pid) {
		t.Errorf("/pid through the mount: %q %v", b, err)
	}
	t.Logf("%d files byte-identical through the mount", files)

	// A large transcript (many FUSE reads, many 9P messages), made while
	// mounted: the tree is live.
	projects := filepath.Join(home, ".claude", "projects")
	var big bytes.Buffer
	for i := 0; big.Len() < 6<<20; i++ {
		fmt.Fprintf(&big, "{\"type\":\"user\",\"n\":%d,\"text\":%q}\n", i, strings.Repeat("mount ", i%113))
	}
	largeHost := filepath.Join(projects, "-home-goblin-src-x", "large.jsonl")
	must(t, os.WriteFile(largeHost, big.Bytes(), 0o644))
	large := m.path("/claude/projects/-home-goblin-src-x/large.jsonl")
	if out, err := exec.Command("cmp", largeHost, large).CombinedOutput(); err != nil {
		t.Errorf("cmp of a %d-byte transcript: %v %s", big.Len(), err, out)
	}

	// 10,000 names, through getdents and through ls.
	many := filepath.Join(projects, "-home-goblin-many")
	must(t, os.Mkdir(many, 0o755))
	for i := 0; i < 10000; i++ {
		must(t, os.WriteFile(filepath.Join(many, fmt.Sprintf("%08d-%s.jsonl", i, strings.Repeat("n", i%40))), nil, 0o644))
	}
	ents, err := os.ReadDir(m.path("/claude/projects/-home-goblin-many"))
	if err != nil || len(ents) != 10000 {
		t.Errorf("os.ReadDir of 10,000 names: %d entries, %v", len(ents), err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.Name()] = true
	}
	if len(seen) != 10000 {
		t.Errorf("%d distinct names of 10,000", len(seen))
	}
	out, err := exec.Command("sh", "-c", `ls -f "$1" | wc -l`, "sh", m.path("/claude/projects/-home-goblin-many")).Output()
	if err != nil || strings.TrimSpace(string(out)) != "10002" {
		t.Errorf("ls -f | wc -l = %q (%v), want 10002 (with . and ..)", out, err)
	}

	// A line appended on the host: visible at once, to a second read and
	// to a tail -f that was already following.
	const tr = "/claude/projects/-home-goblin-src-x/776cd19e-24b2-42a4-b1de-792f056ae0eb.jsonl"
	hostTr, _ := hostOf(home, tr)
	before, err := os.ReadFile(m.path(tr))
	must(t, err)
	tail := exec.Command("tail", "-n", "0", "-f", m.path(tr))
	tailOut := &syncBuffer{}
	tail.Stdout = tailOut
	must(t, tail.Start())
	defer func() { tail.Process.Kill(); tail.Wait() }()
	time.Sleep(300 * time.Millisecond) // tail has read to the end
	line := "{\"type\":\"assistant\",\"appended\":\"through the mount\"}\n"
	f, err := os.OpenFile(hostTr, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(line)
	must(t, err)
	must(t, f.Close())
	after, err := os.ReadFile(m.path(tr))
	if err != nil || string(after) != string(before)+line {
		t.Errorf("read right after the append: %d bytes (%v), want %d", len(after), err, len(before)+len(line))
	}
	fi, err := os.Stat(m.path(tr))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stat right after the append: size %d of %d (the attribute TTL is 1 s)", fi.Size(), len(after))
	eventually15(t, func() bool { return tailOut.String() == line }, "tail -f through the mount to print the appended line")

	// Nothing else can be written, whatever the call.
	file, dir := m.path("/claude/history"), m.path("/claude/projects")
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"open O_WRONLY", openErr(file, os.O_WRONLY)},
		{"open O_RDWR", openErr(file, os.O_RDWR)},
		{"open O_WRONLY|O_TRUNC", openErr(file, os.O_WRONLY|os.O_TRUNC)},
		{"open O_APPEND", openErr(m.path("/pid"), os.O_WRONLY|os.O_APPEND)},
		{"open O_RDONLY|O_TRUNC", openErr(file, os.O_RDONLY|os.O_TRUNC)},
		{"create", openErr(filepath.Join(dir, "new.jsonl"), os.O_WRONLY|os.O_CREATE)},
		{"create O_EXCL", openErr(filepath.Join(dir, "new.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL)},
		{"truncate", os.Truncate(file, 0)},
		{"truncate to 0 of a read-only zmx-less file", os.Truncate(m.path("/uptime"), 0)},
		{"chmod", os.Chmod(file, 0o644)},
		{"chown", os.Chown(file, 1, 1)},
		{"utimes", os.Chtimes(file, time.Now(), time.Now())},
		{"mkdir", os.Mkdir(filepath.Join(dir, "d"), 0o755)},
		{"unlink", os.Remove(file)},
		{"rmdir", syscall.Rmdir(m.path("/claude/projects/-home-goblin-my-proj-v1-2"))},
		{"rename", os.Rename(file, file+".old")},
		{"symlink", os.Symlink("/etc/passwd", filepath.Join(dir, "l"))},
		{"link", os.Link(file, filepath.Join(dir, "h"))},
		{"mknod", syscall.Mknod(filepath.Join(dir, "fifo"), syscall.S_IFIFO|0o644, 0)},
		{"access W_OK", syscall.Access(file, 2)},
	} {
		if !errors.Is(tc.err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", tc.what, tc.err)
		}
	}
	if out, err := exec.Command("sh", "-c", `echo x > "$1"`, "sh", file).CombinedOutput(); err == nil || !strings.Contains(string(out), "Read-only file system") {
		t.Errorf("echo x > history: %v %s", err, out)
	}
	if b, _ := os.ReadFile(hostTr); string(b) != string(after) {
		t.Error("the host transcript changed")
	}

	tail.Process.Kill()
	tail.Wait()
	m.umount()
}

func openErr(path string, flags int) error {
	f, err := os.OpenFile(path, flags, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

// TestMountMove: under --allow-move an agent's tmux file is writable
// through the mount, echo NAME > it moves the agent, and a refusal is the
// daemon's errno; without --allow-move it is read-only like the rest.
//
// Guards rule 4: read-only by absence.
func TestMountMove(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	me := newMoveEnv(t)
	const sid = "4b5c6d7e-8f9a-4b0c-9d1e-2f3a4b5c6d7e"
	agent := me.startClaude(t, sid)
	readonly := startDaemon(t, me.home)
	d := startDaemon(t, me.home, "--allow-move")
	ro, m := mountTree(t, readonly.sock), mountTree(t, d.sock)
	dir := "/active/claude/" + strconv.Itoa(agent.pid())

	// Without --allow-move: a 0444 file like any other.
	if fi, err := os.Stat(ro.path(dir + "/tmux")); err != nil || fi.Mode() != 0o444 {
		t.Errorf("tmux without --allow-move: %v %v", fi, err)
	}
	if out, err := exec.Command("sh", "-c", `echo nope > "$1"`, "sh", ro.path(dir+"/tmux")).CombinedOutput(); err == nil || !strings.Contains(string(out), "Read-only file system") {
		t.Errorf("a move through a read-only daemon's mount: %v %s", err, out)
	}
	ro.umount()

	if fi, err := os.Stat(m.path(dir + "/tmux")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("tmux under --allow-move: %v %v, want -rw-r--r--", fi, err)
	}
	if err := syscall.Access(m.path(dir+"/tmux"), 2); err != nil {
		t.Errorf("access(tmux, W_OK): %v", err)
	}
	// The agent's other facts stay read-only.
	if err := openErr(m.path(dir+"/session"), os.O_WRONLY|os.O_TRUNC); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open session for writing: %v, want EROFS", err)
	}
	// Read-write: after a refused write, a read of the same handle at
	// offset 0 says why (the errno alone cannot); another handle reads the file.
	if rw, err := os.OpenFile(m.path(dir+"/tmux"), os.O_RDWR, 0); err != nil {
		t.Errorf("open tmux O_RDWR: %v", err)
	} else {
		_, werr := rw.Write([]byte("a b"))
		buf := make([]byte, 4096)
		n, _ := rw.ReadAt(buf, 0)
		rw.Close()
		if !errors.Is(werr, syscall.EINVAL) || !strings.HasPrefix(string(buf[:n]), "refused: ") {
			t.Errorf("O_RDWR write of a bad name: %v, then read %q; want EINVAL and the reason", werr, buf[:n])
		}
		if b, err := os.ReadFile(m.path(dir + "/tmux")); err != nil || strings.HasPrefix(string(b), "refused") {
			t.Errorf("another handle reads %q %v", b, err)
		}
	}
	if err := os.Truncate(m.path(dir+"/tmux"), 5); !errors.Is(err, syscall.EROFS) {
		t.Errorf("truncate tmux to 5: %v, want EROFS", err)
	}
	// A refusal reaches the writer as the daemon's errno, and touches
	// nothing.
	for _, tc := range []struct {
		name string
		want syscall.Errno
	}{{"a b", syscall.EINVAL}, {"..", syscall.EINVAL}, {"", syscall.EINVAL}} {
		f, err := os.OpenFile(m.path(dir+"/tmux"), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatalf("open tmux for writing: %v", err)
		}
		_, err = f.Write([]byte(tc.name + "\n"))
		f.Close()
		if !errors.Is(err, tc.want) {
			t.Errorf("write %q through the mount: %v, want %v", tc.name, err, tc.want)
		}
	}
	out, err := exec.Command("sh", "-c", `/usr/bin/printf 'a b' > "$1"`, "sh", m.path(dir+"/tmux")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Invalid argument") {
		t.Errorf("printf 'a b' > tmux through the mount: %v %s, want Invalid argument", err, out)
	}
	if len(me.records(t)) != 1 || !running(t, agent.pid()) {
		t.Fatal("a refused move touched the agent")
	}

	// The move: what a shell does.
	start := time.Now()
	out, err = exec.Command("sh", "-c", `echo moved > "$1"`, "sh", m.path(dir+"/tmux")).CombinedOutput()
	if err != nil {
		t.Fatalf("echo moved > tmux through the mount: %v %s\n%s", err, out, d.stderr.String())
	}
	t.Logf("the move through the mount took %v", time.Since(start).Round(time.Millisecond))
	select {
	case <-agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the old agent still runs after the write returned")
	}
	eventually(t, func() bool { return len(me.records(t)) == 2 }, "the relaunch's record")
	nw := me.records(t)[1]
	defer func() {
		if p, err := os.FindProcess(nw.PID); err == nil {
			p.Signal(os.Interrupt)
		}
	}()
	if got := strings.Join(nw.Argv[1:], " "); got != "--resume "+sid {
		t.Errorf("relaunched with %q", nw.Argv)
	}
	if panes, err := me.tmux("list-panes", "-s", "-t", "=moved", "-F", "#{pane_pid}"); err != nil || panes != strconv.Itoa(nw.PID) {
		t.Errorf("tmux session moved: panes %q (%v), want %d", panes, err, nw.PID)
	}
	// And the mount shows it: the new agent, in its session.
	newDir := "/active/claude/" + strconv.Itoa(nw.PID)
	eventually15(t, func() bool {
		b, err := os.ReadFile(m.path(newDir + "/tmux"))
		return err == nil && string(b) == "moved\n"
	}, "the moved agent under /active through the mount")
	if b, err := os.ReadFile(m.path(newDir + "/session")); err != nil || strings.TrimSpace(string(b)) != sid {
		t.Errorf("the moved agent's session through the mount: %q %v", b, err)
	}
	eventually15(t, func() bool { _, err := os.Stat(m.path(dir)); return errors.Is(err, os.ErrNotExist) }, "the old agent to leave /active")
	m.umount()
}

// TestMountEnds: SIGINT unmounts; SIGTERM on a busy mount detaches it
// (the open file then answers ENOTCONN); a daemon that goes away takes the
// mount with it: the next access fails and the mount process unmounts and
// exits 1, saying why. None leaves a mount behind.
func TestMountEnds(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	home := fixtureHome(t)
	d := startDaemon(t, home)
	wait := func(m *fuseMount, wantOK bool) {
		t.Helper()
		select {
		case err := <-m.done:
			m.done <- err
			if (err == nil) != wantOK {
				t.Errorf("the mount process ended with %v (want success %v):\n%s", err, wantOK, m.out.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the mount process still runs:\n%s", m.out.String())
		}
		if isMounted(t, m.dir) {
			t.Errorf("%s is still mounted", m.dir)
		}
	}

	m := mountTree(t, d.sock)
	must(t, m.cmd.Process.Signal(syscall.SIGINT))
	wait(m, true)

	m = mountTree(t, d.sock)
	f, err := os.Open(m.path("/claude/history"))
	must(t, err)
	defer f.Close()
	must(t, m.cmd.Process.Signal(syscall.SIGTERM))
	wait(m, true)
	if !strings.Contains(m.out.String(), "is busy; detaching it") {
		t.Errorf("a busy mount ended without saying so:\n%s", m.out.String())
	}
	if _, err := f.Read(make([]byte, 10)); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("a file held open across the detach: %v, want ENOTCONN", err)
	}

	m = mountTree(t, d.sock)
	d.stop()
	if _, err := os.ReadFile(m.path("/pid")); err == nil {
		t.Error("read /pid through the mount of a stopped daemon")
	}
	wait(m, false)
	if !strings.Contains(m.out.String(), "lost the daemon at "+d.sock) {
		t.Errorf("the mount ended without saying it lost the daemon:\n%s", m.out.String())
	}
}

// TestMountUnprivileged: an ordinary user mounts its own daemon's tree with
// fusermount3, reads it and unmounts it; root, without allow_other, cannot
// look in. This machine's /dev/fuse may be 0600 and its fusermount3 not
// setuid, so it happens in a private mount namespace: a 0666 FUSE node
// bind-mounted over /dev/fuse and a setuid copy of fusermount3, both on a
// tmpfs only that namespace sees. The host's /dev/fuse is never touched.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestMountUnprivileged(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	for _, tool := range []string{"unshare", "setpriv", "mknod", "useradd", "userdel"} {
		require(t, tool)
	}
	fusermount := require(t, "fusermount3")

	base, err := os.MkdirTemp("", "9harness-fuse-")
	must(t, err)
	t.Cleanup(func() {
		if strings.HasPrefix(base, os.TempDir()+"/9harness-fuse-") {
			os.RemoveAll(base)
		}
	})
	must(t, os.Chmod(base, 0o755))
	u := &sshHost{user: fmt.Sprintf("h9test%06d", rand.IntN(1_000_000)), home: filepath.Join(base, "home")}
	if out, err := userTool(require(t, "useradd"), "-M", "-d", u.home, "-s", "/bin/sh", "-U", u.user); err != nil {
		t.Fatalf("useradd %s: %v\n%s", u.user, err, out)
	}
	userdel := require(t, "userdel")
	t.Cleanup(func() { u.remove(t, userdel) })
	lu, err := user.Lookup(u.user)
	must(t, err)
	u.uid, _ = strconv.Atoi(lu.Uid)
	u.gid, _ = strconv.Atoi(lu.Gid)
	for _, d := range []string{u.home, filepath.Join(base, "run"), filepath.Join(base, "mnt")} {
		must(t, os.Mkdir(d, 0o700))
		u.chown(t, d)
	}
	fixture := fixtureHome(t)
	u.chown(t, fixture)
	must(t, os.Chmod(filepath.Dir(fixture), 0o711))
	priv := filepath.Join(base, "priv")
	must(t, os.Mkdir(priv, 0o700))

	var roots []string
	for _, a := range rootArgs(fixture) {
		roots = append(roots, strconv.Quote(a))
	}
	sock := filepath.Join(base, "run", "harness.sock")
	mnt := filepath.Join(base, "mnt")
	out := inNamespace(t, `
mount -t tmpfs -o mode=755 tmpfs "$PRIV"
mkdir "$PRIV/bin"
cp "$FUSERMOUNT" "$PRIV/bin/fusermount3"
chmod 4755 "$PRIV/bin/fusermount3"
mknod -m 666 "$PRIV/fuse" c 10 229
mount --bind "$PRIV/fuse" /dev/fuse
echo "DEVFUSE $(stat -c %a /dev/fuse)"
as() { setpriv --reuid="$U" --regid="$G" --clear-groups -- env -i PATH="$PRIV/bin:/usr/bin:/bin" HOME="$UHOME" "$@"; }
dpid=
cleanup() {
	grep -q " $MNT " /proc/self/mountinfo && umount -l "$MNT"
	[ -z "$dpid" ] || { kill "$dpid"; wait "$dpid" || true; }
}
trap cleanup EXIT
setpriv --reuid="$U" --regid="$G" --clear-groups -- env -i PATH=/usr/bin:/bin HOME="$UHOME" \
	"$BINS/9harnessd" --unix "$SOCK" --audit stderr `+strings.Join(roots, " ")+` >"$UHOME/daemon.log" 2>&1 &
dpid=$!
for i in $(seq 150); do [ -S "$SOCK" ] && break; sleep 0.1; done
echo "MOUNT $(as "$BINS/9harness" -s "$SOCK" mount "$MNT" 2>&1)"
echo "MOUNTINFO $(grep " $MNT " /proc/self/mountinfo)"
echo "SERVER $(pgrep -u "$U" -f "mount -f $MNT" | wc -l)"
echo "PID $(as cat "$MNT/pid")"
as cmp "$FIX/.claude/history.jsonl" "$MNT/claude/history" && echo "HISTORY identical"
echo "LS $(as ls "$MNT/claude/projects" | tr '\n' ' ')"
echo "WRITE $(as sh -c "echo x > $MNT/pid" 2>&1)"
echo "ROOT $(ls "$MNT" 2>&1)"
echo "UMOUNT $(as "$BINS/9harness" umount "$MNT" 2>&1)"
for i in $(seq 100); do pgrep -u "$U" -f "mount -f $MNT" >/dev/null || break; sleep 0.1; done
echo "LEFT $(grep -c " $MNT " /proc/self/mountinfo || true) $(pgrep -u "$U" -f "mount -f $MNT" || true)"
`, "PRIV="+priv, "FUSERMOUNT="+fusermount, "U="+strconv.Itoa(u.uid), "G="+strconv.Itoa(u.gid), "UHOME="+u.home,
		"BINS="+bins, "SOCK="+sock, "MNT="+mnt, "FIX="+fixture)

	lines := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			lines[k] = v
		}
	}
	check := func(key, want string, ok bool) {
		if !ok {
			t.Errorf("%s: %q, want %s", key, lines[key], want)
		}
	}
	check("DEVFUSE", "666 inside the namespace", lines["DEVFUSE"] == "666")
	check("MOUNT", "mounted "+sock+" on "+mnt, lines["MOUNT"] == "mounted "+sock+" on "+mnt)
	mi := lines["MOUNTINFO"]
	check("MOUNTINFO", "a fuse.9harness mount by fusermount3 with user_id="+strconv.Itoa(u.uid),
		strings.Contains(mi, " - fuse.9harness 9harness:"+sock+" ") && strings.Contains(mi, "user_id="+strconv.Itoa(u.uid)) && !strings.Contains(mi, "allow_other"))
	check("SERVER", "one mount process, the user's", lines["SERVER"] == "1")
	check("PID", "the user's daemon's pid", lines["PID"] != "")
	check("HISTORY", "identical", lines["HISTORY"] == "identical")
	check("LS", "the fixture's projects", strings.Contains(lines["LS"], "-home-goblin-src-x"))
	check("WRITE", "Read-only file system", strings.Contains(lines["WRITE"], "Read-only file system"))
	check("ROOT", "Permission denied (no allow_other)", strings.Contains(lines["ROOT"], "Permission denied"))
	check("UMOUNT", "unmounted "+mnt, lines["UMOUNT"] == "unmounted "+mnt)
	check("LEFT", "no mount and no mount process left", lines["LEFT"] == "0 ")
	if t.Failed() {
		t.Logf("namespace output:\n%s", out)
	}
	if fi, err := os.Stat("/dev/fuse"); err == nil && fi.Mode().Perm() == 0o666 {
		t.Logf("note: the host's /dev/fuse is 0666 (as a distribution's udev rule makes it); it was not changed")
	}
}

// heldElsewhere is a process of another mount namespace where dir is a
// FUSE mount point, or 0.
func heldElsewhere(dir string) int {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	seen := map[string]bool{self: true}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && f[4] == dir && strings.Contains(line, " - fuse") {
				return pid
			}
		}
	}
	return 0
}
