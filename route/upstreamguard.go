package route

import (
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// guardedConn is an upstream connection that is never reused in a state
// where it could hand one exchange's bytes to another:
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
// For an https backend the connection is a *tls.Conn over a recordConn
// (tlsDialer), and the check before a reuse looks at every place a stray
// byte can wait: plaintext decrypted but not read and whole records read
// but not decrypted, both inside the TLS connection, the start of a record
// (recordConn follows the framing), and the socket, where any byte (a
// record is opaque until decrypted) or a close means a fresh connection.
// A well-behaved server costs no redial: TLS 1.3 session tickets come
// before the first answer, which consumes them. The 1xx check reads the
// plaintext, as on plain TCP. A TLS session dialed under an upstream.tls
// configuration that a reload has since replaced is not reused either: the
// request goes out on a fresh connection under the new one (outdated).
//
// Like deadlineConn, it is used by one request at a time; the socket is
// swapped through an atomic pointer so that a concurrent Close (fasthttp's
// idle cleaner, a stream interrupt) always closes the current one.
type guardedConn struct {
	sock atomic.Pointer[sockHolder]
	dial func() (net.Conn, error)
	peek peeker     // on the current socket (under TLS, the raw one)
	tlsd *tlsDialer // an https backend's dialer; nil for plain HTTP

	// Owned by the goroutine using the connection.
	writing  bool // a request is being written; no response byte read yet
	used     bool // a response byte was read on the current socket
	poisoned bool
	head     [12]byte // start of the current response: "HTTP/1.1 101"
	headN    int
	probe    [1]byte // recordConn.unread's read buffer
}

// sockHolder is the current connection; tc and rec are set when it is TLS
// (tc is Conn, over rec). It is read and written through raw (see
// rawSocket: raw system calls on a plain TCP socket, Conn's own methods
// otherwise).
type sockHolder struct {
	net.Conn
	tc  *tls.Conn
	rec *recordConn
	raw rawSocket
}

func newGuardedConn(c net.Conn, dial func() (net.Conn, error)) *guardedConn {
	g := &guardedConn{dial: dial}
	g.use(c)
	return g
}

// use makes c the current connection and returns the one it replaces.
func (g *guardedConn) use(c net.Conn) *sockHolder {
	h := &sockHolder{Conn: c}
	h.raw.reset(c)
	raw := c
	if tc, ok := c.(*tls.Conn); ok {
		if rec, ok := tc.NetConn().(*recordConn); ok {
			h.tc, h.rec, raw = tc, rec, rec.Conn
		}
	}
	old := g.sock.Swap(h)
	g.peek.reset(raw)
	return old
}

func (g *guardedConn) cur() net.Conn { return g.sock.Load().Conn }

// drop closes a connection that is not to be used again. Under TLS it
// closes the socket: nothing more, not even a close_notify alert, is
// written into a session that carried stray bytes or a tunnel.
func (h *sockHolder) drop() error {
	if h.rec != nil {
		return h.rec.Conn.Close()
	}
	return h.Conn.Close()
}

// errStrayRedial wraps a failed redial of a connection that had to be
// replaced: the request never left, so it is a dial error.
var errStrayRedial = errors.New("redial of a connection with unread bytes")

func (g *guardedConn) Write(p []byte) (int, error) {
	if !g.writing {
		// The first write of a request.
		g.writing = true
		g.headN = 0
		if g.poisoned || (g.used && (g.outdated() || g.unread())) {
			if err := g.redial(); err != nil {
				return 0, &net.OpError{Op: "dial", Net: "tcp", Err: errors.Join(errStrayRedial, err)}
			}
		}
	}
	return g.sock.Load().raw.write(p)
}

// unread reports whether the connection holds bytes no one read or its
// peer closed it.
func (g *guardedConn) unread() bool {
	if h := g.sock.Load(); h.rec != nil && h.rec.unread(h.tc, g.probe[:]) {
		return true
	}
	return g.peek.wroteOrClosed()
}

// outdated reports whether the connection is a TLS session dialed under
// an upstream.tls configuration a reload has since replaced (another CA,
// client certificate or server name): it is not reused, so that no request
// goes out under settings the operator withdrew, and forwarding trusts
// what probes trust.
func (g *guardedConn) outdated() bool {
	if g.tlsd == nil {
		return false
	}
	h := g.sock.Load()
	return h.rec != nil && h.rec.cfg != g.tlsd.host.Config()
}

// redial replaces the socket with a fresh one.
func (g *guardedConn) redial() error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	_ = g.use(c).drop()
	g.used, g.poisoned = false, false
	return nil
}

func (g *guardedConn) Read(p []byte) (int, error) {
	h := g.sock.Load()
	n, err := h.raw.read(p)
	if err != nil && g.tlsd != nil {
		g.tlsd.noteReadError(err)
	}
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
					_ = h.drop()
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
