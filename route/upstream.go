package route

import (
	"bytes"
	"net"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/rawconn"
	"github.com/probegate/probegate/internal/upstreamtls"
)

// deadlineConn is an upstream connection that manages its own read
// deadlines, because fasthttp's ReadTimeout and DoDeadline set one deadline
// over the whole response and would cut long streams. After a request is
// written, the next read may wait up to firstByte (upstream.first_byte_timeout:
// the model server may think before it answers); once bytes flow, every read
// may wait up to idle (upstream.idle_timeout), so a stream that keeps sending
// lives as long as it needs and a silent one is cut. The response head
// (status line and header fields, up to the blank line; any interim 1xx
// heads before it included) must be whole within firstByte of the first
// read too: one deadline covers all of it, so a backend that trickles
// header bytes, never silent for idle, cannot hold the request past
// first_byte_timeout. Deadlines that fasthttp asks for are
// ignored: this type owns them.
//
// Deadlines are re-armed lazily (see lazyDeadline): a read or write that
// may wait d gets a deadline between d and d + d/16 away, so a busy
// connection updates its runtime timers about once per d/16 rather than on
// every read and write.
//
// A connection is used by one request at a time; the atomics only make the
// hand-over between the handler goroutine (write) and the response writer
// (body reads) explicit.
//
// It also remembers whether the current request went out on a socket that
// had already carried a response (a pooled keep-alive connection), for
// connTable.take.
type deadlineConn struct {
	net.Conn
	firstByte, idle time.Duration
	awaiting        atomic.Bool // a request was written and no byte read yet
	answered        atomic.Bool // a response byte was read on the current socket
	// The current request's socket when it started (its local address)
	// and whether that socket had carried a response: connTable.take
	// learns from them whether the request went out on a pooled one.
	// Written by the request's first write, read after its round trip.
	sentOn       net.Addr
	sentAnswered bool
	// inHead: the current response's final head is not yet whole.
	// headArmed: its deadline is armed (by its first read). headEnd: how
	// many bytes of headTerm the last head read ended with. headPos: bytes
	// of the current head read so far; interim: its status is 1xx.
	inHead          atomic.Bool
	headArmed       bool
	headEnd         int
	headPos         int
	interim         bool
	conns           *connTable
	keyAddr         net.Addr // the local address this connection is known by in conns
	key             string   // keyAddr as a string
	raddr           net.Addr // the remote address of that socket (RemoteAddr)
	readBy, writeBy lazyDeadline
	// bodyReadSince is when the read under way of a response body (a
	// read past the head) began, Unix ns; 0 while none is: the progress
	// watch reads a stream's silence from it (connTable.silentSince).
	bodyReadSince atomic.Int64
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	first := !c.awaiting.Load()
	if first {
		// The first write of a request: fasthttp has just noted the
		// socket's local address in the Response (ParseNetConn), which is
		// the key a failed round trip looks this connection up by.
		c.awaiting.Store(true)
		c.headArmed, c.headEnd, c.headPos, c.interim = false, 0, 0, false
		c.inHead.Store(true)
		c.rekey()
	}
	if t, ok := c.writeBy.due(time.Now(), c.idle); ok {
		c.writeBy.armed(c.Conn.SetWriteDeadline(t), t)
	}
	if first {
		// guardedConn may replace the socket with a fresh one (it
		// carries the deadlines over), in this write or, for a request
		// it holds back, in the first read: connTable.take compares.
		c.sentOn = c.Conn.LocalAddr()
		c.sentAnswered = c.answered.Load()
	}
	return c.Conn.Write(p)
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if c.inHead.Load() {
		return c.readHead(p)
	}
	d := c.idle
	if c.awaiting.Load() {
		d = c.firstByte
	}
	now := time.Now()
	if t, ok := c.readBy.due(now, d); ok {
		c.readBy.armed(c.Conn.SetReadDeadline(t), t)
	}
	c.bodyReadSince.Store(now.UnixNano())
	n, err := c.read(p)
	c.bodyReadSince.Store(0)
	return n, err
}

// readLent is Read into a buffer l lends only once the connection has
// something to read (rawconn.Socket.ReadLent): a body waiting for its next
// chunk holds no buffer. Its deadline is Read's. Where the socket cannot
// lend (TLS, no file descriptor), the buffer is lent for the whole wait.
func (c *deadlineConn) readLent(l rawconn.Lender) (int, error) {
	if c.inHead.Load() {
		return c.readHead(l.Lend())
	}
	d := c.idle
	if c.awaiting.Load() {
		d = c.firstByte
	}
	now := time.Now()
	if t, ok := c.readBy.due(now, d); ok {
		c.readBy.armed(c.Conn.SetReadDeadline(t), t)
	}
	c.bodyReadSince.Store(now.UnixNano())
	defer c.bodyReadSince.Store(0)
	g, ok := c.Conn.(*guardedConn)
	if !ok {
		return c.read(l.Lend())
	}
	n, err := g.readLent(l)
	c.got(n)
	return n, err
}

// readHead reads while the response head is not whole: the first read
// arms a deadline firstByte away (lazily, as Read does), and the head's
// later reads keep it instead of re-arming.
func (c *deadlineConn) readHead(p []byte) (int, error) {
	if !c.headArmed {
		if t, ok := c.readBy.due(time.Now(), c.firstByte); ok {
			c.readBy.armed(c.Conn.SetReadDeadline(t), t)
		}
		c.headArmed = c.readBy.until.Load() != 0
	}
	n, err := c.read(p)
	if n > 0 && c.scanHead(p[:n]) {
		c.inHead.Store(false)
	}
	return n, err
}

