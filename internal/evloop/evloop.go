// Package evloop is an HTTP/1.1 reverse-proxy fast path on event loops of
// its own (Linux only): each loop is one goroutine locked to its OS thread
// that waits in epoll_wait on its own epoll set, with its own SO_REUSEPORT
// listener, client connections, keep-alive upstream connections and timer
// wheel. Nothing is handed between loops; a request is served start to end
// on the loop that accepted its connection, without a goroutine park, a
// runtime timer or a deadline system call.
//
// The loop serves only the plainest exchange: an HTTP/1.1 request with a
// Content-Length body (or none), relayed to an upstream address the caller
// chooses, answered by a Content-Length response. Everything else (chunked
// or Expect bodies, Upgrade, HTTP/1.0, HEAD, a non-origin-form target, or
// any request the caller's Handler declines) is handed over once to the
// caller's fallback, with the bytes already read replayed first; the
// connection stays with the fallback from then on.
//
// evloop knows nothing of routing policy, metrics or logs: the caller's
// Handler decides per request (Route) and is told each attempt's outcome
// (Done), which is where admission, picking, dispatch accounting, breakers,
// metrics, access logs and retries live. Refusals evloop makes itself
// (malformed or oversized requests, upstream failures, timeouts) are
// answered with the bytes the caller's Config.ErrorResponse returns, so
// the error envelope stays the caller's.
//
// Runtime rule (measured in bench/results/2026-12-02-s14/epoll): a loop
// blocks in a raw epoll_wait that keeps its P only when GOMAXPROCS is
// larger than the number of loops; the caller should run with
// GOMAXPROCS = Loops + 1 so the rest of the process (probes, the admin
// listener, the fallback server, the garbage collector) never waits for a
// loop. With GOMAXPROCS <= Loops the loops wait through the scheduler.
package evloop

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"time"
)

// ErrUnsupported is returned by New where event loops are not built
// (anything but Linux).
var ErrUnsupported = errors.New("evloop: event loops are supported on Linux only")

// Outcomes of an attempt, reported in Result.Err. They are sentinel values:
// compare with errors.Is.
var (
	// ErrConnect: the upstream connection could not be opened.
	ErrConnect = errors.New("evloop: upstream connect failed")
	// ErrUpstreamClosed: the upstream closed or reset the connection
	// before the response was complete.
	ErrUpstreamClosed = errors.New("evloop: upstream closed the connection")
	// ErrBadResponse: the upstream's response head was malformed, too
	// long, or framed in a way the loop does not relay (chunked, no
	// length, 1xx, 101).
	ErrBadResponse = errors.New("evloop: upstream response not relayable")
	// ErrFirstByteTimeout: no response byte within FirstByteTimeout.
	ErrFirstByteTimeout = errors.New("evloop: upstream first-byte timeout")
	// ErrReadTimeout: the upstream was silent for ReadIdleTimeout in the
	// middle of its response.
	ErrReadTimeout = errors.New("evloop: upstream idle timeout")
	// ErrClientGone: the client hung up (FIN, reset or error) before the
	// response was complete (the upstream connection was closed), or
	// while its request was parked (Decision.Park).
	ErrClientGone = errors.New("evloop: client went away")
	// ErrDiscarded: HeadHandler.Head asked for the response to be
	// discarded and the request sent again; Result.Status is the
	// discarded response's status, and nothing of it reached the client.
	ErrDiscarded = errors.New("evloop: response discarded for a retry")
	// ErrParkTimeout: a parked request (Decision.Park) was not resumed
	// within Decision.ParkTimeout; the client got Decision.ParkStatus
	// (504 when zero).
	ErrParkTimeout = errors.New("evloop: parked request not resumed in time")
)

// Handler is the caller's side of every request the loop parses. Its
// methods run on the loop's goroutine, one request at a time per loop, so
// they must not block (no I/O, no lock held for long); they may run on
// several loops at once. The *Request, *Decision and *Result they get are
// the loop's and valid only during the call.
type Handler interface {
	// Route decides what happens to a complete, parsed request: fill d
	// with an upstream address (and header edits), set d.HandOver to give
	// the connection to the fallback, or set d.Status to refuse it.
	Route(r *Request, d *Decision)
	// Done reports the outcome of one attempt Route (or an earlier retry)
	// sent upstream. It is called exactly once per attempt, and once for
	// a parked request that ends without a decision (its client gone,
	// ErrClientGone, or its ParkTimeout passed, ErrParkTimeout; then
	// Result.Upstream is zero and retry is nil). When
	// res.Retryable is set (the attempt failed before any response byte
	// and the upstream cannot have acted on the request), Done may fill
	// retry (an empty Decision) and return true to send the request
	// again; otherwise the return value is ignored and the loop answers
	// res.Status itself.
	Done(r *Request, res *Result, retry *Decision) bool
}

