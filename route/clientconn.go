package route

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/probegate/probegate/internal/rawconn"
)

// clientListener wraps every accepted client connection in a clientConn,
// so that a hijacked SSE stream can take the socket over from fasthttp
// (see hijack.go), with p's deadline slacks and wire budget
// (Proxy.wrapClient), and lets p release it while idle
// (clientconn_idle.go).
type clientListener struct {
	net.Listener
	p *Proxy
}

func (l clientListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.p.wrapClient(c, nil), nil
}

// newClientConn wraps socket c; pre is what was read from it already.
func newClientConn(c net.Conn, pre []byte) *clientConn {
	cc := &clientConn{Conn: c, pre: pre}
	cc.raw.Reset(c)
	return cc
}

// clientConn is a client connection as fasthttp sees it. Once detached,
// Close leaves the socket open: fasthttp closes a hijacked connection
// when its hijack handler returns (and only then returns the connection's
// read buffer to its pool), while the stream goes on over the socket.
// A detached clientConn is never used again; a connection given back to
// the server gets a new one. pre holds bytes read from the socket before
// it was handed over (a pipelined request), served first.
type clientConn struct {
	net.Conn
	detached      atomic.Bool
	lingerOnClose atomic.Bool // close with a lingering close (see linger.go)
	pre           []byte
	raw           rawconn.Socket // reads and writes c.Conn where it can (see rawconn.Socket)
	// The write deadline armed on the socket, kept up to writeSlack later
	// than asked (see SetWriteDeadline); 0 slack: armed as asked.
	writeBy    lazyDeadline
	writeSlack time.Duration
	// The read deadline last asked for (readWant; zero: none), armed on
	// the socket by the next Read, up to readSlack later (see
	// SetReadDeadline); readBy is what is armed.
	readWant  time.Time
	readBy    lazyDeadline
	readSlack time.Duration
	// ip is the client's IP as X-Forwarded-For gets it (forwardedIP).
	ip []byte
	// wire is how many bytes one request may take on the wire (0: no
	// bound), wireLeft what is left of it for the request being read;
	// see Read and nextRequest.
	wire, wireLeft int64
	// phase is where the connection is between requests, for the idle
	// release (clientconn_idle.go); p releases it (nil: never). Only the
	// goroutine serving the connection touches phase.
	phase connPhase
	p     *Proxy

	// Its slot in the proxy's connSet while tracked.
	tracked    atomic.Bool
	shard, idx uint32
}

// errWireTooLong: a request took more bytes on the wire than its
// connection's budget (clientConn.Read); the server answers it 413.
var errWireTooLong = errors.New("request takes more than 8x server.max_body_bytes on the wire") // 8: wireFactor

// wireFactor bounds the bytes one request may take on the wire: its head
// (up to server.max_header_bytes) and wireFactor times
// server.max_body_bytes. A body with Content-Length is never near it, nor
// a chunked one of any chunk size (one-byte chunks take 6 bytes per byte);
// chunk extensions, which fasthttp reads and discards whatever their
// length, are what it stops: without it a 2-byte body with an 8 MiB
// extension was read whole and forwarded, and one request could make the
// proxy read for all of server.read_timeout (Node's CVE-2024-22019 and
// Go's CVE-2023-39326 bound the same).
const wireFactor = 8

// Read reads from the socket, within what is left of the request's wire
// budget: once it is spent Read fails with errWireTooLong, which ends the
// request being read (the server answers 413). Bytes handed over from
// before (pre) were counted where they were read.
func (c *clientConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	if c.wire > 0 {
		if c.wireLeft <= 0 {
			return 0, errWireTooLong
		}
		if int64(len(b)) > c.wireLeft {
			b = b[:c.wireLeft]
		}
	}
	var n int
	var err error
	if c.phase == phaseIdle && c.p != nil {
		n, err = c.readIdle(b) // the wait for the next request
	} else {
		if !c.readWant.IsZero() {
			if a, ok := c.readBy.dueAt(c.readWant, c.readSlack); ok {
				err := c.Conn.SetReadDeadline(a)
				c.readBy.armed(err, a)
				if err != nil {
					return 0, err
				}
			}
		}
		n, err = c.raw.Read(b)
	}
	if n > 0 {
		c.phase = phaseBusy
	}
	c.wireLeft -= int64(n)
	return n, err
}

