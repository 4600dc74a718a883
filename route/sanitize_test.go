package route

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// Clients get a fixed message per status: bytes a broken or hostile
// backend wrote (garbage, header fragments, another exchange's data) never
// appear in the error the client reads.
func TestUpstreamBytesNeverReachErrorMessages(t *testing.T) {
	answers := map[string]string{
		"garbage":          "SECRET-GARBAGE\r\n\r\n",
		"broken header":    "HTTP/1.1 200 OK\r\nX-A: SECRET-VALUE\r\nSECRET-NO-COLON\r\n\r\n",
		"bad status":       "HTTP/1.1 2x0 SECRET-STATUS\r\n\r\n",
		"bad length":       "HTTP/1.1 200 OK\r\nContent-Length: SECRET-LENGTH\r\n\r\n",
		"bad chunk header": "HTTP/1.1 200 OK\r\nTransfer-Encoding: SECRET-TE\r\n\r\n",
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			be := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
				c.Write([]byte(answer))
				return false
			})
			tp := startProxy(t, testConfig(be.url()))
			r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
			if r.status != 502 {
				t.Fatalf("status %d, want 502 (%q)", r.status, r.body)
			}
			if strings.Contains(r.head+r.body, "SECRET") {
				t.Fatalf("upstream bytes reached the client:\n%s\n\n%s", r.head, r.body)
			}
			var env struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &env); err != nil || env.Error.Message != messageFor(502) {
				t.Fatalf("body %q, want the fixed 502 envelope", r.body)
			}
		})
	}
}
