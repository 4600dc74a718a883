package route

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// Parity of server.event_loop: each test here runs over both ways of
// serving the client listener (the fasthttp server, and internal/evloop's
// loops with loopHandler) with the same inputs and the same expectations,
// over real sockets with raw clients. On the loop path each also checks
// that the loops served the request themselves (loopCounts), so that a
// hand-over of everything could not pass for parity; and a stream is
// shown handed over with its guarantees.

// servePaths runs f over both paths: on is server.event_loop.
func servePaths(t *testing.T, f func(t *testing.T, on bool)) {
	t.Helper()
	for _, on := range []bool{false, true} {
		name := "fasthttp"
		if on {
			name = "event_loop"
		}
		t.Run(name, func(t *testing.T) {
			if on && runtime.GOOS != "linux" {
				t.Skip("event loops are Linux only")
			}
			f(t, on)
		})
	}
}

// pathConfig is testConfig with server.event_loop set to on.
func pathConfig(on bool, backends ...string) *config.Config {
	c := testConfig(backends...)
	c.Server.EventLoop = on
	return c
}

// wantLoopServed checks, on the loop path, that the loops served at least
// served requests and handed over handed (exactly).
func wantLoopServed(t *testing.T, tp *testProxy, on bool, served, handed uint64) {
	t.Helper()
	if !on {
		return
	}
	s, h := tp.loopCounts()
	if s < served || h != handed {
		t.Fatalf("loops served %d and handed over %d requests, want >= %d served and %d handed over", s, h, served, handed)
	}
}

// okAnswer is a small vLLM-like JSON answer.
func okAnswer(c net.Conn, extra string) {
	body := `{"ok":true}`
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", extra, len(body), body)
}

// postReq is a raw POST of body to path with extra header lines.
func postReq(path, extra, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", path, extra, len(body), body)
}

// rawEnvelope decodes vLLM's error envelope from a raw body.
func rawEnvelope(t *testing.T, body string) (msg string, code int) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("answer %q is not the error envelope: %v", body, err)
	}
	return e.Error.Message, e.Error.Code
}

func TestParityForwardsWithHandlesEdits(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
			okAnswer(c, "X-Request-Id: the-upstreams\r\nEndpoint-Load-Metrics: TEXT named_metrics.kv_cache_utilization=0.5\r\nKeep-Alive: timeout=5\r\nX-Upstream: yes\r\n")
			return true
		})
		var logs syncBuffer
		cfg := pathConfig(on, up.url())
		cfg.Log.Access = true
		tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })

		body := `{"model":"m","prompt":"hi","max_tokens":4}`
		r := rawDo(t, tp.addr, postReq("/v1/completions?x=1",
			"X-Forwarded-For: 10.9.8.7\r\nX-Request-Id: client-1\r\nForwarded: for=1.2.3.4\r\nX-Real-Ip: 1.2.3.4\r\n"+
				"Keep-Alive: timeout=5\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\nEndpoint-Load-Metrics-Format: JSON\r\nX-Custom: kept\r\n", body))
		if r.status != 200 || r.body != `{"ok":true}` {
			t.Fatalf("answer %d %q, want 200 {\"ok\":true}", r.status, r.body)
		}
		// The client's head: its own id back, no ORCA report, no hop-by-hop.
		if got := headerValues([]byte(r.head), "X-Request-Id"); len(got) != 1 || got[0] != "client-1" {
			t.Errorf("client got X-Request-Id %q, want [client-1]", got)
		}
		for _, name := range []string{"Endpoint-Load-Metrics", "Keep-Alive"} {
			if got := headerValues([]byte(r.head), name); len(got) != 0 {
				t.Errorf("client got %s %q, want none", name, got)
			}
		}
		if got := headerValues([]byte(r.head), "X-Upstream"); len(got) != 1 {
			t.Errorf("client got X-Upstream %q, want the upstream's", got)
		}
		// What went upstream.
		reqs := up.requests()
		if len(reqs) != 1 {
			t.Fatalf("upstream got %d requests, want 1", len(reqs))
		}
		head := reqs[0]
		if !strings.HasPrefix(string(head), "POST /v1/completions?x=1 HTTP/1.1\r\n") {
			t.Errorf("request line %q", strings.SplitN(string(head), "\r\n", 2)[0])
		}
		if got := headerValues(head, "Host"); len(got) != 1 || got[0] != up.ln.Addr().String() {
			t.Errorf("upstream Host %q, want the backend's address (forward's rule)", got)
		}
		if got := headerValues(head, "X-Forwarded-For"); len(got) != 1 || got[0] != "10.9.8.7, 127.0.0.1" {
			t.Errorf("upstream X-Forwarded-For %q, want [10.9.8.7, 127.0.0.1]", got)
		}
		ids := headerValues(head, "X-Request-Id")
		if len(ids) != 1 || !regexp.MustCompile(`^client-1-[0-9a-f]{16}$`).MatchString(ids[0]) {
			t.Errorf("upstream X-Request-Id %q, want client-1-<16 hex digits>", ids)
		}
		for _, name := range []string{"Forwarded", "X-Real-Ip", "Keep-Alive", "X-Hop", "Endpoint-Load-Metrics-Format"} {
			if got := headerValues(head, name); len(got) != 0 {
				t.Errorf("upstream got %s %q, want none", name, got)
			}
		}
		if got := headerValues(head, "X-Custom"); len(got) != 1 || got[0] != "kept" {
			t.Errorf("upstream X-Custom %q, want [kept]", got)
		}
		if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": up.ln.Addr().String(), "code": "200"}); got != 1 {
			t.Errorf("requests_total{code=200} = %v, want 1", got)
		}
		// The access log line: the same fields on both paths.
		waitFor(t, func() bool { return logs.count(`"message":"request"`) == 1 })
		line := logs.String()
		for _, want := range []string{`"request_id":"client-1"`, `"status":200`, `"bytes":11`, `"backend":"` + up.ln.Addr().String() + `"`, `"attempts":1`, `"upstream_request_id":"` + ids[0] + `"`} {
			if !strings.Contains(line, want) {
				t.Errorf("access log %s lacks %s", line, want)
			}
		}
		wantLoopServed(t, tp, on, 1, 0)
	})
}

