package route

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkForwardLarge measures large answers through the proxy
// (least_inflight), so that buffers sized for SSE frames and small JSON
// answers are seen not to slow them: a 1 MiB JSON body with a
// Content-Length, and the same as an SSE stream of 256-byte frames. MB/s is
// the body throughput of one sequential client.
func BenchmarkForwardLarge(b *testing.B) {
	const size = 1 << 20
	json := bytes.Repeat([]byte("x"), size)
	frame := []byte("data: " + string(bytes.Repeat([]byte("y"), 248)) + "\n\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if bytes.Contains(ctx.PostBody(), []byte(`"stream":true`)) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				for range size / len(frame) {
					_, _ = w.Write(frame)
					_ = w.Flush()
				}
			})
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(json)
	}}
	go func() { _ = up.Serve(ln) }()
	b.Cleanup(func() { _ = up.Shutdown() })

	addr := serveBenchProxy(b, "least_inflight", "http://"+ln.Addr().String())
	for _, tc := range []struct{ name, body string }{
		{"json=1MiB", `{"model":"m"}`},
		{"sse=1MiB/frame=256B", `{"model":"m","stream":true}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 1, MaxResponseBodySize: 2 * size}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + addr + "/v1/completions")
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBodyString(tc.body)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Fatalf("status %d, err %v", resp.StatusCode(), err)
				}
				if n := len(resp.Body()); n < size-len(frame) {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}
