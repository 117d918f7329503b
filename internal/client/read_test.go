package client

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// memFS serves one file, /active/table, holding data as each open finds
// it.
type memFS struct {
	mu   sync.Mutex
	data []byte
}

func (fs *memFS) set(data []byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.data = data
}

func (fs *memFS) Attach() (p9.File, error) { return &memNode{fs: fs}, nil }

// memNode is the root (depth 0), /active (1) or /active/table (2).
type memNode struct {
	templatefs.NoopFile
	fs    *memFS
	depth int
	data  []byte // the file's content when it was opened
}

func (n *memNode) qid() p9.QID {
	if n.depth == 2 {
		return p9.QID{Type: p9.TypeRegular, Path: 2}
	}
	return p9.QID{Type: p9.TypeDir, Path: uint64(n.depth)}
}

func (n *memNode) Walk(names []string) ([]p9.QID, p9.File, error) {
	var qids []p9.QID
	d := n.depth
	for _, name := range names {
		if d == 2 || name != []string{"active", "table"}[d] {
			return nil, nil, linux.ENOENT
		}
		d++
		qids = append(qids, (&memNode{depth: d}).qid())
	}
	return qids, &memNode{fs: n.fs, depth: d}, nil
}

func (n *memNode) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	mode := p9.ModeDirectory | 0o555
	if n.depth == 2 {
		mode = p9.ModeRegular | 0o444
	}
	return n.qid(), p9.AttrMask{Mode: true}, p9.Attr{Mode: mode}, nil
}

func (n *memNode) Open(p9.OpenFlags) (p9.QID, uint32, error) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	n.data = n.fs.data
	return n.qid(), 0, nil
}

func (n *memNode) ReadAt(p []byte, off int64) (int, error) {
	if n.depth != 2 {
		return 0, linux.EISDIR
	}
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	return copy(p, n.data[off:]), nil
}

// serveMem dials a server of fs that grants at most msize.
func serveMem(t *testing.T, fs *memFS, msize uint32) *Client {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
	if err != nil {
		t.Fatal(err)
	}
	go p9.NewServer(fs, p9.WithMaxMessageSize(msize)).Serve(l)
	conn, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		l.Close()
	})
	return c
}

// ReadFile and Table read a file whole at every size around the
// boundaries of their buffers, whatever the msize; a table torn in its
// last line is json.Unmarshal's error.
func TestReadFileSizes(t *testing.T) {
	line := []byte(`{"harness":"claude","pid":1,"cwd":"/w","title":"make the tests pass \u00e9","zmx":"","tmux":""}` + "\n")
	for _, msize := range []uint32{8 << 10, 1 << 20} {
		fs := &memFS{}
		c := serveMem(t, fs, msize)
		for _, n := range []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 192<<10 - 1, 192 << 10, 192<<10 + 1, 600 << 10} {
			data := bytes.Repeat(line, n/len(line)+1)[:n]
			fs.set(data)
			got, err := c.ReadFile(TablePath)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("msize %d: ReadFile of %d bytes: %d bytes, %v", msize, n, len(got), err)
			}
			agents, err := c.Table()
			want, werr := unmarshalTable(data)
			if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(agents, want) {
				t.Fatalf("msize %d: Table of %d bytes: %d agents, %v; want %d, %v", msize, n, len(agents), err, len(want), werr)
			}
		}
	}
}

// Readdir lists /active as 300 names in descending order, a few per call.
func (n *memNode) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	if n.depth != 1 {
		return nil, linux.ENOTDIR
	}
	var out p9.Dirents
	for i := offset; i < 300 && len(out) < 7; i++ {
		out = append(out, p9.Dirent{QID: p9.QID{Type: p9.TypeRegular, Path: 10 + i}, Offset: i + 1, Type: p9.TypeRegular, Name: fmt.Sprintf("n%03d", 299-i)})
	}
	return out, nil
}

// ReadDir gives every name, sorted, whatever order the server lists in.
func TestReadDirSorted(t *testing.T) {
	c := serveMem(t, &memFS{}, 8192)
	ents, err := c.ReadDir("/active")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 300 {
		t.Fatalf("%d entries, want 300", len(ents))
	}
	for i, e := range ents {
		if e.Name != fmt.Sprintf("n%03d", i) {
			t.Fatalf("entry %d is %q: not sorted", i, e.Name)
		}
	}
}