// dialKept opens a client connection to addr for several requests
// (closed at cleanup; 30 s bound, as rawDo's) and its reader.
func dialKept(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

func TestParityAllowlistAndBodyLimit(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { okAnswer(c, ""); return true })
		cfg := pathConfig(on, up.url())
		cfg.Route.AllowPaths = append([]string(nil), config.DefaultAllowPaths...)
		cfg.Server.MaxBodyBytes = 64
		tp := startProxy(t, cfg)

		big := `{"model":"m","prompt":"` + strings.Repeat("x", 100) + `"}`
		for _, tc := range []struct {
			name, req string
			status    int
			msg       string
			allow     string
		}{
			{"operator path", "GET /metrics HTTP/1.1\r\nHost: proxy\r\n\r\n", 404, "path not allowed by route.allow_paths", ""},
			{"escaped operator path", postReq("/v1/%2e%2e/metrics", "", "{}"), 404, "path not allowed by route.allow_paths", ""},
			{"method", "GET /v1/completions HTTP/1.1\r\nHost: proxy\r\n\r\n", 405, "method not allowed for this path by route.allow_paths", "POST"},
			{"body over the limit", postReq("/v1/completions", "", big), 413, "request body exceeds server.max_body_bytes", ""},
			{"allowed", postReq("/v1/completions", "", `{"model":"m"}`), 200, "", ""},
		} {
			r := rawDo(t, tp.addr, tc.req)
			if r.status != tc.status {
				t.Errorf("%s: status %d, want %d (%q)", tc.name, r.status, tc.status, r.body)
				continue
			}
			if tc.msg != "" {
				if msg, code := rawEnvelope(t, r.body); msg != tc.msg || code != tc.status {
					t.Errorf("%s: envelope %q %d, want %q %d", tc.name, msg, code, tc.msg, tc.status)
				}
			}
			if got := headerValues([]byte(r.head), "Allow"); tc.allow != "" && (len(got) != 1 || got[0] != tc.allow) {
				t.Errorf("%s: Allow %q, want %q", tc.name, got, tc.allow)
			}
		}
		if n := len(up.requests()); n != 1 {
			t.Errorf("upstream got %d requests, want only the allowed one", n)
		}
		for code, want := range map[string]float64{"404": 2, "405": 1, "413": 1} {
			if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": "none", "code": code}); got != want {
				t.Errorf("requests_total{backend=none,code=%s} = %v, want %v", code, got, want)
			}
		}
		// The 413 is the loop's own refusal; 404 and 405 are Handle's
		// (handed over: their connection stays with the fasthttp server).
		wantLoopServed(t, tp, on, 1, 3)
	})
}

