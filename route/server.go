package route

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
)

// clientIdleTimeout closes a client's keep-alive connection after this long
// without a request. It is not a config key: it only bounds idle sockets,
// and it is longer than the 60 s idle timeouts of common load balancers in
// front of the proxy (AWS ALB, GCP), so they close first and never send
// on a connection the proxy is closing.
const clientIdleTimeout = 90 * time.Second

// newServer builds the client-facing fasthttp server. WriteTimeout
// (upstream.idle_timeout) is armed once before each response is written,
// which bounds a whole small response; a stream re-arms it as its chunks
// flow (bodyStream), so it cuts only a client that stops reading.
// ReadTimeout bounds reading a request, so trickling clients are cut;
// oversized bodies and headers get vLLM-style envelopes.
func (p *Proxy) newServer(cfg *config.Config) *fasthttp.Server {
	maxBody := cfg.Server.MaxBodyBytes
	if maxBody > int64(^uint32(0)>>1) {
		maxBody = int64(^uint32(0) >> 1)
	}
	return &fasthttp.Server{
		Name:               "probegate",
		Handler:            p.Handle,
		ErrorHandler:       p.handleParseError,
		HeaderReceived:     p.headReceived,
		Logger:             connLogger{p.log},
		ReadTimeout:        cfg.Server.ReadTimeout.D(),
		WriteTimeout:       cfg.Upstream.IdleTimeout.D(),
		IdleTimeout:        clientIdleTimeout,
		MaxRequestBodySize: int(maxBody),
		ReadBufferSize:     cfg.Server.MaxHeaderBytes,
		// fasthttp's default, named: readFirst holds a length-framed
		// answer's head until it has this many body bytes (firstWant).
		WriteBufferSize: clientWriteBuffer,
		// Header names are parsed into canonical form, so that every
		// lookup and deletion of the proxy matches any case (RFC 9110
		// section 5.1); see hdrRequestID.
		DisableHeaderNamesNormalizing: false,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		StreamRequestBody:             false,
		// The proxy never reads RequestCtx.Time: no clock read per
		// request for it (the proxy reads its own, Proxy.now).
		LazyRequestTime: true,
		CloseOnShutdown: true,
		ConnState:       p.trackConn,
	}
}

// connLogger takes fasthttp's per-connection error lines (a malformed
// request, a client that hung up) into the proxy's structured log at debug
// level: the client already got its envelope and the requests metric
// counted it, so at the default level these lines are noise that a hostile
// client could use to flood the log. fasthttp's own logger would print them
// unstructured to stderr, hostile bytes included.
type connLogger struct{ log zerolog.Logger }

func (l connLogger) Printf(format string, args ...any) {
	l.log.Debug().Msgf(format, args...)
}

// trackConn keeps the set of open client connections (per connection, not
// per request; lock-free, see connSet). Every connection fasthttp serves
// is a *clientConn: clientListener and afterStream make them.
func (p *Proxy) trackConn(c net.Conn, st fasthttp.ConnState) {
	cc, ok := c.(*clientConn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateNew:
		p.conns.add(cc)
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		p.conns.remove(cc)
	}
}

// closeClientConns closes every client connection still open, which ends
// the streams they carry: bodyStream sees the failed write and releases its
// upstream request.
func (p *Proxy) closeClientConns() {
	p.conns.closeAll()
	p.cutHijacked()
}

// handleParseError answers requests fasthttp could not read, in vLLM's
// envelope: 413 for bodies over server.max_body_bytes, 431 for headers over
// the read buffer, 408 for a client that trickles past server.read_timeout,
// 505 for a version that is not HTTP/d.d, 400 otherwise; a request whose
// body fasthttp left unread because the proxy refused its head
// (headReceived) gets that refusal (404, 405, 400, ...). No backend is
// involved, so no breaker counts it. A request over its wire budget
// (clientConn.Read: chunk extensions) is a 413 too. The connection ends with a lingering
// close (see linger.go).
func (p *Proxy) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	status, msg := fasthttp.StatusBadRequest, "malformed HTTP request"
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		if v := p.refusedOnHead(ctx); v.status != 0 {
			// Refused on its head (headReceived): the body is unread,
			// so the connection ends whatever the refusal.
			v.close = true
			p.refuse(ctx, v)
			return
		}
		status, msg = fasthttp.StatusRequestEntityTooLarge, "request body exceeds server.max_body_bytes"
	case wireSpent(ctx):
		// fasthttp's chunk errors do not wrap the read's: the budget
		// itself says.
		status, msg = fasthttp.StatusRequestEntityTooLarge, errWireTooLong.Error()
	case errors.As(err, &small):
		status, msg = fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large"
	case isTimeout(err):
		status, msg = fasthttp.StatusRequestTimeout, "request not received within server.read_timeout"
	case strings.Contains(err.Error(), "unsupported http version"):
		// fasthttp has no sentinel for a request line whose version is
		// not HTTP/d.d ("HTTP/10.0"); its message is the only signal.
		status, msg = fasthttp.StatusHTTPVersionNotSupported, messageFor(fasthttp.StatusHTTPVersionNotSupported)
	}
	writeError(ctx, status, msg)
	// The client may still be sending the rest of what was refused.
	closeAfterRefusal(ctx)
	p.metrics.requests(nil, status)
}

