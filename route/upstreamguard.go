package route

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probegate/probegate/internal/rawconn"
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
// On a plain TCP socket where raw system calls are used (rawconn.Socket), a
// request that arrives in one write (what fasthttp's writer flushes for a
// request up to its buffer size) is held back until the first read and
// sent from there (rawconn.Socket.Exchange): the check before a reuse is then a
// read(2) that must find nothing, followed by the write, and the answer is
// waited for before it is read. A request longer than that goes out as it
// is written, after the check (a peek). A held request's send can fail
// inside Read (a failed redial, a failed write): fasthttp then reports a
// connection closed before the first byte, and sendErr keeps the error
// that tells the proxy the request never left (connTable.take).
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
	held     *[]byte // the current request, held back until the first read (from heldRequests)
	sendErr  error   // why the current held request never left whole

	// The deadlines set on the current socket, for its replacement
	// (Unix nanoseconds, 0: none). Atomic because a deadline may be set
	// while another goroutine owns the other direction.
	readBy, writeBy atomic.Int64
}

// maxHeldRequest is the largest request guardedConn holds back until the
// first read: fasthttp's default write buffer, so a request that fits it
// (a chat or completion request with a prompt of a few KiB) is held.
const maxHeldRequest = 4 << 10

// heldRequests holds requests between their write and the first read of
// their answer. A pool, not a buffer per connection: an idle stream holds
// its upstream connection for minutes and must not hold this too. Its
// buffers start empty and grow to the requests they hold, so that what a
// burst of concurrent requests leaves in the pool is the size of those
// requests, not maxHeldRequest each.
var heldRequests = sync.Pool{New: func() any { return new([]byte) }}

// sockHolder is the current connection; tc and rec are set when it is TLS
// (tc is Conn, over rec). It is read and written through raw (see
// rawconn.Socket: raw system calls on a plain TCP socket, Conn's own methods
// otherwise).
type sockHolder struct {
	net.Conn
	tc  *tls.Conn
	rec *recordConn
	raw rawconn.Socket
}

func newGuardedConn(c net.Conn, dial func() (net.Conn, error)) *guardedConn {
	g := &guardedConn{dial: dial}
	g.use(c)
	return g
}

// use makes c the current connection and returns the one it replaces.
func (g *guardedConn) use(c net.Conn) *sockHolder {
	h := &sockHolder{Conn: c}
	h.raw.Reset(c)
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

// errUndelivered marks the failure of a request on a reused socket whose
// peer's TCP never acknowledged it (peerAcked): the backend closed or
// reset the connection before the request reached it, so it is no drop of
// the poison rule (poison.go).
var errUndelivered = errors.New("request not acknowledged by the backend's TCP before the connection failed")

// errStrayRedial wraps a failed redial of a connection that had to be
// replaced: the request never left, so it is a dial error.
var errStrayRedial = errors.New("redial of a connection with unread bytes")

func (g *guardedConn) Write(p []byte) (int, error) {
	if !g.writing {
		// The first write of a request.
		g.writing = true
		g.headN = 0
		g.sendErr = nil
		if g.poisoned || (g.used && g.outdated()) {
			if err := g.redial(); err != nil {
				return 0, redialError(err)
			}
		}
		if len(p) <= maxHeldRequest && g.sock.Load().raw.OK() {
			// Sent by the first Read, unless more follows.
			b := heldRequests.Get().(*[]byte)
			*b = append((*b)[:0], p...)
			g.held = b
			return len(p), nil
		}
		if err := g.check(); err != nil {
			return 0, err
		}
	} else if g.held != nil {
		// The request is longer than one write: what was held goes out
		// first, the way a request that was not held does.
		err := g.check()
		if err == nil {
			_, err = g.sock.Load().raw.Write(*g.held)
		}
		g.release()
		if err != nil {
			return 0, err
		}
	}
	return g.writeOut(p)
}

// errAnsweredEarly: the backend answered (or closed) while a request was
// still being written to it (writeOut).
var errAnsweredEarly = errors.New("the backend answered before it read the whole request")

// stallLook is how long a request write that cannot go out waits before it
// first looks whether the backend has answered meanwhile (writeOut); each
// later wait of the same write is twice the one before, up to
// maxStallLook. Looking every 20 ms for the whole of a long stall cost a
// 12 MiB request to a backend reading 16 MiB/s 8.4 -> 16.5 ms of the
// proxy's CPU (adfd762^ vs adfd762, 9 of 9 rounds above; 100 ms slices:
// 10.3 ms): each slice's wake-up is paid, and a slow reader stalls a large
// body for most of its transfer.
const stallLook = 20 * time.Millisecond

// maxStallLook bounds the waits between looks: an answer that comes late
// in a long stall reaches the client at most this much later.
const maxStallLook = 320 * time.Millisecond

// writeOut writes p, part of a request longer than maxHeldRequest, on the
// current socket.
//
// A backend may answer before it has read the whole request (a 413 for a
// body over its own limit, a 401 from a layer that never reads bodies)
// and then neither read the rest nor close. A write of the rest would
// stall on the full socket until its deadline (upstream.idle_timeout) and
// the client would get a 504 instead of that answer, counted against the
// backend. So on a plain TCP socket a write that cannot go out at once
// waits for the socket in slices (stallLook, doubling up to maxStallLook),
// and before each it looks
// whether the backend has answered (anything but an interim 1xx head) or
// closed: if it has, the
// write stops with errAnsweredEarly, a write error, on which RoundTrip
// reads the answer (earlyAnswer) and closes the connection: the unsent
// rest of the request would otherwise be read as the next one. A write
// that goes out at once (the socket's buffer takes it) costs what it
// always did: one write(2). Over TLS, or where the socket cannot be
// peeked, the write waits for its deadline as before.
func (g *guardedConn) writeOut(p []byte) (int, error) {
	h := g.sock.Load()
	if h.rec != nil || !h.raw.OK() || !g.peek.ok() {
		return h.raw.Write(p)
	}
	n, done := g.peek.tryWrite(p)
	if done {
		return n, nil
	}
	by := g.writeBy.Load() // the deadline deadlineConn armed
	defer func() {
		// Give the socket back the deadline deadlineConn believes armed.
		var t time.Time
		if by != 0 {
			t = time.Unix(0, by)
		}
		_ = h.Conn.SetWriteDeadline(t)
	}()
	for look := stallLook; ; look = min(2*look, maxStallLook) {
		if g.peek.answered() {
			return n, &net.OpError{Op: "write", Net: "tcp", Source: h.LocalAddr(), Addr: h.RemoteAddr(), Err: errAnsweredEarly}
		}
		slice := time.Now().Add(look)
		if by != 0 && slice.UnixNano() > by {
			slice = time.Unix(0, by)
		}
		_ = h.Conn.SetWriteDeadline(slice)
		k, err := h.raw.Write(p[n:])
		n += k
		if err == nil {
			return n, nil
		}
		if !isTimeout(err) || (by != 0 && time.Now().UnixNano() >= by) {
			return n, err
		}
	}
}

// check replaces a connection that carried a response when it holds
// unread bytes or its peer closed it.
func (g *guardedConn) check() error {
	if g.used && g.unread() {
		if err := g.redial(); err != nil {
			return redialError(err)
		}
	}
	return nil
}

// redialError is the error of a failed redial: a dial error, so the
// request counts as never sent.
func redialError(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: errors.Join(errStrayRedial, err)}
}

