package route

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/probe"
)

// forward sends the request to b and, once response headers arrive, hands
// the body to the client: whole when it is small and not a stream (see
// maxBufferedBody; settled at once), else as a stream. It returns nil when
// the response is under way (bodyStream settles it) or settled. Otherwise nothing reached the client,
// and it returns how the round trip failed with an error to map to a status:
// ErrNotSent when the request never reached the backend whole (dial
// failed, write failed), ErrReset when the connection closed after the
// write and before the first response byte, ErrUpstreamTimeout, or
// ErrUpstream.
//
// A connection that fails before the first byte after it had already
// carried a response is a stale keep-alive connection (the pod restarted or
// died while it sat in the pool): that is no verdict on the pod as it is
// now, so the breaker ignores it, and the backend's other idle connections,
// pooled before the same event, are closed so that the next request dials
// afresh (a dead pod then refuses the dial, which the breaker counts).
//
// start is when the request arrived, sent when its decision ended: the
// send's time for its token work and the first-byte timeout's progress
// check (the clock is read once for both, microseconds before the send).
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, rt *settings, rc *reqCtx, b *Backend, ticket breaker.Ticket, start, sent time.Time, dec Decision, attempt int, idReplaced bool) (failure, error) {
	req := &ctx.Request
	// The token work first: its prefill is the prompt minus the prefix b
	// held before this request. NoteDispatch then records that b holds
	// this prompt's blocks too; in the other order every request's own
	// blocks matched, and its prefill counted only the tail past its last
	// whole block (38 tokens at the median of the bench's lognormal
	// prompts, against 1,271 true).
	work := p.beginWork(rt, rc, b, sent)
	p.memory.NoteDispatch(b, &rc.info, start)
	// The HostClient's scheme, whatever the client's request line said: an
	// absolute "https://..." URI would otherwise make it refuse the request
	// and count it against the backend's breaker. It is http for https
	// backends too: the proxy speaks TLS in the HostClient's Dial
	// (tlsDialer).
	// Likewise its own Host, whatever the client sent (an HTTP/1.0 request
	// may send none): no client shape makes the request unsendable, so none
	// can fail against the backend's breaker.
	u := req.URI()
	u.SetScheme("http")
	u.SetHost(b.addr)
	u.SetUsername("")
	u.SetPassword("")
	b.state.Dispatch()
	resp := fasthttp.AcquireResponse()
	err := b.hc.Do(req, resp)
	// A small answer's body that failed after its head (upstreamTransport):
	// the head is judged as any other, then forwardBuffered answers the
	// failure (nothing of the answer reached the client).
	var bodyErr error
	if err != nil {
		if be := (*bodyError)(nil); errors.As(err, &be) {
			bodyErr, err = be.err, nil
		}
	}
	if err != nil {
		reused, sendErr := b.conns.take(resp.LocalAddr())
		if sendErr != nil {
			err = sendErr // fasthttp named it a connection closed before the first byte
		}
		f := failure{kind: classify(err), undelivered: errors.Is(err, errUndelivered)}
		outcome := upstreamErrOutcome(err)
		if f.kind == failTimeout {
			outcome = p.firstByteTimeoutOutcome(rc.info.Stream, b.state, sent)
		}
		if (f.kind == failReset || f.kind == failWrite) && reused {
			f.stale = true
			outcome = breaker.Ignore
			b.hc.CloseIdleConnections()
		}
		p.abandon(b, resp, ticket, &work, outcome)
		switch f.kind {
		case failConnect, failWrite:
			return f, errors.Join(ErrNotSent, err)
		case failReset:
			return f, errors.Join(ErrReset, err)
		case failTimeout:
			return f, errors.Join(ErrUpstreamTimeout, err)
		default:
			return f, errors.Join(ErrUpstream, err)
		}
	}
	status := resp.StatusCode()
	if status < 200 {
		// fasthttp consumes interim answers itself and returns only a 101:
		// a tunnel the proxy never asked for (it strips Upgrade). Its
		// socket is already closed (guardedConn); the client gets an error.
		p.abandon(b, resp, ticket, &work, breaker.Failure)
		return failure{}, errors.Join(ErrUpstream, errSwitchingProtocols)
	}
	// The head's arrival: the first byte's latency and an ORCA report's time.
	headAt := p.now()
	if rc.suspect != nil {
		p.secondOpinion(rc, status) // on the re-sent 5xx (second_opinion.go)
	}
	if status == fasthttp.StatusTooManyRequests && p.resendable(rc) {
		// One backend's admission limit, not the fleet's: another
		// backend may have room (overload.go). Never a failure.
		p.abandon(b, resp, ticket, &work, breaker.Ignore)
		return failure{kind: failTooMany}, errors.Join(ErrUpstream, errTooManyRequests)
	}
	if overloaded(status, &resp.Header) {
		// The backend says it is overloaded, not broken: never counted
		// against its breaker (overload.go), re-sent when it can be.
		if p.resendable(rc) {
			p.metrics.resent(b, status)
			p.abandon(b, resp, ticket, &work, p.excuse(excuseOverloaded))
			return failure{kind: failServerError}, errors.Join(ErrUpstream, errServerError)
		}
		ticket.Done(p.excuse(excuseOverloaded))
		ticket = breaker.Ticket{}
	} else if status >= 500 {
		if p.resendable(rc) {
			// Re-sent to another backend, whose answer decides the
			// ticket (second_opinion.go).
			rc.suspect, rc.suspectTicket = b, ticket
			p.metrics.resent(b, status)
			p.abandon(b, resp, breaker.Ticket{}, &work, breaker.Ignore)
			return failure{kind: failServerError}, errors.Join(ErrUpstream, errServerError)
		}
		// A 5xx is judged by a canary request no client shapes
		// (canary.go), not taken on the client's word; the canary
		// decides the ticket (now, or when its verdict comes), nothing
		// later here reports on it.
		p.judgeServerError(rt, b, ticket)
		ticket = breaker.Ticket{}
	}
	// The fields of the upstream head the proxy strips, found in one pass.
	fields, spaceInName := responseFields(&resp.Header)
	if fields&fConnection != 0 && tooManyConnectionOptions(&resp.Header) {
		// Stripping them would cost a pass over the head each
		// (maxConnectionOptions): a malformed answer.
		p.abandon(b, resp, ticket, &work, breaker.Failure)
		return failure{}, errors.Join(ErrUpstream, errConnectionOptions)
	}
	if spaceInName {
		// No HTTP client behind the proxy reads it (responseFields).
		p.abandon(b, resp, ticket, &work, breaker.Failure)
		return failure{}, errors.Join(ErrUpstream, errSpaceInName)
	}
	if rt.orca && fields&fORCA != 0 {
		if v := resp.Header.Peek(hdrORCA); len(v) > 0 {
			if l, ok := probe.ParseORCA(v, headAt); ok {
				b.state.Report(&l)
			}
		}
	}
	sse := isSSE(&resp.Header)
	up := resp.BodyStream()
	// A small answer was read whole (upstreamTransport), or the answer
	// has no body (HEAD, 204, 304): no stream, settled at once. Through
	// bodyStream, whose body fasthttp never reads for HEAD, every HEAD
	// request was counted as 499 and answered Content-Length: 0; here
	// the head copied below keeps the backend's Content-Length, which
	// fasthttp writes as is for HEAD (an empty body, SkipBody).
	buffered := up == nil
	firstByte := headAt.Sub(start)
	ctx.Response.Reset()
	copyHead(&ctx.Response.Header, &resp.Header, fields, rc.id)

	var first firstChunk
	if up != nil && p.holds.take() {
		// Hold the head until the body's first bytes, or for a
		// length-framed body enough of them that writing them flushes
		// the head (firstWant, first_bytes.go): until then a failure can
		// still be re-picked or answered with the envelope (writeError
		// resets the response).
		var err error
		first, err = readFirst(up, firstWant(resp.Header.ContentLength()))
		p.holds.give()
		if err != nil {
			p.metrics.firstByte.Observe(firstByte.Seconds())
			return p.failAfterHead(rt, b, resp, ticket, &work, sent, err)
		}
		if first.n > 0 {
			work.sawBytes(b, first.bytes(), p.now())
		}
	}
	if buffered {
		return p.forwardBuffered(ctx, rt, rc, b, resp, ticket, sent, bodyErr, accounting{start: start, firstByte: firstByte, status: status, code: status, dec: dec, attempt: attempt, idReplaced: idReplaced, work: work})
	}

	hijack := hijackable(ctx, resp, sse, rc.clientClose)
	s := bodyStreamPool.Get().(*bodyStream)
	s.p, s.b, s.resp, s.ticket = p, b, resp, ticket
	s.up = up
	s.client = ctx.Conn()
	s.idle = rt.idle
	s.sse = sse
	s.acct = accounting{start: start, firstByte: firstByte, status: status, code: status, dec: dec, attempt: attempt, idReplaced: idReplaced}
	s.acct.work = work
	if rt.accessLog {
		s.acct.id, s.acct.idLen = string(rc.up), len(rc.id)
	}
	p.metrics.firstByte.Observe(s.acct.firstByte.Seconds())
	s.holdFirst(first)
	if ticket.Trial() {
		// A half-open breaker's trial is decided by the answer's status
		// once its first bytes arrived: a long stream would otherwise
		// hold the trial slot, and the backend out of everyone's picks,
		// for as long as its client's generation runs.
		ticket.Done(outcomeForStatus(status))
		s.ticket = breaker.Ticket{}
	}
	size := resp.Header.ContentLength()
	if size < 0 {
		size = -1
	}
	if hijack && p.startHijack(ctx, s) {
		return failure{}, nil // pumped over the hijacked connection (hijack.go)
	}
	ctx.Response.SetBodyStream(s, size)
	return failure{}, nil
}

