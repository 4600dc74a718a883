package route

import (
	"net"
	"sync"
)

// connTable holds a backend's open upstream connections by local address,
// so that a failed round trip (whose Response still names the local address
// of the connection it used) can tell a reused keep-alive connection from a
// fresh one: a stale pooled connection to a pod that restarted or died says
// nothing about the pod as it is now. It costs a map write per connection
// (and per socket replacement), nothing per request. Safe for concurrent
// use.
type connTable struct {
	m sync.Map // local address string -> *deadlineConn
}

// add registers c under its local address and returns it.
func (t *connTable) add(c *deadlineConn) *deadlineConn {
	c.keyAddr = c.Conn.LocalAddr()
	c.raddr = c.Conn.RemoteAddr()
	c.key = c.keyAddr.String()
	t.m.Store(c.key, c)
	return c
}

// take reports whether the request that just failed on the connection at
// local address laddr went out on a socket that had already carried a
// response, i.e. one taken from the idle pool (not one guardedConn dialed
// for it), and forgets the connection (fasthttp closes a connection whose
// round trip failed). A nil address (the round trip never got a
// connection) is not reused. sendErr is why the request never left, when
// guardedConn held it back and its send failed in the first read (which
// fasthttp reports as a connection closed before the first byte); nil
// otherwise.
func (t *connTable) take(laddr net.Addr) (reused bool, sendErr error) {
	if laddr == nil {
		return false, nil
	}
	key := laddr.String()
	v, ok := t.m.Load(key)
	if !ok {
		return false, nil
	}
	c := v.(*deadlineConn)
	t.m.CompareAndDelete(key, c)
	if g, ok := c.Conn.(*guardedConn); ok {
		sendErr = g.sendErr
	}
	return c.sentAnswered && sameAddr(c.sentOn, c.Conn.LocalAddr()), sendErr
}

// rekey moves c to its socket's current local address when the socket was
// replaced (guardedConn redials). Called at the start of each request.
// A socket's LocalAddr is the same value for its whole life, so the common
// case is one interface comparison and no allocation.
func (c *deadlineConn) rekey() {
	a := c.Conn.LocalAddr()
	if a == nil || a == c.keyAddr {
		return
	}
	c.conns.m.CompareAndDelete(c.key, c)
	c.keyAddr, c.key = a, a.String()
	c.raddr = c.Conn.RemoteAddr()
	c.conns.m.Store(c.key, c)
}

// RemoteAddr returns the backend's address as of the socket the connection
// was last keyed by (add, rekey): fasthttp reads it before every request
// (Response.RemoteAddr, which the proxy does not use), and reading it
// through guardedConn's current socket each time cost about 1% of the
// proxy's user time under wrk. LocalAddr, which keys the connection, is
// always read from the socket.
func (c *deadlineConn) RemoteAddr() net.Addr {
	if c.raddr == nil {
		return c.Conn.RemoteAddr()
	}
	return c.raddr
}

// Close closes the connection. It forgets it at once unless a request is
// awaiting its first response byte: then the round trip is failing, and
// its error path takes the entry (connTable.take) to learn whether the
// connection was reused.
func (c *deadlineConn) Close() error {
	if !c.awaiting.Load() {
		c.conns.m.CompareAndDelete(c.key, c)
	}
	return c.Conn.Close()
}

// sameAddr reports whether a and b are the same socket's address value.
func sameAddr(a, b net.Addr) bool { return a != nil && a == b }
