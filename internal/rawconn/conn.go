package rawconn

import (
	"net"
	"time"
)

// Conn is a TCP connection read and written with raw system calls (a
// Socket). It is a net.Conn with the net package's results: io.EOF when
// the peer closed, a *net.OpError with Op "read" or "write" otherwise
// (deadlines and Close included). As with any net.Conn, one Read and one
// Write may run at the same time.
type Conn struct {
	s Socket
}

// Wrap returns c as a *Conn when it is a *net.TCPConn on Linux, else c
// itself (a TLS connection, a pipe, another system: they keep their own
// Read and Write).
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	r := new(Conn)
	if !r.s.Reset(tc) {
		return c
	}
	return r
}

// Read implements net.Conn with one raw read(2) (and waits on the poller
// while there is nothing to read).
func (c *Conn) Read(p []byte) (int, error) { return c.s.Read(p) }

// Write implements net.Conn with raw write(2) calls: all of p, or an
// error.
func (c *Conn) Write(p []byte) (int, error) { return c.s.Write(p) }

// Close implements net.Conn.
func (c *Conn) Close() error { return c.s.c.Close() }

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.s.c.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.s.c.RemoteAddr() }

// SetDeadline implements net.Conn; Read and Write honour it.
func (c *Conn) SetDeadline(t time.Time) error { return c.s.c.SetDeadline(t) }

// SetReadDeadline implements net.Conn; Read honours it.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.s.c.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn; Write honours it.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.s.c.SetWriteDeadline(t) }
