package route

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
)

// The proxy holds a streamed response's head until the body's first bytes
// arrive: a backend that sends its head and then closes, resets or falls
// silent has answered nothing yet, and while no byte has reached the
// client the request can still be re-picked on another backend (a close or
// reset, within upstream.retries, under upstream.retry_on_reset, and not
// after upstream.first_byte_timeout) or answered with the error envelope
// (502; 504 after upstream.idle_timeout of silence) instead of an empty
// 200. A small non-stream answer is read whole before its head is sent
// anyway (forwardBuffered). The hold costs a stream nothing the client
// sees: its first token is its first body byte, and the head now goes out
// in the same write as that first chunk.

// maxHeldHeads bounds the responses whose head is held at once. A held
// head keeps its request's handler waiting, with what it holds: the
// connection's read buffer (server.max_header_bytes, 64 KiB by default),
// the request, and the routing scratch, about 100 KiB per stream against
// the ~15 KiB of a stream pumped at once, for as long as the model takes to
// its first token (its queue and prefill). Past the bound a stream's head
// goes out at once, as before the hold: such a stream is not re-picked
// when its backend fails before the first byte (the client gets an SSE
// error frame, or a cut body). 1,024 held heads are about 100 MiB. Not a
// config key: it bounds memory, and changes what a client sees only under
// more than 1,024 streams waiting for their first token at once.
const maxHeldHeads = 1024

// headHolds counts the held heads. Lock-free.
type headHolds struct {
	n atomic.Int64
	// max overrides maxHeldHeads when not 0 (tests; negative: hold none).
	max atomic.Int64
}

// take claims a hold, or reports false when maxHeldHeads are held.
func (h *headHolds) take() bool {
	limit := h.max.Load()
	if limit == 0 {
		limit = maxHeldHeads
	}
	if h.n.Add(1) > limit {
		h.n.Add(-1)
		return false
	}
	return true
}

// give returns a hold.
func (h *headHolds) give() { h.n.Add(-1) }

// firstChunk is the first read of a response body, made before the
// response head is committed to the client. buf (from pumpBufPool) holds
// n bytes at buf[chunkRoom:]; err is what that read returned with them
// (nil, io.EOF, or an upstream error to report after them). buf is nil
// when the body ended before any byte (err is io.EOF).
type firstChunk struct {
	buf *[]byte
	n   int
	err error
}

// bytes returns the chunk's data.
func (f *firstChunk) bytes() []byte {
	if f.buf == nil {
		return nil
	}
	return (*f.buf)[chunkRoom : chunkRoom+f.n]
}

// maxEmptyReads bounds the reads that return neither bytes nor an error
// (bufio gives up after 100 as well).
const maxEmptyReads = 100

// clientWriteBuffer is the size of a client connection's write buffer
// (the server's WriteBufferSize, newServer). fasthttp writes a response
// into it and flushes it when it fills or the response ends; when a
// body's read fails before that, it closes the connection without
// flushing: the client gets nothing at all, not even the head.
const clientWriteBuffer = 4 << 10

// firstWant is how many of a body's bytes readFirst waits for before the
// head is committed to the client: one for a body of unknown length,
// whose chunks fasthttp flushes one by one (the head goes out with the
// first), and for a Content-Length-framed body up to clientWriteBuffer
// (all of it when shorter): until then fasthttp may hold the whole
// response unsent, so a failure while it does left the client an empty
// reply where it can still get the error envelope or another backend's
// answer; with that many bytes in hand, writing them flushes the head.
// It costs a length-framed answer no wait its client sees: the answer is
// of use to the client only whole, and a server that knows its length has
// its bytes.
func firstWant(size int) int {
	if size > 0 {
		return min(size, clientWriteBuffer)
	}
	return 1
}

// readFirst waits for the first want bytes of the body up (firstWant;
// fewer when the body ends before them). A zero-length read first waits
// without a buffer (for a chunked body, until the first chunk's size line
// arrives; other readers return at once), then reads take them into a
// pooled buffer. Each read waits at most upstream.idle_timeout
// (deadlineConn). It returns an error only when the body failed before
// want bytes of it: then no buffer is held (nothing reached the client).
func readFirst(up io.Reader, want int) (firstChunk, error) {
	if _, err := up.Read(nil); err != nil {
		if errors.Is(err, io.EOF) {
			return firstChunk{err: io.EOF}, nil
		}
		return firstChunk{}, err
	}
	buf := takePumpBuf()
	room := (*buf)[chunkRoom : len(*buf)-chunkTail]
	n := 0
	for empty := 0; empty < maxEmptyReads; {
		m, err := up.Read(room[n:])
		n += m
		switch {
		case errors.Is(err, io.EOF):
			if n == 0 {
				releasePumpBuf(buf)
				return firstChunk{err: io.EOF}, nil
			}
			return firstChunk{buf: buf, n: n, err: io.EOF}, nil
		case err != nil && n < want:
			releasePumpBuf(buf)
			return firstChunk{}, err
		case err != nil || n >= want:
			return firstChunk{buf: buf, n: n, err: err}, nil
		case m == 0:
			empty++
		}
	}
	releasePumpBuf(buf)
	return firstChunk{}, io.ErrNoProgress
}

// takePumpBuf takes a buffer from pumpBufPool, counted in pumpBufsHeld.
func takePumpBuf() *[]byte {
	pumpBufsHeld.Add(1)
	return pumpBufPool.Get().(*[]byte)
}

// releasePumpBuf returns a buffer taken with takePumpBuf.
func releasePumpBuf(buf *[]byte) {
	pumpBufPool.Put(buf)
	pumpBufsHeld.Add(-1)
}

// failAfterHead settles an attempt whose body failed with err after the
// response head and before any of it reached the client: it counts against
// the backend, and the caller re-picks the request or answers with the
// error envelope (see retryReasonFor).
//
// A stream's silence after its head is judged as a non-stream answer's
// wait for its head (silenceOutcome): vLLM sends a stream's head
// once it accepted the request, and its first token only after the
// request's turn in the queue and its prefill, which other clients' work
// lengthens. Counted always, a client queueing long streams on a working
// pod (seats or KV cache full) opened its breaker for everyone with the
// timeouts of its own queued streams. The reports come under every policy:
// the progress watch scrapes a backend while one of its response bodies
// has been silent longer than idle_timeout/2 (connTable.silentSince).
func (p *Proxy) failAfterHead(rt *settings, b *Backend, resp *fasthttp.Response, ticket breaker.Ticket, work *workTicket, sent time.Time, err error) (failure, error) {
	f := failure{kind: classifyBody(err), afterHead: true, late: p.now().Sub(sent) >= rt.firstByte}
	outcome := breaker.Failure
	if f.kind == failTimeout && isSSE(&resp.Header) {
		outcome = p.silenceOutcome(b.state, sent)
	}
	p.abandon(b, resp, ticket, work, outcome)
	if f.kind == failTimeout {
		return f, errors.Join(ErrUpstreamTimeout, err)
	}
	return f, errors.Join(ErrUpstream, err)
}
