package ninep

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// A mirrored file offers its host file to the server's splice path; a
// generated one, a directory and an unopened file do not.
func TestHostFile(t *testing.T) {
	root, _ := attach(t)
	cases := []struct {
		path []string
		open bool
		want bool
	}{
		{[]string{"dsh", "file"}, true, true},
		{[]string{"dsh", "file"}, false, false},
		{[]string{"dsh", "sub"}, true, false},
		{[]string{"pid"}, true, false},
	}
	for _, c := range cases {
		_, f, err := root.Walk(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if c.open {
			if _, _, err := f.Open(p9.ReadOnly); err != nil {
				t.Fatal(err)
			}
		}
		sc, ok := f.(p9.HostFileReader).HostFile()
		if ok != c.want {
			t.Errorf("%v (open %v): HostFile %v, want %v", c.path, c.open, ok, c.want)
			continue
		}
		if ok {
			b := make([]byte, 16)
			n, _ := sc.(io.ReaderAt).ReadAt(b, 0)
			if string(b[:n]) != "hello\n" {
				t.Errorf("%v: host file holds %q", c.path, b[:n])
			}
		}
	}
}

// osNode is a writable file backed by a host file whose every write
// fails: after the failure, reads of the fid are the reason, so the host
// file must no longer be offered for splicing.
type osNode struct{ path string }

func (n osNode) Attr() (tree.Attr, error) { return tree.Attr{Mode: 0o644, Size: 5, Path: 9}, nil }
func (n osNode) Open() (tree.Handle, error) {
	f, err := os.Open(n.path)
	if err != nil {
		return nil, err
	}
	return f, nil
}
func (osNode) Write(context.Context, tree.Writer, []byte) error {
	return errs.E("move", errs.Permission, "x", fmt.Errorf("not today"))
}

func TestHostFileAfterFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host")
	os.WriteFile(path, []byte("file\n"), 0o644)
	f := &file{a: &Attacher{}, node: osNode{path}}
	if _, _, err := f.Open(p9.ReadWrite); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.HostFile(); !ok {
		t.Fatal("before the write: the host file is not offered")
	}
	if _, err := f.WriteAt([]byte("name"), 0); err == nil {
		t.Fatal("the write succeeded")
	}
	if _, ok := f.HostFile(); ok {
		t.Error("after a failed write: the host file is still offered, a splice would send the file, not the reason")
	}
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	if !bytes.Contains(b[:n], []byte("not today")) {
		t.Errorf("read after the failed write: %q, want the reason", b[:n])
	}
}

// A mirrored file read through the whole stack, one Tread of msize-24
// bytes at a time (as diodcat asks): every reply is as long as the file
// allows (none short, though a 1 MiB pipe cannot hold a whole unaligned
// 1 MiB read: its tail is copied), and the bytes are the file's. With the
// server on the socket (spliced) and behind a plain writer (copied).
func TestReadThroughStack(t *testing.T) {
	home := t.TempDir()
	content := make([]byte, 3<<20+7)
	rand.New(rand.NewSource(1)).Read(content)
	os.WriteFile(filepath.Join(home, "big"), content, 0o644)
	root := tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
	for _, socket := range []bool{true, false} {
		for _, msize := range []uint32{64 << 10, 1 << 20} {
			t.Run(fmt.Sprintf("socket=%v/msize=%dK", socket, msize>>10), func(t *testing.T) {
				r := dialWith(t, root, msize, socket)
				r.walk(t, 0, 1, "dsh", "big")
				r.open(t, 1)
				var got []byte
				for {
					ask := r.msize - 24
					r.begin(116)
					r.u32(1)
					r.u64(uint64(len(got)))
					r.u32(ask)
					_, body := r.rpc(t)
					cnt := binary.LittleEndian.Uint32(body)
					if want := min(int(ask), len(content)-len(got)); int(cnt) != want {
						t.Fatalf("Tread of %d at %d: %d bytes, want %d", ask, len(got), cnt, want)
					}
					if cnt == 0 {
						break
					}
					got = append(got, body[4:4+cnt]...)
				}
				if !bytes.Equal(got, content) {
					t.Fatal("the bytes read are not the file's")
				}
				r.clunk(t, 1)
			})
		}
	}
}
