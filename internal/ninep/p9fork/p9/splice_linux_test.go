package p9_test

// What splice_linux.go does beyond one splice per Tread: the chunk a
// reader in sequence will ask for next is spliced ahead, and used only if
// the file is still as it was; and the socket's send buffer is raised for
// spliced replies and given back while a large one drains.

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

func TestReadAhead(t *testing.T) {
	const chunk = 256 << 10
	const size = 8 * chunk
	for _, c := range []struct {
		name string
		// change, if set, changes the file after chunks 0 and 1 were
		// read (and chunk 2 read ahead), and returns what chunk 2
		// must then read.
		change func(t *testing.T, path string, content []byte) []byte
	}{
		{name: "unchanged"},
		{name: "rewritten", change: func(t *testing.T, path string, content []byte) []byte {
			// Truncated and written again, as long as before:
			// new pages, and the old ones still in the pipe.
			next := bytes.Repeat([]byte("rewritten "), size/10+1)[:size]
			if err := os.WriteFile(path, next, 0o644); err != nil {
				t.Fatal(err)
			}
			return next[2*chunk : 3*chunk]
		}},
		{name: "overwritten in place", change: func(t *testing.T, path string, content []byte) []byte {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			patch := bytes.Repeat([]byte{0xAA}, 1000)
			if _, err := f.WriteAt(patch, 2*chunk+100); err != nil {
				t.Fatal(err)
			}
			want := bytes.Clone(content[2*chunk : 3*chunk])
			copy(want[100:], patch)
			return want
		}},
		{name: "truncated", change: func(t *testing.T, path string, content []byte) []byte {
			if err := os.Truncate(path, 2*chunk+10); err != nil {
				t.Fatal(err)
			}
			return content[2*chunk : 2*chunk+10]
		}},
		{name: "appended to", change: func(t *testing.T, path string, content []byte) []byte {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("more")); err != nil {
				t.Fatal(err)
			}
			return content[2*chunk : 3*chunk]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, content := newHostFS(t, size)
			root := serveHost(t, fs, 1<<20, false)
			f := openData(t, root, "data")
			buf := make([]byte, chunk)
			read := func(i int, want []byte) {
				t.Helper()
				n, _ := f.ReadAt(buf, int64(i*chunk))
				if !bytes.Equal(buf[:n], want) {
					t.Fatalf("chunk %d: %d bytes, not the %d of the file", i, n, len(want))
				}
			}
			read(0, content[:chunk])
			read(1, content[chunk:2*chunk])
			// A reply's read ahead is done before the next request is
			// read: once this is answered, chunk 2 waits in a pipe.
			if _, _, _, err := root.GetAttr(p9.AttrMask{Mode: true}); err != nil {
				t.Fatal(err)
			}
			if got := fs.controls.Load(); got != 1 {
				t.Fatalf("%d fstats after two chunks in sequence, want 1: the one before chunk 2 was read ahead", got)
			}
			want := content[2*chunk : 3*chunk]
			if c.change != nil {
				// A clock tick after the file was written: with
				// coarse timestamps (a file system without multigrain
				// ones), a change in the tick of the change before it
				// keeps the ctime, which splice_linux.go owns up to.
				time.Sleep(20 * time.Millisecond)
				want = c.change(t, fs.path, content)
			}
			read(2, want)
			if got := fs.controls.Load(); got < 2 {
				t.Errorf("%d fstats, want the one that checked chunk 2 before it was sent", got)
			}
			if c.change == nil {
				// The rest, in sequence, each chunk from a pipe filled
				// ahead: nothing came through ReadAt.
				for i := 3; i < size/chunk; i++ {
					read(i, content[i*chunk:(i+1)*chunk])
				}
				if r := fs.readAtBytes.Load(); r != 0 {
					t.Errorf("ReadAt gave %d bytes: a chunk was not spliced", r)
				}
			}
		})
	}
}

// Reads that do not follow each other read nothing ahead.
func TestReadAheadNotForRandomReads(t *testing.T) {
	const chunk = 64 << 10
	fs, content := newHostFS(t, 64*chunk)
	f := openData(t, serveHost(t, fs, 1<<20, false), "data")
	buf := make([]byte, chunk)
	for _, i := range []int{7, 3, 40, 12, 60, 1, 33} {
		n, err := f.ReadAt(buf, int64(i*chunk))
		if err != nil || !bytes.Equal(buf[:n], content[i*chunk:(i+1)*chunk]) {
			t.Fatalf("chunk %d: %d bytes, %v; not the file", i, n, err)
		}
	}
	if fs.hostFiles.Load() == 0 {
		t.Fatal("nothing was spliced")
	}
	if got := fs.controls.Load(); got != 0 {
		t.Errorf("%d fstats: a chunk was read ahead for reads out of sequence", got)
	}
}

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