// setWireBudget bounds each request the connection reads to wire bytes
// (0: no bound), starting with the next.
func (c *clientConn) setWireBudget(wire int64) { c.wire, c.wireLeft = wire, wire }

// nextRequest renews the wire budget: the server handles a request, so
// what the connection reads from now on belongs to the next one. Only the
// goroutine serving the connection calls it.
func (c *clientConn) nextRequest() { c.wireLeft = c.wire }

func (c *clientConn) Write(b []byte) (int, error) {
	c.phase = phaseWrote
	return c.raw.Write(b)
}

// forwardedIP returns the client's IP as setForwardedFor appends it,
// formatted at the connection's first request and kept for its next ones.
// Only the goroutine serving the connection calls it.
func (c *clientConn) forwardedIP() []byte {
	if c.ip == nil {
		ip := net.IPv4zero
		if a, ok := c.Conn.RemoteAddr().(*net.TCPAddr); ok {
			ip = a.IP
		}
		c.ip = appendIP(make([]byte, 0, len("255.255.255.255")), ip)
	}
	return c.ip
}

// SetWriteDeadline arms the socket's write deadline lazily: a deadline
// already armed between t and t+writeSlack is kept, else t+writeSlack is
// armed (lazyDeadline.dueAt). A write is then cut no sooner than asked and
// at most writeSlack later. fasthttp's server asks for now+WriteTimeout
// before every response; the proxy's writeSlack is WriteTimeout/16
// (Proxy.clientWriteSlack), so a busy keep-alive connection updates its
// runtime timer about once per WriteTimeout/16 instead of once per
// response. A zero t (no deadline) is always passed on.
func (c *clientConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		c.writeBy.forget()
		return c.Conn.SetWriteDeadline(t)
	}
	if a, ok := c.writeBy.dueAt(t, c.writeSlack); ok {
		err := c.Conn.SetWriteDeadline(a)
		c.writeBy.armed(err, a)
		return err
	}
	return nil
}

// SetReadDeadline records t as the deadline of the connection's next
// reads; Read arms it on the socket before it reads, lazily: a deadline
// already armed between t and t+readSlack is kept, else t+readSlack is
// armed (lazyDeadline.dueAt), so a read is cut no sooner than asked and at
// most readSlack later. fasthttp's server asks for two deadlines per
// request on a keep-alive connection: now+IdleTimeout before it waits for
// the next request, then now+ReadTimeout once its first byte arrived. A
// small request arrives whole in the read that waited for it, so the
// second is never armed, and the first is kept from the request before
// while requests follow each other within readSlack (the proxy's is
// server.read_timeout/16, Proxy.clientReadSlack): a busy connection
// updates its runtime timer about once per readSlack instead of twice per
// request. A zero t (no deadline) is always passed on at once.
func (c *clientConn) SetReadDeadline(t time.Time) error {
	c.readWant = t
	c.phase = c.phase.asked(t)
	if t.IsZero() {
		c.readBy.forget()
		return c.Conn.SetReadDeadline(t)
	}
	return nil
}

// SetDeadline sets both deadlines as asked, and the records of what is
// armed (SetWriteDeadline, SetReadDeadline) with them.
func (c *clientConn) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	c.readWant = t
	if t.IsZero() {
		c.writeBy.forget()
		c.readBy.forget()
	} else {
		c.writeBy.armed(err, t)
		c.readBy.armed(err, t)
	}
	return err
}

// Close closes the socket unless the connection was detached. After a
// refusal (closeAfterRefusal) the first Close lingers before it closes; a
// second, concurrent one (Shutdown cutting connections) closes at once,
// which also ends the first one's wait.
func (c *clientConn) Close() error {
	if c.detached.Load() {
		return nil
	}
	if c.lingerOnClose.Swap(false) {
		linger(c.Conn, lingerTime, lingerMaxBytes)
	}
	return c.Conn.Close()
}

// ReadFrom hands large bodies to the socket's own ReadFrom, as fasthttp's
// writer does on an unwrapped connection (one copy through a 32 KiB
// buffer rather than 4 KiB flushes of the writer's buffer; sendfile or
// splice where the source allows).
func (c *clientConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides a writer's ReadFrom, so that io.Copy does not call back
// into it.
type writerOnly struct{ io.Writer }
