package srv9p

import "9fans.net/go/plan9"

// Requests are served concurrently, each in a goroutine of its own, so a
// client that pipelines a Twalk and a Topen of its newfid (or a Tattach
// and a Twalk from its fid) would have the second run before the first
// has set the fid up: "unknown fid", or a handler that finds the fid's
// Aux not yet set. A request that names a fid whose set-up was read
// before it and is not yet answered is therefore handed to its goroutine
// only once that set-up's reply is written. Requests on other fids, and
// Tversion, Tauth and Tflush, are never held.

// awaitSetups waits until no set-up of a fid r names is in flight, then
// records r as the set-up of the fid it sets up, if any.
func (c *conn) awaitSetups(r *request) {
	f := r.ifcall
	switch f.Type {
	case plan9.Tversion, plan9.Tauth, plan9.Tflush:
		return
	}
	c.awaitSetup(f.Fid)
	sets, ok := f.Fid, false
	switch f.Type {
	case plan9.Twalk:
		c.awaitSetup(f.Newfid)
		sets, ok = f.Newfid, true
	case plan9.Tattach, plan9.Topen, plan9.Tcreate:
		ok = true
	}
	if ok {
		r.setup, r.setupFid = make(chan struct{}), sets
		c.setupMu.Lock()
		c.setups[sets] = r.setup
		c.setupMu.Unlock()
	}
}

func (c *conn) awaitSetup(fid uint32) {
	c.setupMu.Lock()
	ch := c.setups[fid]
	c.setupMu.Unlock()
	if ch != nil {
		<-ch
	}
}

// setupDone releases the requests waiting for r's set-up.
func (c *conn) setupDone(r *request) {
	if r.setup == nil {
		return
	}
	c.setupMu.Lock()
	if c.setups[r.setupFid] == r.setup {
		delete(c.setups, r.setupFid)
	}
	c.setupMu.Unlock()
	close(r.setup)
}
