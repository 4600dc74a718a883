package route

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// upstreamTransport is the RoundTripper of the backends' HostClients
// (newHostClient). It sends a request as fasthttp's own transport does and
// reads the response head; then:
//   - a small non-stream answer (bufferable: not SSE, a Content-Length up to
//     maxBufferedBody) is read whole into the Response, and its connection
//     goes back to the pool before RoundTrip returns;
//   - any other body is the Response's BodyStream, an *upstreamBody, read as
//     it arrives; closing it (Response.CloseBodyStream) gives the
//     connection back, or closes it when the body was not read to its end,
//     which aborts the request on the model server.
//
// fasthttp's streaming transport made four allocations per response (its
// body reader and three closures) and serialized every body read with a
// mutex and its close with a sync.Once; this one allocates nothing per
// request once its pools are warm. A body that fails after the head and
// before it was read whole returns a *bodyError: nothing of it reached the
// client, and forward treats it as a failure after the head (failAfterHead).
//
// Only the HostClients' own settings that newHostClient sets are honoured:
// no ReadTimeout, WriteTimeout or MaxConnDuration (deadlineConn owns the
// deadlines), no per-request timeout (the proxy calls Do), header names
// normalized, no response body size limit.
type upstreamTransport struct{}

// bodyError is the failure of a buffered answer's body, after its head.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "upstream body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// errInterimHeads: more interim (1xx) heads than fasthttp accepts.
var errInterimHeads = errors.New("upstream sent more than 100 interim (1xx) responses")

// maxInterimHeads is how many interim heads a response may carry before
// its final one (as fasthttp's own transport allows).
const maxInterimHeads = 100

func (upstreamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	cc, err := hc.AcquireConn(0, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	conn := cc.Conn()

	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		if isTimeout(err) {
			err = fasthttp.ErrTimeout
		} else if isWriteError(err) && earlyAnswer(hc, conn, req, resp) {
			hc.CloseConn(cc)
			return false, nil
		}
		noteConn(resp, conn)
		hc.CloseConn(cc)
		return true, err
	}

	skip := resp.SkipBody || req.Header.IsHead()
	br := hc.AcquireReader(conn)
	if err := readHead(&resp.Header, br); err != nil {
		noteConn(resp, conn)
		hc.ReleaseReader(br)
		hc.CloseConn(cc)
		return true, err
	}
	status := resp.StatusCode()
	// fasthttp returns a 101 as the answer; its socket is the guard's to
	// close (upstreamguard.go), and never goes back to the pool.
	closeConn := req.ConnectionClose() || resp.ConnectionClose() || status == fasthttp.StatusSwitchingProtocols
	if skip || noBody(status) {
		resp.SkipBody = skip
		// As after a buffered body: bytes read past a head that has no
		// body belong to no exchange, and the reader's release would
		// drop them unseen; the connection they came on is not reused.
		closeConn = closeConn || br.Buffered() > 0
		hc.ReleaseReader(br)
		if closeConn {
			hc.CloseConn(cc)
		} else {
			hc.ReleaseConn(cc)
		}
		return false, nil
	}
	size := resp.Header.ContentLength()
	if bufferable(&resp.Header) {
		resp.StreamBody = false
		err := resp.ReadBody(br, maxBufferedBody)
		// Bytes past the body belong to no exchange: never reuse the
		// connection they came on (the guard checks the socket itself
		// before reuse; these were already taken off it).
		closeConn = closeConn || br.Buffered() > 0
		hc.ReleaseReader(br)
		if err != nil || closeConn {
			hc.CloseConn(cc)
		} else {
			hc.ReleaseConn(cc)
		}
		if err != nil {
			return false, &bodyError{err: err}
		}
		return false, nil
	}
	body := bodies.get()
	body.hc, body.cc, body.conn, body.closeConn = hc, cc, conn, closeConn
	body.dc, _ = conn.(*deadlineConn)
	// The body is decoded by upstreamBody itself, which takes over what
	// br buffered past the head: br goes back to its pool now, and an
	// open stream holds no reader and no buffer while it waits.
	body.start(size, br)
	hc.ReleaseReader(br)
	resp.SetBodyStream(body, size)
	return false, nil
}

