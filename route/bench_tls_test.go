package route

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// tlsFastUpstream is fastUpstream serving https with testCert. dials
// counts the connections that carried a completion (the proxy's, not its
// scrapes').
func tlsFastUpstream(b *testing.B) (addr string, dials func() int64) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	var seen sync.Map
	var n atomic.Int64
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/metrics" {
			ctx.SetContentType("text/plain; version=0.0.4")
			return
		}
		if _, dup := seen.LoadOrStore(ctx.ConnID(), true); !dup {
			n.Add(1)
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}}
	go func() { _ = s.Serve(tls.NewListener(ln, testTLSConfig(0))) }()
	b.Cleanup(func() { _ = s.Shutdown() })
	return ln.Addr().String(), n.Load
}

// BenchmarkForwardTLS is BenchmarkForward's proxy/least_inflight over an
// https backend (TLS 1.3, a fasthttp server): the cost of the proxy's own
// TLS client and of the guard's checks before each reuse. dials is the
// number of upstream connections that carried requests, req/dial the
// requests each carried.
func BenchmarkForwardTLS(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		up, dials := tlsFastUpstream(b)
		addr := serveBenchProxy(b, "least_inflight", "https://"+up)
		c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
		do := func(req *fasthttp.Request, resp *fasthttp.Response) bool {
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("status %d, err %v", resp.StatusCode(), err)
				return false
			}
			return true
		}
		newReq := func() *fasthttp.Request {
			req := fasthttp.AcquireRequest()
			req.SetRequestURI("http://" + addr + "/v1/completions")
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBody([]byte(`{"model":"m","prompt":"Say hi","max_tokens":1}`))
			return req
		}
		b.ReportAllocs()
		if parallel {
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				req, resp := newReq(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				for pb.Next() && do(req, resp) {
				}
			})
		} else {
			req, resp := newReq(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for b.Loop() && do(req, resp) {
			}
		}
		d := dials()
		b.ReportMetric(float64(d), "dials")
		if d > 0 {
			b.ReportMetric(float64(b.N)/float64(d), "req/dial")
		}
	}
	b.Run("proxy/least_inflight", func(b *testing.B) { run(b, false) })
	b.Run("parallel/proxy/least_inflight", func(b *testing.B) { run(b, true) })
}