// Optional interfaces a Handler may implement. New checks for each once;
// a Handler implementing none of them behaves as before they existed.

// RefusalHandler hears every refusal the loop makes on its own, before
// any Handler call for the request: a malformed request (400), a read
// timeout (408), a body over MaxBodyBytes (413), a head over MaxHeadBytes
// or MaxHeaders (431), an HTTP version other than 1.x (505), a
// connection over Config.MaxConns (503), and a Decision.Park from a
// Handler that is not a Resumer (500). The client got
// Config.ErrorResponse(status) and the connection closes.
//
// Refusals of requests Route saw are not reported here: Decision.Status
// and Decision.Response are the Handler's own answers, and every outcome
// after Route (502 and 504 after an attempt, 499, a park's expiry) is
// reported through Done.
type RefusalHandler interface {
	// Refused runs on the loop, like Route: it must not block. rf is
	// the loop's, valid only during the call.
	Refused(rf *Refusal)
}

// Refusal describes one refusal the loop made on its own.
type Refusal struct {
	// Status is the status answered (Config.ErrorResponse(Status)).
	Status int
	// Cause names the rule, for logs: a constant string such as
	// "malformed request" or "connection cap" (no allocation).
	Cause string
	// Remote is the client's address.
	Remote netip.AddrPort
}

// HeadHandler sees each attempt's upstream response head before any byte
// of it reaches the client: to read report headers (ORCA's
// Endpoint-Load-Metrics), to edit the head the client gets, or to discard
// the response and send the request again (a 5xx or 429 re-sent to
// another backend).
type HeadHandler interface {
	// Head is called once per attempt whose response head parsed as
	// relayable (a final status with a Content-Length, or 204/304), on
	// the loop: it must not block. h and retry are the loop's, valid
	// only during the call (h.Set values must stay valid until Done
	// reports this attempt).
	//
	// Returning false relays the response with h's edits. Returning true
	// discards it: nothing of it reaches the client, its upstream
	// connection is kept only if the whole body was already read with
	// the head (otherwise it is closed: the loop never waits to drain),
	// Done reports the attempt (Result.Err ErrDiscarded, Result.Status
	// the discarded status; Done's return value is ignored), and retry,
	// which Head fills as Done would, is acted on. A true return past
	// the loop's attempt bound (8 attempts per request) relays the
	// response instead.
	Head(r *Request, h *ResponseHead, retry *Decision) bool
}

// ResponseHead is an upstream response head as HeadHandler.Head sees it,
// with the edits Head makes to the head the client gets. The loop resets
// it before each call, keeping the capacity of Set and Del.
type ResponseHead struct {
	// Status is the upstream's status code.
	Status int
	// ContentLength is the body's length (0 for 204 and 304).
	ContentLength int
	// Set are headers added to the client's response; a response header
	// of the same name (case-insensitive) is removed first. Del are
	// response headers removed (case-insensitive names). Hop-by-hop
	// headers are removed whatever Head does.
	Set []Header
	Del []string

	raw []byte // the head as received, through the blank line
}

// Header returns the value of the first header field named name
// (case-insensitive), without surrounding white space, or nil. The bytes
// are the loop's: valid only during Head.
func (h *ResponseHead) Header(name string) []byte {
	b := h.raw
	i := bytes.IndexByte(b, '\n') + 1 // past the status line
	for i > 0 && i < len(b)-2 {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 1 {
			return nil
		}
		ln := b[i : i+j-1] // without CRLF
		i += j + 1
		if c := bytes.IndexByte(ln, ':'); c > 0 && foldBytes(ln[:c], name) {
			return bytes.TrimSpace(ln[c+1:])
		}
	}
	return nil
}

