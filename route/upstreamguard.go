package route

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// guardedConn is a plain-TCP upstream connection that is never reused in a
// state where it could hand one exchange's bytes to another:
//
//   - When a new request starts on a connection that already carried a
//     response, it first checks, without blocking, whether the backend
//     wrote anything since (stray bytes after a Content-Length, a late
//     duplicate answer) or closed its end. If so, the socket is closed and
//     the request goes out on a freshly dialed one: unread bytes never
//     become the start of the next client's response.
//   - A response that starts with a 1xx status poisons the connection: the
//     next request on the connection object is sent on a fresh socket. For
//     a 101 Switching Protocols (which the proxy never asks for: it strips
//     Upgrade) the socket is closed as soon as the status is seen, so a
//     tunnel can never be pooled; the handler answers that client with an
//     error (see errSwitchingProtocols).
//
// TLS connections are not guarded (the bytes seen here are records, not
// HTTP); see the README's security section.
//
// Like deadlineConn, it is used by one request at a time; the socket is
// swapped through an atomic pointer so that a concurrent Close (fasthttp's
// idle cleaner, a stream interrupt) always closes the current one.
type guardedConn struct {
	sock atomic.Pointer[sockHolder]
	dial func() (net.Conn, error)
	peek peeker // on the current socket

	// Owned by the goroutine using the connection.
	writing  bool // a request is being written; no response byte read yet
	used     bool // a response byte was read on the current socket
	poisoned bool
	head     [12]byte // start of the current response: "HTTP/1.1 101"
	headN    int
}

type sockHolder struct{ net.Conn }

func newGuardedConn(c net.Conn, dial func() (net.Conn, error)) *guardedConn {
	g := &guardedConn{dial: dial}
	g.sock.Store(&sockHolder{c})
	g.peek.reset(c)
	return g
}

func (g *guardedConn) cur() net.Conn { return g.sock.Load().Conn }

// errStrayRedial wraps a failed redial of a connection that had to be
// replaced: the request never left, so it is a dial error.
var errStrayRedial = errors.New("redial of a connection with unread bytes")

func (g *guardedConn) Write(p []byte) (int, error) {
	if !g.writing {
		// The first write of a request.
		g.writing = true
		g.headN = 0
		if g.poisoned || (g.used && g.peek.wroteOrClosed()) {
			if err := g.redial(); err != nil {
				return 0, &net.OpError{Op: "dial", Net: "tcp", Err: errors.Join(errStrayRedial, err)}
			}
		}
	}
	return g.cur().Write(p)
}

// redial replaces the socket with a fresh one.
func (g *guardedConn) redial() error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	old := g.sock.Swap(&sockHolder{c})
	_ = old.Close()
	g.peek.reset(c)
	g.used, g.poisoned = false, false
	return nil
}

func (g *guardedConn) Read(p []byte) (int, error) {
	c := g.cur()
	n, err := c.Read(p)
	if n > 0 {
		g.writing = false
		g.used = true
		if g.headN < len(g.head) {
			g.headN += copy(g.head[g.headN:], p[:n])
			if g.headN == len(g.head) && isInformational(g.head[:]) {
				g.poisoned = true
				if string(g.head[9:]) == "101" {
					// What follows is another protocol: nothing more
					// of it may be read by anyone.
					_ = c.Close()
				}
			}
		}
	}
	return n, err
}

// isInformational reports whether a response starts with a 1xx status line.
func isInformational(h []byte) bool {
	return string(h[:7]) == "HTTP/1." && h[8] == ' ' && h[9] == '1'
}

func (g *guardedConn) Close() error                       { return g.cur().Close() }
func (g *guardedConn) LocalAddr() net.Addr                { return g.cur().LocalAddr() }
func (g *guardedConn) RemoteAddr() net.Addr               { return g.cur().RemoteAddr() }
func (g *guardedConn) SetDeadline(t time.Time) error      { return g.cur().SetDeadline(t) }
func (g *guardedConn) SetReadDeadline(t time.Time) error  { return g.cur().SetReadDeadline(t) }
func (g *guardedConn) SetWriteDeadline(t time.Time) error { return g.cur().SetWriteDeadline(t) }
