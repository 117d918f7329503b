package ninep

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/ninep/proto"
	"github.com/9harness/9harness/internal/tree"
)

// blockDir is a root holding one file, "block", whose reads wait until
// their context is cancelled: the shape of the events file.
type blockDir struct{ h *blockHandle }

func (blockDir) Attr() (tree.Attr, error) { return tree.Attr{Dir: true, Mode: 0o555, Path: 1}, nil }
func (d blockDir) Lookup(name string) (tree.Node, error) {
	if name != "block" {
		return nil, errs.E("lookup", errs.NotExist, name, nil)
	}
	return blockFile(d), nil
}
func (blockDir) List() ([]tree.Entry, error) { return []tree.Entry{{Name: "block", Path: 2}}, nil }

type blockFile blockDir

func (blockFile) Attr() (tree.Attr, error)     { return tree.Attr{Mode: 0o444, Path: 2}, nil }
func (f blockFile) Open() (tree.Handle, error) { return f.h, nil }
func (*blockHandle) Close() error              { return nil }
func (*blockHandle) ReadAt([]byte, int64) (int, error) {
	return 0, errors.New("ReadAt of a blocking file")
}

type blockHandle struct {
	started  chan struct{} // a read is blocked
	released chan error    // a read returned, with its context's error
}

func (h *blockHandle) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	h.started <- struct{}{}
	<-ctx.Done()
	h.released <- ctx.Err()
	return 0, ctx.Err()
}

func newBlockHandle() *blockHandle {
	return &blockHandle{started: make(chan struct{}, 1), released: make(chan error, 1)}
}

type reply struct {
	typ  uint8
	tag  uint16
	body string
}

func readReply(t *testing.T, c net.Conn) reply {
	t.Helper()
	f, err := proto.ReadFrame(c, 8192)
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	_, typ, tag := proto.Header(f)
	return reply{typ, tag, string(f[proto.HeaderSize:])}
}