// earlyAnswer reads the answer a backend sent before it closed its end
// without reading the whole request (a 413 for a body over its limit, a
// 401 from an authentication layer that never reads bodies): the write
// that failed on the close is no failed send then, and the client gets
// that answer. Without it the proxy answered 503 and counted a breaker
// failure, so a client's large bodies opened such a backend's breaker. It
// is called after a write failed other than by timeout (the peer closed or
// reset): the kernel keeps what arrived before the close readable, and
// reads end at once. It reports true when a whole final answer was read
// into resp: a head, and no body or one small enough to buffer
// (bufferable); anything else leaves the write's failure as it was.
func earlyAnswer(hc *fasthttp.HostClient, conn net.Conn, req *fasthttp.Request, resp *fasthttp.Response) bool {
	// A read that finds no answer says nothing new of the send: what the
	// guard knew of it (sendErr, which connTable.take reads) is kept, so a
	// stale pooled connection's failed write is classified as before.
	var g *guardedConn
	if dc, ok := conn.(*deadlineConn); ok {
		g, _ = dc.Conn.(*guardedConn)
	}
	var sendErr error
	if g != nil {
		sendErr = g.sendErr
	}
	if readEarlyAnswer(hc, conn, req, resp) {
		return true
	}
	resp.Reset()
	if g != nil {
		g.sendErr = sendErr
	}
	return false
}

// readEarlyAnswer reads a whole final answer into resp (see earlyAnswer).
func readEarlyAnswer(hc *fasthttp.HostClient, conn net.Conn, req *fasthttp.Request, resp *fasthttp.Response) bool {
	br := hc.AcquireReader(conn)
	defer hc.ReleaseReader(br)
	if readHead(&resp.Header, br) != nil || resp.StatusCode() < 200 {
		return false
	}
	if req.Header.IsHead() || noBody(resp.StatusCode()) {
		resp.SkipBody = req.Header.IsHead()
		return true
	}
	if !bufferable(&resp.Header) {
		return false
	}
	resp.StreamBody = false
	return resp.ReadBody(br, maxBufferedBody) == nil
}

// noteConn records on resp the addresses of the connection a round trip
// failed on, as fasthttp's transport records them before every request
// (Response.ParseNetConn), for forward's failure path (connTable.take,
// keyed by the socket the request started on: deadlineConn's key, which
// guardedConn's redial during the send does not move). A round trip that
// succeeds reads no address: that was two interface calls through
// guardedConn per request, for a value only a failure uses.
func noteConn(resp *fasthttp.Response, conn net.Conn) {
	if dc, ok := conn.(*deadlineConn); ok && dc.keyAddr != nil {
		conn = keyedConn{Conn: dc, local: dc.keyAddr}
	}
	resp.ParseNetConn(conn)
}

// keyedConn is a connection whose LocalAddr is the key it is known by.
type keyedConn struct {
	net.Conn
	local net.Addr
}

func (c keyedConn) LocalAddr() net.Addr { return c.local }

// readHead reads a response head into h, skipping interim (1xx) heads
// other than 101, as fasthttp's Response.ReadLimitBody does. A status code
// outside 100-599 (RFC 9110 section 15) is errBadStatus: fasthttp reads
// "000" as no code at all and reports it as 200 (ResponseHeader.StatusCode),
// so statusZero looks at the line itself first.
//
// A final head with both Content-Length and Transfer-Encoding fields is
// errFramingBoth (framingBoth): fasthttp reads it by Transfer-Encoding and
// drops the Content-Length, as RFC 9112 section 6.3 allows, but the same
// section says such a message "ought to be handled as an error": it is
// the shape of response splitting, and a hop between the proxy and the
// model server that framed it by Content-Length leaves the bytes past
// that framing to be read as the next exchange's answer. nginx answers
// 502 ("upstream sent Content-Length and Transfer-Encoding headers at the
// same time"); so does the proxy, and the connection is closed.
func readHead(h *fasthttp.ResponseHeader, br *bufio.Reader) error {
	for n := 0; ; n++ {
		zero := statusZero(br)
		both := framingBoth(br)
		if err := h.Read(br); err != nil {
			return err
		}
		s := h.StatusCode()
		switch {
		case zero || s < 100 || s > 599:
			return errBadStatus
		case s > 199 || s == fasthttp.StatusSwitchingProtocols:
			if both {
				return errFramingBoth
			}
			return nil
		case n >= maxInterimHeads:
			return errInterimHeads
		}
	}
}

// errBadStatus: a response status code outside 100-599.
var errBadStatus = errors.New("upstream status code outside 100-599")

// errFramingBoth: a response head with both Content-Length and
// Transfer-Encoding (readHead).
var errFramingBoth = errors.New("upstream sent both Content-Length and Transfer-Encoding")

