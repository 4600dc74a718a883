package route

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/probegate/probegate/internal/config"
)

// A backend's status code outside 100-599 (RFC 9110 section 15: "all
// valid status codes are within the range of 100 to 599") is a malformed
// answer: the client gets the 502 envelope, the backend's breaker counts
// a failure, and the code never becomes a label of requests_total.
// fasthttp reads "000" as no status and reports it as 200, so such an
// answer reached the client as "200" and counted as the backend's success;
// 600 to 999 were passed on as they came, one label value each. Each
// answer also carries stray bytes: the next exchange on the same (single)
// connection slot gets its own answer.
func TestStatusOutsideTheValidRangeIsAMalformedAnswer(t *testing.T) {
	lines := []string{
		"HTTP/1.1 000 OK",
		"HTTP/1.1 000",
		"HTTP/1.1    000 OK",      // fasthttp skips the spaces
		"\r\n\r\nHTTP/1.1 000 OK", // and empty lines before the status line
		"HTTP/1.0 000 OK",
		"HTTP/1.1 600 Beyond",
		"HTTP/1.1 999 Beyond",
		"HTTP/1.1 099 Below",
	}
	for _, line := range lines {
		name := strings.TrimSpace(line)
		t.Run(name, func(t *testing.T) {
			be := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
				if bytes.HasPrefix(head, []byte("GET /canary ")) {
					_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+itoa(len(canaryBody))+"\r\n\r\n"+canaryBody)
					return err == nil
				}
				_, err := io.WriteString(c, line+"\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"ok\":true}\n")
				return err == nil
			})
			cfg := testConfig(be.url())
			cfg.Upstream.MaxConnsPerBackend = 1
			cfg.Breaker.ConsecutiveFailures = 2
			cfg.Breaker.OpenFor = config.Duration(60e9)
			tp := startProxy(t, cfg)
			for i := range 2 {
				r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
				if r.status != 502 || !strings.Contains(r.body, `"code":502`) {
					t.Fatalf("request %d: %d %q, want the 502 envelope", i, r.status, r.body)
				}
			}
			if st := tp.DebugBackends()[0].Breaker; st != "open" {
				t.Errorf("breaker %s after %d malformed answers, want open", st, cfg.Breaker.ConsecutiveFailures)
			}
			for _, code := range []string{"0", "200", "600", "999", "99"} {
				if n := tp.counter(t, "probegate_requests_total", map[string]string{"code": code}); n != 0 {
					t.Errorf("requests_total{code=%q} = %v", code, n)
				}
			}
		})
	}
	// A valid code at either end of the range is passed on.
	for _, line := range []string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", "HTTP/1.1 599 Odd", "HTTP/1.1 299 Odd", "HTTP/1.1 200 000"} {
		be := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
			_, err := io.WriteString(c, line+"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
			return err == nil
		})
		cfg := testConfig(be.url())
		cfg.Upstream.Retries = 0
		tp := startProxy(t, cfg)
		final := line[strings.LastIndex(line, "HTTP/1.1 "):]
		want := final[len("HTTP/1.1 "):][:3]
		r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		if itoa(r.status) != want {
			t.Errorf("%q: status %d, want %s", line, r.status, want)
		}
	}
}