// copyHead makes dst the head of the client's response from src, the
// backend's: its fields without the hop-by-hop ones and the ORCA report,
// X-Request-Id set to id, and the proxy's own status line. fields is what
// responseFields found src to hold; allFields does the same work without
// knowing.
func copyHead(dst, src *fasthttp.ResponseHeader, fields fieldSet, id []byte) {
	src.CopyTo(dst)
	// No Content-Type of the proxy's own: CopyTo copies the upstream
	// header's default (text/plain; charset=utf-8 for an answer that
	// names none), which is the server's setting
	// (NoDefaultContentType) no more.
	dst.SetNoDefaultContentType(true)
	// The status line is the proxy's own: CopyTo copied the backend's
	// version, and an "HTTP/1.0" line over a chunked body (what a stream
	// of unknown length becomes) tells the client to read until the
	// connection closes, which keep-alive never does.
	dst.SetProtocol(http11)
	stripHop(dst, fields)
	if fields&fORCA != 0 {
		dst.Del(hdrORCA)
	}
	if fields&fRequestID != 0 {
		dst.Del(hdrRequestID)
	}
	dst.SetBytesV(hdrRequestID, id)
}

var http11 = []byte("HTTP/1.1")

// forwardBuffered answers with a small upstream body that was read whole,
// or with an answer that has none (HEAD, 204, 304; upstreamTransport,
// whose connection is already back in its pool),
// releases the upstream response and settles the request. A body that
// failed after its head (bodyErr, its connection closed) is an upstream
// failure the client learns of as an error status: nothing of the answer
// reached it yet, so the request is re-picked only as retryReasonFor
// allows after a head (failAfterHead).
func (p *Proxy) forwardBuffered(ctx *fasthttp.RequestCtx, rt *settings, rc *reqCtx, b *Backend, resp *fasthttp.Response, ticket breaker.Ticket, sent time.Time, bodyErr error, a accounting) (failure, error) {
	p.metrics.firstByte.Observe(a.firstByte.Seconds())
	if bodyErr != nil {
		return p.failAfterHead(rt, b, resp, ticket, &a.work, sent, bodyErr)
	}
	body := resp.Body()
	ctx.Response.SetBody(body)
	a.bytes = int64(len(body))
	fasthttp.ReleaseResponse(resp)
	a.outcome = outcomeForStatus(a.status)
	if rt.accessLog {
		a.id, a.idLen = string(rc.up), len(rc.id)
	}
	p.settle(b, ticket, &a)
	return failure{}, nil
}

