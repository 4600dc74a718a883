package route

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/rawconn"
)

// An SSE stream is pumped over the hijacked client connection rather than
// written by fasthttp, so that an idle stream holds no buffer: fasthttp's
// response writer would hold the server goroutine (its stack grown by the
// whole request path), the connection's read and write buffers, the
// RequestCtx with the request body, and a 4 KiB copy buffer for the whole
// stream. Hijacked, the stream holds a small goroutine and the upstream
// response; it waits for the next upstream chunk with a zero-length read
// and takes a buffer from a pool only to move a chunk. When the stream
// ends cleanly, the connection goes back to the server (Server.ServeConn)
// once the client's next request arrives: keep-alive is kept, and the wait
// in between holds no buffer either.
//
// What the client sees is what fasthttp wrote before: the same header
// block (rendered by fasthttp), chunked framing, one chunk per upstream
// read, the terminating chunk, and the connection kept alive. Two things
// differ: the header block is sent at once rather than with the first
// frame, and an HTTP/1.0 client, a request that asks to close the
// connection, a HEAD request, an upstream body that is not chunked, or a
// stream that starts during Shutdown keep fasthttp's writer (hijackable).

// hijackState is the part of a bodyStream pumped over a hijacked client
// connection.
type hijackState struct {
	handler fasthttp.HijackHandler // s.hijacked, bound once per pooled stream
	head    *[]byte                // response header block, written first
	cc      *clientConn            // the connection as fasthttp holds it
	raw     net.Conn               // its socket, which the pump writes to
	w       *rawconn.Socket        // how the pump writes: the clientConn's raw socket
	reg     hijackEntry            // its registration (hijack_registry.go)
}

// Chunk framing around a pump buffer: room for the size line before the
// data ("4000\r\n") and for the CRLF and the last chunk ("\r\n0\r\n\r\n")
// after it.
const (
	pumpBufSize = 16 << 10
	chunkRoom   = 8
	chunkTail   = 8
)

var (
	pumpBufPool = sync.Pool{New: func() any { b := make([]byte, pumpBufSize); return &b }}
	headBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
	// pumpBufsHeld counts the pump buffers taken and not yet returned:
	// what the streams hold beyond their upstream response.
	pumpBufsHeld atomic.Int64
)

// hijackable reports whether the stream of resp can be pumped over the
// hijacked client connection: an SSE body with chunked framing, to an
// HTTP/1.1 client that keeps the connection alive. clientClose is whether
// the client asked to close the connection (read before stripHop removed
// its Connection field from the request forwarded).
func hijackable(ctx *fasthttp.RequestCtx, resp *fasthttp.Response, sse, clientClose bool) bool {
	_, ok := ctx.Conn().(*clientConn)
	return ok && sse && resp.BodyStream() != nil && resp.Header.ContentLength() == -1 &&
		!ctx.IsHead() && ctx.Request.Header.IsHTTP11() && !clientClose &&
		!ctx.Response.Header.ConnectionClose()
}

// startHijack renders the response header block of s and asks fasthttp to
// hand over the client connection once the handler returns. It reports
// false (nothing changed) when the proxy is shutting down: fasthttp then
// writes the stream and closes the connection after it. The caller must
// not touch s after a true return.
func (p *Proxy) startHijack(ctx *fasthttp.RequestCtx, s *bodyStream) bool {
	h := &ctx.Response.Header
	h.SetContentLength(-1)
	if len(h.Server()) == 0 && p.server.Name != "" {
		h.SetServer(p.server.Name) // as the server adds to what it writes
	}
	buf := headBufPool.Get().(*[]byte)
	*buf = h.AppendBytes((*buf)[:0])
	s.hj.head = buf
	s.hj.cc = ctx.Conn().(*clientConn)
	s.hj.raw = s.hj.cc.Conn
	// The pump writes through the clientConn's raw socket, which no one
	// else uses once fasthttp lets go of the connection: raw write(2)
	// calls. A plain Write enters the scheduler's system-call state, and
	// when the proxy was idle between two frames (all Ps idle, sysmon
	// parked), that wakes sysmon, which then polls every 20 µs: with
	// paced streams, one wake-up per frame.
	s.hj.w = &s.hj.cc.raw
	handler := s.hj.handler // s may be Shutdown's once registered
	s.hj.reg.s, s.hj.reg.raw = s, s.hj.raw
	if !p.hijacks.register(&s.hj.reg) {
		headBufPool.Put(buf)
		s.hj.head = nil
		return false
	}
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(handler)
	return true
}

// hijacked is the hijack handler, run by fasthttp on a goroutine of its
// own after the request handler returned; c reads what fasthttp's reader
// buffered before the socket. It takes those bytes, detaches the
// connection (so that fasthttp's Close after this returns leaves the
// socket open), starts the pump on a fresh goroutine and returns, so that
// fasthttp releases the RequestCtx (and the request body) and its read
// buffer at once.
func (s *bodyStream) hijacked(c net.Conn) {
	if !s.hj.reg.start() {
		return // Shutdown's cut closed the connection and settled s
	}
	pre, keep := pipelined(c, s.hj.cc)
	s.hj.cc.detached.Store(true)
	s.hj.cc = nil
	s.client = s.hj.raw
	s.writeBy.forget() // fasthttp cleared the deadlines when it let go
	// The head, with the first chunk held with it (first_bytes.go), goes
	// out before the pump's goroutine starts: the first token does not
	// wait for it.
	ok := s.writeHead()
	go s.pump(pre, keep, ok)
}

