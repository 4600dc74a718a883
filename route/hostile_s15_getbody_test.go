package route

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// A GET or HEAD request carrying a body (a Content-Length above 0, or
// chunks that hold bytes) is refused with the 400 envelope and its connection
// closed; nothing reaches a backend. RFC 9110 section 9.3.1 gives such a
// body no meaning and names it a smuggling vector: a backend that ignores
// Content-Length on GET (the CL.0 class) reads the body as the next
// request on the proxy's pooled connection, which reaches the pod's
// operator endpoints (/sleep, /v1/load_lora_adapter) past
// route.allow_paths. It was forwarded with its body.
func TestBodyOnGetOrHeadIsRefused(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		return err == nil
	})
	cfg := testConfig(be.url())
	cfg.Route.AllowPaths = config.Default().Route.AllowPaths
	tp := startProxy(t, cfg)
	smuggled := "POST /sleep HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	for _, req := range []string{
		"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: " + itoa(len(smuggled)) + "\r\n\r\n" + smuggled,
		"GET /v1/models HTTP/1.1\r\nHost: x\r\ncontent-length: 1\r\n\r\nx",
		"GET /v1/models HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.TrimLeft(itoaHex(len(smuggled)), "0") + "\r\n" + smuggled + "\r\n0\r\n\r\n",
		"HEAD /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"GET /v1/models HTTP/1.0\r\nContent-Length: 1\r\n\r\nx",
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// A second request follows in the same write: the connection
		// must close after the refusal, unanswered.
		if _, err := io.WriteString(c, req+"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(c)
		c.Close()
		if !bytes.HasPrefix(all, []byte("HTTP/1.1 400 ")) || bytes.Count(all, []byte("HTTP/1.1 ")) != 1 {
			t.Errorf("%q: got %q, want one 400 and a close", req, all)
		}
		if !strings.HasPrefix(req, "HEAD") && !bytes.Contains(all, []byte(`"code":400`)) {
			t.Errorf("%q: got %q, want the 400 envelope", req, all)
		}
	}
	if n := len(be.requests()); n != 0 {
		t.Fatalf("backend got %d requests, want none: %q", n, be.requests())
	}
	// Without a body (Content-Length: 0 and empty chunks included) GET
	// goes through, and reaches the backend with no body.
	for _, req := range []string{
		"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: x\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		if r := rawDo(t, tp.addr, req); r.status != 200 {
			t.Errorf("%q: %d, want 200", req, r.status)
		}
	}
	for _, h := range be.requests() {
		if len(headerValues(h, "Content-Length")) > 0 && headerValues(h, "Content-Length")[0] != "0" || len(headerValues(h, "Transfer-Encoding")) > 0 {
			t.Errorf("GET forwarded with a body: %q", h)
		}
	}
}

func itoaHex(n int) string {
	const digits = "0123456789abcdef"
	s := ""
	for ; n > 0; n /= 16 {
		s = string(digits[n%16]) + s
	}
	return s
}
