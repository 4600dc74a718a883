package route

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// The check before a reuse (upstreamguard.go) finds stray bytes however
// long the connection idled in the pool: also after the read deadline the
// last exchange armed on its socket (upstream.first_byte_timeout or
// idle_timeout, here 200 ms, below upstream.idle_conn_ttl) has passed. A
// peek through the socket's poller refused to look once that deadline was
// gone, so the check saw nothing and the next client got the stray answer
// as its own: over TLS on every request, over plain TCP on requests longer
// than one held write (found on a starved -race run of
// TestStrayTLSUpstreamBytesNeverReachAnotherClient, whose 2 s timeouts
// passed while the process was stopped).
func TestStrayBytesFoundAfterTheLastDeadlinePassed(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nsecret-of-A"
	const bodyB = `{"for":"B"}`
	bigB := `{"pad":"` + strings.Repeat("b", 8<<10) + `"}` // longer than maxHeldRequest
	for _, tc := range []struct {
		name, scheme string
		bodyB        string
	}{
		{"https", "https", "{}"},
		{"http/large_request", "http", bigB},
		{"http/small_request", "http", "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			written := make(chan string, 8) // the path whose stray bytes left the backend
			respond := func(c net.Conn, n int, head []byte) bool {
				switch {
				case bytes.HasPrefix(head, []byte("POST /b ")):
					_, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(bodyB)) + "\r\n\r\n" + bodyB))
					return err == nil
				case !bytes.HasPrefix(head, []byte("POST /a")):
					return okResponder("")(c, n, head)
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"))
				time.Sleep(20 * time.Millisecond)
				c.Write([]byte(stray))
				written <- strings.Fields(string(head))[1]
				return true
			}
			var be *rawBackend
			if tc.scheme == "https" {
				be = startTLSRawBackend(t, 0, respond)
			} else {
				be = startRawBackend(t, respond)
			}
			cfg := testConfig(be.url())
			cfg.Upstream.MaxConnsPerBackend = 1 // one connection: reuse is forced
			cfg.Upstream.FirstByteTimeout = config.Duration(200 * time.Millisecond)
			cfg.Upstream.IdleTimeout = config.Duration(200 * time.Millisecond)
			tp := startProxy(t, cfg)
			// do sends req(i) until its answer is no 504 (at most 10
			// times): an answer must come within the short deadline, which
			// a starved process can miss.
			do := func(req func(i int) string) (rawResponse, int) {
				for i := 0; ; i++ {
					r := rawDo(t, tp.addr, req(i))
					if r.status != 504 || i == 9 {
						return r, i
					}
				}
			}
			a, i := do(func(i int) string { return "POST /a" + itoa(i) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" })
			if a.status != 200 || a.body != "{}" {
				t.Fatalf("client A got %d %.60q, want its own answer", a.status, a.body)
			}
			for p := ""; p != "/a"+itoa(i); {
				select {
				case p = <-written:
				case <-time.After(5 * time.Second):
					t.Fatal("the backend never wrote its stray bytes")
				}
			}
			// Past every deadline A's exchange armed (200 ms + 1/16), well
			// within idle_conn_ttl (4 s): the connection is still pooled.
			time.Sleep(400 * time.Millisecond)
			b, _ := do(func(int) string {
				return "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: " + itoa(len(tc.bodyB)) + "\r\n\r\n" + tc.bodyB
			})
			if strings.Contains(b.head+b.body, "secret") {
				t.Fatalf("client B got A's stray bytes: %d %q", b.status, b.body)
			}
			if b.status != 200 || b.body != bodyB {
				t.Fatalf("client B got %d %q, want its own %q", b.status, b.body, bodyB)
			}
		})
	}
}
