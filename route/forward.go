package route

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// reqCtx is the per-request scratch space of the handler, pooled so that a
// request allocates nothing for routing.
type reqCtx struct {
	ex          extractor
	info        RequestInfo
	sample      [2*maxD + 1]*Backend
	spare       [maxD]*Backend
	excl        []*Backend
	all         []*Backend
	cands       []Candidate
	views       []probe.View
	states      []*probe.State
	spareStates []*probe.State
	tried       [maxRetries + 1]*Backend
	memo        [memoryScan]*Backend
	memoCands   [memoryScan]Candidate
	id          []byte
	xff         []byte
}

func newReqCtx() *reqCtx {
	return &reqCtx{
		excl:        make([]*Backend, 0, 2*maxD),
		cands:       make([]Candidate, 0, 2*maxD),
		views:       make([]probe.View, 0, 2*maxD),
		states:      make([]*probe.State, 0, maxD),
		spareStates: make([]*probe.State, 0, maxD),
	}
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
	dec       decision
	id        string
	attempt   int
}

// newServer builds the client-facing fasthttp server. There is no write
// timeout (it would cut long streams: bodyStream re-arms a per-chunk write
// deadline instead); ReadTimeout bounds reading a request, so trickling
// clients are cut; oversized bodies and headers get vLLM-style envelopes.
func (p *Proxy) newServer(cfg *config.Config) *fasthttp.Server {
	maxBody := cfg.Server.MaxBodyBytes
	if maxBody > int64(^uint32(0)>>1) {
		maxBody = int64(^uint32(0) >> 1)
	}
	hdr := cfg.Server.MaxHeaderBytes
	if hdr <= 0 {
		hdr = 64 << 10
	}
	return &fasthttp.Server{
		Name:                          "probegate",
		Handler:                       p.Handle,
		ErrorHandler:                  p.handleParseError,
		ReadTimeout:                   cfg.Server.ReadTimeout.D(),
		IdleTimeout:                   90 * time.Second,
		MaxRequestBodySize:            int(maxBody),
		ReadBufferSize:                hdr,
		DisableHeaderNamesNormalizing: true,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		StreamRequestBody:             false,
		CloseOnShutdown:               true,
		ConnState:                     p.trackConn,
	}
}

// trackConn keeps the set of open client connections (per connection, not
// per request).
func (p *Proxy) trackConn(c net.Conn, st fasthttp.ConnState) {
	switch st {
	case fasthttp.StateNew:
		p.connsMu.Lock()
		p.conns[c] = struct{}{}
		p.connsMu.Unlock()
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		p.connsMu.Lock()
		delete(p.conns, c)
		p.connsMu.Unlock()
	}
}

