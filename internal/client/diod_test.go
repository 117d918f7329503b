package client

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// missing skips when a component of the test is absent, and fails under
// CI=true, where the component is installed and must not pass silently.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// TestDiod reads from diod, the independent 9P2000.L server that refuses
// the Google version string: a file larger than its 64 KiB msize, byte for
// byte, and a directory.
func TestDiod(t *testing.T) {
	diod, err := exec.LookPath("diod")
	if err != nil {
		for _, p := range []string{"/usr/sbin/diod", "/sbin/diod"} {
			if _, serr := os.Stat(p); serr == nil {
				diod, err = p, nil
				break
			}
		}
	}
	if err != nil {
		missing(t, "diod is not installed (Debian package diod)")
	}
	if os.Geteuid() != 0 {
		missing(t, "needs root (diod serves as root)")
	}
	dir := t.TempDir()
	export := filepath.Join(dir, "export")
	if err := os.Mkdir(export, 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 300<<10+7)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(export, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(export, fmt.Sprintf("f%03d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "diod.sock")
	var log bytes.Buffer
	cmd := exec.Command(diod, "-f", "-n", "-N", "-e", export, "-l", sock)
	cmd.Stdout, cmd.Stderr, cmd.Dir = &log, &log, dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("diod exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("diod did not listen on %s: %s", sock, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	c, err := DialAname(sock, export)
	if err != nil {
		t.Fatalf("DialAname(diod): %v\ndiod: %s", err, log.String())
	}
	defer c.Close()
	if got := c.Msize(); got != 65536 {
		t.Errorf("Msize() = %d, want diod's 65536", got)
	}
	got, err := c.ReadFile("/big")
	if err != nil {
		t.Fatalf("ReadFile(big): %v\ndiod: %s", err, log.String())
	}
	if !bytes.Equal(got, data) {
		t.Errorf("ReadFile(big): %d bytes differ from the %d written", len(got), len(data))
	}
	ents, err := c.ReadDir("/")
	if err != nil {
		t.Fatalf("ReadDir: %v\ndiod: %s", err, log.String())
	}
	n := 0
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			n++
		}
	}
	if n != 101 {
		t.Errorf("ReadDir: %d entries, want 101", n)
	}
}
