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
	client net.Conn // client connection: its write deadline is re-armed per chunk
	done   func(breaker.Outcome)
	acct   accounting

	sse      bool
	idle     time.Duration
	complete bool   // upstream body read to EOF
	upErr    error  // upstream failed mid-body
	pending  []byte // error frame still to deliver
	closed   bool
	writeBy  lazyDeadline // the client write deadline armed by this stream
}

var bodyStreamPool = sync.Pool{New: func() any { return new(bodyStream) }}

func (s *bodyStream) Read(p []byte) (int, error) {
	n, err := s.read(p)
	if n > 0 && s.client != nil {
		// fasthttp writes what we return next: give that write
		// upstream.idle_timeout (to idle + idle/16, see lazyDeadline) to
		// reach a slow client. The server arms the same bound before each
		// response (server write timeout), so none is left to reset.
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
		return n, nil
	}
	if s.complete || s.upErr != nil {
		return 0, io.EOF
	}
	n, err := s.up.Read(p)
	s.acct.bytes += int64(n)
	if n > 0 {
		s.acct.work.sawBytes(s.b, p[:n], s.p.now())
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		s.complete = true
		return n, io.EOF
	default:
		s.upErr = err
		if isTimeout(err) {
			s.upErr = ErrUpstreamTimeout
		}
		if !s.sse {
			// The client sees a truncated body and a closed connection:
			// there is no way to signal an error after the headers.
			return n, err
		}
		// An SSE client gets the error as a frame, as vLLM sends errors
		// after the stream started, then a clean end of stream.
		f := append([]byte(nil), "data: "...)
		st := statusFor(s.upErr)
		f = appendEnvelope(f, st, messageFor(st))
		f = append(f, "\n\n"...)
		s.pending = f
		return n, nil
	}
}

// Close releases the upstream response and settles accounting. fasthttp
// calls it once the response was written or the client went away; it is
// idempotent.
func (s *bodyStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	_ = s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)

	a := &s.acct
	switch {
	case s.complete && s.upErr == nil:
		a.outcome = outcomeForStatus(a.status)
	case s.upErr != nil:
		a.outcome = breaker.Failure
		a.err = s.upErr
	default:
		// The client stopped reading before the end: its cancellation is
		// never the backend's fault.
		a.outcome = breaker.Ignore
		a.code = 499
	}
	s.p.settle(s.b, s.done, a)

	*s = bodyStream{}
	bodyStreamPool.Put(s)
	return nil
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