// Resumer continues requests whose Route (or a retry from Done or Head)
// set Decision.Park. A Handler that parks must implement it.
type Resumer interface {
	// Resumed is called on the loop, once per Server.Resume of a parked
	// request's ticket while the request is still parked, with d reset
	// (an empty Decision, as Route gets): fill it as Route would (an
	// upstream, a hand-over, an answer, or Park again). The caller's
	// goroutine passes its result through its own state (for example
	// the value in Decision.Tag, which the loop returns in
	// Request.Tag): everything it wrote before calling Server.Resume is
	// visible here.
	Resumed(r *Request, d *Decision)
}

// Ticket names one parked request for Server.Resume. It is a value:
// copy it freely. A ticket resumes only the park it was issued for: after
// that request was resumed, expired, or its client went away, Resume with
// it does nothing, whatever now uses the connection's descriptor.
type Ticket struct {
	loop int32
	fd   int32
	gen  uint32
	seq  uint32
}

// Header is one request header to add upstream. Value may point into
// Decision.Scratch.
type Header struct {
	Name  string
	Value []byte
}

// Decision is what Handler.Route (or a retry from Handler.Done) decides
// for a request. The loop resets it before each call, keeping the
// capacity of Set, Del and Scratch, so a caller that appends into them
// allocates nothing in steady state.
type Decision struct {
	// HandOver gives the connection, with every byte read so far, to the
	// fallback. Nothing has been sent upstream for this request.
	HandOver bool
	// Status, when not zero, refuses the request: the loop writes
	// Config.ErrorResponse(Status) and closes the connection.
	Status int
	// Response, when not nil (and Status is zero), is a complete
	// HTTP/1.1 response the loop writes instead of sending the request
	// upstream: status line, header fields (framed by Content-Length;
	// no Connection field), blank line, body. The loop copies it
	// before Route returns, so a caller may pass a shared slice. The
	// connection stays open for the next request unless Close is set or
	// the client asked to close; then the loop adds "Connection: close"
	// and closes gracefully after it. Done is not called (nothing was
	// sent upstream).
	Response []byte
	// Close ends the connection after Response.
	Close bool
	// Park defers the decision: the loop stops reading the connection
	// (ReadTimeout no longer runs; a client hang-up is still noticed and
	// reported through Done as ErrClientGone, 499) until Server.Resume is
	// called with the request's ticket (Request.Ticket), from any
	// goroutine; the loop then calls Resumer.Resumed for the decision.
	// ParkTimeout bounds the wait (required, > 0); on expiry the client
	// gets Config.ErrorResponse(ParkStatus), 504 when ParkStatus is zero,
	// and Done reports ErrParkTimeout. Done's report of a parked request
	// may come before the caller's goroutine calls Resume: the caller
	// must not reuse the state behind Tag until both have happened.
	Park        bool
	ParkTimeout time.Duration
	ParkStatus  int
	// Upstream is the address the request is sent to.
	Upstream netip.AddrPort
	// Target, when not nil, replaces the request target upstream (an
	// origin-form path and query, such as a normalized path); it may
	// point into Scratch.
	Target []byte
	// Set are headers added to the upstream request; a request header of
	// the same name (case-insensitive) is removed first.
	Set []Header
	// Del are request headers removed (case-insensitive names).
	Del []string
	// Scratch is the caller's buffer for header values (for example
	// X-Forwarded-For), reset to length 0 per request.
	Scratch []byte
	// Tag is the caller's per-request value, returned in Result.Tag
	// (a pointer stored in it does not allocate).
	Tag any
}

func (d *Decision) reset() {
	*d = Decision{Set: d.Set[:0], Del: d.Del[:0], Scratch: d.Scratch[:0]}
}

// Result is one attempt's outcome, for accounting (or, with Upstream
// zero, that of a parked request that ended without a decision).
type Result struct {
	// Status is the status the client got: the upstream's, or the one the
	// loop answered (502, 504), or 499 when the client went away. Zero
	// when a retry follows.
	Status int
	// Upstream and Reused: where the attempt went and whether it used a
	// pooled keep-alive connection.
	Upstream netip.AddrPort
	Reused   bool
	// Attempt counts from 0.
	Attempt int
	// RequestBytes is the size of the client's request (head and body);
	// ResponseBytes how many response bytes went to the client (head
	// included).
	RequestBytes  int
	ResponseBytes int64
	// BodyBytes is the part of ResponseBytes that was the response
	// body.
	BodyBytes int64
	// Start, FirstByte and End are times on the loop's clock
	// (Config.Clock), in nanoseconds; FirstByte is zero when no response
	// byte arrived.
	Start, FirstByte, End int64
	// Err is nil on success, else one of the Err* values of this package.
	Err error
	// Retryable is set when the request never reached an upstream that
	// could have acted on it: the connect failed, or a reused connection
	// failed (write error, close or reset) before the first response byte.
	Retryable bool
	// Tag is Decision.Tag of the attempt.
	Tag any
}

