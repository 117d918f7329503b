package srv9p

import "time"

// The stall bounds (Server.ReadTimeout, WriteTimeout, IdleTimeout): a
// peer that sends half a message, or never takes its replies, would
// otherwise hold its connection's goroutines, slots and fids for good,
// and one that holds a connection it does not use, a slot of whoever
// bounds connections. They use the connection's own deadlines.

type readDeadliner interface{ SetReadDeadline(time.Time) error }
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// between is called before each message is read; midFrame once its
// first bytes have arrived.
func (c *conn) between()  { c.setFrame(false) }
func (c *conn) midFrame() { c.setFrame(true) }

func (c *conn) setFrame(in bool) {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	c.inFrame = in
	c.armLocked()
}

// started and finished count the requests in flight, which keep the idle
// timeout off.
func (c *conn) started() {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	c.busy++
}

func (c *conn) finished() {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	c.busy--
	if c.busy == 0 {
		c.armLocked()
	}
}

// armLocked sets the read deadline the state calls for. Called with
// c.stallMu held, so the deadline always follows the last change.
func (c *conn) armLocked() {
	srv := c.srv
	if srv.ReadTimeout <= 0 && srv.IdleTimeout <= 0 {
		return
	}
	d, ok := c.in.(readDeadliner)
	if !ok {
		return
	}
	var t time.Time
	switch {
	case c.inFrame && srv.ReadTimeout > 0:
		t = time.Now().Add(srv.ReadTimeout)
	case !c.inFrame && c.busy == 0 && srv.IdleTimeout > 0:
		t = time.Now().Add(srv.IdleTimeout)
	}
	d.SetReadDeadline(t)
}

// writeReply writes one reply within WriteTimeout. Called with c.outMu held.
func (c *conn) writeReply(msg []byte) error {
	if d, ok := c.out.(writeDeadliner); ok && c.srv.WriteTimeout > 0 {
		d.SetWriteDeadline(time.Now().Add(c.srv.WriteTimeout))
	}
	_, err := c.out.Write(msg)
	return err
}
