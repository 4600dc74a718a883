package probe

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
)

// Send sends req to s over the fetcher's pooled client for s (and its TLS
// settings, as probes and scrapes) by the ctx deadline (DefaultFetchTimeout
// without one), and reads the answer into resp, whose body is bounded like
// a probe's (MaxBodyBytes). It sets req's Host to s's address. It is for
// the proxy's own requests to a backend other than load reports (the
// breaker's canary, route/canary.go).
func (f *HTTPFetcher) Send(ctx context.Context, s *State, req *fasthttp.Request, resp *fasthttp.Response) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultFetchTimeout)
	}
	req.Header.SetHost(s.addr)
	return f.hostClient(s).DoDeadline(req, resp, deadline)
}
