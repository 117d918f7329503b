package test

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// uidBlock holds the uids and gids of one test's peers. They need no
// passwd entries: the kernel names peers by number, and so does the
// policy.
type uidBlock struct {
	owner   int // runs the daemon
	friend  int // granted by --allow-uid
	member  int // granted through a supplementary group
	strange int // granted nothing
	primary int // granted through its primary group
	grant   int // the granted group
}

// uidBlocks is where testUIDs records each top-level test's block; a
// test's subtests share their parent's, so that a daemon a subtest starts
// and a peer its parent named are the same uid.
var uidBlocks = struct {
	sync.Mutex
	m map[string]uidBlock
}{m: map[string]uidBlock{}}

// testUIDs returns t's block of ten ids, the same for every call of one
// top-level test. No other test holds it at the same time, of this run or
// of another checkout's run on the machine: a block is claimed by a lock
// file's flock, held until this process exits; a block that names a user
// or group, or a uid some process still runs as (a test killed before its
// cleanup), is passed over. A daemon of the block's owner uid therefore
// lists only the agents its test started.
func testUIDs(t testing.TB) uidBlock {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	uidBlocks.Lock()
	defer uidBlocks.Unlock()
	if b, ok := uidBlocks.m[top]; ok {
		return b
	}
	dir := filepath.Join(os.TempDir(), "9harness-test-uids")
	must(t, os.MkdirAll(dir, 0o755))
	busy := runningUIDs()
	for base := 41000; base < 41000+10*2000; base += 10 {
		if !freeIDs(base, busy) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(base)), os.O_RDWR|os.O_CREATE, 0o600)
		must(t, err)
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		// f stays open: its lock is this process's until it exits.
		b := uidBlock{owner: base + 1, friend: base + 2, member: base + 3, strange: base + 4, primary: base + 5, grant: base + 9}
		uidBlocks.m[top] = b
		return b
	}
	t.Fatal("no free block of test uids")
	return uidBlock{}
}

// freeIDs says that no id of the block at base names a user or a group,
// and that no process runs as one of them.
func freeIDs(base int, busy map[int]bool) bool {
	for id := base; id < base+10; id++ {
		if busy[id] {
			return false
		}
		if _, err := user.LookupId(strconv.Itoa(id)); err == nil {
			return false
		}
		if _, err := user.LookupGroupId(strconv.Itoa(id)); err == nil {
			return false
		}
	}
	return true
}

// runningUIDs is the set of real uids of the machine's processes.
func runningUIDs() map[int]bool {
	busy := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '1' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		if f := strings.Fields(lineAfter(string(b), "Uid:")); len(f) > 1 {
			if uid, err := strconv.Atoi(f[1]); err == nil {
				busy[uid] = true
			}
		}
	}
	return busy
}

