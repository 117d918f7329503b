package test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSSHForward: a host reached once through the relay is reached next
// through a forward of its daemon's socket that the user's ssh master
// holds, so the next call starts no ssh, shell or relay (the relay is
// gone and the call still answers). The forward lives beside the master's
// control socket; a master that exited leaves a dead socket, which the
// next call passes over to the relay and makes again; a host whose socket
// sits below a directory others may write is never forwarded.
func TestSSHForward(t *testing.T) {
	t.Parallel()
	h := newSSHHost(t)
	daemonPid := itoa(h.daemon.cmd.Process.Pid)
	runtimeDir := t.TempDir()
	cm := filepath.Join(t.TempDir(), "cm")
	must(t, os.Mkdir(cm, 0o700))
	// The relay, through a script the test can take away.
	relayDir := t.TempDir()
	must(t, os.Chmod(relayDir, 0o755))
	relayScript := filepath.Join(relayDir, "relay")
	putRelay := func() {
		writeExe(t, relayScript, []byte("#!/bin/sh\nexec "+bin("9harness")+" \"$@\"\n"))
	}
	putRelay()
	opts := append(h.opts(h.key), "--ssh-opt", "ControlMaster=auto", "--ssh-opt", "ControlPath="+cm+"/%C",
		"--ssh-opt", "ControlPersist=60", "--ssh-cmd", relayScript+" relay", "--ssh="+h.user+"@127.0.0.1")
	ssh := func(args ...string) string {
		a := []string{"-o", "ControlPath=" + cm + "/%C", "-o", "LogLevel=ERROR", "-p", itoa(h.port)}
		out, _ := exec.Command("ssh", append(append(a, args...), h.user+"@127.0.0.1")...).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() { ssh("-O", "exit") })
	cat := func(extra ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin("9harness"), append(append(opts, extra...), "cat", "/pid")...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=" + runtimeDir}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		return strings.TrimSpace(string(out)), nil
	}
	record := func() string {
		t.Helper()
		ents, _ := os.ReadDir(filepath.Join(runtimeDir, "9p", "fwd"))
		if len(ents) != 1 {
			t.Fatalf("%d forward records, want 1: %v", len(ents), ents)
		}
		b, err := os.ReadFile(filepath.Join(runtimeDir, "9p", "fwd", ents[0].Name()))
		must(t, err)
		return string(b)
	}
	forwardSockets := func() []string {
		m, _ := filepath.Glob(filepath.Join(cm, "*.9p-*"))
		return m
	}

	// The first call goes through the relay (and makes the master);
	// its Close waits for the forward.
	if out, err := cat(); err != nil || out != daemonPid {
		t.Fatalf("first call: %q, %v", out, err)
	}
	rec := record()
	socks := forwardSockets()
	if len(socks) != 1 || rec != "forward "+socks[0]+"\n" {
		t.Fatalf("after the first call: record %q, forward sockets in the master's directory %v", rec, socks)
	}

	// No relay: the forward answers.
	must(t, os.Remove(relayScript))
	if out, err := cat(); err != nil || out != daemonPid {
		t.Fatalf("through the forward, the relay gone: %q, %v", out, err)
	}
	// ... and never with --ssh-forward=no.
	if out, err := cat("--ssh-forward=no"); err == nil {
		t.Fatalf("--ssh-forward=no answered without a relay: %q", out)
	}
	// The remote daemon served sshd's session for the user as the owner,
	// as it serves the relay: the same peer, judged the same.
	if log := h.daemon.stderr.String(); strings.Contains(log, "served as a grantee") || strings.Contains(log, "refused") {
		t.Fatalf("the remote daemon did not serve the forward as its owner:\n%s", log)
	}

	// The master exits: its forward's socket is left, dead. The next
	// call passes it over for the relay, which makes the forward again.
	ssh("-O", "exit")
	eventually15(t, func() bool {
		_, err := os.Stat(filepath.Join(cm, filepath.Base(strings.TrimSuffix(socks[0], filepath.Ext(socks[0])))))
		return err != nil
	}, "the master to exit")
	if out, err := cat(); err == nil {
		t.Fatalf("a dead forward and no relay answered: %q", out)
	}
	putRelay()
	if out, err := cat(); err != nil || out != daemonPid {
		t.Fatalf("after the master exited: %q, %v", out, err)
	}
	if got := record(); got != rec {
		t.Fatalf("record after the master came back: %q, want %q", got, rec)
	}
	must(t, os.Remove(relayScript))
	if out, err := cat(); err != nil || out != daemonPid {
		t.Fatalf("through the forward made again: %q, %v", out, err)
	}

	// A directory above the socket that others may write: the relay
	// still answers (its own directory is the user's), but the socket is
	// never forwarded, and the record says why.
	putRelay()
	ssh("-O", "exit")
	must(t, os.RemoveAll(filepath.Join(runtimeDir, "9p", "fwd")))
	base := filepath.Dir(h.home)
	var st syscall.Stat_t
	must(t, syscall.Stat(base, &st))
	must(t, os.Chmod(base, 0o777))
	defer os.Chmod(base, os.FileMode(st.Mode&0o777))
	if out, err := cat(); err != nil || out != daemonPid {
		t.Fatalf("through the relay, below a directory others may write: %q, %v", out, err)
	}
	if rec := record(); !strings.HasPrefix(rec, "relay ") || !strings.Contains(rec, base+" above it is writable by its group and others") {
		t.Fatalf("record below a directory others may write: %q", rec)
	}
	for _, s := range forwardSockets() {
		if c, err := net.Dial("unix", s); err == nil {
			c.Close()
			t.Fatalf("forwarded anyway: %s answers", s)
		}
	}
	must(t, os.Remove(relayScript))
	if out, err := cat(); err == nil {
		t.Fatalf("answered without a relay though nothing may be forwarded: %q", out)
	}
}
