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
	// response was complete; the upstream connection was closed.
	ErrClientGone = errors.New("evloop: client went away")
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
	// sent upstream. It is called exactly once per attempt. When
	// res.Retryable is set (the attempt failed before any response byte
	// and the upstream cannot have acted on the request), Done may fill
	// retry (an empty Decision) and return true to send the request
	// again; otherwise the return value is ignored and the loop answers
	// res.Status itself.
	Done(r *Request, res *Result, retry *Decision) bool
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
	// Upstream is the address the request is sent to.
	Upstream netip.AddrPort
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

// Result is one attempt's outcome, for accounting.
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
	return errors.Join(errs...)
}
