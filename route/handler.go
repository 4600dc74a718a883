package route

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/internal/config"
)

// reqCtx is the per-request scratch space of the handler, pooled so that a
// request allocates nothing for routing.
type reqCtx struct {
	ex    extractor
	info  RequestInfo
	pick  Scratch
	tried [config.MaxRetries + 1 + maxBreakerSkips]*Backend
	// id is the request's id as the client sees it (the response's
	// X-Request-Id, the access log's request_id): the client's own, or one
	// generated. up is the X-Request-Id sent to the backend, vLLM's
	// request id: id with a suffix that no other request carries
	// (appendUpstreamID), then -r<n> on the n-th retry.
	id, up []byte
	xff    []byte
	// path is the normalized request path route.allow_paths decided on
	// (empty when it allows every path), target the request target
	// forwarded.
	path, target []byte
	// clientClose: the client asked to close its connection after this
	// response (Connection: close, or HTTP/1.0 without keep-alive).
	clientClose bool
	// ntried: entries of tried in use. resend5xx: a 5xx or 429 answer to
	// the attempt under way may be re-sent (second_opinion.go, overload.go); suspect: the
	// backend whose 5xx was, and suspectTicket its breaker claim, decided
	// by the next answer's status.
	ntried        int
	resend5xx     bool
	suspect       *Backend
	suspectTicket breaker.Ticket
}

// forwardedPath is the path req goes upstream with: the one
// route.allow_paths decided on and forwards, already normalized; with every
// path allowed, the URI's (which parses it).
func (rc *reqCtx) forwardedPath(req *fasthttp.Request) []byte {
	if len(rc.path) > 0 {
		return rc.path
	}
	return req.URI().Path()
}

func newReqCtx() *reqCtx {
	rc := &reqCtx{}
	rc.pick.init()
	return rc
}

// accounting is what is known of one forwarded request when it settles.
type accounting struct {
	start     time.Time
	firstByte time.Duration
	status    int // upstream status (0 if none)
	code      int // status for metrics: upstream status, our error status, or 499
	bytes     int64
	outcome   breaker.Outcome
	err       error
	dec       Decision
	work      workTicket
	// id is the upstream id of the attempt (reqCtx.up), whose first idLen
	// bytes are the client's (reqCtx.id): one string for both, as up
	// starts with id.
	id      string
	idLen   int
	attempt int // attempts made, this one included (0: none reached a backend)
	// idReplaced: the client's X-Request-Id was unusable (too long, not
	// visible ASCII, repeated) and a generated one replaced it.
	idReplaced bool
}