// sharedHome copies the fixtures where another uid can read them and makes
// a socket directory the daemon's uid owns. It returns the home and the
// socket path.
func sharedHome(t *testing.T, owner int) (string, string) {
	t.Helper()
	base, err := os.MkdirTemp("", "9harness-authz-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	home := filepath.Join(base, "home")
	out, err := exec.Command("cp", "-a", "../testdata/home", home).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	must(t, exec.Command("chmod", "-R", "a+rX", home).Run())
	run := filepath.Join(base, "run")
	// Other uids must be able to reach the socket: a directory they may
	// traverse (an administrator picks such a path for grants).
	must(t, os.Mkdir(run, 0o711))
	must(t, os.Chmod(run, 0o711))
	if run == "" || !strings.HasPrefix(run, os.TempDir()) {
		t.Fatalf("refusing to chown %q", run)
	}
	must(t, os.Chown(run, owner, owner))
	return home, filepath.Join(run, "harness.sock")
}

// startAs runs 9harnessd under uid with args and waits for its socket.
func startAs(t *testing.T, uid int, home, sock string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, stderr: &syncBuffer{}, done: make(chan error, 1), sock: sock}
	all := append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(home)...)
	d.cmd = exec.Command(bin("9harnessd"), append(all, args...)...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	d.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	d.cmd.Stderr = d.stderr
	must(t, d.cmd.Start())
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("daemon exited: %v\n%s", err, d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket\n%s", d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientAs runs the 9harness client as uid (with the given groups).
func clientAs(uid, gid int, groups []uint32, sock string, args ...string) (string, error) {
	cmd := exec.Command(bin("9harness"), append([]string{"-s", sock}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestGrants: the daemon runs as one uid and clients as others. A granted
// uid reads, a group grant works through supplementary and primary groups,
// an ungranted uid and root get nothing, and each refusal is audited.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestGrants(t *testing.T) {
	t.Parallel()
	u := testUIDs(t)
	requireRoot(t)
	home, sock := sharedHome(t, u.owner)
	d := startAs(t, u.owner, home, sock,
		"--allow-uid", strconv.Itoa(u.friend), "--allow-group", strconv.Itoa(u.grant), "--allow-move")
	fi, err := os.Stat(sock)
	must(t, err)
	if fi.Mode().Perm() != 0o666 {
		t.Errorf("with grants the socket is %v, want 0666 (the gate decides)", fi.Mode().Perm())
	}
	pid := strconv.Itoa(d.cmd.Process.Pid) + "\n"
	for _, tc := range []struct {
		name   string
		uid    int
		gid    int
		groups []uint32
		served bool
	}{
		{"owner", u.owner, u.owner, nil, true},
		{"granted uid", u.friend, u.friend, nil, true},
		{"supplementary group", u.member, u.member, []uint32{uint32(u.member), uint32(u.grant)}, true},
		{"primary group", u.primary, u.grant, nil, true},
		{"stranger", u.strange, u.strange, []uint32{uint32(u.strange)}, false},
		{"root", 0, 0, []uint32{0}, false},
	} {
		out, err := clientAs(tc.uid, tc.gid, tc.groups, sock, "cat", "/pid")
		if tc.served && (err != nil || out != pid) {
			t.Errorf("%s: %v %q, want %q", tc.name, err, out, pid)
		}
		if !tc.served && (err == nil || strings.Contains(out, pid)) {
			t.Errorf("%s was served: %q", tc.name, out)
		}
	}
	for _, uid := range []int{u.strange, 0} {
		want := "peer_uid=" + strconv.Itoa(uid) + " "
		eventually(t, func() bool { return strings.Contains(d.stderr.String(), want) }, "an audit line for uid "+strconv.Itoa(uid))
	}
	if !strings.Contains(d.stderr.String(), fmt.Sprintf(`reason="uid %d is not the daemon's uid %d and holds no grant"`, u.strange, u.owner)) {
		t.Errorf("audit lacks the reason:\n%s", d.stderr.String())
	}

	// A granted reader cannot move the owner's agent, --allow-move or not.
	must(t, exec.Command("chmod", "-R", "a+rwX", filepath.Join(home, ".claude")).Run())
	cwd := filepath.Join(filepath.Dir(home), "cwd")
	must(t, os.MkdirAll(cwd, 0o777))
	agent := exec.Command(bin("claude"))
	agent.Dir = cwd
	agent.Env = []string{"HOME=" + home, "PATH=" + bins + ":/usr/bin:/bin", "FAKE_SESSION=6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d"}
	agent.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.owner), Gid: uint32(u.owner)}}
	must(t, agent.Start())
	done := make(chan struct{})
	go func() { agent.Wait(); close(done) }()
	defer func() { agent.Process.Kill(); <-done }()
	dir := "/active/claude/" + strconv.Itoa(agent.Process.Pid)
	path := dir + "/zmx"
	eventually(t, func() bool {
		_, err := clientAs(u.friend, u.friend, nil, sock, "stat", dir+"/pid")
		return err == nil
	}, "the owner's agent under /active")
	// The grantee's view has no field derived from the agent's
	// environment (zmx, tmux) and nothing to write; the owner's has both.
	for _, f := range []string{"zmx", "tmux"} {
		if out, err := clientAs(u.friend, u.friend, nil, sock, "stat", dir+"/"+f); err == nil {
			t.Errorf("a grantee stats %s/%s: %s", dir, f, out)
		}
	}
	if out, err := clientAs(u.owner, u.owner, nil, sock, "stat", path); err != nil {
		t.Errorf("the owner cannot stat %s: %v %s", path, err, out)
	}
	// The resume line holds the agent's kept flags' values (--settings,
	// -c can hold keys): the owner reads it, a grantee gets ENOENT.
	eventually(t, func() bool {
		out, err := clientAs(u.owner, u.owner, nil, sock, "cat", dir+"/resume")
		return err == nil && strings.Contains(out, "claude --resume 6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d")
	}, "the owner's "+dir+"/resume")
	for _, verb := range []string{"stat", "cat"} {
		if out, err := clientAs(u.friend, u.friend, nil, sock, verb, dir+"/resume"); err == nil || !strings.Contains(out, "no such file") {
			t.Errorf("a grantee's %s %s/resume: %v %q, want ENOENT", verb, dir, err, out)
		}
	}
	probe := exec.Command(bin("self.test"), "-test.run=^TestHelperWrite$")
	probe.Env = append(os.Environ(), "HELPER_WRITE_SOCK="+sock, "HELPER_WRITE_PATH="+path, "HELPER_WRITE_VALUE=stolen")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.friend), Gid: uint32(u.friend)}}
	out, _ := probe.CombinedOutput()
	if !strings.Contains(string(out), "WRITE err no such file or directory") {
		t.Errorf("a granted reader's move: %s, want ENOENT (no zmx in a grantee's view)", out)
	}
	select {
	case <-done:
		t.Fatal("the owner's agent died from a refused move")
	default:
	}
	// Nothing reached the mover: no move was started for anyone.
	if strings.Contains(d.stderr.String(), "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54") {
		t.Errorf("a grantee's write started a move:\n%s", d.stderr.String())
	}
}

