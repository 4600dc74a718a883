package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/rawconn"
	"github.com/probegate/probegate/internal/upstreamtls"
)

// Endpoint is the backend endpoint a Fetcher reads load from.
type Endpoint uint8

// Endpoints a Fetcher can read.
const (
	EndpointMetrics Endpoint = iota // GET /metrics: running, waiting, KV use, LoRA
	EndpointLoad                    // GET /load: {"server_load": N}, tiny and cheap
)

// Path returns the HTTP path of e.
func (e Endpoint) Path() string {
	if e == EndpointLoad {
		return "/load"
	}
	return "/metrics"
}

// String returns the config spelling of e ("metrics" or "load").
func (e Endpoint) String() string {
	if e == EndpointLoad {
		return "load"
	}
	return "metrics"
}

// ParseEndpoint parses the config spelling of an endpoint: "metrics" (also
// the empty string, the default) or "load".
func ParseEndpoint(s string) (Endpoint, error) {
	switch s {
	case "", "metrics", "/metrics":
		return EndpointMetrics, nil
	case "load", "/load":
		return EndpointLoad, nil
	}
	return 0, fmt.Errorf("probe: unknown endpoint %q (want metrics or load)", s)
}

// Errors of a Fetch, to be matched with errors.Is.
var (
	// ErrTimeout: no complete answer before the deadline.
	ErrTimeout = errors.New("probe: timeout")
	// ErrStatus: the backend answered with a status other than 200.
	ErrStatus = errors.New("probe: unexpected status")
)

// Fetcher reads one backend's load from one of its endpoints. The returned
// Load has At = the receive time and Source = SourceNone; callers stamp the
// source (probe or scrape) and Report it.
//
// Implementations must be safe for concurrent use and must return by the
// ctx deadline (an error matching ErrTimeout when it passes).
type Fetcher interface {
	Fetch(ctx context.Context, s *State, ep Endpoint) (Load, error)
}

// Default limits of HTTPFetcher.
const (
	DefaultMaxIdleConnDuration = 4 * time.Second // vLLM (uvicorn) closes idle keep-alive at 5 s
	DefaultFetchTimeout        = time.Second     // when ctx has no deadline
)

// HTTPFetcher fetches load over HTTP/1.1 with fasthttp (over TLS for a
// State made by NewHTTPSState, configured by TLS), keeping one pooled
// fasthttp.HostClient per backend (per State), created on first use. The
// fetcher owns the transport; the State owns only load. The zero value is
// ready to use; set the fields before the first Fetch and do not change
// them after, and do not copy an HTTPFetcher once used. The prober and the
// scraper should share one HTTPFetcher, so a backend has one probe pool;
// call Forget when a backend leaves for good.
//
// HTTPFetcher honours the ctx deadline (it is passed to DoDeadline). fasthttp
// cannot abort a request in flight, so a ctx cancelled before its deadline
// ends the Fetch only when the answer arrives or the deadline passes; callers
// that cancel should not wait for it.
type HTTPFetcher struct {
	// MaxBodyBytes bounds the response body. Optional. Default: MaxMetricsBytes.
	MaxBodyBytes int
	// MaxIdleConnDuration closes idle keep-alive connections. Optional.
	// Default: DefaultMaxIdleConnDuration (must stay below vLLM's 5 s).
	MaxIdleConnDuration time.Duration
	// MaxConns bounds connections per backend. Optional. Default: 64.
	MaxConns int
	// Now stamps the answers. Optional. Default: time.Now.
	Now func() time.Time
	// TLS configures the connections to https backends: the proxy's
	// upstream.tls, the same Source its forwarding dials with, so a probe
	// trusts, presents and names what a request does. When it changes,
	// a backend's pooled connections are replaced at its next Fetch.
	// Optional. Default: nil, the system's roots, no client certificate,
	// the backend's host as server name.
	TLS *upstreamtls.Source

	clients sync.Map // *State -> *hostClient
}

// hostClient is one backend's pooled client. For an https backend, cfg is
// the TLS configuration current when it was made: once tls returns
// another, the client is replaced.
type hostClient struct {
	*fasthttp.HostClient
	tls *upstreamtls.Host
	cfg *tls.Config
}

var _ Fetcher = (*HTTPFetcher)(nil)