// Handle is the proxy's fasthttp handler: extract, pick, forward, stream.
func (p *Proxy) Handle(ctx *fasthttp.RequestCtx) {
	p.inflight.Add(1)
	settled := false
	defer func() {
		if !settled {
			p.inflight.Add(-1)
		}
	}()
	if cc, ok := ctx.Conn().(*clientConn); ok {
		cc.nextRequest() // this one was read whole
	}
	snap := p.snap.Load()
	rt := snap.set
	rc := p.rcPool.Get().(*reqCtx)
	defer p.rcPool.Put(rc)

	start := p.now()
	v := judgeHead(&ctx.Request.Header, rt.allow, rc, true)
	if v.status != 0 {
		p.refuse(ctx, v)
		return
	}
	rt.allow.forwardDecided(&ctx.Request, rc, v.query)
	body := ctx.PostBody()
	if int64(len(body)) > rt.maxBody {
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, "request body exceeds server.max_body_bytes")
		p.metrics.requests(nil, fasthttp.StatusRequestEntityTooLarge)
		return
	}
	rc.ex.Extract(body, rt.blockChars, rt.maxBlocks, &rc.info)
	if rc.info.Stream && !streamsAt(rc.forwardedPath(&ctx.Request)) {
		rc.info.Stream = false // the answer comes whole (streamsAt)
	}

	req := &ctx.Request
	idReplaced := p.cleanRequest(ctx, rc, v.fields)
	upLen := len(rc.up)
	if rt.orca && !rc.info.Stream {
		req.Header.Set(hdrORCAFormat, "TEXT")
	}

	var lastErr error
	var last *Backend
	reason := retryNone // why the next attempt is a retry
	attempts := 0       // attempts forwarded to a backend
	ntried := 0         // entries of rc.tried in use
	drops := 0          // attempts a backend dropped after they went out (poison.go)
	resent := false     // a 5xx answer was re-sent (second_opinion.go): once per request
	rc.suspect, rc.suspectTicket = nil, breaker.Ticket{}
	// attempts counts the requests sent, which upstream.retries bounds; a
	// breaker refusal sends nothing and costs no time, so it does not count
	// (rc.tried's size bounds those re-picks).
	for attempts <= rt.retries && ntried < len(rc.tried) {
		tried := rc.tried[:ntried]
		t0 := p.now()
		if ntried > 0 {
			// A retry sees the current pool: it may go to a backend that
			// joined since the request arrived.
			snap = p.snap.Load()
		}
		// Never hand the RequestCtx to the prober as a context.Context:
		// contexts derived from it may outlive the handler, and fasthttp
		// recycles it. Probes are bounded by probe.deadline on their own.
		b, dec, err := snap.picker.Pick(context.Background(), &rc.info, tried, &rc.pick)
		// One clock read ends the decision and stamps the send (forward).
		picked := p.now()
		p.metrics.decideTime.Observe(picked.Sub(t0).Seconds())
		if errors.Is(err, ErrNoBackend) && reason == retryStale && last != nil && last.Eligible() {
			// A stale pooled connection says nothing of the pod now: with
			// no other backend to go to, try it again on a fresh
			// connection (forward closed its idle ones), as Go's
			// net/http transport does.
			b, err = last, nil
		}
		if err != nil {
			if lastErr == nil || !errors.Is(err, ErrNoBackend) {
				lastErr = err
			}
			break
		}
		rc.tried[ntried] = b
		ntried++
		last = b
		if ntried > 1 {
			p.metrics.retried(reason)
			// Never reuse a request id across two attempts.
			rc.up = append(rc.up[:upLen], "-r"...)
			rc.up = strconv.AppendInt(rc.up, int64(ntried-1), 10)
		}
		p.metrics.decided(dec)
		ticket, err := b.brk.Allow()
		if err != nil {
			lastErr = ErrNotSent
			reason = retryBreaker
			continue
		}
		attempts++
		rc.ntried = ntried
		rc.resend5xx = rt.retryOnReset && attempts <= rt.retries && !resent
		req.Header.SetBytesV(hdrRequestID, rc.up)
		f, err := p.forward(ctx, rt, rc, b, ticket, start, picked, dec, attempts, idReplaced)
		if err == nil {
			settled = true // bodyStream.Close settles
			return
		}
		lastErr = err
		reason = retryReasonFor(f, rt.retryOnReset)
		if reason == retryNone {
			break
		}
		if reason == retryServerError || reason == retryTooMany {
			resent = true // one answer re-sent per request
		}
		if f.kind == failWrite {
			// Never delivered whole, so no drop (poison.go). On a pooled
			// connection the backend had reset while it sat idle it also
			// cost nothing (the write fails at once), like a breaker
			// refusal: it spends no retry.
			if f.stale {
				attempts--
			}
		} else if reason.dropped() && !f.undelivered {
			// A dropped request may be what crashed the pod: re-sent
			// once at most, and never again once two pods dropped it
			// (poison.go).
			drops++
			if drops > 1 {
				p.poisoned(rc, body, rc.tried[:ntried])
				break
			}
			if p.poison.has(body, p.now()) {
				break
			}
		}
		if attempts <= rt.retries && b.draining.Load() {
			p.reap() // b will not be counted: nothing of it is left to keep
		}
	}
	if rc.suspect != nil {
		// No answer came after the re-sent 5xx: no verdict.
		rc.suspectTicket.Done(breaker.Ignore)
		rc.suspect, rc.suspectTicket = nil, breaker.Ticket{}
	}
	if lastErr == nil {
		lastErr = ErrNoBackend
	}
	status := statusFor(lastErr)
	if errors.Is(lastErr, ErrSaturated) {
		p.metrics.shed.Inc()
	}
	// The client gets the status's fixed message; what the upstream said
	// (its bytes may belong to another exchange) goes to the access log.
	writeError(ctx, status, messageFor(status))
	if status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	if errors.Is(lastErr, ErrNotSent) || errors.Is(lastErr, ErrNoBackend) || errors.Is(lastErr, ErrSaturated) {
		last = nil // the backend never saw it
	}
	p.metrics.requests(last, status)
	p.metrics.duration.Observe(p.now().Sub(start).Seconds())
	if rt.accessLog {
		p.accessLog(ctx, last, &accounting{start: start, code: status, err: lastErr, id: string(rc.up), idLen: len(rc.id), idReplaced: idReplaced, attempt: attempts})
	}
	// Counted: a draining backend this request tried may now be forgotten.
	for _, b := range rc.tried[:ntried] {
		if b.draining.Load() {
			p.reap()
			break
		}
	}
}