// framingBoth reports whether the head br holds next has both a
// Content-Length and a Transfer-Encoding field, names in any case, as
// fasthttp's parser reads the lines (ended by LF, a CR before it
// dropped; spaces before the colon trimmed). Like statusZero it waits
// for no byte h.Read would not wait for: the head's end, which h.Read
// needs too; a head longer than br's buffer is h.Read's to refuse. It
// reads the buffered bytes once, a line at a time, comparing only lines
// that begin with c or t.
func framingBoth(br *bufio.Reader) bool {
	var cl, te, status bool
	for from := 0; ; {
		line, next, ok := peekLine(br, from)
		if !ok {
			return false
		}
		from = next
		switch {
		case len(line) == 0 && !status:
			// an empty line before the status line, which fasthttp skips
		case len(line) == 0:
			return cl && te // the head's end
		case !status:
			status = true
		case line[0]|0x20 == 'c':
			cl = cl || fieldNamed(line, "content-length")
		case line[0]|0x20 == 't':
			te = te || fieldNamed(line, "transfer-encoding")
		}
	}
}

// fieldNamed reports whether a header line is a field named name, in any
// case, spaces or tabs allowed before the colon.
func fieldNamed(line []byte, name string) bool {
	if len(line) <= len(name) || !asciiEqualFold(line[:len(name)], name) {
		return false
	}
	rest := bytes.TrimLeft(line[len(name):], " \t")
	return len(rest) > 0 && rest[0] == ':'
}

// statusZero reports whether the status line br holds next, as fasthttp
// parses it (empty lines before it skipped, spaces after the version),
// has the code "000". It waits for no byte h.Read would not wait for: the
// line's end, which h.Read needs too; a line longer than br's buffer is
// h.Read's to refuse.
func statusZero(br *bufio.Reader) bool {
	for from := 0; ; {
		line, next, ok := peekLine(br, from)
		if !ok {
			return false
		}
		from = next
		if len(line) == 0 {
			continue // an empty line, which fasthttp skips
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return false
		}
		code := bytes.TrimLeft(line[sp+1:], " ")
		return len(code) >= 3 && string(code[:3]) == "000" && (len(code) == 3 || code[3] == ' ')
	}
}

// peekLine returns the line of the head br holds next that starts at
// offset from (its CR before the LF dropped) and the offset after its LF.
// It waits only for bytes h.Read would wait for too: the line's end. ok
// is false when the line does not end within br's buffer (h.Read refuses
// such a head) or the connection ends first (h.Read fails).
func peekLine(br *bufio.Reader, from int) (line []byte, next int, ok bool) {
	if _, err := br.Peek(from + 1); err != nil {
		return nil, 0, false
	}
	b, _ := br.Peek(br.Buffered())
	for scanned := from; ; {
		if i := bytes.IndexByte(b[scanned:], '\n'); i >= 0 {
			line = b[from : scanned+i]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, scanned + i + 1, true
		}
		if len(b) >= br.Size() {
			return nil, 0, false
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return nil, 0, false
		}
		scanned = len(b)
		b, _ = br.Peek(br.Buffered())
	}
}

// noBody reports whether a response with this status has no body (RFC
// 9110: 1xx, 204, 304), as fasthttp reads it.
func noBody(status int) bool {
	return status < 200 || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified
}

// connHandle is what upstreamBody needs of fasthttp's pooled connection,
// whose type is not exported: it is inferred from the HostClient's methods
// (see bodies).
type connHandle interface{ Conn() net.Conn }

// bodyPool recycles upstreamBody values; release and close are the
// HostClient's ReleaseConn and CloseConn, as method expressions (no
// closure is made per body).
type bodyPool[C connHandle] struct {
	pool           sync.Pool
	release, close func(*fasthttp.HostClient, C)
}

// bodies is the upstreamBody pool, typed by fasthttp's connection.
var bodies = newBodyPool((*fasthttp.HostClient).ReleaseConn, (*fasthttp.HostClient).CloseConn)

func newBodyPool[C connHandle](release, close func(*fasthttp.HostClient, C)) *bodyPool[C] {
	p := &bodyPool[C]{release: release, close: close}
	p.pool.New = func() any { return &upstreamBody[C]{pool: p} }
	return p
}

func (p *bodyPool[C]) get() *upstreamBody[C] { return p.pool.Get().(*upstreamBody[C]) }
