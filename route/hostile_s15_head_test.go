package route

import (
	"io"
	"net"
	"strings"
	"testing"
)

// An answer with no body (to HEAD, a 204, a 304) is settled as the
// backend's answer: counted under its status, a success for the breaker,
// and a HEAD answer keeps the backend's Content-Length (RFC 9110 section
// 9.3.2: the fields a GET would get). It went through the streaming path,
// whose body fasthttp never reads for HEAD: every HEAD request was
// counted as 499 (a client that went away) and reached the client with
// Content-Length: 0.
func TestAnswerWithoutABodyIsSettledAsAnswered(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
		answer := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n"
		if strings.HasPrefix(string(head), "POST ") {
			answer = "HTTP/1.1 204 No Content\r\n\r\n"
		}
		_, err := io.WriteString(c, answer)
		return err == nil
	})
	tp := startProxy(t, testConfig(be.url()))
	for range 3 {
		r := rawDo(t, tp.addr, "HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
		if r.status != 200 || !strings.Contains(r.head, "\r\nContent-Length: 10") {
			t.Fatalf("HEAD: %d %q, want 200 with the backend's Content-Length: 10", r.status, r.head)
		}
		if r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); r.status != 204 {
			t.Fatalf("POST: %d, want 204", r.status)
		}
	}
	for code, want := range map[string]float64{"200": 3, "204": 3, "499": 0} {
		if got := tp.counter(t, "probegate_requests_total", map[string]string{"code": code}); got != want {
			t.Errorf("requests_total{code=%q} = %v, want %v", code, got, want)
		}
	}
}
