package route

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// rawUpstream is a model server that records the raw bytes of every request
// head it receives and answers 200 with an empty body.
type rawUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	heads [][]byte
	wg    sync.WaitGroup
}

func startRawUpstream(t testing.TB) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() { defer u.wg.Done(); u.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var head []byte
		cl := 0
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			head = append(head, line...)
			if k, v, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":")); ok && strings.EqualFold(string(k), "content-length") {
				fmt.Sscan(strings.TrimSpace(string(v)), &cl)
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := io.CopyN(io.Discard, br, int64(cl)); err != nil {
			return
		}
		u.mu.Lock()
		u.heads = append(u.heads, head)
		u.mu.Unlock()
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"); err != nil {
			return
		}
	}
}

func (u *rawUpstream) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.heads...)
}

// rawExchange writes req to the proxy on a fresh connection and returns the
// status line of the answer ("" if the connection closed without one).
func rawExchange(t testing.TB, addr, req string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.Status, string(b)
}

// The proxy forwards only to configured backends: an absolute request URI or
// a Host header naming another address reaches that address never, and a
// client cannot open a backend's breaker with such requests.
func TestOnlyConfiguredBackendsAreReached(t *testing.T) {
	var victimHits atomic.Int64
	victim := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		victimHits.Add(1)
		w.WriteHeader(200)
	})
	vaddr := strings.TrimPrefix(victim.URL, "http://")
	backend := startRawUpstream(t)
	tp := startProxy(t, testConfig("http://"+backend.ln.Addr().String()))

	tricks := map[string]string{
		"absolute http URI":        "GET http://" + vaddr + "/v1/models HTTP/1.1\r\nHost: " + vaddr + "\r\n\r\n",
		"absolute https URI":       "POST https://" + vaddr + "/v1/completions HTTP/1.1\r\nHost: " + vaddr + "\r\nContent-Length: 2\r\n\r\n{}",
		"absolute URI, other Host": "GET http://" + vaddr + "/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"Host header":              "GET /v1/models HTTP/1.1\r\nHost: " + vaddr + "\r\n\r\n",
		"CONNECT":                  "CONNECT " + vaddr + " HTTP/1.1\r\nHost: " + vaddr + "\r\n\r\n",
		"X-Forwarded-Host":         "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Forwarded-Host: " + vaddr + "\r\n\r\n",
	}
	for i := 0; i < 3; i++ { // more than breaker.consecutive_failures times
		for name, req := range tricks {
			status, body := rawExchange(t, tp.addr, req)
			if strings.HasPrefix(status, "5") {
				t.Errorf("%s: a client's request shape must not fail as a backend fault: %s %s", name, status, body)
			}
		}
	}
	if n := victimHits.Load(); n != 0 {
		t.Fatalf("an unconfigured address received %d requests", n)
	}
	for _, b := range tp.DebugBackends() {
		if b.Breaker != "closed" {
			t.Fatalf("client request shapes opened the breaker of %s: %s", b.Address, b.Breaker)
		}
	}
	resp := post(t, tp.url("/v1/completions"), `{}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a normal request after the tricks: %d", resp.StatusCode)
	}
	// Whatever reached the backend carried an origin-form request line.
	for _, h := range backend.requests() {
		line, _, _ := bytes.Cut(h, []byte("\r\n"))
		if f := bytes.Fields(line); len(f) != 3 || f[1][0] != '/' {
			t.Errorf("backend got request line %q, want origin-form", line)
		}
	}
}

// Request smuggling and header injection: a request with both
// Content-Length and Transfer-Encoding is refused, and no CR or LF ever
// ends up inside a forwarded header value.
func TestRequestSmugglingAndHeaderInjection(t *testing.T) {
	backend := startRawUpstream(t)
	tp := startProxy(t, testConfig("http://"+backend.ln.Addr().String()))

	t.Run("Content-Length with Transfer-Encoding", func(t *testing.T) {
		before := len(backend.requests())
		req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"2\r\n{}\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
		status, _ := rawExchange(t, tp.addr, req)
		if !strings.HasPrefix(status, "400") {
			t.Errorf("status %q, want 400", status)
		}
		for _, h := range backend.requests()[before:] {
			if bytes.Contains(h, []byte("/smuggled")) {
				t.Fatal("a smuggled request reached the backend")
			}
		}
		if n := len(backend.requests()) - before; n != 0 {
			t.Errorf("the ambiguous request reached the backend %d times", n)
		}
	})

	injections := map[string]string{
		"obs-fold":          "GET /a HTTP/1.1\r\nHost: x\r\nX-Test: a\r\n X-Injected: yes\r\n\r\n",
		"bare CR":           "GET /b HTTP/1.1\r\nHost: x\r\nX-Test: a\rX-Injected: yes\r\n\r\n",
		"bare LF":           "GET /c HTTP/1.1\r\nHost: x\r\nX-Test: a\nX-Injected: yes\r\n\r\n",
		"CR in request id":  "GET /d HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rX-Injected: yes\r\n\r\n",
		"CR in forwarded":   "GET /e HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\rX-Injected: yes\r\n\r\n",
		"NUL in value":      "GET /f HTTP/1.1\r\nHost: x\r\nX-Test: a\x00b\r\n\r\n",
		"space before name": "GET /g HTTP/1.1\r\nHost: x\r\n X-Injected: yes\r\n\r\n",
	}
	for name, req := range injections {
		t.Run(name, func(t *testing.T) {
			before := len(backend.requests())
			status, _ := rawExchange(t, tp.addr, req)
			if status != "" && !strings.HasPrefix(status, "200") && !strings.HasPrefix(status, "400") {
				t.Errorf("status %q, want 200 (sanitized) or 400 (refused)", status)
			}
			for _, h := range backend.requests()[before:] {
				// A bare LF ends a header line for the proxy (RFC 9112
				// section 2.2 allows it) and it forwards CRLF lines: the
				// backend parses exactly the headers the proxy saw.
				ftCheckHead(t, h, name != "bare LF")
			}
		})
	}
}

// A Transfer-Encoding other than chunked leaves a request's length
// undetermined (RFC 9112 section 6.3): the proxy answers 400 and closes,
// rather than reading no body and parsing that body as the connection's
// next request, which a front proxy delimiting the body otherwise would
// have let one client's bytes become a request of their own (TE.0).
func TestTransferEncodingOtherThanChunkedIsRefused(t *testing.T) {
	backend := startRawUpstream(t)
	tp := startProxy(t, withDefaultAllow(testConfig("http://"+backend.ln.Addr().String())))
	for _, te := range []string{"Transfer-Encoding: identity", "transfer-encoding: IDENTITY", "TRANSFER-ENCODING: identity\t"} {
		before := len(backend.requests())
		r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"+te+"\r\n\r\n"+
			"GET /v1/models?smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
		if r.status != 400 || !strings.Contains(r.body, `"code":400`) || !strings.Contains(strings.ToLower(r.head), "connection: close") {
			t.Errorf("%q: status %d, head %q, body %q; want a 400 envelope and Connection: close", te, r.status, r.head, r.body)
		}
		if seen := backend.requests()[before:]; len(seen) != 0 {
			t.Errorf("%q: the backend saw %q", te, seen)
		}
	}
	// Chunked, in any case, is still read and forwarded.
	r := rawDo(t, tp.addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
	if r.status != 200 {
		t.Errorf("chunked request: status %d, want 200", r.status)
	}
}

// A field name must be a token (RFC 9110 section 5.1): fasthttp accepts a
// name with a space inside and would forward it as written, for the
// backend's own parser to refuse with a plain-text 400 or to read its own
// way. The proxy answers such a request itself, in the envelope.
func TestHeaderNameWithSpaceIsRefused(t *testing.T) {
	backend := startRawUpstream(t)
	tp := startProxy(t, withDefaultAllow(testConfig("http://"+backend.ln.Addr().String())))
	for _, field := range []string{"Bad Name: y", "Transfer-Encoding x: chunked", "X-Request Id: forged"} {
		before := len(backend.requests())
		r := rawDo(t, tp.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n"+field+"\r\n\r\n")
		if r.status != 400 || !strings.Contains(r.body, `"code":400`) || !strings.Contains(strings.ToLower(r.head), "connection: close") {
			t.Errorf("%q: status %d, head %q, body %q; want a 400 envelope and Connection: close", field, r.status, r.head, r.body)
		}
		if seen := backend.requests()[before:]; len(seen) != 0 {
			t.Errorf("%q: the backend saw %q", field, seen)
		}
	}
}

// Trailer fields of a chunked request never become header fields upstream
// (RFC 9110 section 6.5.1 forbids merging them): the proxy forwards the body
// with a Content-Length, so a trailer would have reached the backend as a
// header that a gateway in front, which checks the header section, never
// saw. The proxy refuses such a request in the envelope.
func TestRequestTrailersNeverBecomeHeaders(t *testing.T) {
	backend := startRawUpstream(t)
	tp := startProxy(t, withDefaultAllow(testConfig("http://"+backend.ln.Addr().String())))
	const chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-User: alice\r\nTransfer-Encoding: chunked\r\n"
	for name, req := range map[string]string{
		"unannounced": chunked + "\r\n2\r\n{}\r\n0\r\nX-User: admin\r\n\r\n",
		"announced":   chunked + "Trailer: X-Request-Id\r\n\r\n2\r\n{}\r\n0\r\nX-Request-Id: forged\r\n\r\n",
		"bad name":    chunked + "\r\n2\r\n{}\r\n0\r\nBad Name: y\r\n\r\n",
	} {
		before := len(backend.requests())
		r := rawDo(t, tp.addr, req)
		if r.status != 400 || !strings.Contains(r.body, `"code":400`) {
			t.Errorf("%s: status %d, body %q; want a 400 envelope", name, r.status, r.body)
		}
		if seen := backend.requests()[before:]; len(seen) != 0 {
			t.Errorf("%s: the backend saw %q", name, seen)
		}
	}
	// A chunked body without trailers is forwarded.
	if r := rawDo(t, tp.addr, chunked+"\r\n2\r\n{}\r\n0\r\n\r\n"); r.status != 200 {
		t.Errorf("chunked request without trailers: status %d, want 200", r.status)
	}
}

// ftCheckHead fails if a forwarded request head has a header line with a bare
// CR or LF, a NUL, or a line that was injected as its own header.
func ftCheckHead(t testing.TB, h []byte, noInjected bool) {
	t.Helper()
	body := bytes.TrimSuffix(h, []byte("\r\n\r\n"))
	for _, line := range bytes.Split(body, []byte("\r\n")) {
		if bytes.ContainsAny(line, "\r\n\x00") {
			t.Errorf("forwarded header line carries CR, LF or NUL: %q", line)
		}
		if noInjected && bytes.HasPrefix(bytes.ToLower(bytes.TrimLeft(line, " \t")), []byte("x-injected")) {
			t.Errorf("a header was injected: %q in %q", line, h)
		}
	}
}

// The admin listener binds to loopback unless the operator says otherwise.
func TestAdminListenerIsLoopbackByDefault(t *testing.T) {
	host, _, err := net.SplitHostPort(config.Default().Server.AdminListen)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("default server.admin_listen host %q is not a loopback address", host)
	}
}

// FuzzForwardedRequestHead sends arbitrary bytes to a real proxy as a
// client's request and checks what reaches the backend: an origin-form
// request line and header lines free of CR, LF and NUL, whatever the
// client wrote. The proxy itself must keep answering.
func FuzzForwardedRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"GET http://127.0.0.1:1/x HTTP/1.1\r\nHost: y\r\n\r\n",
		"POST https://evil/ HTTP/1.1\r\nHost: evil\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nConnection: X-A, close\r\n\r\n",
		"GET /a HTTP/1.1\nHost: x\nX-Request-Id: \x7f\xff\n\n",
		"GET /a?x=%0d%0aX-Injected:%20yes HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	backend := startRawUpstream(f)
	cfg := testConfig("http://" + backend.ln.Addr().String())
	cfg.Server.ReadTimeout = config.Duration(500 * time.Millisecond)
	p, err := New(Options{Config: cfg})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = p.Serve(ln); close(done) }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		<-done
	})
	addr := ln.Addr().String()
	f.Fuzz(func(t *testing.T, req []byte) {
		before := len(backend.requests())
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write(req)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		for _, h := range backend.requests()[before:] {
			line, _, _ := bytes.Cut(h, []byte("\r\n"))
			if fs := bytes.Fields(line); len(fs) != 3 || len(fs[1]) == 0 || fs[1][0] != '/' {
				t.Fatalf("backend got request line %q", line)
			}
			ftCheckHead(t, h, false)
		}
		// The proxy still serves a normal request.
		status, _ := rawExchange(t, addr, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(status, "200") {
			t.Fatalf("after the input the proxy answers %q", status)
		}
	})
}
