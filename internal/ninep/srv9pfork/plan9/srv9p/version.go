package srv9p

// A Tversion resets the session: version(5) says "all outstanding I/O on
// the connection is aborted; all active fids are freed". reset does both
// before answering it: every request in flight is cancelled, as a Tflush
// would, and its reply (and that of any Tflush of it) is not sent, since
// the client's new session cannot tell it from one of its own; once they
// have all returned, every fid is clunked. The Tversion is served in the
// goroutine that reads the connection, so no request of the new session
// is read before the reset is done, and the client may reuse any fid and
// tag at once.
func (c *conn) reset(r *request) {
	c.reqs.rw.RLock()
	for _, old := range c.reqs.m {
		if old != r {
			old.aborted.Store(true)
			old.cancel()
		}
	}
	c.reqs.rw.RUnlock()
	c.running.Wait()
	c.fids.clear()
	c.version(r)
	r.respond()
}
