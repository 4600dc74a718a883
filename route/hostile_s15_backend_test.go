package route

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// A backend's answer with both Content-Length and Transfer-Encoding is a
// malformed answer: the client gets the 502 envelope and the connection
// is closed, never reused. RFC 9112 section 6.3 lets a recipient read
// such a message by its Transfer-Encoding but says it "ought to be handled
// as an error": it is the shape of response splitting, and whatever sits
// between the proxy and the model server may have framed it by the other
// field, leaving the bytes past one framing to be read as the next
// exchange's answer. nginx answers 502 ("upstream sent Content-Length and
// Transfer-Encoding headers at the same time"). fasthttp reads it by
// Transfer-Encoding and drops the Content-Length: the proxy passed it on
// as a 200 and sent the next request over the same connection.
func TestBackendAnswerWithBothFramingsIsMalformed(t *testing.T) {
	for _, head := range []string{
		"Transfer-Encoding: chunked\r\nContent-Length: 2",
		"Content-Length: 2\r\nTransfer-Encoding: chunked",
		"content-length: 14\r\ntransfer-encoding: chunked",
		"Content-Length: 0\r\nTransfer-Encoding: chunked",
	} {
		name := strings.ReplaceAll(head, "\r\n", ", ")
		t.Run(name, func(t *testing.T) {
			var n atomic.Int64
			be := startRawBackend(t, func(c net.Conn, _ int, h []byte) bool {
				if canary, ok := answerCanary(c, h); canary {
					return ok
				}
				if n.Add(1) == 1 {
					_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"+head+"\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
					return err == nil
				}
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"own\":1}")
				return err == nil
			})
			cfg := testConfig(be.url())
			cfg.Upstream.MaxConnsPerBackend = 1
			cfg.Upstream.Retries = 0
			tp := startProxy(t, cfg)
			const req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
			r := rawDo(t, tp.addr, req)
			if r.status != 502 || !strings.Contains(r.body, `"code":502`) {
				t.Fatalf("both framings: %d %q, want the 502 envelope", r.status, r.body)
			}
			r = rawDo(t, tp.addr, req)
			if r.status != 200 || r.body != `{"own":1}` {
				t.Fatalf("next request: %d %q, want its own answer", r.status, r.body)
			}
			var posts int
			for _, l := range be.connLogs() {
				if bytes.Contains(l, []byte("POST /v1/completions ")) {
					posts++
				}
			}
			if posts != 2 {
				t.Fatalf("the two requests went over %d connection(s), want 2: the answer's connection is never reused", posts)
			}
		})
	}
}

// Bytes a backend sends past an answer that has no body (to HEAD, a 204,
// a 304) retire its connection, as stray bytes after any other answer
// do: they belong to no exchange, and a backend that sends them (one that
// answers HEAD as GET) is out of step with its own framing. When they
// arrived in the same read as the head, the transport dropped them with
// its read buffer and gave the connection back to the pool: the next
// request went out on it.
func TestStrayBytesAfterABodilessAnswerRetireTheConnection(t *testing.T) {
	for _, c := range []struct{ req, answer string }{
		{"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"leak\":1}"},
		{"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n{\"leak\":1}"},
		{"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 304 Not Modified\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"leak\":1}"},
	} {
		t.Run(strings.Fields(c.answer)[1], func(t *testing.T) {
			var n atomic.Int64
			be := startRawBackend(t, func(conn net.Conn, _ int, h []byte) bool {
				if canary, ok := answerCanary(conn, h); canary {
					return ok
				}
				if n.Add(1) == 1 {
					_, err := io.WriteString(conn, c.answer) // one write: head and stray bytes
					return err == nil
				}
				_, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"own\":1}")
				return err == nil
			})
			cfg := testConfig(be.url())
			cfg.Upstream.MaxConnsPerBackend = 1
			tp := startProxy(t, cfg)
			if r := rawDo(t, tp.addr, c.req); strings.Contains(r.body, "leak") {
				t.Fatalf("first answer carried the stray bytes: %q", r.body)
			}
			r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
			if r.status != 200 || r.body != `{"own":1}` {
				t.Fatalf("next request: %d %q, want its own answer", r.status, r.body)
			}
			if got := len(be.connLogs()); got != 2 {
				t.Fatalf("%d upstream connection(s), want 2: the one with stray bytes is never reused", got)
			}
		})
	}
}

// answerCanary answers the proxy's canary request (canary.go) with a
// healthy answer: canary reports whether head was one, ok whether the
// answer was written.
func answerCanary(c net.Conn, head []byte) (canary, ok bool) {
	if !bytes.HasPrefix(head, []byte("GET /canary ")) {
		return false, false
	}
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+itoa(len(canaryBody))+"\r\n\r\n"+canaryBody)
	return true, err == nil
}

// BenchmarkReadHead is the cost of reading a vLLM (uvicorn) answer's head,
// and the part of it framingBoth takes.
func BenchmarkReadHead(b *testing.B) {
	for name, head := range map[string]string{
		"json": "HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 14:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 512\r\ncontent-type: application/json\r\n\r\n",
		"sse":  "HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 14:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
	} {
		sr := strings.NewReader(head)
		br := bufio.NewReaderSize(sr, upstreamReadBuffer)
		var h fasthttp.ResponseHeader
		b.Run(name+"/readHead", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sr.Reset(head)
				br.Reset(sr)
				h.Reset()
				if err := readHead(&h, br); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/framingBoth", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sr.Reset(head)
				br.Reset(sr)
				if framingBoth(br) {
					b.Fatal("both")
				}
			}
		})
	}
}