// cleanRequest readies the client's request header for the backend:
// hop-by-hop fields stripped, the client's IP appended to X-Forwarded-For,
// the client's X-Request-Id taken out into rc.id (or one generated; the
// result reports whether the client's was replaced), the client's ORCA
// request field, Expect, Forwarded and X-Real-Ip removed. fields is what scanFields found the header to
// hold; allFields does the same work without knowing.
func (p *Proxy) cleanRequest(ctx *fasthttp.RequestCtx, rc *reqCtx, fields fieldSet) (idReplaced bool) {
	h := &ctx.Request.Header
	// The client's own wish to close, before stripHop takes Connection
	// away: such a stream is written by fasthttp, which then closes the
	// connection, rather than hijacked (hijackable). The server read the
	// same before calling the handler, for closing after the response.
	rc.clientClose = h.ConnectionClose()
	// No Content-Type of the proxy's own: fasthttp's writer would add
	// application/octet-stream to a body sent without one, which
	// FastAPI (vLLM) reads as bytes, not JSON (422), where the request
	// as sent is parsed as JSON.
	h.SetNoDefaultContentType(true)
	stripHop(h, fields)
	p.setForwardedFor(ctx, rc, fields&fForwardedFor != 0)
	baseID, idSent := clientRequestID(h, fields&fRequestID != 0)
	rc.id = rc.id[:0]
	if len(baseID) == 0 {
		rc.id = appendRequestID(rc.id, p.rand())
		rc.up = append(rc.up[:0], rc.id...)
	} else {
		rc.id = append(rc.id, baseID...)
		rc.up = appendUpstreamID(rc.up[:0], rc.id, p.upSeq.Add(1))
	}
	if fields&fRequestID != 0 {
		h.Del(hdrRequestID)
	}
	// The proxy owns the ORCA request header: a client's own (in any case)
	// never reaches the backend beside or instead of the proxy's.
	if fields&fORCAFormat != 0 {
		h.Del(hdrORCAFormat)
	}
	// The proxy answered the client's Expect: 100-continue itself and
	// holds the whole body: forwarded, it would only make the backend send
	// an interim 100, which costs the pooled connection (upstreamguard.go).
	if fields&fExpect != 0 {
		h.Del(hdrExpect)
	}
	// A client's claims of its own origin the proxy never makes
	// (setForwardedFor's rule): dropped, so no backend trusts them.
	if fields&fForwarded != 0 {
		h.Del(hdrForwarded)
	}
	if fields&fRealIP != 0 {
		h.Del(hdrRealIP)
	}
	return idSent && len(baseID) == 0
}

// maxBreakerSkips bounds the re-picks after breaker refusals (a half-open
// breaker whose trial slot is taken), which do not spend upstream.retries.
const maxBreakerSkips = 4

// retryReason is why a request is re-picked: the label of
// probegate_retries_total.
type retryReason uint8

const (
	retryNone        retryReason = iota // no retry
	retryConnect                        // the dial failed: label "connect"
	retryReset                          // closed or reset before the first byte: "reset"
	retryStale                          // as retryReset, on a reused keep-alive connection: "reset"
	retryBreaker                        // the breaker refused the attempt: "breaker"
	retryAfterHead                      // closed or reset after the head, before the body's first byte: "after_head"
	retryServerError                    // a 5xx answer re-sent for a second opinion: "server_error"
	retryTooMany                        // a 429 answer re-sent to another backend: "too_many_requests"
	retryReasons                        // how many reasons there are
)

// retryReasonFor decides whether a failed attempt on b may be re-picked,
// and why. Only failures before any byte reached the client qualify, and
// only at the connection level: never a timeout (a slow pod is not a dead
// pod) and never a malformed response. A connection closed or reset after
// the response head and before the body's first byte qualifies too (the
// proxy holds the head until then, see forward), under
// upstream.retry_on_reset, unless the attempt had been waiting longer than
// upstream.first_byte_timeout.
func retryReasonFor(f failure, onReset bool) retryReason {
	r := retryNone
	switch f.kind {
	case failConnect:
		return retryConnect
	case failServerError:
		return retryServerError
	case failTooMany:
		return retryTooMany
	case failWrite:
		r = retryReset
	case failReset:
		if f.afterHead {
			if onReset && !f.late {
				return retryAfterHead
			}
			return retryNone
		}
		if onReset {
			r = retryReset
		}
	}
	if r == retryReset && f.stale {
		r = retryStale
	}
	return r
}

// accessLog writes one line per request.
func (p *Proxy) accessLog(ctx *fasthttp.RequestCtx, b *Backend, a *accounting) {
	ev := p.log.Info()
	if !ev.Enabled() {
		return
	}
	if a.err != nil && a.code >= 500 {
		ev = p.log.Warn()
	}
	id := a.id
	if a.idLen < len(id) {
		id = id[:a.idLen]
	}
	ev = ev.Str("request_id", id).Int("status", a.code).Int64("bytes", a.bytes).
		Float64("first_byte_ms", float64(a.firstByte.Microseconds())/1e3).Float64("total_ms", float64(p.now().Sub(a.start).Microseconds())/1e3)
	if b != nil {
		ev = ev.Str("backend", b.addr).Str("source", a.dec.Source.String())
	}
	if a.attempt > 0 {
		ev = ev.Int("attempts", a.attempt)
	}
	if a.idReplaced {
		ev = ev.Bool("request_id_replaced", true)
	}
	if len(id) < len(a.id) {
		ev = ev.Str("upstream_request_id", a.id)
	}
	if a.err != nil {
		ev = ev.AnErr("error", a.err)
	}
	ev.Msg("request")
}
