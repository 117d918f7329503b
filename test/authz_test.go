package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Uids and gids of the authorization tests. They need no passwd entries:
// the kernel names peers by number, and so does the policy.
const (
	ownerUID   = 4101 // runs the daemon
	friendUID  = 4102 // granted by --allow-uid
	memberUID  = 4103 // granted through a supplementary group
	primaryUID = 4105 // granted through its primary group
	strangeUID = 4104 // granted nothing
	grantGID   = 4200
)

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
	requireRoot(t)
	home, sock := sharedHome(t, ownerUID)
	d := startAs(t, ownerUID, home, sock,
		"--allow-uid", strconv.Itoa(friendUID), "--allow-group", strconv.Itoa(grantGID), "--allow-move")
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
		{"owner", ownerUID, ownerUID, nil, true},
		{"granted uid", friendUID, friendUID, nil, true},
		{"supplementary group", memberUID, memberUID, []uint32{memberUID, grantGID}, true},
		{"primary group", primaryUID, grantGID, nil, true},
		{"stranger", strangeUID, strangeUID, []uint32{strangeUID}, false},
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
	for _, uid := range []int{strangeUID, 0} {
		want := "peer_uid=" + strconv.Itoa(uid) + " "
		eventually(t, func() bool { return strings.Contains(d.stderr.String(), want) }, "an audit line for uid "+strconv.Itoa(uid))
	}
	if !strings.Contains(d.stderr.String(), `reason="uid 4104 is not the daemon's uid 4101 and holds no grant"`) {
		t.Errorf("audit lacks the reason:\n%s", d.stderr.String())
	}

	// A granted reader cannot move the owner's agent, --allow-move or not.
	must(t, exec.Command("chmod", "-R", "a+rwX", filepath.Join(home, ".claude")).Run())
	cwd := filepath.Join(filepath.Dir(home), "cwd")
	must(t, os.MkdirAll(cwd, 0o777))
	agent := exec.Command(bin("claude"))
	agent.Dir = cwd
	agent.Env = []string{"HOME=" + home, "PATH=" + bins + ":/usr/bin:/bin", "FAKE_SESSION=6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d"}
	agent.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ownerUID, Gid: ownerUID}}
	must(t, agent.Start())
	done := make(chan struct{})
	go func() { agent.Wait(); close(done) }()
	defer func() { agent.Process.Kill(); <-done }()
	dir := "/active/claude/" + strconv.Itoa(agent.Process.Pid)
	path := dir + "/zmx"
	eventually(t, func() bool {
		_, err := clientAs(friendUID, friendUID, nil, sock, "stat", dir+"/pid")
		return err == nil
	}, "the owner's agent under /active")
	// The grantee's view has no field derived from the agent's
	// environment (zmx, tmux) and nothing to write; the owner's has both.
	for _, f := range []string{"zmx", "tmux"} {
		if out, err := clientAs(friendUID, friendUID, nil, sock, "stat", dir+"/"+f); err == nil {
			t.Errorf("a grantee stats %s/%s: %s", dir, f, out)
		}
	}
	if out, err := clientAs(ownerUID, ownerUID, nil, sock, "stat", path); err != nil {
		t.Errorf("the owner cannot stat %s: %v %s", path, err, out)
	}
	// The resume line holds the agent's kept flags' values (--settings,
	// -c can hold keys): the owner reads it, a grantee gets ENOENT.
	eventually(t, func() bool {
		out, err := clientAs(ownerUID, ownerUID, nil, sock, "cat", dir+"/resume")
		return err == nil && strings.Contains(out, "claude --resume 6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d")
	}, "the owner's "+dir+"/resume")
	for _, verb := range []string{"stat", "cat"} {
		if out, err := clientAs(friendUID, friendUID, nil, sock, verb, dir+"/resume"); err == nil || !strings.Contains(out, "no such file") {
			t.Errorf("a grantee's %s %s/resume: %v %q, want ENOENT", verb, dir, err, out)
		}
	}
	probe := exec.Command(bin("self.test"), "-test.run=^TestHelperWrite$")
	probe.Env = append(os.Environ(), "HELPER_WRITE_SOCK="+sock, "HELPER_WRITE_PATH="+path, "HELPER_WRITE_VALUE=stolen")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: friendUID, Gid: friendUID}}
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
	requireRoot(t)
	home, sock := sharedHome(t, ownerUID)
	startAs(t, ownerUID, home, sock, "--allow-uid", strconv.Itoa(friendUID))
	for _, tc := range []struct {
		uid     int
		nuname  int
		replies bool
	}{
		{strangeUID, ownerUID, false},
		{strangeUID, 0, false},
		{ownerUID, 0, true},
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