// settle records the end of a forwarded request: breaker outcome, local
// in-flight count, metrics and the access log line.
func (p *Proxy) settle(b *Backend, ticket breaker.Ticket, a *accounting) {
	ticket.Done(a.outcome)
	p.endWork(b, &a.work, a.outcome == breaker.Success)
	b.state.Finish()
	p.metrics.requests(b, a.code)
	p.metrics.duration.Observe(p.now().Sub(a.start).Seconds())
	if a.id != "" {
		p.accessLog(nil, b, a)
	}
	if b.draining.Load() {
		p.reap()
	}
	p.inflight.Add(-1)
}

// abandon settles an attempt on b that answered the client nothing (the
// caller re-picks the request or answers with the error envelope): it
// releases resp, takes back the attempt's token work and in-flight count,
// and gives the breaker outcome. The handler counts the request and reaps
// a draining b once it answered the client (Handle).
func (p *Proxy) abandon(b *Backend, resp *fasthttp.Response, ticket breaker.Ticket, work *workTicket, outcome breaker.Outcome) {
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
	p.endWork(b, work, false)
	b.state.Finish()
	ticket.Done(outcome)
}

// reap forgets draining backends that finished their requests.
func (p *Proxy) reap() {
	p.mu.Lock()
	p.reapLocked()
	p.mu.Unlock()
}

