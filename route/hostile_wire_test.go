package route

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request's cost is bounded by what the proxy takes of it: fasthttp
// reads and discards chunk extensions whatever their length, so a 2-byte
// body could come with megabytes of extension (all of it read, the
// request then forwarded), and a client could keep the proxy reading for
// all of server.read_timeout. Each request may now take at most its head
// and wireFactor times server.max_body_bytes on the wire, else 413 (the
// envelope) and the connection closes. Legitimate framing never comes
// near it: a body just under the limit in one-byte chunks, and requests
// in a row on one connection whose extensions together exceed it (the
// budget is per request), are forwarded.
func TestChunkExtensionsAreBounded(t *testing.T) {
	be := startRawBackend(t, okResponder(""))
	cfg := testConfig(be.url())
	cfg.Server.MaxBodyBytes = 1 << 20
	tp := startProxy(t, cfg)
	const head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	ext := func(n int) string { return "2;" + strings.Repeat("e", n) + "\r\n{}\r\n0\r\n\r\n" }

	t.Run("extension over the budget", func(t *testing.T) {
		before := len(be.requests())
		r := rawDo(t, tp.addr, head+ext(9<<20))
		if r.status != 413 || !strings.Contains(r.body, `"code":413`) || !strings.Contains(r.body, "server.max_body_bytes") {
			t.Fatalf("a 2-byte body with a 9 MiB chunk extension: %d %q, want the 413 envelope naming server.max_body_bytes", r.status, r.body)
		}
		if n := len(be.requests()) - before; n != 0 {
			t.Errorf("the request reached the backend %d times", n)
		}
	})

	t.Run("one-byte chunks under the limit", func(t *testing.T) {
		body := strings.Repeat("1\r\nx\r\n", 1<<20-64) + "0\r\n\r\n"
		if r := rawDo(t, tp.addr, head+body); r.status != 200 {
			t.Fatalf("a body just under server.max_body_bytes in one-byte chunks: %d %q, want 200", r.status, r.body)
		}
	})

	t.Run("budget per request", func(t *testing.T) {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// 12 MiB through a -race proxy: 20 s was too short for a
		// starved process (s14: "request 5: i/o timeout" at 23 s).
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReader(c)
		for i := range 12 { // 12 MiB of extensions in all, over one request's budget
			if _, err := io.WriteString(c, head+ext(1<<20)); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("request %d on a kept-alive connection, 1 MiB of extension: %d, want 200", i, resp.StatusCode)
			}
		}
	})
}
