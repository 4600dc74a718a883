//go:build linux

package evloop

import (
	"testing"
	"time"
)

// Hostile clients and upstreams against the loop, over real sockets
// (session 16's red team; route's equivalents are route/hostile_*_test.go).

// A client's Connection header cannot take the body's length off the
// request that goes upstream: "Connection: Content-Length" made the loop
// drop the field (a header the Connection field names is hop-by-hop) while
// it still sent the body, so the upstream read a POST without a body and
// the body as a second request of the client's choosing, on a pooled
// connection, never judged by the Handler (route.allow_paths once wired:
// /sleep, /v1/load_lora_adapter, ...). Now the upstream gets one request
// with its body; the smuggled one never arrives.
func TestConnectionCannotStripTheBodyLength(t *testing.T) {
	smuggled := "POST /sleep?level=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	for _, conn := range []string{"Content-Length", "keep-alive, content-length", "CONTENT-LENGTH, x-a"} {
		t.Run(conn, func(t *testing.T) {
			up := startUpstream(t, nil)
			h := newHandler(up.addr())
			s := startLoop(t, h, newFakeClock(), nil)
			c := dial(t, s)
			c.send(post("/v1/completions", smuggled, "Connection: "+conn+"\r\n"))
			status, _, body := c.response()
			if status != 200 || string(body) != "ok:/v1/completions" {
				t.Fatalf("answer %d %q", status, body)
			}
			if r := up.next(t); r.path != "/v1/completions" || r.body != smuggled {
				t.Fatalf("upstream got %s %s with body %q, want the client's body", r.method, r.path, r.body)
			}
			// A smuggled request would be read right after the first.
			time.Sleep(100 * time.Millisecond)
			up.none(t)
		})
	}
}
