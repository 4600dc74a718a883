package route

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
)

// bodyStream hands an upstream response body to the client as it arrives.
// fasthttp reads it after the handler has returned and writes each Read as
// one flushed chunk, so SSE frames reach the client token by token. It owns
// the upstream response: Close releases it (closing the upstream connection
// if the body was not read to the end, which aborts the request on the
// model server when the client went away) and settles the request's
// accounting exactly once. Used by one goroutine at a time.
type bodyStream struct {
	p      *Proxy
	b      *Backend
	resp   *fasthttp.Response
	up     io.Reader
	client net.Conn       // client connection: its write deadline is re-armed per chunk
	ticket breaker.Ticket // the breaker admitted the request; told its outcome once
	acct   accounting

	sse      bool
	idle     time.Duration
	complete bool  // upstream body read to EOF
	upErr    error // upstream failed mid-body
	// silentFrom is when the silence began that upstream.idle_timeout
	// cut (upErr is ErrUpstreamTimeout): the progress rule's since.
	silentFrom time.Time
	pending    []byte  // error frame, or the held first chunk, still to deliver
	firstBuf   *[]byte // the pump buffer pending lies in (holdFirst), or nil
	deferred   error   // an upstream error that came with the first chunk
	closed     bool
	writeBy    lazyDeadline // the client write deadline armed by this stream

	// A stream pumped over the hijacked client connection (hijack.go).
	hj hijackState
}

var bodyStreamPool sync.Pool

func init() { bodyStreamPool.New = func() any { return newBodyStream() } }

func newBodyStream() *bodyStream {
	s := new(bodyStream)
	s.hj.handler = s.hijacked // bound once: a hijack allocates no closure
	return s
}

func (s *bodyStream) Read(p []byte) (int, error) {
	n, err := s.read(p)
	if n > 0 && s.client != nil {
		// fasthttp writes what we return next: give that write
		// upstream.idle_timeout (to idle + idle/16, see lazyDeadline; on
		// a clientConn, which keeps a deadline up to its own slack later,
		// to idle + idle/8) to reach a slow client. The server arms the
		// same bound before each response (server write timeout), so none
		// is left to reset.
		if t, ok := s.writeBy.due(time.Now(), s.idle); ok {
			s.writeBy.armed(s.client.SetWriteDeadline(t), t)
		}
	}
	return n, err
}

func (s *bodyStream) read(p []byte) (int, error) {
	if len(s.pending) > 0 {
		n := copy(p, s.pending)
		s.pending = s.pending[n:]
		if len(s.pending) == 0 {
			s.releaseFirst()
		}
		return n, nil
	}
	if s.complete || s.upErr != nil {
		return 0, io.EOF
	}
	if err := s.deferred; err != nil {
		s.deferred = nil
		return 0, s.ended(err)
	}
	n, err := s.up.Read(p)
	s.acct.bytes += int64(n)
	if n > 0 {
		s.acct.work.sawBytes(s.b, p[:n], s.p.now())
	}
	return n, s.ended(err)
}

// holdFirst makes f, the body's first read (readFirst, made before the
// head was committed), the first bytes the stream delivers; s owns its
// buffer from now on.
func (s *bodyStream) holdFirst(f firstChunk) {
	if f.n > 0 {
		s.acct.bytes += int64(f.n)
		s.firstBuf = f.buf
		s.pending = f.bytes()
	}
	switch {
	case f.err == nil:
	case f.n > 0 && !errors.Is(f.err, io.EOF):
		s.deferred = f.err // reported once the bytes are delivered
	default:
		_ = s.ended(f.err)
	}
}

// releaseFirst returns the held first chunk's buffer, if any.
func (s *bodyStream) releaseFirst() {
	if s.firstBuf != nil {
		releasePumpBuf(s.firstBuf)
		s.firstBuf = nil
	}
}

// ended records how an upstream read ended: nil goes on, io.EOF is the
// end of the body; any other error is an upstream failure, returned as is
// for a non-SSE body (the client sees a truncated body and a closed
// connection: there is no way to signal an error after the headers) and
// turned into a pending error frame and nil for SSE.
func (s *bodyStream) ended(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		s.complete = true
		return io.EOF
	default:
		s.upErr = err
		if isTimeout(err) {
			s.upErr = ErrUpstreamTimeout
			s.silentFrom = s.p.now().Add(-s.idle)
		}
		if !s.sse {
			return err
		}
		// An SSE client gets the error as a frame, as vLLM sends errors
		// after the stream started, then a clean end of stream.
		f := append([]byte(nil), "data: "...)
		st := statusFor(s.upErr)
		f = appendEnvelope(f, st, messageFor(st))
		f = append(f, "\n\n"...)
		s.pending = f
		return nil
	}
}

// Close releases the upstream response and settles accounting. fasthttp
// calls it once the response was written or the client went away; it is
// idempotent.
func (s *bodyStream) Close() error {
	if s.closed {
		return nil
	}
	s.finish()
	s.recycle()
	return nil
}

// finish releases the upstream response and settles accounting, once.
func (s *bodyStream) finish() {
	if s.closed {
		return
	}
	s.closed = true
	s.pending = nil
	s.releaseFirst()
	_ = s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)

	a := &s.acct
	switch {
	case s.complete && s.upErr == nil:
		a.outcome = outcomeForStatus(a.status)
	case s.upErr != nil:
		a.outcome = breaker.Failure
		if s.sse && errors.Is(s.upErr, ErrUpstreamTimeout) {
			// Silent for upstream.idle_timeout: excused if the backend's
			// token counters advanced meanwhile (silenceOutcome): vLLM
			// preempted the request (its KV cache full, which other
			// clients' work fills) and will resume it, or it waits for
			// its first token; the backend is working. The progress
			// watch scrapes the backend during the silence under every
			// policy (connTable.silentSince).
			a.outcome = s.p.silenceOutcome(s.b.state, s.silentFrom)
		}
		a.err = s.upErr
	default:
		// The client stopped reading before the end: its cancellation is
		// never the backend's fault.
		a.outcome = breaker.Ignore
		a.code = 499
	}
	s.p.settle(s.b, s.ticket, a)
}

// recycle returns s to its pool, keeping its bound hijack handler; unless
// Shutdown's view of the hijacked streams may still hold it (see
// hijackRegistry), in which case the garbage collector takes it.
func (s *bodyStream) recycle() {
	if s.hj.reg.pinned {
		return
	}
	h := s.hj.handler
	*s = bodyStream{}
	s.hj.handler = h
	bodyStreamPool.Put(s)
}

// outcomeForStatus classifies an upstream status for the breaker: 5xx is a
// failure, 429 neither success nor failure, anything else a success.
func outcomeForStatus(status int) breaker.Outcome {
	switch {
	case status == fasthttp.StatusTooManyRequests:
		return breaker.Ignore
	case status >= 500:
		return breaker.Failure
	}
	return breaker.Success
}