// Serve accepts connections on ln until Shutdown.
func (p *Proxy) Serve(ln net.Listener) error {
	if !p.listeners.add(ln) {
		_ = ln.Close() // Shutdown began: serve nothing
		return nil
	}
	return p.server.Serve(clientListener{Listener: ln, p: p})
}

// wrapClient wraps raw, a client socket (pre: bytes already read from
// it), in a clientConn with the server's deadline slacks
// (clientWriteSlack, clientReadSlack) and wire budget (clientWireBudget),
// released by p while idle (clientConn.p, clientconn_idle.go): accepted,
// given back after an SSE stream (afterStream) or after a release.
func (p *Proxy) wrapClient(raw net.Conn, pre []byte) *clientConn {
	c := newClientConn(raw, pre)
	c.p = p
	c.writeSlack, c.readSlack = p.clientWriteSlack(), p.clientReadSlack()
	c.setWireBudget(p.clientWireBudget())
	return c
}

// wireSpent reports whether the request of ctx spent its connection's
// wire budget (clientConn.Read).
func wireSpent(ctx *fasthttp.RequestCtx) bool {
	cc, ok := ctx.Conn().(*clientConn)
	return ok && cc.wire > 0 && cc.wireLeft <= 0
}

// clientWireBudget is how many bytes one request may take on the wire
// (clientConn.Read): its head and wireFactor times its largest body.
func (p *Proxy) clientWireBudget() int64 {
	return int64(p.server.ReadBufferSize) + wireFactor*int64(p.server.MaxRequestBodySize)
}

// clientWriteSlack is how much later than asked a client connection's
// write deadline may be armed (clientConn.SetWriteDeadline): 1/16 of the
// server's WriteTimeout, as lazyDeadline gives every other wait.
func (p *Proxy) clientWriteSlack() time.Duration { return p.server.WriteTimeout / 16 }

// clientReadSlack is how much later than asked a client connection's read
// deadline may be armed (clientConn.SetReadDeadline): 1/16 of the shorter
// of the server's two read waits, ReadTimeout (server.read_timeout) and
// IdleTimeout.
func (p *Proxy) clientReadSlack() time.Duration {
	d := p.server.IdleTimeout
	if r := p.server.ReadTimeout; r > 0 && r < d {
		d = r
	}
	return d / 16
}

// serveListeners remembers the listeners Serve was given. fasthttp's
// Shutdown closes only the listeners its Serve has already registered, so a
// Serve goroutine that had not got that far (Shutdown right after start)
// would accept forever; Shutdown closes these itself once fasthttp's
// returned. Not on the request path.
type serveListeners struct {
	mu   sync.Mutex
	lns  []net.Listener
	shut bool
}

// add registers ln; false once shutdown was called.
func (l *serveListeners) add(ln net.Listener) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		return false
	}
	l.lns = append(l.lns, ln)
	return true
}

// shutdown refuses further listeners and returns those registered.
func (l *serveListeners) shutdown() []net.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shut = true
	lns := l.lns
	l.lns = nil
	return lns
}

// shutdownPoll is how often Shutdown checks whether every stream settled:
// short enough to return within a few milliseconds of the last one.
const shutdownPoll = 5 * time.Millisecond

// cutSettleWait bounds how long Shutdown waits, after cutting the
// remaining client connections, for their streams to settle (their
// accounting and breaker outcomes); a stream settles within one read of
// its closed socket, so this is ample, and it keeps Shutdown bounded.
const cutSettleWait = time.Second

// Shutdown stops accepting connections, lets in-flight requests and streams
// finish until ctx is done, then closes what remains and stops the
// background loops. It returns ctx.Err() if streams had to be cut.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.hijacks.beginStop()
	loopsDone := p.shutdownLoops(ctx) // server.event_loop: stop accepting now
	lns := p.listeners.shutdown()
	// After fasthttp's Shutdown: close what it did not know of (a Serve
	// that had not registered with it yet); errors are those listeners it
	// closed already.
	closeListeners := func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- p.server.ShutdownWithContext(ctx) }()
	t := time.NewTicker(shutdownPoll)
	defer t.Stop()
	var err error
wait:
	for {
		select {
		case err = <-errc:
			closeListeners()
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
			closeListeners()
			break wait
		}
	}
	// The event loops (server.event_loop) stop once their last client
	// connection closed (shutdownLoops), or when the grace is over
	// (exchanges still on them are cut).
	if err != nil {
		// The grace is over: cut what remains rather than leave its clients
		// and upstream requests hanging, and give the streams a moment to
		// settle.
		p.stopLoops()
		p.closeClientConns()
		for i := 0; i < int(cutSettleWait/shutdownPoll) && p.inflight.Load() > 0; i++ {
			<-t.C
		}
	}
	<-loopsDone
	p.Close()
	return err
}
