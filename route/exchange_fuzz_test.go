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

// goodAnswer is what a well-behaved backend answers in FuzzProxyExchange
// when the fuzzer gives no upstream bytes.
const goodAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

// canaryBody is the answer to the request that follows every fuzzed
// exchange: the next client must get exactly it.
const canaryBody = `{"canary":"ok"}`

// hopNames are header names that must never reach a backend, in any case.
var hopNames = []string{"keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade"}

// FuzzProxyExchange drives a whole client request and a whole upstream
// answer through a real proxy over real sockets, then one more exchange on
// the same (single) upstream connection slot, and checks the invariants:
//
//   - no hop-by-hop header, in any case, and none the client's Connection
//     named, reaches the backend, and every request line it gets is
//     origin-form HTTP/1.1 or HTTP/1.0 with the backend's own Host;
//   - no byte of one exchange reaches another: the next client gets its
//     own answer, byte for byte, whatever the previous backend wrote
//     (stray bytes, a 101 and a tunnel, garbage);
//   - breakers are unaffected by client faults: with a well-behaved
//     backend, whatever the client sent, the breaker (opening at the first
//     failure here) stays closed.
//
// The seed corpus is under testdata/fuzz/FuzzProxyExchange; `go test` runs it.
func FuzzProxyExchange(f *testing.F) {
	f.Add([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"), []byte(""))
	f.Fuzz(func(t *testing.T, req, answer []byte) {
		good := len(answer) == 0
		if good {
			answer = []byte(goodAnswer)
		}
		be := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
			if bytes.HasPrefix(head, []byte("GET /canary ")) {
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+itoa(len(canaryBody))+"\r\n\r\n"+canaryBody)
				return err == nil
			}
			_, err := c.Write(answer)
			return err == nil // keep the connection: what follows stays unread
		})
		cfg := testConfig(be.url())
		cfg.Server.ReadTimeout = config.Duration(300 * time.Millisecond)
		cfg.Upstream.FirstByteTimeout = config.Duration(300 * time.Millisecond)
		cfg.Upstream.IdleTimeout = config.Duration(300 * time.Millisecond)
		cfg.Upstream.ConnectTimeout = config.Duration(2 * time.Second)
		cfg.Upstream.MaxConnsPerBackend = 1 // the next exchange takes the same slot
		cfg.Breaker.ConsecutiveFailures = 1000
		if good {
			cfg.Breaker.ConsecutiveFailures = 1
		}
		tp := startProxy(t, cfg)

		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write(req)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
		c.Close()

		if good {
			if st := tp.DebugBackends()[0].Breaker; st != "closed" {
				t.Fatalf("a client's request opened the breaker of a well-behaved backend: %q", req)
			}
		}
		r := rawDo(t, tp.addr, "GET /canary HTTP/1.1\r\nHost: x\r\n\r\n")
		if r.status != 200 || r.body != canaryBody {
			t.Fatalf("the next client got %d %q, want its own answer (previous answer %q)", r.status, r.body, answer)
		}
		clientConn := strings.ToLower(string(headerLine(req, "connection")))
		for _, h := range be.requests() {
			line, _, _ := bytes.Cut(h, []byte("\r\n"))
			fs := bytes.Fields(line)
			if len(fs) != 3 || fs[1][0] != '/' || (string(fs[2]) != "HTTP/1.1" && string(fs[2]) != "HTTP/1.0") {
				t.Fatalf("backend got request line %q", line)
			}
			if hosts := headerValues(h, "host"); len(hosts) != 1 || hosts[0] != be.ln.Addr().String() {
				t.Fatalf("backend got Host %q", hosts)
			}
			for _, name := range hopNames {
				if vs := headerValues(h, name); len(vs) != 0 {
					t.Fatalf("hop-by-hop %q reached the backend: %q", name, h)
				}
			}
			for _, tok := range strings.Split(clientConn, ",") {
				if tok = strings.TrimSpace(tok); tok != "" && tok != "close" && tok != "keep-alive" && tok != "host" &&
					tok != "content-length" && len(headerValues(h, tok)) != 0 {
					t.Fatalf("%q, named in the client's Connection, reached the backend: %q", tok, h)
				}
			}
			for _, v := range headerValues(h, "connection") {
				if !strings.EqualFold(v, "close") && !strings.EqualFold(v, "keep-alive") {
					t.Fatalf("the client's Connection reached the backend: %q", v)
				}
			}
		}
	})
}

// headerLine returns the value of the first header field named name
// (any case) in a raw request, or nil.
func headerLine(req []byte, name string) []byte {
	head, _, _ := bytes.Cut(req, []byte("\r\n\r\n"))
	for _, l := range bytes.Split(head, []byte("\r\n"))[1:] {
		if k, v, ok := bytes.Cut(l, []byte(":")); ok && strings.EqualFold(string(bytes.TrimSpace(k)), name) {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}