// writeHead writes the response header block and, when it fits the
// head's buffer, the held first chunk in the same write.
func (s *bodyStream) writeHead() bool {
	head := *s.hj.head
	if s.firstBuf != nil && len(head)+len(s.pending)+chunkRoom+2 <= cap(head) {
		head = appendChunk(head, s.pending)
		s.pending = nil
		s.releaseFirst()
	}
	ok := s.write(head)
	*s.hj.head = head[:0]
	headBufPool.Put(s.hj.head)
	s.hj.head = nil
	return ok
}

// pipelined returns what the client sent after its request and fasthttp
// already buffered (a pipelined request), without waiting for more: the
// socket's read deadline is put in the past, so that reads of hjc return
// only buffered bytes. keep is false when the client's end is already
// closed or failed: the connection must not serve another request.
func pipelined(hjc, raw net.Conn) (pre []byte, keep bool) {
	if hjc == raw {
		return nil, true
	}
	if raw.SetReadDeadline(time.Unix(1, 0)) != nil {
		return nil, false
	}
	var tmp [512]byte
	for {
		n, err := hjc.Read(tmp[:])
		pre = append(pre, tmp[:n]...)
		if err != nil {
			keep = isTimeout(err)
			break
		}
		if n == 0 {
			keep = true
			break
		}
	}
	if raw.SetReadDeadline(time.Time{}) != nil {
		keep = false
	}
	return pre, keep
}

// pump writes each upstream chunk as it arrives after the header block
// (written by hijacked; ok tells whether that write succeeded), then the
// last chunk; it settles the request and, after a clean end, gives the
// connection back to the server. While the upstream is silent it holds no
// buffer (see wait).
func (s *bodyStream) pump(pre []byte, keep, ok bool) {
	for ok {
		s.wait()
		buf := takePumpBuf()
		b := *buf
		n, err := s.read(b[chunkRoom : len(b)-chunkTail])
		start, end := chunkRoom, chunkRoom+n
		if n > 0 {
			start = chunkSizeLine(b, n)
			end += copy(b[end:], "\r\n")
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			end += copy(b[end:], "0\r\n\r\n")
		default:
			ok = false // not SSE: never hijacked; cut rather than end cleanly
		}
		if ok && end > start {
			ok = s.write(b[start:end])
		}
		releasePumpBuf(buf)
		if err != nil {
			break
		}
	}
	s.finish()
	s.p.afterStream(s, pre, ok && keep)
}

// wait blocks until the upstream body has more to read, ended or failed,
// holding no buffer: a zero-length Read of the upstream body
// (upstreamBody) returns once the next chunk's size line has arrived (or
// the last chunk, or an error, such as upstream.idle_timeout passing), and
// waits for it without a buffer of its own. Should a reader return at once
// instead, the next read waits with a buffer: slower to shrink, never
// wrong.
func (s *bodyStream) wait() {
	if len(s.pending) > 0 || s.complete || s.upErr != nil {
		return
	}
	_, err := s.up.Read(nil)
	_ = s.ended(err)
}

// write writes b to the client within upstream.idle_timeout (see
// lazyDeadline), as fasthttp's writer did per chunk.
func (s *bodyStream) write(b []byte) bool {
	if t, ok := s.writeBy.due(time.Now(), s.idle); ok {
		s.writeBy.armed(s.client.SetWriteDeadline(t), t)
	}
	_, err := s.hj.w.Write(b)
	return err == nil
}

// appendChunk appends data to dst as one chunk of a chunked body.
func appendChunk(dst, data []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(data)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, data...)
	return append(dst, "\r\n"...)
}

// chunkSizeLine writes the chunk size line of an n-byte chunk just before
// b[chunkRoom:] and returns where it starts.
func chunkSizeLine(b []byte, n int) int {
	const hex = "0123456789abcdef"
	i := chunkRoom - 2
	b[i], b[i+1] = '\r', '\n'
	for {
		i--
		b[i] = hex[n&0xf]
		n >>= 4
		if n == 0 {
			return i
		}
	}
}

// afterStream ends a settled hijacked stream: a clean end gives the
// connection back to the server once the client's next request arrives
// (waiting for it holds no buffer and is bounded by the keep-alive idle
// time); anything else, or a shutdown, closes it.
func (p *Proxy) afterStream(s *bodyStream, pre []byte, keep bool) {
	raw := s.hj.raw
	if keep && len(pre) == 0 {
		if keep = p.hijacks.park(&s.hj.reg); keep {
			keep = waitReadable(raw, clientIdleTimeout)
		}
	}
	if !p.hijacks.drop(&s.hj.reg) {
		keep = false // shutting down
	}
	s.recycle()
	if !keep {
		_ = raw.Close()
		return
	}
	c := p.wrapClient(raw, pre)
	p.trackConn(c, fasthttp.StateNew)
	_ = p.server.ServeConn(c) // closes c and reports StateClosed when done
}

// cutHijacked closes every hijacked connection (Shutdown's grace is over)
// and settles the streams whose hijack handler had not run yet; those are
// not recycled, since fasthttp may still call it.
func (p *Proxy) cutHijacked() {
	for _, s := range p.hijacks.cut() {
		if s.hj.head != nil {
			headBufPool.Put(s.hj.head)
			s.hj.head = nil
		}
		s.finish()
	}
}
