package route

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
)

// Errors the request path classifies. Every failure is mapped to an HTTP
// status in exactly one place, statusFor.
var (
	// ErrNoBackend means no eligible backend could be sampled (all open,
	// draining, or none configured).
	ErrNoBackend = errors.New("no eligible backend")
	// ErrSaturated means every candidate reported saturation and
	// route.saturation.shed is on.
	ErrSaturated = errors.New("all candidate backends are saturated")
	// ErrUpstreamTimeout means the backend did not send response headers
	// within upstream.first_byte_timeout, or fell silent inside a stream for
	// longer than upstream.idle_timeout.
	ErrUpstreamTimeout = errors.New("upstream timed out")
	// ErrUpstream means the backend failed after the request may have
	// reached it (connection reset, malformed response).
	ErrUpstream = errors.New("upstream failed")
	// ErrNotSent means the request never reached the backend (dial refused,
	// breaker open), so it may safely be re-picked on another backend.
	ErrNotSent = errors.New("request not sent")
	// ErrUpstreamTLS means the TLS handshake with an https backend failed
	// for a reason other than a timeout: its certificate did not verify
	// (upstream.tls.ca_file, server_name), it refused the client's, or the
	// two sides share no version or cipher. The request never left, so it
	// is re-picked like a failed dial and counts against the backend; the
	// client gets 502, not the 503 of a refused dial: the backend is up
	// and answered, and what failed is trust between the two, a
	// configuration problem retrying later does not fix.
	ErrUpstreamTLS = errors.New("upstream TLS handshake failed")

	// errSwitchingProtocols: the backend answered 101 (or another 1xx as
	// its final answer) though the proxy forwards no Upgrade: no tunnel is
	// opened and the client gets a 502.
	errSwitchingProtocols = errors.New("upstream answered 1xx as final response: no tunnel is opened")
	// errConnectionOptions: the backend's answer listed more options in
	// its Connection fields than maxConnectionOptions, a malformed answer
	// (502) like a head too large for the proxy's buffer.
	errConnectionOptions = errors.New("upstream Connection header lists too many options")
	// errSpaceInName: a field name of the backend's answer holds a space,
	// a malformed answer (502) no client behind the proxy would read.
	errSpaceInName = errors.New("upstream header field name contains a space")
	// ErrReset means the connection failed after the request was written
	// and before the first response byte (EOF, reset): a dead or restarted
	// pod. It is an ErrUpstream (502) unless upstream.retry_on_reset
	// re-picks the request.
	ErrReset = fmt.Errorf("%w: connection closed before the first response byte", ErrUpstream)
)

// failureKind is how an upstream round trip failed before any response
// header arrived, which decides whether the request may be re-picked.
type failureKind uint8

const (
	failOther       failureKind = iota // malformed response and the like: 502
	failConnect                        // dial refused or timed out, no free connection: never sent
	failWrite                          // writing the request failed: never sent whole
	failReset                          // closed or reset after the write, before the first byte
	failTimeout                        // upstream.first_byte_timeout (or the write's deadline): 504
	failServerError                    // a 5xx answer re-sent for a second opinion (second_opinion.go)
	failTooMany                        // a 429 answer re-sent to another backend (overload.go)
)

// failure is how one forwarded attempt failed.
type failure struct {
	kind  failureKind
	stale bool // on a keep-alive connection that had carried a response before
	// afterHead: the response head had arrived, and the body failed before
	// any of it reached the client (failReset, failTimeout or failOther).
	afterHead bool
	// late: the attempt failed after upstream.first_byte_timeout had
	// passed since it was sent: it is never sent again.
	late bool
	// undelivered: on a reused connection whose peer's TCP never
	// acknowledged the request (errUndelivered): no poison drop.
	undelivered bool
}

// classify maps the error of a fasthttp round trip to a failureKind.
// fasthttp reports any failure to read the first response byte that is not
// a timeout as ErrConnectionClosed; a reset after part of the headers
// arrived is failOther (the pod had started answering).
func classify(err error) failureKind {
	switch {
	case isDialError(err):
		return failConnect
	case isWriteError(err):
		return failWrite
	case isTimeout(err):
		return failTimeout
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return failReset
	}
	return failOther
}