// firstByteTimeoutOutcome is the breaker outcome of an attempt sent at sent
// whose response head did not arrive within upstream.first_byte_timeout.
//
// A streamed answer's head comes before the generation (vLLM sends it once
// it accepted the request), so its timeout is the backend's failure. A
// non-stream answer's head comes after the whole generation, whose length
// the client chooses (max_tokens, the prompt): a client asking for long
// generations would otherwise open a healthy backend's breaker for
// everyone with a few requests. So it is a failure only if the backend
// showed no progress while the request waited: unless two of its reports
// taken after sent (probes, scrapes, the progress watch's scrapes) show
// its token counters advancing (probe.State.ProgressedSince), in which
// case it counts as neither success nor failure. The progress watch
// (progress_watch.go) scrapes a backend's /metrics while one of its
// requests waits longer than first_byte_timeout/2, so the rule holds under
// every policy and probe.endpoint. A hung engine whose HTTP server still
// answers shows no progress and trips the breaker as before; so does a
// backend whose /metrics does not answer or carries no vLLM token
// counters.
func (p *Proxy) firstByteTimeoutOutcome(stream bool, st *probe.State, sent time.Time) breaker.Outcome {
	if stream {
		return breaker.Failure
	}
	return p.silenceOutcome(st, sent)
}

// silenceOutcome is the breaker outcome of a wait for a backend's bytes,
// begun at since, that a timeout ended: excused (excuseProgress) when two
// of the backend's reports taken since show its token counters advancing
// (probe.State.ProgressedSince), a failure otherwise. The rule of a
// non-stream answer's head (firstByteTimeoutOutcome), of a stream's first
// bytes after its head (failAfterHead) and of a stream's silence midway
// (bodyStream.finish).
func (p *Proxy) silenceOutcome(st *probe.State, since time.Time) breaker.Outcome {
	if st.ProgressedSince(since) {
		return p.excuse(excuseProgress)
	}
	return breaker.Failure
}

// upstreamErrOutcome classifies a failed exchange for the breaker. The
// proxy's own saturation (every connection to the backend busy at
// upstream.max_conns_per_backend, "no free connections") is no fault of the
// backend: it counts as neither success nor failure, and the request is
// re-picked as one that was never sent.
func upstreamErrOutcome(err error) breaker.Outcome {
	if errors.Is(err, fasthttp.ErrNoFreeConns) {
		return breaker.Ignore
	}
	return breaker.Failure
}
