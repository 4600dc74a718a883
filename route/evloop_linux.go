//go:build linux

package route

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/evloop"
	"github.com/probegate/probegate/probe"
)

// server.event_loop: the client listener served by internal/evloop's event
// loops, with route's rules as its Handler (loopHandler). A request is
// served on a loop only when the loop can give it exactly what Handle
// would: a non-stream Content-Length exchange over a plain-HTTP backend
// with an IP address, under a policy whose pick does no I/O, whose target
// is forwarded as sent, and whose head holds nothing Handle refuses or
// answers itself. Everything else is handed over, connection and bytes
// read, to the fasthttp server (serveHandedOver), which serves it and
// every later request of that connection as without the key.
//
// What the loop path does, in Handle's order: the path allowlist (handed
// over when it refuses or rewrites the target), the body limit, extraction
// (a stream is handed over), the header edits of cleanRequest
// (X-Forwarded-For folded and appended, X-Request-Id taken or generated
// and suffixed upstream, the client's Forwarded, X-Real-Ip and ORCA
// request field dropped, the proxy's ORCA request field added; the loop
// strips hop-by-hop fields), the pick with breaker re-picks, dispatch
// accounting (token work, State.Dispatch/Finish), and in Done the breaker
// outcome, metrics, access log and retries within upstream.retries with
// retryReasonFor's rule.

// loopServer is the running event loops of a Proxy, if any.
type loopServer struct {
	srv *evloop.Server
	h   *loopHandler
}

// loopCounts returns how many requests the loops served and handed over.
func (p *Proxy) loopCounts() (served, handedOver uint64) {
	p.mu.Lock()
	h := p.loops.h
	p.mu.Unlock()
	if h == nil {
		return 0, 0
	}
	return h.served.Load(), h.handedOver.Load()
}

// loopReq is one request served on a loop, from Route to its last Done:
// the handler's pooled scratch and the state of its attempts. It is the
// Decision's Tag.
type loopReq struct {
	rc         *reqCtx
	rt         *settings
	b          *Backend
	ticket     breaker.Ticket
	work       workTicket
	start      time.Time
	sent       time.Time
	dec        Decision
	upLen      int
	attempts   int
	ntried     int
	drops      int
	reason     retryReason
	idReplaced bool
	resent     bool   // a 5xx or 429 answer was re-sent: once per request
	bodyLen    int    // the relayed answer's Content-Length (Head)
	host       []byte // the attempt's Host: the backend's address, as forward sends
	last       *Backend
	lastErr    error
}

// loopHandler is the evloop.Handler of server.event_loop (and its
// RefusalHandler and HeadHandler).
type loopHandler struct {
	p *Proxy
	// answers are the keep-alive error answers Handle gives when no
	// backend answered (writeError, no close), by status.
	answers map[int][]byte
	// served and handedOver count the requests Route took on and gave to
	// the fasthttp server (tests read them: loopCounts).
	served, handedOver atomic.Uint64
}

var (
	_ evloop.RefusalHandler = (*loopHandler)(nil)
	_ evloop.HeadHandler    = (*loopHandler)(nil)
)

