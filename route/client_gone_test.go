package route

import (
	"io"
	"net"
	"testing"
	"time"
)

// Clients that go away (reset) while the proxy waits for the response
// head, while it holds the head for the first body bytes, or in mid-stream
// are counted as 499 and never against the backend: with
// breaker.consecutive_failures 1, three of each leave the breaker closed.
func TestClientsGoingAwayNeverCountAgainstTheBackend(t *testing.T) {
	for _, shape := range []string{"before_head", "before_body", "mid_stream"} {
		t.Run(shape, func(t *testing.T) {
			up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
				if shape == "before_head" {
					time.Sleep(300 * time.Millisecond)
				}
				_, _ = io.WriteString(c, hhSSEHead)
				if shape == "before_body" {
					time.Sleep(300 * time.Millisecond)
				}
				_, _ = io.WriteString(c, "d\r\ndata: first\n\n\r\n")
				time.Sleep(300 * time.Millisecond)
				_, err := io.WriteString(c, "d\r\ndata: again\n\n\r\n0\r\n\r\n")
				return err == nil
			})
			cfg := testConfig(up.url())
			cfg.Breaker.ConsecutiveFailures = 1
			tp := startProxy(t, cfg)
			for range 3 {
				c, err := net.Dial("tcp", tp.addr)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{\"stream\":true}"); err != nil {
					t.Fatal(err)
				}
				wait := 100 * time.Millisecond
				if shape == "mid_stream" {
					wait = 150 * time.Millisecond // after the first frame
				}
				time.Sleep(wait)
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			ftPoll(t, 3*time.Second, "three 499s", func() bool {
				return tp.counter(t, "probegate_requests_total", map[string]string{"code": "499"}) == 3
			})
			if st := tp.DebugBackends()[0].Breaker; st != "closed" {
				t.Fatalf("breaker %s after clients went away", st)
			}
		})
	}
}
