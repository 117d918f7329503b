package p9

import "context"

// ReaderAtContext is implemented by a File whose reads can wait (for an
// event, say): the server calls ReadAtContext instead of ReadAt, with a
// context that is cancelled when the client flushes the request (Tflush),
// when the connection ends, or when the server's context (WithContext) is
// done. A read that waits must select on ctx.Done() and return then; EINTR
// is the error a flushed read returns. The Rflush is written after the
// read's reply, whatever that reply is.
//
// Why: File methods get no context, so a read that waits could only be
// ended by its event. A Tflush was answered only after the event came, and
// a client that hung up left the handler, and with it the connection's
// goroutines and fids, waiting for good.
type ReaderAtContext interface {
	ReadAtContext(ctx context.Context, p []byte, offset int64) (int, error)
}

// WithContext makes ctx the parent of every request's context: cancelling
// it ends every read in flight that waits (ReaderAtContext) on every
// connection of the server, as a shutdown wants.
func WithContext(ctx context.Context) ServerOpt {
	return func(s *Server) {
		s.ctx = ctx
	}
}

// readAt reads from f through ReadAtContext if it has it and the request
// has a context, and through ReadAt otherwise.
func readAt(ctx context.Context, f File, p []byte, off int64) (int, error) {
	if rc, ok := f.(ReaderAtContext); ok && ctx != nil {
		return rc.ReadAtContext(ctx, p, off)
	}
	return f.ReadAt(p, off)
}
