package p9_test

// The socket's send buffer: raised for spliced replies, and given back
// while a large one drains.

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The send buffer is raised to a pipe's worth for spliced replies, and a
// reply larger than the socket's own buffer leaves it with its own while
// the client reads it: at 2 MiB, the socket woke the server's poller six
// or seven times per 1 MiB Rread as it drained.
func TestSpliceSendBuffer(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Fatal(err)
	}
	var wmemMax int
	if _, err := fmt.Sscan(string(b), &wmemMax); err != nil {
		t.Fatal(err)
	}
	fs, content := newHostFS(t, 4<<20)
	f := openData(t, serveHost(t, fs, 1<<20, false), "data")
	raw, err := fs.server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sndbuf := func() int {
		var n int
		var err error
		raw.Control(func(fd uintptr) { n, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	own := sndbuf()
	if own >= 1<<20 {
		t.Fatalf("the socket's own send buffer is %d: too large for this test to tell", own)
	}
	raised := 2 * min(1<<20, wmemMax) // the kernel reports twice what is set
	var off int
	for i, c := range []struct {
		n    int
		want int
	}{
		{64 << 10, raised},  // the first spliced reply: raised
		{1<<20 - 64, own},   // larger than own: own again once sent
		{1<<20 - 64, own},   // raised for it, own again
		{64 << 10, raised},  // raised for it, and it fits: left raised
		{100 << 10, raised}, // still
	} {
		buf := make([]byte, c.n)
		n, err := f.ReadAt(buf, int64(off))
		if err != nil || !bytes.Equal(buf[:n], content[off:off+c.n]) {
			t.Fatalf("read %d: %d bytes, %v; not the file", i, n, err)
		}
		off += c.n
		if got := sndbuf(); got != c.want {
			t.Errorf("after read %d (%d bytes): SO_SNDBUF %d, want %d (own %d, raised %d)", i, c.n, got, c.want, own, raised)
		}
	}
}