// closeClientConns closes every client connection still open, which ends
// the streams they carry: bodyStream sees the failed write and releases its
// upstream request.
func (p *Proxy) closeClientConns() {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// handleParseError answers requests fasthttp could not read, in vLLM's
// envelope: 413 for bodies over server.max_body_bytes, 431 for headers over
// the read buffer, 408 for a client that trickles past server.read_timeout,
// 400 otherwise.
func (p *Proxy) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	status, msg := fasthttp.StatusBadRequest, "malformed HTTP request"
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, msg = fasthttp.StatusRequestEntityTooLarge, "request body exceeds server.max_body_bytes"
	case errors.As(err, &small):
		status, msg = fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large"
	case isTimeout(err):
		status, msg = fasthttp.StatusRequestTimeout, "request not received within server.read_timeout"
	}
	writeError(ctx, status, msg)
	ctx.SetConnectionClose()
	p.metrics.requests(nil, status)
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
	rt := p.rt.Load()
	rc := p.rcPool.Get().(*reqCtx)
	defer p.rcPool.Put(rc)

	start := p.now()
	if ctx.IsConnect() {
		// A model server is no tunnel endpoint: never forward CONNECT.
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "CONNECT is not supported")
		p.metrics.requests(nil, fasthttp.StatusMethodNotAllowed)
		return
	}
	if ambiguousFraming(ctx.Request.Header.RawHeaders()) {
		// Content-Length and Transfer-Encoding together are the shape of
		// request smuggling (RFC 9112 section 6.3): refuse, and close the
		// connection since its framing cannot be trusted.
		writeError(ctx, fasthttp.StatusBadRequest, "request has both Content-Length and Transfer-Encoding")
		ctx.SetConnectionClose()
		p.metrics.requests(nil, fasthttp.StatusBadRequest)
		return
	}
	body := ctx.PostBody()
	if int64(len(body)) > rt.maxBody {
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, "request body exceeds server.max_body_bytes")
		p.metrics.requests(nil, fasthttp.StatusRequestEntityTooLarge)
		return
	}
	rc.ex.Extract(body, rt.blockChars, rt.maxBlocks, &rc.info)

	req := &ctx.Request
	stripHopRequest(&req.Header)
	p.setForwardedFor(ctx, rc)
	baseID := req.Header.Peek("X-Request-Id")
	rc.id = rc.id[:0]
	if len(baseID) == 0 {
		rc.id = appendRequestID(rc.id, p.rand())
	} else {
		rc.id = append(rc.id, baseID...)
	}
	idLen := len(rc.id)
	if rt.orca && !rc.info.Stream {
		req.Header.Set("Endpoint-Load-Metrics-Format", "TEXT")
	}

	pool := p.pool.Load()
	var lastErr error
	var last *Backend
	for attempt := 0; attempt <= rt.retries; attempt++ {
		tried := rc.tried[:attempt]
		t0 := p.now()
		// Never hand the RequestCtx to the prober as a context.Context:
		// contexts derived from it may outlive the handler, and fasthttp
		// recycles it. Probes are bounded by probe.deadline on their own.
		b, dec, err := p.pick(context.Background(), rc, rt, pool, tried)
		p.metrics.decideTime.Observe(p.now().Sub(t0).Seconds())
		if err != nil {
			if lastErr == nil || !errors.Is(err, ErrNoBackend) {
				lastErr = err
			}
			break
		}
		rc.tried[attempt] = b
		last = b
		if attempt > 0 {
			p.metrics.retries.Inc()
			// Never reuse a request id across two backends.
			rc.id = append(rc.id[:idLen], "-r"...)
			rc.id = strconv.AppendInt(rc.id, int64(attempt), 10)
		}
		p.metrics.decided(dec)
		done, err := b.brk.Allow()
		if err != nil {
			lastErr = ErrNotSent
			continue
		}
		req.Header.SetBytesV("X-Request-Id", rc.id)
		err = p.forward(ctx, rt, rc, b, done, start, dec, attempt)
		if err == nil {
			settled = true // bodyStream.Close settles
			return
		}
		lastErr = err
		if !errors.Is(err, ErrNotSent) {
			break
		}
	}
	if lastErr == nil {
		lastErr = ErrNoBackend
	}
	status := statusFor(lastErr)
	msg := lastErr.Error()
	switch {
	case errors.Is(lastErr, ErrNotSent) || errors.Is(lastErr, ErrNoBackend):
		msg = "no model server available: " + msg
	case errors.Is(lastErr, ErrSaturated):
		p.metrics.shed.Inc()
	}
	writeError(ctx, status, msg)
	if status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	if errors.Is(lastErr, ErrNotSent) || errors.Is(lastErr, ErrNoBackend) || errors.Is(lastErr, ErrSaturated) {
		last = nil // the backend never saw it
	}
	p.metrics.requests(last, status)
	p.metrics.duration.Observe(p.now().Sub(start).Seconds())
	if rt.accessLog {
		p.accessLog(ctx, last, &accounting{start: start, code: status, err: lastErr, id: string(rc.id)})
	}
}

// forward sends the request to b and, once response headers arrive, hands
// the body to the client as a stream. It returns nil when the response is
// under way (bodyStream settles it), an error wrapping ErrNotSent when
// nothing reached the backend, or another error to map to a status.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, rt *runtime, rc *reqCtx, b *Backend, done func(breaker.Outcome), start time.Time, dec decision, attempt int) error {
	req := &ctx.Request
	if rc.info.NBlocks > 0 {
		b.prefix.Insert(rc.info.Blocks[:rc.info.NBlocks])
	}
	if rc.info.ModelHash != 0 {
		b.lora.Note(rc.info.ModelHash, start)
	}
	// The backend's scheme, whatever the client's request line said: an
	// absolute "https://..." URI would otherwise make the HostClient refuse
	// the request and count it against the backend's breaker.
	if b.hc.IsTLS {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	b.state.Dispatch()
	resp := fasthttp.AcquireResponse()
	err := b.hc.Do(req, resp)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		b.state.Finish()
		done(breaker.Failure)
		if b.draining.Load() {
			p.reap()
		}
		switch {
		case isDialError(err):
			return errors.Join(ErrNotSent, err)
		case isTimeout(err):
			return errors.Join(ErrUpstreamTimeout, err)
		default:
			return errors.Join(ErrUpstream, err)
		}
	}
	status := resp.StatusCode()
	if rt.orca {
		if v := resp.Header.Peek("Endpoint-Load-Metrics"); len(v) > 0 {
			if l, ok := probe.ParseORCA(v, p.now()); ok {
				b.state.Report(&l)
			}
		}
	}
	ctx.Response.Reset()
	resp.Header.CopyTo(&ctx.Response.Header)
	stripHopResponse(&ctx.Response.Header)
	ctx.Response.Header.Del("Endpoint-Load-Metrics")
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetBytesV("X-Request-Id", rc.id)

	s := bodyStreamPool.Get().(*bodyStream)
	s.p, s.b, s.resp, s.done = p, b, resp, done
	s.up = resp.BodyStream()
	s.client = ctx.Conn()
	s.idle = rt.idle
	s.sse = bytesHasPrefix(resp.Header.ContentType(), "text/event-stream")
	s.acct = accounting{start: start, firstByte: p.now().Sub(start), status: status, code: status, dec: dec, attempt: attempt}
	if rt.accessLog {
		s.acct.id = string(rc.id)
	}
	p.metrics.firstByte.Observe(s.acct.firstByte.Seconds())
	size := resp.Header.ContentLength()
	if size < 0 {
		size = -1
	}
	if s.up == nil {
		// No body stream (e.g. HEAD): settle now.
		body := append([]byte(nil), resp.Body()...)
		s.up = bytesReader(body)
		size = len(body)
	}
	ctx.Response.SetBodyStream(s, size)
	return nil
}