// Config configures a Server. Every duration and limit is required
// (evloop owns no defaults: the caller's configuration does).
type Config struct {
	// Addr is the TCP address every loop listens on (host:port; port 0
	// picks one for all loops).
	Addr string
	// Loops is the number of event loops (one OS thread each), >= 1.
	Loops int
	// Handler decides per request; Fallback serves connections handed
	// over (on a goroutine of its own per connection; it must close the
	// connection when done). ErrorResponse returns a complete HTTP/1.1
	// response for a status (with the caller's error envelope and
	// "Connection: close"); it is called on the loop and must not block.
	Handler       Handler
	Fallback      func(net.Conn)
	ErrorResponse func(status int) []byte

	// MaxHeadBytes bounds a request head (431), MaxHeaders its header
	// count (431), MaxBodyBytes its Content-Length (413).
	MaxHeadBytes int
	MaxHeaders   int
	MaxBodyBytes int
	// MaxIdlePerUpstream bounds each loop's idle keep-alive connections
	// per upstream address.
	MaxIdlePerUpstream int
	// MaxConns bounds each loop's client connections (0: no bound). A
	// connection accepted past it is answered
	// Config.ErrorResponse(503), reported through RefusalHandler, and
	// closed gracefully, as fasthttp answers past Server.Concurrency:
	// the loop keeps accepting, since a connection left in its
	// listener's backlog (SO_REUSEPORT pins it to this loop) would wait
	// unanswered until the client gave up. Connections being refused
	// count toward a second bound of MaxConns more; past it the loop
	// stops accepting until a connection ends.
	MaxConns int

	// ReadTimeout bounds reading one request, from its first byte (or the
	// connection's accept) to its last (408 and close). IdleTimeout bounds
	// a kept-alive client connection's wait for its next request.
	// FirstByteTimeout bounds the wait for the first response byte after
	// the request is sent (504). ReadIdleTimeout bounds the upstream's
	// silence in mid-response (the client's connection is cut).
	// IdleConnTTL bounds how long an upstream connection idles in the pool.
	ReadTimeout      time.Duration
	IdleTimeout      time.Duration
	FirstByteTimeout time.Duration
	ReadIdleTimeout  time.Duration
	IdleConnTTL      time.Duration

	// Clock returns monotonic nanoseconds; nil uses the process's
	// monotonic clock. Tests inject a fake one (safe for concurrent use):
	// loops read it at least every 10 ms.
	Clock func() int64
}

func (c *Config) validate() error {
	var errs []error
	req := func(ok bool, field string) {
		if !ok {
			errs = append(errs, errors.New("evloop: Config."+field+" must be set (> 0 / non-nil)"))
		}
	}
	req(c.Addr != "", "Addr")
	req(c.Loops >= 1, "Loops")
	req(c.Handler != nil, "Handler")
	req(c.Fallback != nil, "Fallback")
	req(c.ErrorResponse != nil, "ErrorResponse")
	req(c.MaxHeadBytes > 0, "MaxHeadBytes")
	req(c.MaxHeaders > 0, "MaxHeaders")
	req(c.MaxBodyBytes > 0, "MaxBodyBytes")
	req(c.MaxIdlePerUpstream > 0, "MaxIdlePerUpstream")
	req(c.ReadTimeout > 0, "ReadTimeout")
	req(c.IdleTimeout > 0, "IdleTimeout")
	req(c.FirstByteTimeout > 0, "FirstByteTimeout")
	req(c.ReadIdleTimeout > 0, "ReadIdleTimeout")
	req(c.IdleConnTTL > 0, "IdleConnTTL")
	if c.MaxConns < 0 {
		errs = append(errs, errors.New("evloop: Config.MaxConns must be >= 0 (0: no bound)"))
	}
	return errors.Join(errs...)
}
