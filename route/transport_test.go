package route

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A small non-stream exchange through the proxy allocates nothing per
// request once the pools are warm: the upstream transport reads the answer
// whole without fasthttp's per-response stream reader and closures (4
// allocations per request before). The client and the upstream are
// fasthttp's, which allocate nothing either: the direct exchange is
// checked first, so a count through the proxy is the proxy's.
func TestForwardedSmallAnswerAllocatesNothing(t *testing.T) {
	up := fastUpstream(t)
	addr := serveBenchProxy(t, "least_inflight", "http://"+up)
	do := func(addr string) func() {
		c := &fasthttp.HostClient{Addr: addr, MaxConns: 1}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		t.Cleanup(func() { fasthttp.ReleaseRequest(req); fasthttp.ReleaseResponse(resp) })
		req.SetRequestURI("http://" + addr + "/v1/completions")
		req.Header.SetMethod("POST")
		req.Header.SetContentType("application/json")
		req.SetBodyString(`{"model":"m","prompt":"Say hi","max_tokens":1}`)
		return func() {
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 || len(resp.Body()) == 0 {
				t.Fatalf("status %d, %d bytes, err %v", resp.StatusCode(), len(resp.Body()), err)
			}
		}
	}
	direct, proxied := do(up), do(addr)
	for range 200 {
		direct()
		proxied()
	}
	if n := leastAllocsPerRun(200, direct); n != 0 {
		t.Skipf("the direct exchange allocates %v per request: the harness cannot judge the proxy", n)
	}
	if n := leastAllocsPerRun(200, proxied); n != 0 {
		t.Fatalf("%v allocations per forwarded small exchange, want 0", n)
	}
}

// Bytes a backend sends past a small answer's Content-Length belong to no
// exchange: the client gets the answer alone, and the connection they came
// on is not reused, so they never reach another request.
func TestBytesPastASmallAnswerAreNeverReused(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, n int, _ []byte) bool {
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"+
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
		return err == nil
	})
	tp := startProxy(t, testConfig(be.url()))
	for i := range 3 {
		r := rawDo(t, tp.addr, hhReq)
		if r.status != 200 || r.body != "{}" {
			t.Fatalf("request %d: %d %q, want 200 {}", i, r.status, r.body)
		}
		if strings.Contains(r.body, "stray") {
			t.Fatalf("request %d got another exchange's bytes: %q", i, r.body)
		}
	}
	if n := len(be.requests()); n != 3 {
		t.Fatalf("backend saw %d requests, want 3", n)
	}
	be.mu.Lock()
	conns := len(be.conns)
	be.mu.Unlock()
	if conns != 3 {
		t.Fatalf("%d upstream connections for 3 requests, want 3: one that carried stray bytes was reused", conns)
	}
}

// A small 5xx answer whose body is cut short is judged at its head first,
// as any 5xx: re-sent to another pod for a second opinion
// (retries_total{reason="server_error"}), not taken as a connection that
// failed after its head ("after_head"). The client gets the other pod's
// answer.
func TestCutShortServerErrorIsJudgedAtItsHead(t *testing.T) {
	bad := hhFails(t, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"error\"", 0, false)
	good := hhHealthy(t)
	cfg := testConfig(bad.url(), good.url())
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.RetryOnReset = true
	tp := startProxy(t, cfg)
	for i := range 4 {
		r := rawDo(t, tp.addr, hhReq)
		if r.status != 200 || r.body != "data: ok\n\n" {
			t.Fatalf("request %d: %d %q, want the healthy pod's 200 stream", i, r.status, r.body)
		}
	}
	hits := float64(len(bad.requests()))
	if hits == 0 {
		t.Fatal("the failing backend got no request: the test tested nothing")
	}
	if got, after := rtRetries(t, tp, "server_error"), rtRetries(t, tp, "after_head"); got != hits || after != 0 {
		t.Fatalf("retries_total server_error = %v, after_head = %v; want %v and 0", got, after, hits)
	}
}