// settle records the end of a forwarded request: breaker outcome, local
// in-flight count, metrics and the access log line.
func (p *Proxy) settle(b *Backend, done func(breaker.Outcome), a *accounting) {
	done(a.outcome)
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

// reap forgets draining backends that finished their requests.
func (p *Proxy) reap() {
	p.mu.Lock()
	p.reapLocked()
	p.mu.Unlock()
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
	ev = ev.Str("request_id", a.id).Int("status", a.code).Int64("bytes", a.bytes).
		Float64("first_byte_ms", float64(a.firstByte.Microseconds())/1e3).Float64("total_ms", float64(p.now().Sub(a.start).Microseconds())/1e3)
	if b != nil {
		ev = ev.Str("backend", b.addr).Str("source", a.dec.source.String())
	}
	if a.attempt > 0 {
		ev = ev.Int("attempt", a.attempt)
	}
	if a.err != nil {
		ev = ev.AnErr("error", a.err)
	}
	ev.Msg("request")
}

// setForwardedFor appends the client's IP to X-Forwarded-For.
func (p *Proxy) setForwardedFor(ctx *fasthttp.RequestCtx, rc *reqCtx) {
	ip := ctx.RemoteIP()
	rc.xff = rc.xff[:0]
	if prior := ctx.Request.Header.Peek("X-Forwarded-For"); len(prior) > 0 {
		rc.xff = append(rc.xff, prior...)
		rc.xff = append(rc.xff, ", "...)
	}
	rc.xff = appendIP(rc.xff, ip)
	ctx.Request.Header.SetBytesV("X-Forwarded-For", rc.xff)
}

func appendIP(dst []byte, ip net.IP) []byte {
	if ip4 := ip.To4(); ip4 != nil {
		for i, b := range ip4 {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
		return dst
	}
	return append(dst, ip.String()...)
}

const hexDigits = "0123456789abcdef"

// appendRequestID appends a 16-hex-digit request id derived from r.
func appendRequestID(dst []byte, r uint64) []byte {
	for i := 15; i >= 0; i-- {
		dst = append(dst, hexDigits[(r>>(uint(i)*4))&0xf])
	}
	return dst
}

// ambiguousFraming reports whether raw request headers carry both
// Content-Length and Transfer-Encoding.
var (
	strContentLength    = []byte("Content-Length")
	strTransferEncoding = []byte("Transfer-Encoding")
)

func ambiguousFraming(raw []byte) bool {
	var cl, te bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if i := bytes.IndexByte(line, ':'); i > 0 {
			switch k := line[:i]; {
			case bytes.EqualFold(k, strContentLength):
				cl = true
			case bytes.EqualFold(k, strTransferEncoding):
				te = true
			}
		}
	}
	return cl && te
}

func bytesHasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// Serve accepts connections on ln until Shutdown.
func (p *Proxy) Serve(ln net.Listener) error {
	return p.server.Serve(ln)
}

// Shutdown stops accepting connections, lets in-flight requests and streams
// finish until ctx is done, then closes what remains and stops the
// background loops. It returns ctx.Err() if streams had to be cut.
func (p *Proxy) Shutdown(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- p.server.ShutdownWithContext(ctx) }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	var err error
wait:
	for {
		select {
		case err = <-errc:
			// The server stopped serving; streams it handed to bodyStream
			// settle as they finish.
			for p.inflight.Load() > 0 {
				select {
				case <-ctx.Done():
					err = ctx.Err()
					break wait
				case <-t.C:
				}
			}
			break wait
		case <-ctx.Done():
			err = ctx.Err()
			<-errc
			break wait
		}
	}
	if err != nil {
		// The grace is over: cut what remains rather than leave its clients
		// and upstream requests hanging, and give the streams a moment to
		// settle.
		p.closeClientConns()
		for i := 0; i < 200 && p.inflight.Load() > 0; i++ {
			<-t.C
		}
	}
	p.Close()
	return err
}