// TestForgedAttach: the 9P Tattach uname and n_uname are never trusted. A
// stranger that claims to be the owner (and root) in its Tattach gets
// nothing; the owner claiming to be root gets exactly what the owner gets.
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
func TestForgedAttach(t *testing.T) {
	t.Parallel()
	u := testUIDs(t)
	requireRoot(t)
	home, sock := sharedHome(t, u.owner)
	startAs(t, u.owner, home, sock, "--allow-uid", strconv.Itoa(u.friend))
	for _, tc := range []struct {
		uid     int
		nuname  int
		replies bool
	}{
		{u.strange, u.owner, false},
		{u.strange, 0, false},
		{u.owner, 0, true},
	} {
		probe := exec.Command(bin("self.test"), "-test.run=^TestHelperForgedAttach$")
		probe.Env = append(os.Environ(), "HELPER_SOCK="+sock, "HELPER_NUNAME="+strconv.Itoa(tc.nuname))
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tc.uid), Gid: uint32(tc.uid)}}
		out, _ := probe.CombinedOutput()
		got := string(out)
		switch {
		case !tc.replies && !strings.Contains(got, "REPLY-BYTES 0"):
			t.Errorf("uid %d claiming %d: %s", tc.uid, tc.nuname, got)
		case tc.replies && !strings.Contains(got, "ATTACHED root-as-owner"):
			t.Errorf("owner claiming uid %d: %s", tc.nuname, got)
		}
	}
}

// TestHelperForgedAttach runs as another uid for TestForgedAttach: it sends
// Tversion and a Tattach with uname "root" and the given n_uname.
func TestHelperForgedAttach(t *testing.T) {
	sock := os.Getenv("HELPER_SOCK")
	if sock == "" || os.Getenv("HELPER_NUNAME") == "" {
		return
	}
	nuname, _ := strconv.Atoi(os.Getenv("HELPER_NUNAME"))
	c, err := netDial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(tversion(0xffff, 8192, "9P2000.L"))
	attach := []byte{0, 0, 0, 0, 104, 1, 0, 0, 0, 0, 0, 255, 255, 255, 255, 4, 0, 'r', 'o', 'o', 't', 1, 0, '/',
		byte(nuname), byte(nuname >> 8), byte(nuname >> 16), byte(nuname >> 24)}
	attach[0] = byte(len(attach))
	c.Write(attach)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, _ := readAtLeast(c, buf, 2)
	if n == 0 {
		println("REPLY-BYTES 0")
		return
	}
	// Rversion, then Rattach (type 105) when the attach was served.
	if idx := indexFrame(buf[:n], 105); idx >= 0 {
		println("ATTACHED root-as-owner")
		return
	}
	println("REPLY-BYTES", n)
}
