package bench

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// leanTransport is the http.RoundTripper of the overhead scenario's vegeta
// runs: vegeta's library paces the requests, runs the workers and keeps the
// metrics, and this transport does each exchange on the calling worker's
// goroutine with fasthttp's HostClient (write, then read the answer, on
// one keep-alive connection per request in flight).
//
// Why not net/http's Transport: it runs two goroutines per connection (a
// write loop and a read loop) and hands every request and answer between
// them and the caller over channels, and http.Client's timeout adds a
// timer goroutine per request; on the bench's 2-CPU machine that cost the
// generator ~60 µs of CPU per request (0.6 of the 2 CPUs at 10k req/s,
// session 7), CPU the targets then lacked. The load offered is the same:
// HTTP/1.1, keep-alive, the same POST and headers, a 5 s timeout.
//
// Idle connections are reused newest first (fasthttp.LIFO), as net/http's
// Transport and so the vegeta command line do: after a burst the generator
// keeps sending on as many connections as it has requests in flight, and
// the burst's surplus idles. fasthttp's default (FIFO) would rotate every
// request over every connection the burst opened, so that a target that
// fell behind once kept serving up to 512 active connections for the rest
// of the run: load the generator made, not the rate.
type leanTransport struct {
	hc *fasthttp.HostClient
}

// newLeanTransport returns a transport for requests to addr (host:port)
// with at most maxConns connections (one per request in flight).
func newLeanTransport(addr string, maxConns int) *leanTransport {
	return &leanTransport{hc: &fasthttp.HostClient{
		Addr:                          addr,
		MaxConns:                      maxConns,
		MaxConnWaitTimeout:            leanTimeout,
		ReadTimeout:                   leanTimeout,
		WriteTimeout:                  leanTimeout,
		MaxIdleConnDuration:           time.Minute,
		ConnPoolStrategy:              fasthttp.LIFO,
		DisableHeaderNamesNormalizing: true,
		NoDefaultUserAgentHeader:      true,
	}}
}

// leanTimeout bounds one exchange, as the net/http client's Timeout did.
const leanTimeout = 5 * time.Second

// RoundTrip sends r and returns its answer with the body read in full.
func (t *leanTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.String())
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.Body != nil {
		_, err := io.Copy(req.BodyWriter(), r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := t.hc.Do(req, resp); err != nil {
		return nil, err
	}
	body := bytes.Clone(resp.Body())
	code := resp.StatusCode()
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// CloseIdleConnections closes the transport's idle connections.
func (t *leanTransport) CloseIdleConnections() { t.hc.CloseIdleConnections() }
