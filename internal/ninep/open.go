package ninep

import (
	"context"
	"errors"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/tree"
)

// The open, write and blocking-read rules both dialects' adapters follow
// (file.go for 9P2000.L, plan9.go for 9P2000). Each adapter decodes its
// own open mode and spells the errors for its wire (Errno, plan9Err); what
// a fid may do is decided here once.

// openNode opens node for a fid. write says the open asks to write (any
// write mode, or a truncation): only a tree.Writable node may be opened
// so, because the tree is read-only by absence. read says the fid will
// read: a file's handle is opened then, and a directory needs none (its
// listing is snapshotted by the first read). The handle is nil for a
// directory and for a write-only open.
func openNode(node tree.Node, write, read bool) (tree.Handle, error) {
	if write {
		if _, ok := node.(tree.Writable); !ok {
			return nil, errs.E("open", errs.ReadOnly, "", nil)
		}
	}
	f, ok := node.(tree.File)
	if !read || !ok {
		return nil, nil
	}
	return f.Open()
}

// writeNode is a fid's write of data at off to node: the whole value at
// offset 0 (echo name > file), returning when what it asks for (a move)
// has completed or been refused. ctx is the daemon's, not the request's:
// a started move completes whether or not the client stays. When the
// write ran, record is given what a read of the same fid returns from
// then on instead of the file: the reason it failed (reason.go), or nil
// once one succeeds. A refusal before it (not writable, an offset) leaves
// the fid's reason be.
func writeNode(ctx context.Context, node tree.Node, w tree.Writer, data []byte, off int64, record func(reason []byte)) error {
	wn, ok := node.(tree.Writable)
	if !ok {
		return errs.E("write", errs.ReadOnly, "", nil)
	}
	if off != 0 {
		return errs.E("write", errs.Invalid, "", nil)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := wn.Write(ctx, w, data); err != nil {
		record(reasonOf(err))
		return err
	}
	record(nil)
	return nil
}

// ContextReader is a tree.Handle whose reads may wait for something to
// happen (the events file). It is handed the request's context, which a
// Tflush naming the request, or the end of the connection, cancels; it
// must then return promptly, with the context's error or what it has.
// The name matches the p9 fork's optional File method, so the 9P2000.L
// adapter can pass it through.
type ContextReader interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// readHandle reads h at off on behalf of a request: through
// ReadAtContext when h may block, with a context cancelled by the
// request's own (a flush) and by conn's (the connection's end); through
// ReadAt otherwise. A read cut short by either is errs.Interrupted.
func readHandle(ctx, conn context.Context, h tree.Handle, p []byte, off int64) (int, error) {
	cr, ok := h.(ContextReader)
	if !ok {
		return h.ReadAt(p, off)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if conn != nil {
		stop := context.AfterFunc(conn, cancel)
		defer stop()
	}
	n, err := cr.ReadAtContext(ctx, p, off)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		err = errs.E("read", errs.Interrupted, "", err)
	}
	return n, err
}
