package daemon

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
	"golang.org/x/sys/unix"
)

// TestTmuxFileRunsTmuxOnlyOnRead: the daemon as Run wires it, on the real
// /proc. An agent (a copy of sleep named claude) is in a tmux pane: its
// TMUX names a socket this test serves from a 0700 directory, and a fake
// tmux on --host-path records each run. Listing /active, /active/claude
// and the agent's directory, and a stat of every file in it, run nothing;
// a read of the tmux file connects once to the socket (the judgement of
// its server), runs the daemon's tmux once, against that socket through
// its pinned descriptor and the agent's pane, and shows its answer. (The
// fake tmux runs confined: it answers with its argv rather than write
// it down.)
func TestTmuxFileRunsTmuxOnlyOnRead(t *testing.T) {
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	bin := filepath.Join(tmp, "bin")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(bin, 0o755))
	must(os.WriteFile(filepath.Join(bin, "tmux"), []byte("#!/bin/sh\necho \"work $*\"\n"), 0o755))
	sleep, err := exec.LookPath("sleep")
	must(err)
	b, err := os.ReadFile(sleep)
	must(err)
	must(os.WriteFile(filepath.Join(bin, "claude"), b, 0o755))

	sockDir := filepath.Join(tmp, "tmux-srv")
	must(os.Mkdir(sockDir, 0o700))
	sock := filepath.Join(sockDir, "default")
	l, err := net.Listen("unix", sock)
	must(err)
	defer l.Close()
	// Only this process's connections count: another daemon on the
	// machine (another test's, of this uid) lists this agent too, and may
	// judge its tmux server when it is asked for a table.
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if peerPID(c) == os.Getpid() {
				conns.Add(1)
			}
			c.Close()
		}
	}()

	home := filepath.Join(tmp, "home")
	must(os.MkdirAll(filepath.Join(home, ".claude"), 0o755))
	agent := exec.Command(filepath.Join(bin, "claude"), "600")
	agent.Env = []string{"HOME=" + home, "TMUX=" + sock + ",1,0", "TMUX_PANE=%7"}
	must(agent.Start())
	defer func() { agent.Process.Kill(); agent.Wait() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dsock := filepath.Join(tmp, "d.sock")
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Unix: dsock, FD: -1, Audit: "stderr", HostPath: bin,
			Roots: map[string]string{"claude": filepath.Join(home, ".claude")}, Listening: func(string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not listen")
	}
	defer func() { cancel(); <-done }()
	c, err := client.Dial(dsock)
	must(err)
	defer c.Close()

	dir := "/active/claude/" + strconv.Itoa(agent.Process.Pid)
	var names []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		ents, err := c.ReadDir(dir)
		if err == nil {
			names = names[:0]
			for _, e := range ents {
				names = append(names, e.Name)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls %s: %v", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range []string{"/active", "/active/claude"} {
		if _, err := c.ReadDir(p); err != nil {
			t.Fatalf("ls %s: %v", p, err)
		}
	}
	sawTmux := false
	for _, n := range names {
		sawTmux = sawTmux || n == "tmux"
		if _, _, err := c.Stat(dir + "/" + n); err != nil {
			t.Fatalf("stat %s/%s: %v", dir, n, err)
		}
	}
	if !sawTmux {
		t.Fatalf("%s lists %q: no tmux file for an agent in tmux", dir, names)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("listing and stat dialled the tmux socket %d times", n)
	}
	got, err := c.ReadFile(dir + "/tmux")
	must(err)
	if want := sock + ":work -S /proc/self/fd/3 display-message -p -t %7 #{session_name}\n"; string(got) != want {
		t.Errorf("tmux file %q, want %q: tmux once against the pinned socket and the agent's pane", got, want)
	}
	// The judgement's connection is queued before the read returns; its
	// accept may come a moment later.
	for deadline := time.Now().Add(5 * time.Second); conns.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the read dialled the tmux socket %d times, want once (the judgement)", n)
	}
}

// peerPID is the pid the kernel gives for a unix connection's peer, or -1.
func peerPID(c net.Conn) int {
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return -1
	}
	pid := -1
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
