package peer

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line  string
		comm  string
		start uint64
	}{
		{"1234 (claude) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 50424 1000 200", "claude", 50424},
		{"1234 (a) (b) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 777 1000 200", "a) (b", 777},
		{"1234 () () S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0", ") (", 9},
		{"garbage", "", 0},
		{"1 (x) S 1", "x", 0},
	} {
		comm, start := parseStat([]byte(tc.line))
		if comm != tc.comm || start != tc.start {
			t.Errorf("%q: got %q %d, want %q %d", tc.line, comm, start, tc.comm, tc.start)
		}
	}
}

// The kernel's account of our own connection: our uid, gid and pid, a
// pidfd, our groups and a start time that matches our own stat.
func TestIdentifySelf(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:])
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := Identify(c, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.UID != uint32(os.Getuid()) || p.GID != uint32(os.Getgid()) || p.PID != int32(os.Getpid()) {
		t.Fatalf("cred %v", p.Cred)
	}
	if p.PIDFD() < 0 {
		t.Fatal("no SO_PEERPIDFD on this kernel")
	}
	if !p.Alive() || p.StartTime == 0 || p.Comm == "" || p.Groups == nil {
		t.Fatalf("peer %+v", p)
	}
	own, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != len(p.Groups) {
		t.Fatalf("groups %v, own %v", p.Groups, own)
	}
	for i, g := range own {
		if p.Groups[i] != uint32(g) {
			t.Fatalf("groups %v, own %v", p.Groups, own)
		}
	}
	stat, _ := os.ReadFile("/proc/self/stat")
	if _, st := parseStat(stat); st != p.StartTime {
		t.Fatalf("start time %d, own stat %d", p.StartTime, st)
	}
	var _ = syscall.Getpid
}
