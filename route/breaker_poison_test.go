package route

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// Only backend failures count against a backend: 100 requests shaped by a
// hostile or broken client (malformed, unsupported versions, no Host,
// userinfo or foreign schemes in the target) are answered by the proxy
// itself or forwarded cleanly, never fail as a backend fault, and leave
// every breaker closed.
func TestClientFaultsNeverOpenBreakers(t *testing.T) {
	var urls []string
	var bes []*rawBackend
	for i := 0; i < 4; i++ {
		be := startRawBackend(t, okResponder(""))
		bes = append(bes, be)
		urls = append(urls, be.url())
	}
	cfg := testConfig(urls...)
	cfg.Breaker.ConsecutiveFailures = 3
	cfg.Breaker.OpenFor = config.Duration(time.Minute)
	tp := startProxy(t, cfg)

	shapes := []struct {
		name, req string
		status    int
	}{
		{"HTTP/1.0 without Host", "POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}", 200},
		{"HAProxy's health check", "OPTIONS / HTTP/1.0\r\n\r\n", 200},
		{"HTTP/1.1 without Host", "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"HTTP/2.0 request line", "GET /v1/models HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"HTTP/1.2 request line", "GET /v1/models HTTP/1.2\r\nHost: x\r\n\r\n", 505},
		{"HTTP/10.0 request line", "GET /v1/models HTTP/10.0\r\nHost: x\r\n\r\n", 505},
		{"userinfo in target", "POST http://user:pass@evil:1/x HTTP/1.1\r\nHost: evil:1\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"ftp target", "GET ftp://evil/x HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"asterisk for GET", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"garbage", "GARBAGE\r\n\r\n", 400},
		{"bad Content-Length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n", 400},
	}
	for i := 0; i < 100; i++ {
		sh := shapes[i%len(shapes)]
		r := rawDo(t, tp.addr, sh.req)
		if r.status != sh.status {
			t.Fatalf("%s: status %d, want %d (%q)", sh.name, r.status, sh.status, r.body)
		}
	}
	for _, b := range tp.DebugBackends() {
		if b.Breaker != "closed" {
			t.Errorf("client faults opened the breaker of %s: %s", b.Address, b.Breaker)
		}
	}
	if n := tp.counter(t, "probegate_requests_total", map[string]string{"code": "502"}); n != 0 {
		t.Errorf("%v client requests were answered 502 (an upstream fault)", n)
	}
	for _, be := range bes {
		for _, h := range be.requests() {
			hosts := headerValues(h, "host")
			if len(hosts) != 1 || hosts[0] != be.ln.Addr().String() {
				t.Errorf("backend %s got Host %q, want its own", be.ln.Addr(), hosts)
			}
			if strings.Contains(strings.ToLower(string(h)), "authorization") || strings.Contains(string(h), "evil") {
				t.Errorf("a refused target reached a backend:\n%s", h)
			}
			if line, _, _ := strings.Cut(string(h), "\r\n"); !strings.HasSuffix(line, " HTTP/1.1") && !strings.HasSuffix(line, " HTTP/1.0") {
				t.Errorf("backend got request line %q", line)
			}
		}
	}
}

// The proxy's own saturation is no fault of the backend: with every
// connection to it busy (upstream.max_conns_per_backend), further requests
// get 503 from the proxy and the backend's breaker stays closed.
func TestNoFreeConnectionsIsNotABackendFailure(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	be := startRawBackend(t, func(c net.Conn, n int, head []byte) bool {
		if strings.HasPrefix(string(head), "POST /slow ") {
			<-release
		}
		return okResponder("")(c, n, head)
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cfg := testConfig(be.url())
	cfg.Upstream.MaxConnsPerBackend = 1
	cfg.Upstream.ConnectTimeout = config.Duration(50 * time.Millisecond) // also the wait for a free connection
	cfg.Breaker.ConsecutiveFailures = 3
	cfg.Breaker.OpenFor = config.Duration(time.Minute)
	tp := startProxy(t, cfg)

	slow := make(chan rawResponse, 1)
	go func() { slow <- rawDo(t, tp.addr, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}") }()
	waitUntil(t, 2*time.Second, func() bool { return len(be.requests()) == 1 }, "the slow request to hold the only connection")
	for i := 0; i < 10; i++ {
		r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		if r.status != 503 {
			t.Fatalf("request %d while saturated: status %d, want 503 (%q)", i, r.status, r.body)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "closed" {
		t.Fatalf("the proxy's own connection limit opened the breaker: %s", st)
	}
	once.Do(func() { close(release) })
	if r := <-slow; r.status != 200 {
		t.Fatalf("slow request: %d", r.status)
	}
	if r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status != 200 {
		t.Fatalf("after the slow request: %d", r.status)
	}
}