func TestParityHostileFramingIsRefused(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { okAnswer(c, ""); return true })
		tp := startProxy(t, pathConfig(on, up.url()))
		for _, tc := range []struct{ name, req string }{
			{"CL and TE", "POST /v1/completions HTTP/1.1\r\nHost: p\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
			{"two lengths", "POST /v1/completions HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x"},
			{"space in a name", "POST /v1/completions HTTP/1.1\r\nHost: p\r\nX Bad: 1\r\nContent-Length: 2\r\n\r\n{}"},
			// Not here: a request line ended by a bare LF, which fasthttp
			// serves and the loop refuses (400).
		} {
			r := rawDo(t, tp.addr, tc.req)
			if r.status != 400 {
				t.Errorf("%s: status %d, want 400", tc.name, r.status)
				continue
			}
			if _, code := rawEnvelope(t, r.body); code != 400 {
				t.Errorf("%s: envelope code %d", tc.name, code)
			}
		}
		if n := len(up.requests()); n != 0 {
			t.Errorf("upstream got %d requests, want none", n)
		}
		if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": "none", "code": "400"}); got != 3 {
			t.Errorf("requests_total{backend=none,code=400} = %v, want 3", got)
		}
	})
}

func TestParityRetriesAndErrorAnswers(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		// A dead backend beside a live one: every request is answered by
		// the live one, the dead one's refusals re-picked (connect).
		live := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { okAnswer(c, ""); return true })
		cfg := pathConfig(on, deadAddr(t), live.url())
		cfg.Route.Policy = "round_robin"
		tp := startProxy(t, cfg)
		for i := range 4 {
			if r := rawDo(t, tp.addr, postReq("/v1/completions", "", `{"model":"m"}`)); r.status != 200 {
				t.Fatalf("request %d: %d %q, want 200", i, r.status, r.body)
			}
		}
		if got := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "connect"}); got < 1 {
			t.Errorf("retries_total{reason=connect} = %v, want >= 1", got)
		}
		wantLoopServed(t, tp, on, 4, 0)
	})
}

func TestParityNoBackendAnswersAndKeepsTheConnection(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		tp := startProxy(t, pathConfig(on, deadAddrs(t, 2)...))
		c, br := dialKept(t, tp.addr)
		for i := range 2 {
			if _, err := io.WriteString(c, postReq("/v1/completions", "", `{"model":"m"}`)); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			resp, body := readResponse(t, br)
			if resp.StatusCode != 503 || resp.Close {
				t.Fatalf("request %d: %d (close %v), want 503 on a kept connection", i, resp.StatusCode, resp.Close)
			}
			if msg, _ := rawEnvelope(t, body); msg != "no model server available" {
				t.Errorf("request %d: message %q", i, msg)
			}
		}
		if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": "none", "code": "503"}); got != 2 {
			t.Errorf("requests_total{backend=none,code=503} = %v, want 2", got)
		}
		wantLoopServed(t, tp, on, 2, 0)
	})
}

func TestParityServerErrorIsResentOnce(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		failing := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
			body := `{"error":"boom"}`
			fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			return true
		})
		live := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { okAnswer(c, ""); return true })
		cfg := pathConfig(on, failing.url(), live.url())
		cfg.Route.Policy = "round_robin"
		tp := startProxy(t, cfg)
		for i := range 4 {
			if r := rawDo(t, tp.addr, postReq("/v1/completions", "", `{"model":"m"}`)); r.status != 200 {
				t.Fatalf("request %d: %d %q, want 200 (the 500 re-sent)", i, r.status, r.body)
			}
		}
		resent := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": failing.ln.Addr().String(), "code": "500"})
		if resent < 1 || resent != float64(len(failing.requests())) {
			t.Errorf("resent_server_errors_total = %v, want >= 1 and one per request the failing backend got (%d)", resent, len(failing.requests()))
		}
		wantLoopServed(t, tp, on, 4, 0)
	})
}

func TestParityFirstByteTimeout(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		release := make(chan struct{})
		silent := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { <-release; return false })
		defer close(release)
		cfg := pathConfig(on, silent.url())
		cfg.Upstream.FirstByteTimeout = config.Duration(300 * time.Millisecond)
		tp := startProxy(t, cfg)
		r := rawDo(t, tp.addr, postReq("/v1/completions", "", `{"model":"m"}`))
		if r.status != 504 {
			t.Fatalf("status %d %q, want 504", r.status, r.body)
		}
		if msg, _ := rawEnvelope(t, r.body); msg != "the model server did not answer in time" {
			t.Errorf("message %q", msg)
		}
		if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": silent.ln.Addr().String(), "code": "504"}); got != 1 {
			t.Errorf("requests_total{code=504} = %v, want 1", got)
		}
		wantLoopServed(t, tp, on, 1, 0)
	})
}