// statusDigit is the offset of a head's first status digit ("HTTP/1.1 2").
const statusDigit = len("HTTP/1.1 ")

// scanHead follows the response heads through b, the next bytes read, and
// reports whether the final one is now whole. An interim (1xx) head is not
// the answer: the deadline goes on over the heads after it, so that a
// backend cannot reset it with a "100 Continue".
func (c *deadlineConn) scanHead(b []byte) bool {
	for len(b) > 0 {
		if k := statusDigit - c.headPos; k >= 0 && k < len(b) {
			c.interim = b[k] == '1'
		}
		m, end := headEnds(c.headEnd, b)
		if end < 0 {
			c.headEnd = m
			c.headPos += len(b)
			return false
		}
		if !c.interim {
			return true
		}
		b = b[end:]
		c.headEnd, c.headPos, c.interim = 0, 0, false
	}
	return false
}

func (c *deadlineConn) read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.got(n)
	return n, err
}

// got notes that a read returned n bytes.
func (c *deadlineConn) got(n int) {
	if n > 0 {
		if c.awaiting.Load() {
			c.awaiting.Store(false)
		}
		if !c.answered.Load() {
			c.answered.Store(true)
		}
	}
}

// headTerm ends a response head. fasthttp wants it whole: a head ended by
// bare LFs is never complete for it (the head deadline then cuts it).
const headTerm = "\r\n\r\n"

// headEnds finds where headTerm ends in b, given that the bytes before b
// ended with its first m bytes: it returns the index just past it, or -1
// and how many of its bytes b ends with. The first head read usually holds
// the whole head, so this is one bytes.Index per response.
func headEnds(m int, b []byte) (int, int) {
	if m > 0 {
		k := 0
		for k < len(b) && m+k < len(headTerm) && b[k] == headTerm[m+k] {
			k++
		}
		if m+k == len(headTerm) {
			return 0, k
		}
		if k == len(b) {
			return m + k, -1
		}
	}
	if i := bytes.Index(b, []byte(headTerm)); i >= 0 {
		return 0, i + len(headTerm)
	}
	for k := min(len(headTerm)-1, len(b)); k > 0; k-- {
		if string(b[len(b)-k:]) == headTerm[:k] {
			return k, -1
		}
	}
	return 0, -1
}

// SetReadDeadline is a no-op: deadlineConn owns its read deadlines.
func (c *deadlineConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is a no-op: deadlineConn owns its write deadlines.
func (c *deadlineConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline is a no-op: deadlineConn owns its deadlines.
func (c *deadlineConn) SetDeadline(time.Time) error { return nil }

// upstreamReadBuffer is the read buffer of each upstream connection, held
// for as long as a response streams through it. It also bounds the
// response's header block: 4 KiB, like nginx's proxy_buffer_size on x86
// (vLLM's headers are a few hundred bytes). A body read larger than it
// goes straight into the reader's buffer, so large answers are not copied
// through it.
const upstreamReadBuffer = 4 << 10

// upstreamKeepAlive is the TCP keep-alive probe period of upstream
// connections (net.Dialer's default): it detects a peer that vanished
// without a FIN on a long idle stream. Not a config key: it changes
// nothing a user observes.
const upstreamKeepAlive = 30 * time.Second

// newHostClient returns the pooled fasthttp client of one backend. It never
// retries by itself (the router decides what may be re-sent), reads small
// answers whole and streams the others (upstreamTransport), keeps idle connections for less than vLLM's 5 s
// keep-alive, and forwards paths byte for byte. Response header names are
// parsed into canonical form, so that ORCA, X-Request-Id and hop-by-hop
// headers are found whatever case the model server wrote (uvicorn writes
// lowercase).
//
// tlsHost is the TLS configuration of an https backend (nil: plain HTTP);
// log receives its handshake failures.
func newHostClient(addr string, tlsHost *upstreamtls.Host, up config.Upstream, conns *connTable, log zerolog.Logger) *fasthttp.HostClient {
	connect := up.ConnectTimeout.D()
	firstByte, idle := up.FirstByteTimeout.D(), up.IdleTimeout.D()
	dialer := &net.Dialer{Timeout: connect, KeepAlive: upstreamKeepAlive}
	dial := func(a string) (net.Conn, error) { return dialer.Dial("tcp", a) }
	var td *tlsDialer
	if tlsHost != nil {
		// The proxy speaks TLS itself: fasthttp sees plain HTTP.
		td = newTLSDialer(dialer, addr, tlsHost, connect, log)
		dial = td.dial
	}
	return &fasthttp.HostClient{
		Addr: addr,
		Dial: func(a string) (net.Conn, error) {
			c, err := dial(a)
			if err != nil {
				return nil, err
			}
			// Never reuse a socket with unread bytes or a tunnel, nor
			// a TLS session made under a replaced upstream.tls.
			g := newGuardedConn(c, func() (net.Conn, error) { return dial(a) })
			g.tlsd = td
			return conns.add(&deadlineConn{Conn: g, firstByte: firstByte, idle: idle, conns: conns}), nil
		},
		MaxConns:                      up.MaxConnsPerBackend,
		MaxIdleConnDuration:           up.IdleConnTTL.D(),
		MaxConnWaitTimeout:            connect,
		MaxIdemponentCallAttempts:     1,
		RetryIfErr:                    func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		Transport:                     upstreamTransport{},
		StreamResponseBody:            true,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: false,
		DisablePathNormalizing:        true,
		ReadBufferSize:                upstreamReadBuffer,
	}
}
