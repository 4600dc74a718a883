package route

import (
	"io"
	"net"
	"strings"
	"testing"
)

// A client's Forwarded and X-Real-Ip fields, in any case, never reach a
// backend: the proxy sets neither, so a backend that trusts them would
// take the client's word for its origin. X-Forwarded-For reaches it as one
// field whose last entry is the peer the proxy saw (the client's own
// entries before it, as an appending proxy passes them; uvicorn, with the
// proxy among its forwarded_allow_ips, takes the last entry not of a
// trusted proxy). Both were forwarded as the client wrote them.
func TestClientCannotSpoofItsOriginToABackend(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		return err == nil
	})
	tp := startProxy(t, testConfig(be.url()))
	r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"+
		"Forwarded: for=10.0.0.1;proto=https\r\nforwarded: for=\"[2001:db8::1]\"\r\n"+
		"X-Real-Ip: 10.0.0.2\r\nx-real-ip: 10.0.0.3\r\nX-REAL-IP: 10.0.0.4\r\n"+
		"x-forwarded-for: 10.0.0.5\r\nX-Forwarded-For: 10.0.0.6, 10.0.0.7\r\n"+
		"Content-Length: 2\r\n\r\n{}")
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	hs := be.requests()
	if len(hs) != 1 {
		t.Fatalf("%d requests upstream", len(hs))
	}
	h := hs[0]
	for _, name := range []string{"Forwarded", "X-Real-Ip"} {
		if vs := headerValues(h, name); len(vs) != 0 {
			t.Errorf("%s reached the backend: %q", name, vs)
		}
	}
	xff := headerValues(h, "X-Forwarded-For")
	if len(xff) != 1 || !strings.HasSuffix(xff[0], ", 127.0.0.1") || !strings.Contains(xff[0], "10.0.0.5") {
		t.Errorf("X-Forwarded-For %q, want one field ending with the peer 127.0.0.1", xff)
	}
}
