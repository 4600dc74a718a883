package evloop

import "net"

// replayConn is a handed-over connection: Read returns the bytes the loop
// had already read before the socket's. Every other method is the
// socket's, so CloseWrite, deadlines and addresses behave as on the
// original connection.
type replayConn struct {
	net.Conn
	pre []byte
}

func newReplayConn(c net.Conn, pre []byte) net.Conn {
	if len(pre) == 0 {
		return c
	}
	return &replayConn{Conn: c, pre: pre}
}

// Read implements net.Conn.
func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// CloseWrite shuts the sending side, as *net.TCPConn does.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