// Clients that go away while the proxy waits for a non-stream answer's
// head never count against the backend (breaker.consecutive_failures 1,
// three such clients: the breaker stays closed). The one difference
// between the paths: the loop notices the hang-up at once, cancels the
// upstream exchange and counts 499 (nginx's rule), where the fasthttp
// path waits for the answer, counts its status and writes it to the
// closed connection.
func TestParityClientGoneBeforeTheHead(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
			if strings.HasPrefix(string(head), "POST ") {
				time.Sleep(300 * time.Millisecond)
			}
			okAnswer(c, "")
			return true
		})
		cfg := pathConfig(on, up.url())
		cfg.Breaker.ConsecutiveFailures = 1
		tp := startProxy(t, cfg)
		for range 3 {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, postReq("/v1/completions", "", `{"model":"m"}`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		code := "200"
		if on {
			code = "499"
		}
		waitFor(t, func() bool {
			return tp.counter(t, "probegate_requests_total", map[string]string{"backend": up.ln.Addr().String(), "code": code}) == 3
		})
		if st := tp.DebugBackends()[0].Breaker; st != "closed" {
			t.Fatalf("breaker %s after clients went away", st)
		}
		wantLoopServed(t, tp, on, 3, 0)
	})
}

func TestParityStreamIsHandedOverWhole(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := upstream(t, sseUpstream(3, 10*time.Millisecond))
		tp := startProxy(t, pathConfig(on, up.URL))
		c, br := dialKept(t, tp.addr)
		// Two streams on one connection: the second is served by the
		// fasthttp server too (the connection stays with it).
		for i := range 2 {
			io.WriteString(c, postReq("/v1/completions", "X-Request-Id: s-1\r\n", `{"model":"m","prompt":"hi","stream":true}`))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.Header.Get("X-Request-Id") != "s-1" {
				t.Fatalf("stream %d: %d %q X-Request-Id %q", i, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Request-Id"))
			}
			if got := strings.Count(string(b), "data: "); got != 4 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				t.Fatalf("stream %d: %q, want 3 frames and [DONE]", i, b)
			}
		}
		wantLoopServed(t, tp, on, 0, 1)
	})
}

// The probe policy's pick probes backends (network I/O): the loops hand
// its requests over, and they are answered as without the key.
func TestParityProbePolicyIsHandedOver(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool { okAnswer(c, ""); return true })
		cfg := pathConfig(on, up.url())
		cfg.Route.Policy = config.PolicyProbe
		tp := startProxy(t, cfg)
		for i := range 2 {
			if r := rawDo(t, tp.addr, postReq("/v1/completions", "", `{"model":"m"}`)); r.status != 200 {
				t.Fatalf("request %d: %d %q, want 200", i, r.status, r.body)
			}
		}
		wantLoopServed(t, tp, on, 0, 2)
	})
}

// Shutdown stops accepting at once and lets a request under way finish
// with its answer (server.shutdown_grace), on both paths.
func TestParityShutdownDrainsInFlightRequests(t *testing.T) {
	servePaths(t, func(t *testing.T, on bool) {
		release := make(chan struct{})
		reached := make(chan struct{}, 1)
		up := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
			if strings.HasPrefix(string(head), "POST ") {
				reached <- struct{}{}
				<-release
			}
			okAnswer(c, "")
			return true
		})
		tp := startProxy(t, pathConfig(on, up.url()))
		answer := make(chan rawResponse, 1)
		go func() { answer <- rawDo(t, tp.addr, postReq("/v1/completions", "", `{"model":"m"}`)) }()
		select {
		case <-reached:
		case <-time.After(20 * time.Second):
			t.Fatal("the request never reached the upstream")
		}
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stopped <- tp.Shutdown(ctx)
		}()
		// New connections are refused while the request is under way.
		waitFor(t, func() bool {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				return true
			}
			c.Close()
			return false
		})
		close(release)
		if r := <-answer; r.status != 200 || r.body != `{"ok":true}` {
			t.Fatalf("request under way at Shutdown: %d %q, want its 200", r.status, r.body)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("Shutdown: %v, want nil (drained within the grace)", err)
		}
		wantLoopServed(t, tp, on, 1, 0)
	})
}