// classifyBody maps the error of a failed read of a response body, before
// any of it reached the client: a connection closed or reset (the body cut
// short: io.ErrUnexpectedEOF, ECONNRESET) is failReset; a timeout
// failTimeout; a malformed body (a bad chunk, more bytes than its
// Content-Length) failOther.
func classifyBody(err error) failureKind {
	switch {
	case isTimeout(err):
		return failTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return failReset
	}
	return failOther
}

// statusFor maps a classified error to the HTTP status the client gets.
func statusFor(err error) int {
	switch {
	case errors.Is(err, ErrSaturated):
		return fasthttp.StatusTooManyRequests
	case errors.Is(err, ErrNoBackend), errors.Is(err, breaker.ErrOpen):
		return fasthttp.StatusServiceUnavailable
	case errors.Is(err, ErrUpstreamTimeout):
		return fasthttp.StatusGatewayTimeout
	case errors.Is(err, ErrUpstreamTLS):
		return fasthttp.StatusBadGateway
	case errors.Is(err, ErrNotSent):
		return fasthttp.StatusServiceUnavailable
	default:
		return fasthttp.StatusBadGateway
	}
}

// errorType returns the OpenAI/vLLM error type name for a status.
func errorType(status int) string {
	switch status {
	case fasthttp.StatusBadRequest:
		return "BadRequestError"
	case fasthttp.StatusNotFound:
		return "NotFoundError"
	case fasthttp.StatusMethodNotAllowed:
		return "MethodNotAllowedError"
	case fasthttp.StatusRequestTimeout:
		return "RequestTimeoutError"
	case fasthttp.StatusRequestEntityTooLarge:
		return "RequestEntityTooLargeError"
	case fasthttp.StatusRequestHeaderFieldsTooLarge:
		return "RequestHeaderFieldsTooLargeError"
	case fasthttp.StatusTooManyRequests:
		return "RateLimitError"
	case fasthttp.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	case fasthttp.StatusGatewayTimeout:
		return "GatewayTimeoutError"
	case fasthttp.StatusHTTPVersionNotSupported:
		return "HTTPVersionNotSupportedError"
	default:
		return "BadGatewayError"
	}
}

// messageFor returns the fixed message a client gets for a status the proxy
// itself produces. It never carries upstream bytes or error text: those
// may hold another exchange's data (a peer's garbage, header fragments),
// so they go to the access log only.
func messageFor(status int) string {
	switch status {
	case fasthttp.StatusTooManyRequests:
		return "all candidate model servers are saturated; retry later"
	case fasthttp.StatusServiceUnavailable:
		return "no model server available"
	case fasthttp.StatusGatewayTimeout:
		return "the model server did not answer in time"
	case fasthttp.StatusBadGateway:
		return "the model server failed to answer"
	case fasthttp.StatusBadRequest:
		return "malformed HTTP request"
	case fasthttp.StatusHTTPVersionNotSupported:
		return "HTTP version not supported: use HTTP/1.1 or HTTP/1.0"
	}
	return fasthttp.StatusMessage(status)
}

// writeError answers the client with vLLM's error envelope:
// {"error":{"message":"...","type":"...","param":null,"code":<status>}}.
// It never allocates for the common messages beyond the response buffer.
func writeError(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(appendEnvelope(nil, status, msg))
}

// appendEnvelope appends the JSON error envelope to dst.
func appendEnvelope(dst []byte, status int, msg string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = strconv.AppendQuote(dst, msg)
	dst = append(dst, `,"type":"`...)
	dst = append(dst, errorType(status)...)
	dst = append(dst, `","param":null,"code":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, "}}"...)
	return dst
}

// isDialError reports whether err happened before a connection to the
// backend existed: the dial failed or timed out, or no connection was free.
func isDialError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isWriteError reports whether writing the request failed (a pooled
// connection the backend had reset, as a restarted pod leaves behind): the
// request's end never left, and a model server acts only on a whole
// request, so re-picking cannot duplicate work.
func isWriteError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "write" && !op.Timeout()
}

// isTimeout reports whether err is a timeout of the upstream exchange.
func isTimeout(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUpstreamTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