// ServeLoops serves addr on loops event loops (internal/evloop) instead of
// Serve's fasthttp listener, until Shutdown. It returns the address the
// loops listen on once they do. Requests the loops do not serve are handed
// to the fasthttp server with their connection.
func (p *Proxy) ServeLoops(addr string, loops int) (net.Addr, error) {
	set := p.snap.Load().set
	cfg := set.cfg
	maxBody := cfg.Server.MaxBodyBytes
	if maxBody > int64(^uint32(0)>>1) {
		maxBody = int64(^uint32(0) >> 1)
	}
	h := &loopHandler{p: p, answers: map[int][]byte{}}
	for _, status := range []int{fasthttp.StatusTooManyRequests, fasthttp.StatusBadGateway, fasthttp.StatusServiceUnavailable, fasthttp.StatusGatewayTimeout} {
		h.answers[status] = loopErrorResponse(status, messageFor(status), false)
	}
	srv, err := evloop.New(evloop.Config{
		Addr:          addr,
		Loops:         loops,
		Handler:       h,
		Fallback:      p.serveHandedOver,
		ErrorResponse: loopErrorResponses(),
		MaxHeadBytes:  cfg.Server.MaxHeaderBytes,
		// fasthttp's default bound on header fields is its buffer alone:
		// the head's bytes bound them here too (a field takes 4 bytes at
		// least).
		MaxHeaders:         cfg.Server.MaxHeaderBytes/4 + 1,
		MaxBodyBytes:       int(maxBody),
		MaxIdlePerUpstream: cfg.Upstream.MaxConnsPerBackend,
		ReadTimeout:        cfg.Server.ReadTimeout.D(),
		IdleTimeout:        clientIdleTimeout,
		FirstByteTimeout:   cfg.Upstream.FirstByteTimeout.D(),
		ReadIdleTimeout:    cfg.Upstream.IdleTimeout.D(),
		IdleConnTTL:        cfg.Upstream.IdleConnTTL.D(),
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed || p.loops.srv != nil {
		p.mu.Unlock()
		_ = srv.Close()
		return nil, errors.New("route: ServeLoops after Shutdown, or twice")
	}
	p.loops.srv, p.loops.h = srv, h
	p.mu.Unlock()
	return srv.Addr(), nil
}

// shutdownLoops starts the loops' graceful stop (evloop.Server.Shutdown:
// listeners closed at once, idle connections closed, requests under way
// finished, until ctx is done) and returns a channel closed when it ended
// (at once when no loops run).
func (p *Proxy) shutdownLoops(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	p.mu.Lock()
	srv := p.loops.srv
	p.mu.Unlock()
	if srv == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		_ = srv.Shutdown(ctx)
	}()
	return done
}

// stopLoops closes the event loops (exchanges still in flight on them are
// cut; connections handed over stay with the fasthttp server).
func (p *Proxy) stopLoops() {
	p.mu.Lock()
	srv := p.loops.srv
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// servesLoops reports whether ServeLoops' loops are serving.
func (p *Proxy) servesLoops() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loops.srv != nil
}

// serveHandedOver serves a connection a loop handed over (with the bytes
// it had read replayed first) on the fasthttp server, as an accepted one.
func (p *Proxy) serveHandedOver(raw net.Conn) {
	c := p.wrapClient(raw, nil)
	p.trackConn(c, fasthttp.StateNew)
	_ = p.server.ServeConn(c) // closes c and reports StateClosed when done
}

// loopErrorResponses returns the loop's ErrorResponse: the closing
// answer the fasthttp path gives for each status, in vLLM's envelope,
// built once (handleParseError's messages for the loop's own refusals).
func loopErrorResponses() func(int) []byte {
	msgs := map[int]string{
		fasthttp.StatusBadRequest:                  messageFor(fasthttp.StatusBadRequest),
		fasthttp.StatusRequestTimeout:              "request not received within server.read_timeout",
		fasthttp.StatusRequestEntityTooLarge:       "request body exceeds server.max_body_bytes",
		fasthttp.StatusRequestHeaderFieldsTooLarge: "request headers too large",
		fasthttp.StatusHTTPVersionNotSupported:     messageFor(fasthttp.StatusHTTPVersionNotSupported),
		fasthttp.StatusTooManyRequests:             messageFor(fasthttp.StatusTooManyRequests),
		fasthttp.StatusBadGateway:                  messageFor(fasthttp.StatusBadGateway),
		fasthttp.StatusServiceUnavailable:          messageFor(fasthttp.StatusServiceUnavailable),
		fasthttp.StatusGatewayTimeout:              messageFor(fasthttp.StatusGatewayTimeout),
	}
	built := make(map[int][]byte, len(msgs))
	for status, msg := range msgs {
		built[status] = loopErrorResponse(status, msg, true)
	}
	return func(status int) []byte {
		if b, ok := built[status]; ok {
			return b
		}
		return loopErrorResponse(status, messageFor(status), true)
	}
}

// loopErrorResponse is an HTTP/1.1 answer of status with the envelope of
// msg, as writeError's (and Retry-After for 429, as Handle adds), closing
// the connection or not (the loop adds its own Connection: close to a
// keep-alive answer when the client asked to close).
func loopErrorResponse(status int, msg string, closing bool) []byte {
	body := appendEnvelope(nil, status, msg)
	b := append([]byte("HTTP/1.1 "), strconv.Itoa(status)...)
	b = append(b, ' ')
	b = append(b, fasthttp.StatusMessage(status)...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if status == fasthttp.StatusTooManyRequests {
		b = append(b, "\r\nRetry-After: 1"...)
	}
	if closing {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// Refused implements evloop.RefusalHandler: the loop's own refusals
// (400, 408, 413, 431, 505) are counted as handleParseError counts them.
func (h *loopHandler) Refused(rf *evloop.Refusal) {
	h.p.metrics.requests(nil, rf.Status)
}

// loopServes reports whether a loop can serve a request under rt exactly
// as Handle would, as far as its head tells: the policy's pick does no
// I/O, and the head holds nothing Handle refuses or answers itself (admit,
// scanFields). It returns the fields found (fieldSet) for the header
// edits.
func loopServes(rt *settings, r *evloop.Request) (fieldSet, bool) {
	if rt.pc.Policy == config.PolicyProbe {
		return 0, false // its pick probes: handed over until park/resume
	}
	var fields fieldSet
	for i := range r.NumHeaders() {
		name, _ := r.HeaderAt(i)
		fields |= fieldOf(name)
	}
	if fields&fTrailer != 0 {
		return 0, false // admit refuses announced trailers
	}
	if fields&fConnection != 0 && tooManyLoopConnectionOptions(r) {
		return 0, false
	}
	if len(r.Body()) > 0 {
		if m := r.Method(); string(m) == fasthttp.MethodGet || string(m) == fasthttp.MethodTrace {
			return 0, false // admit: no body on GET or TRACE
		}
	}
	return fields, true
}

// tooManyLoopConnectionOptions is tooManyConnectionOptions over the
// loop's request.
func tooManyLoopConnectionOptions(r *evloop.Request) bool {
	n := 0
	for i := range r.NumHeaders() {
		name, v := r.HeaderAt(i)
		if fieldOf(name) != fConnection {
			continue
		}
		forEachToken(v, func([]byte) { n++ })
	}
	return n > maxConnectionOptions
}

// Route implements evloop.Handler.
func (h *loopHandler) Route(r *evloop.Request, d *evloop.Decision) {
	p := h.p
	snap := p.snap.Load()
	rt := snap.set
	fields, ok := loopServes(rt, r)
	if !ok {
		h.handedOver.Add(1)
		d.HandOver = true
		return
	}
	lr := p.loopPool.Get().(*loopReq)
	rc := lr.rc
	target := r.Target()
	fwd := target
	if i := bytes.IndexByte(fwd, '?'); i >= 0 {
		fwd = fwd[:i]
	}
	if !rt.allow.all {
		path, query, ok := normalizePath(rc.path, target)
		if !ok {
			h.handOver(lr, d)
			return
		}
		rc.path = path
		if status, _ := rt.allow.check(r.Method(), path); status != 0 {
			h.handOver(lr, d) // answered 404/405 (with Allow) by Handle
			return
		}
		rc.target = append(append(rc.target[:0], path...), '?')
		rc.target = append(rc.target, query...)
		if len(query) == 0 {
			rc.target = rc.target[:len(path)]
		}
		if !bytes.Equal(rc.target, target) {
			h.handOver(lr, d) // forwarded normalized: the loop sends targets as they came
			return
		}
		fwd = path
	}
	body := r.Body()
	if int64(len(body)) > rt.maxBody {
		h.handOver(lr, d) // a reload lowered server.max_body_bytes below the loop's
		return
	}
	rc.ex.Extract(body, rt.blockChars, rt.maxBlocks, &rc.info)
	if rc.info.Stream {
		if streamsAt(fwd) {
			h.handOver(lr, d)
			return
		}
		rc.info.Stream = false // the answer comes whole (streamsAt)
	}

	h.served.Add(1)
	p.inflight.Add(1)
	lr.rt = rt
	lr.start = p.now()
	lr.idReplaced = h.cleanRequest(r, lr, fields)
	lr.upLen = len(rc.up)
	lr.attempts, lr.ntried, lr.drops, lr.reason, lr.resent = 0, 0, 0, retryNone, false
	lr.last, lr.lastErr, lr.b = nil, nil, nil
	h.next(r, lr, d)
}

// handOver gives the request back to the fasthttp server, unserved.
func (h *loopHandler) handOver(lr *loopReq, d *evloop.Decision) {
	h.handedOver.Add(1)
	h.p.loopPool.Put(lr)
	d.HandOver = true
}

// cleanRequest is Proxy.cleanRequest over the loop's request: the same
// fields end up upstream, written as lr's Decision edits by setHeaders.
// It fills rc.xff, rc.id and rc.up, and reports whether the client's
// X-Request-Id was replaced.
func (h *loopHandler) cleanRequest(r *evloop.Request, lr *loopReq, fields fieldSet) (idReplaced bool) {
	rc := lr.rc
	rc.clientClose = false
	rc.xff = rc.xff[:0]
	var baseID []byte
	ids := 0
	if fields&(fForwardedFor|fRequestID) != 0 {
		for i := range r.NumHeaders() {
			name, v := r.HeaderAt(i)
			switch fieldOf(name) {
			case fForwardedFor:
				if len(v) > 0 {
					rc.xff = append(rc.xff, v...)
					rc.xff = append(rc.xff, ", "...)
				}
			case fRequestID:
				ids++
				baseID = v
			}
		}
	}
	rc.xff = r.Remote.Addr().Unmap().AppendTo(rc.xff)
	if ids != 1 || !usableRequestID(baseID) {
		baseID = nil
	}
	rc.id = rc.id[:0]
	if len(baseID) == 0 {
		rc.id = appendRequestID(rc.id, h.p.rand())
		rc.up = append(rc.up[:0], rc.id...)
	} else {
		rc.id = append(rc.id, baseID...)
		rc.up = appendUpstreamID(rc.up[:0], rc.id, h.p.upSeq.Add(1))
	}
	return ids > 0 && len(baseID) == 0
}

// setHeaders fills d's header edits for an attempt of lr.
func setHeaders(lr *loopReq, d *evloop.Decision) {
	rc := lr.rc
	lr.host = append(lr.host[:0], lr.b.addr...)
	d.Set = append(d.Set,
		evloop.Header{Name: "Host", Value: lr.host},
		evloop.Header{Name: hdrForwardedFor, Value: rc.xff},
		evloop.Header{Name: hdrRequestID, Value: rc.up})
	if lr.rt.orca {
		d.Set = append(d.Set, evloop.Header{Name: hdrORCAFormat, Value: orcaText})
	} else {
		d.Del = append(d.Del, hdrORCAFormat)
	}
	d.Del = append(d.Del, hdrForwarded, hdrRealIP)
}

var orcaText = []byte("TEXT")

// next picks a backend for the next attempt of lr and fills d: the
// backend's address and the header edits, or a hand-over when the pick
// is a backend the loop does not speak to, or the error answer when no
// backend is left (accounted here: the request ends).
func (h *loopHandler) next(r *evloop.Request, lr *loopReq, d *evloop.Decision) {
	p := h.p
	rc := lr.rc
	rt := lr.rt
	for lr.attempts <= rt.retries && lr.ntried < len(rc.tried) {
		snap := p.snap.Load()
		t0 := p.now()
		b, dec, err := snap.picker.Pick(context.Background(), &rc.info, rc.tried[:lr.ntried], &rc.pick)
		picked := p.now()
		p.metrics.decideTime.Observe(picked.Sub(t0).Seconds())
		if errors.Is(err, ErrNoBackend) && lr.reason == retryStale && lr.last != nil && lr.last.Eligible() {
			b, err = lr.last, nil // as Handle: a stale connection says nothing of the pod
		}
		if err != nil {
			if lr.lastErr == nil || !errors.Is(err, ErrNoBackend) {
				lr.lastErr = err
			}
			break
		}
		if !b.loopAddr.IsValid() {
			if lr.ntried == 0 {
				// An https or named backend: the whole request goes to
				// the fasthttp server (nothing of it was counted yet).
				h.served.Add(^uint64(0))
				p.inflight.Add(-1)
				h.handOver(lr, d)
				return
			}
			// A retry cannot be handed over (the loop has sent it once):
			// this backend counts as tried and refused.
			rc.tried[lr.ntried] = b
			lr.ntried++
			lr.lastErr = ErrNotSent
			continue
		}
		rc.tried[lr.ntried] = b
		lr.ntried++
		lr.last = b
		if lr.ntried > 1 {
			p.metrics.retried(lr.reason)
			rc.up = append(rc.up[:lr.upLen], "-r"...)
			rc.up = strconv.AppendInt(rc.up, int64(lr.ntried-1), 10)
		}
		p.metrics.decided(dec)
		ticket, err := b.brk.Allow()
		if err != nil {
			lr.lastErr = ErrNotSent
			lr.reason = retryBreaker
			continue
		}
		lr.attempts++
		lr.b, lr.ticket, lr.dec, lr.sent = b, ticket, dec, picked
		lr.work = p.beginWork(rt, rc, b, picked)
		p.memory.NoteDispatch(b, &rc.info, lr.start)
		b.state.Dispatch()
		d.Upstream = b.loopAddr
		d.Tag = lr
		setHeaders(lr, d)
		return
	}
	d.Response = h.answers[h.fail(r, lr)]
}

// fail ends a request no backend answered: accounting as Handle's end,
// and the status the client gets.
func (h *loopHandler) fail(r *evloop.Request, lr *loopReq) int {
	p := h.p
	rc := lr.rc
	if lr.lastErr == nil {
		lr.lastErr = ErrNoBackend
	}
	status := statusFor(lr.lastErr)
	if errors.Is(lr.lastErr, ErrSaturated) {
		p.metrics.shed.Inc()
	}
	last := lr.last
	if errors.Is(lr.lastErr, ErrNotSent) || errors.Is(lr.lastErr, ErrNoBackend) || errors.Is(lr.lastErr, ErrSaturated) {
		last = nil
	}
	p.metrics.requests(last, status)
	p.metrics.duration.Observe(p.now().Sub(lr.start).Seconds())
	if lr.rt.accessLog {
		p.accessLog(nil, last, &accounting{start: lr.start, code: status, err: lr.lastErr, id: string(rc.up), idLen: len(rc.id), idReplaced: lr.idReplaced, attempt: lr.attempts})
	}
	for _, b := range rc.tried[:lr.ntried] {
		if b.draining.Load() {
			p.reap()
			break
		}
	}
	h.release(lr)
	p.inflight.Add(-1)
	return status
}

func (h *loopHandler) release(lr *loopReq) {
	if rc := lr.rc; rc.suspect != nil {
		// No answer came after the re-sent 5xx: no verdict (Handle's rule).
		rc.suspectTicket.Done(breaker.Ignore)
		rc.suspect, rc.suspectTicket = nil, breaker.Ticket{}
	}
	lr.b, lr.last, lr.lastErr, lr.ticket, lr.rt = nil, nil, nil, breaker.Ticket{}, nil
	clear(lr.rc.tried[:])
	h.p.loopPool.Put(lr)
}

// Done implements evloop.Handler: one attempt's outcome.
func (h *loopHandler) Done(r *evloop.Request, res *evloop.Result, retry *evloop.Decision) bool {
	if errors.Is(res.Err, evloop.ErrDiscarded) {
		// Head re-sent the answer and settled the attempt (and lr may
		// already be back in its pool, when the re-send found no backend).
		return false
	}
	p := h.p
	lr := res.Tag.(*loopReq)
	b, rt := lr.b, lr.rt
	firstByte := time.Duration(0)
	if res.FirstByte != 0 {
		firstByte = time.Duration(res.FirstByte - res.Start)
	}
	switch {
	case res.Err == nil:
		// Answered: the upstream's status went to the client.
		p.metrics.firstByte.Observe(firstByte.Seconds())
		status := res.Status
		ticket := lr.ticket // zero when Head decided it already
		outcome := outcomeForStatus(status)
		a := lr.accounting(firstByte)
		a.status, a.code, a.bytes, a.outcome = status, status, int64(lr.bodyLen), outcome
		p.settle(b, ticket, &a)
		h.release(lr)
		return false
	case errors.Is(res.Err, evloop.ErrClientGone):
		// The client went away: never the backend's fault.
		if res.FirstByte != 0 {
			p.metrics.firstByte.Observe(firstByte.Seconds())
		}
		a := lr.accounting(firstByte)
		a.code, a.bytes, a.outcome, a.err = 499, res.ResponseBytes, breaker.Ignore, res.Err
		p.settle(b, lr.ticket, &a)
		h.release(lr)
		return false
	case res.FirstByte != 0 && res.Status != 0 && !errors.Is(res.Err, evloop.ErrBadResponse):
		// Cut after the answer began (the upstream closed or fell silent
		// mid-body): the client's connection was closed.
		p.metrics.firstByte.Observe(firstByte.Seconds())
		outcome := breaker.Failure
		if errors.Is(res.Err, evloop.ErrReadTimeout) {
			outcome = p.silenceOutcome(b.state, lr.sent)
		}
		a := lr.accounting(firstByte)
		a.status, a.code, a.bytes, a.outcome, a.err = res.Status, fasthttp.StatusBadGateway, res.ResponseBytes, outcome, res.Err
		p.settle(b, lr.ticket, &a)
		h.release(lr)
		return false
	}
	// Nothing reached the client: abandon the attempt, then re-pick or
	// answer the error as Handle does.
	var f failure
	outcome := breaker.Failure
	switch {
	case errors.Is(res.Err, evloop.ErrConnect):
		f.kind = failConnect
		lr.lastErr = errors.Join(ErrNotSent, res.Err)
	case errors.Is(res.Err, evloop.ErrUpstreamClosed):
		f.kind = failReset
		if res.Reused {
			f.stale = true
			outcome = breaker.Ignore
		}
		lr.lastErr = errors.Join(ErrReset, res.Err)
	case errors.Is(res.Err, evloop.ErrFirstByteTimeout):
		f.kind = failTimeout
		outcome = p.firstByteTimeoutOutcome(false, b.state, lr.sent)
		lr.lastErr = errors.Join(ErrUpstreamTimeout, res.Err)
	default:
		lr.lastErr = errors.Join(ErrUpstream, res.Err)
	}
	h.abandon(lr, outcome)
	reason := retryReasonFor(f, rt.retryOnReset)
	if reason != retryNone && res.Retryable {
		lr.reason = reason
		stop := false
		if reason.dropped() {
			lr.drops++
			if lr.drops > 1 {
				p.poisoned(lr.rc, r.Body(), lr.rc.tried[:lr.ntried])
				stop = true
			} else if p.poison.has(r.Body(), p.now()) {
				stop = true
			}
		}
		if b.draining.Load() {
			p.reap()
		}
		if !stop {
			h.next(r, lr, retry)
			return true // a new attempt, or retry.Status: the answer
		}
	}
	if res.Retryable {
		// Handle's answer for the error, kept alive (a refused dial is
		// 503 there, where the loop would say 502 and close).
		retry.Response = h.answers[h.fail(r, lr)]
		return true
	}
	h.fail(r, lr)
	return false
}

// accounting returns the fields of an answered attempt's accounting that
// every outcome shares (the request id only when the access log is on: it
// costs a string); Done sets the outcome's own.
func (lr *loopReq) accounting(firstByte time.Duration) accounting {
	a := accounting{start: lr.start, firstByte: firstByte, dec: lr.dec, attempt: lr.attempts, idReplaced: lr.idReplaced, work: lr.work}
	if lr.rt.accessLog {
		a.id, a.idLen = string(lr.rc.up), len(lr.rc.id)
	}
	return a
}

// abandon settles the attempt under way on lr.b that answered the client
// nothing, as Proxy.abandon does.
func (h *loopHandler) abandon(lr *loopReq, outcome breaker.Outcome) {
	b := lr.b
	h.p.endWork(b, &lr.work, false)
	b.state.Finish()
	lr.ticket.Done(outcome)
	lr.ticket = breaker.Ticket{}
}

// Head implements evloop.HeadHandler: forward's rules on the answer's
// head before any of it reaches the client. A 429, or a 5xx when another
// backend is left to ask (resendable), is re-sent once per request (the
// 5xx's breaker claim decided by the next answer, second_opinion.go); an
// overloaded answer is excused; another 5xx is judged by a canary; an
// ORCA report is taken; the client's head loses the ORCA field and
// carries the client's X-Request-Id.
func (h *loopHandler) Head(r *evloop.Request, hd *evloop.ResponseHead, retry *evloop.Decision) bool {
	p := h.p
	lr := r.Tag().(*loopReq)
	b, rt, rc := lr.b, lr.rt, lr.rc
	headAt := p.now()
	status := hd.Status
	if rc.suspect != nil {
		p.secondOpinion(rc, status)
	}
	rc.ntried = lr.ntried
	rc.resend5xx = rt.retryOnReset && lr.attempts <= rt.retries && !lr.resent
	resend := func(reason retryReason, outcome breaker.Outcome, err error) bool {
		h.abandon(lr, outcome)
		lr.resent, lr.reason, lr.lastErr = true, reason, errors.Join(ErrUpstream, err)
		if b.draining.Load() {
			p.reap()
		}
		h.next(r, lr, retry)
		return true
	}
	switch {
	case status == fasthttp.StatusTooManyRequests && p.resendable(rc):
		return resend(retryTooMany, breaker.Ignore, errTooManyRequests)
	case status == fasthttp.StatusServiceUnavailable && len(hd.Header(fasthttp.HeaderRetryAfter)) > 0:
		// Overloaded, not broken (overload.go).
		if p.resendable(rc) {
			p.metrics.resent(b, status)
			return resend(retryServerError, p.excuse(excuseOverloaded), errServerError)
		}
		lr.ticket.Done(p.excuse(excuseOverloaded))
		lr.ticket = breaker.Ticket{}
	case status >= 500:
		if p.resendable(rc) {
			rc.suspect, rc.suspectTicket = b, lr.ticket
			lr.ticket = breaker.Ticket{}
			p.metrics.resent(b, status)
			return resend(retryServerError, breaker.Ignore, errServerError)
		}
		// Judged by a canary (canary.go), which may wait: off the loop.
		go p.judgeServerError(rt, b, lr.ticket)
		lr.ticket = breaker.Ticket{}
	}
	if rt.orca {
		if v := hd.Header(hdrORCA); len(v) > 0 {
			if l, ok := probe.ParseORCA(v, headAt); ok {
				b.state.Report(&l)
			}
		}
	}
	lr.bodyLen = hd.ContentLength
	hd.Del = append(hd.Del, hdrORCA)
	hd.Set = append(hd.Set, evloop.Header{Name: hdrRequestID, Value: rc.id})
	return false
}