func (f *HTTPFetcher) hostClient(s *State) *fasthttp.HostClient {
	v, ok := f.clients.Load(s)
	if ok {
		hc := v.(*hostClient)
		if hc.tls == nil || hc.tls.Config() == hc.cfg {
			return hc.HostClient
		}
	}
	c := f.newHostClient(s)
	if ok {
		if f.clients.CompareAndSwap(s, v, c) {
			// Its connections in use close when they are released
			// and sit idle for MaxIdleConnDuration.
			v.(*hostClient).CloseIdleConnections()
			return c.HostClient
		}
	} else if got, loaded := f.clients.LoadOrStore(s, c); loaded {
		// Another goroutine stored one first; c was never used.
		return got.(*hostClient).HostClient
	} else {
		return c.HostClient
	}
	// Another goroutine replaced it first.
	return f.hostClient(s)
}

func (f *HTTPFetcher) newHostClient(s *State) *hostClient {
	c := &fasthttp.HostClient{
		Addr:                          s.addr,
		Name:                          "probegate",
		MaxConns:                      64,
		MaxIdleConnDuration:           DefaultMaxIdleConnDuration,
		MaxResponseBodySize:           MaxMetricsBytes,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      false,
	}
	if f.MaxBodyBytes > 0 {
		c.MaxResponseBodySize = f.MaxBodyBytes
	}
	if f.MaxIdleConnDuration > 0 {
		c.MaxIdleConnDuration = f.MaxIdleConnDuration
	}
	if f.MaxConns > 0 {
		c.MaxConns = f.MaxConns
	}
	hc := &hostClient{HostClient: c}
	// Probe and scrape sockets are read and written with raw system calls
	// (see internal/rawconn): a probe then costs no sysmon wake-up and no
	// processor hand-off, which on a proxy under load cost more than the
	// exchange itself.
	c.DialTimeout = rawconn.DialTimeout
	if s.https {
		// An https backend is probed over TLS like its requests, with
		// the same configuration (upstream.tls). The fetcher shakes
		// hands in the dial, within the time the fetch has left
		// (fasthttp passes it): fasthttp sees plain HTTP.
		hc.tls = f.TLS.Host(s.addr)
		hc.cfg = hc.tls.Config()
		c.DialTimeout = func(addr string, timeout time.Duration) (net.Conn, error) {
			return dialTLS(addr, timeout, hc.tls.Config())
		}
	}
	return hc
}

// dialTLS connects to addr and completes a TLS handshake with cfg, both
// within timeout (DefaultFetchTimeout when fasthttp passes none).
func dialTLS(addr string, timeout time.Duration, cfg *tls.Config) (net.Conn, error) {
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	deadline := time.Now().Add(timeout)
	raw, err := rawconn.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	c, err := upstreamtls.Handshake(raw, cfg, deadline)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	return c, nil
}

// Forget closes the idle keep-alive connections to s and drops its client,
// so a backend that left the pool holds neither sockets nor memory here. A
// later Fetch of s creates a new client. The proxy calls it when a removed
// backend has drained.
func (f *HTTPFetcher) Forget(s *State) {
	if c, ok := f.clients.LoadAndDelete(s); ok {
		c.(*hostClient).CloseIdleConnections()
	}
}

// Fetch implements Fetcher: GET ep.Path() from s.Addr() and parse the body
// with ParseMetrics or ParseLoadJSON.
func (f *HTTPFetcher) Fetch(ctx context.Context, s *State, ep Endpoint) (Load, error) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	if err := ctx.Err(); err != nil {
		return Load{}, fetchErr(s, ep, err)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(ep.Path())
	if ep == EndpointMetrics {
		req.Header.Set(fasthttp.HeaderAccept, "text/plain")
	} else {
		req.Header.Set(fasthttp.HeaderAccept, "application/json")
	}
	if err := f.Send(ctx, s, req, resp); err != nil {
		return Load{}, fetchErr(s, ep, err)
	}
	at := now()
	if sc := resp.StatusCode(); sc != fasthttp.StatusOK {
		return Load{}, fmt.Errorf("%w %d from %s%s", ErrStatus, sc, s.addr, ep.Path())
	}
	var (
		l   Load
		err error
	)
	if ep == EndpointLoad {
		l, err = ParseLoadJSON(resp.Body(), at)
	} else {
		l, err = ParseMetrics(resp.Body(), at)
	}
	if err != nil {
		return Load{}, fmt.Errorf("%s%s: %w", s.addr, ep.Path(), err)
	}
	return l, nil
}

// fetchErr classifies a transport error once: deadlines and fasthttp
// timeouts become ErrTimeout, cancellation stays context.Canceled.
func fetchErr(s *State, ep Endpoint, err error) error {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout),
		errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s%s: %w", ErrTimeout, s.addr, ep.Path(), err)
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return fmt.Errorf("%w: %s%s: %w", ErrTimeout, s.addr, ep.Path(), err)
	}
	return fmt.Errorf("probe: %s%s: %w", s.addr, ep.Path(), err)
}