// release returns the held request's buffer.
func (g *guardedConn) release() {
	heldRequests.Put(g.held)
	g.held = nil
}

// send writes the held request and reads the first bytes of its answer
// into p (rawconn.Socket.Exchange), after the check before a reuse; a socket
// that fails the check is replaced and the request sent on the new one.
// When the request cannot be sent, sendErr says why.
func (g *guardedConn) send(p []byte) (int, error) {
	defer g.release()
	for {
		n, res, err := g.sock.Load().raw.Exchange(*g.held, p, g.used)
		switch res {
		case rawconn.Unusable:
			// A fresh socket is not checked: the loop ends.
			if err := g.redial(); err != nil {
				g.sendErr = redialError(err)
				return 0, g.sendErr
			}
			continue
		case rawconn.NotSent:
			g.sendErr = err
		}
		return n, err
	}
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
	// The new socket gets the deadlines of the one it replaces.
	if t := g.readBy.Load(); t != 0 {
		_ = c.SetReadDeadline(time.Unix(0, t))
	}
	if t := g.writeBy.Load(); t != 0 {
		_ = c.SetWriteDeadline(time.Unix(0, t))
	}
	_ = g.use(c).drop()
	g.used, g.poisoned = false, false
	return nil
}

func (g *guardedConn) Read(p []byte) (int, error) {
	var n int
	var err error
	if g.held != nil && len(p) > 0 {
		n, err = g.send(p)
	} else {
		n, err = g.sock.Load().raw.Read(p)
	}
	h := g.sock.Load()
	if err != nil && g.tlsd != nil {
		g.tlsd.noteReadError(err)
	}
	if err != nil && n == 0 && g.writing && g.used && g.sendErr == nil {
		// A reused socket failed before any byte of the answer: was the
		// request delivered? (poison.go)
		raw := h.Conn
		if h.rec != nil {
			raw = h.rec.Conn
		}
		if acked, known := peerAcked(raw); known && !acked {
			g.sendErr = errors.Join(errUndelivered, err)
		}
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

// readLent is Read into a buffer l lends only once the socket has
// something to read (rawconn.Socket.ReadLent). Only a plain TCP socket
// whose answer already began (its status seen, no request held back) can
// wait without the buffer; otherwise this is Read into l's buffer.
func (g *guardedConn) readLent(l rawconn.Lender) (int, error) {
	h := g.sock.Load()
	if g.held != nil || g.writing || g.headN < len(g.head) || h.rec != nil || !h.raw.OK() {
		return g.Read(l.Lend())
	}
	return h.raw.ReadLent(l)
}

// isInformational reports whether a response starts with a 1xx status line.
func isInformational(h []byte) bool {
	return string(h[:7]) == "HTTP/1." && h[8] == ' ' && h[9] == '1'
}

func (g *guardedConn) Close() error         { return g.cur().Close() }
func (g *guardedConn) LocalAddr() net.Addr  { return g.cur().LocalAddr() }
func (g *guardedConn) RemoteAddr() net.Addr { return g.cur().RemoteAddr() }

func (g *guardedConn) SetDeadline(t time.Time) error {
	g.readBy.Store(unixNano(t))
	g.writeBy.Store(unixNano(t))
	return g.cur().SetDeadline(t)
}

func (g *guardedConn) SetReadDeadline(t time.Time) error {
	g.readBy.Store(unixNano(t))
	return g.cur().SetReadDeadline(t)
}

func (g *guardedConn) SetWriteDeadline(t time.Time) error {
	g.writeBy.Store(unixNano(t))
	return g.cur().SetWriteDeadline(t)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (no deadline).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
