package route

import (
	"bufio"
	"context"
	"encoding/json"
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

// sseUpstream streams n frames spaced by gap, then [DONE].
func sseUpstream(n int, gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f := w.(http.Flusher)
		for i := 0; i < n; i++ {
			if i > 0 {
				select {
				case <-time.After(gap):
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			f.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		f.Flush()
	}
}

func TestStreamsFramesAsTheyArrive(t *testing.T) {
	bothStreamPaths(t, testStreamsFramesAsTheyArrive)
}

func testStreamsFramesAsTheyArrive(t *testing.T, post postFunc) {
	// Lock step: the upstream sends frame i+1 only once the client has
	// read frame i, so every frame must reach the client while the
	// upstream still holds the stream open. A proxy that held frames back
	// (until the end, or until more arrived) never lets the client see
	// frame i: the upstream gives up waiting after hold and sends the rest,
	// and the test fails. No wall-clock bound judges how fast a frame
	// came (an absolute 200 ms for the first frame failed on a starved
	// machine at 275 and 615 ms); hold only ends a test that already
	// failed, and it is far below idle_timeout, so the proxy never cuts
	// the silence.
	const (
		frames = 5
		// Below the clients' 10 s bound on the whole exchange.
		hold = 4 * time.Second
	)
	seen := make(chan int, frames+1)
	var heldBack atomic.Int64 // 1 + the frame the client never saw, or 0
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f := w.(http.Flusher)
		for i := 0; i < frames; i++ {
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			f.Flush()
			if heldBack.Load() != 0 {
				continue
			}
			select {
			case <-seen:
			case <-time.After(hold):
				heldBack.Store(int64(i) + 1)
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		f.Flush()
	})
	cfg := testConfig(up.URL)
	cfg.Upstream.FirstByteTimeout = config.Duration(3 * hold)
	cfg.Upstream.IdleTimeout = config.Duration(3 * hold)
	tp := startProxy(t, cfg)

	resp := post(t, tp.url("/v1/completions"), `{"model":"m","prompt":"hi","stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			got = append(got, line)
			seen <- len(got) - 1
		}
	}
	if i := heldBack.Load(); i != 0 {
		t.Fatalf("frames were buffered: frame %d did not reach the client in %v while the upstream held the stream open", i-1, hold)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream after %d frames: %v", len(got), err)
	}
	want := []string{}
	for i := 0; i < frames; i++ {
		want = append(want, fmt.Sprintf(`data: {"i":%d}`, i))
	}
	want = append(want, "data: [DONE]")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("frames %q, want %q", got, want)
	}
}

func TestForwardsBodyAndHeaders(t *testing.T) {
	var got struct {
		sync.Mutex
		body       string
		xff, id    string
		conn, te   string
		host       string
		custom     string
		path       string
		keepalive  string
		orcaFormat string
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Lock()
		got.body, got.xff, got.id = string(b), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Request-Id")
		got.conn, got.keepalive, got.custom = r.Header.Get("Connection"), r.Header.Get("Keep-Alive"), r.Header.Get("X-Custom")
		got.path, got.host = r.URL.RequestURI(), r.Host
		got.orcaFormat = r.Header.Get("Endpoint-Load-Metrics-Format")
		got.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Upstream", "yes")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	tp := startProxy(t, testConfig(up.URL))

	body := `{"model":"m","prompt":"hi","unknown_field":[1,2,{"x":null}]}`
	req, _ := http.NewRequest("POST", tp.url("/v1/completions?x=1&y=%20"), strings.NewReader(body))
	req.Header.Set("X-Forwarded-For", "10.9.8.7")
	req.Header.Set("Keep-Alive", "timeout=9")
	req.Header.Set("X-Custom", "kept")
	req.Header.Set("Connection", "X-Custom-Hop")
	req.Header.Set("X-Custom-Hop", "drop me")
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	got.Lock()
	defer got.Unlock()
	if got.body != body {
		t.Errorf("body changed in transit: %q", got.body)
	}
	if got.path != "/v1/completions?x=1&y=%20" {
		t.Errorf("path/query changed: %q", got.path)
	}
	if got.xff != "10.9.8.7, 127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the client's IP appended", got.xff)
	}
	if len(got.id) != 16 {
		t.Errorf("X-Request-Id = %q, want a generated id", got.id)
	}
	if resp.Header.Get("X-Request-Id") != got.id {
		t.Errorf("the client must see the request id the backend saw: %q vs %q", resp.Header.Get("X-Request-Id"), got.id)
	}
	if got.keepalive != "" || got.custom != "kept" {
		t.Errorf("hop-by-hop handling: Keep-Alive %q (want stripped), X-Custom %q (want kept)", got.keepalive, got.custom)
	}
	if string(respBody) != `{"ok":true}` || resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Keep-Alive") != "" {
		t.Errorf("response: body %q, X-Upstream %q, Keep-Alive %q", respBody, resp.Header.Get("X-Upstream"), resp.Header.Get("Keep-Alive"))
	}
}

func TestForwardsClientRequestID(t *testing.T) {
	var seen atomic.Value
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("X-Request-Id"))
		w.WriteHeader(204)
	})
	tp := startProxy(t, testConfig(up.URL))
	req, _ := http.NewRequest("GET", tp.url("/v1/models"), nil)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id, _ := seen.Load().(string); !isUpstreamIDOf(id, "abc-123") {
		t.Fatalf("backend saw request id %q, want the client's, suffixed", id)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("the client got request id %q back, want its own", got)
	}
}

func TestNonJSONBodyForwardedUntouched(t *testing.T) {
	var got atomic.Value
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		w.WriteHeader(200)
	})
	tp := startProxy(t, testConfig(up.URL))
	resp := post(t, tp.url("/tokenize"), "\x00not json{{")
	resp.Body.Close()
	if resp.StatusCode != 200 || got.Load() != "\x00not json{{" {
		t.Fatalf("status %d, upstream got %q", resp.StatusCode, got.Load())
	}
}

// envelope decodes vLLM's error envelope from resp and checks its code.
func envelope(t *testing.T, resp *http.Response, status int) string {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, status, b)
	}
	var env struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("status %d: body is not the error envelope: %v", status, err)
	}
	if env.Error.Code != status || env.Error.Message == "" || env.Error.Type == "" {
		t.Fatalf("bad envelope %+v", env)
	}
	return env.Error.Message
}

func TestErrorsUseTheEnvelope(t *testing.T) {
	t.Run("413 body too large", func(t *testing.T) {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
		cfg := testConfig(up.URL)
		cfg.Server.MaxBodyBytes = 1024
		tp := startProxy(t, cfg)
		envelope(t, post(t, tp.url("/v1/completions"), strings.Repeat("x", 4096)), 413)
	})
	t.Run("431 headers too large", func(t *testing.T) {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
		cfg := testConfig(up.URL)
		cfg.Server.MaxHeaderBytes = 4096
		tp := startProxy(t, cfg)
		req, _ := http.NewRequest("GET", tp.url("/v1/models"), nil)
		req.Header.Set("X-Big", strings.Repeat("y", 8192))
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		envelope(t, resp, 431)
	})
	t.Run("503 no backend alive", func(t *testing.T) {
		tp := startProxy(t, testConfig(deadAddrs(t, 2)...))
		msg := envelope(t, post(t, tp.url("/v1/completions"), `{}`), 503)
		if !strings.Contains(msg, "no model server") {
			t.Fatalf("message %q", msg)
		}
	})
	t.Run("504 first byte timeout", func(t *testing.T) {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		})
		cfg := testConfig(up.URL)
		cfg.Upstream.FirstByteTimeout = config.Duration(200 * time.Millisecond)
		tp := startProxy(t, cfg)
		start := time.Now()
		envelope(t, post(t, tp.url("/v1/completions"), `{}`), 504)
		// Well before testConfig's first_byte_timeout (2 s) and the
		// upstream's 5 s: a proxy that ignored the configured 200 ms would
		// answer at one of those. A fixed 1 s failed once under -race at
		// load 5-10; the 1.8 s margin is scheduler slack, not a contract.
		if el, def := time.Since(start), testConfig(up.URL).Upstream.FirstByteTimeout.D(); el >= def {
			t.Fatalf("504 took %v, want about first_byte_timeout (200ms), well before the %v it was overridden from", el, def)
		}
	})
	t.Run("502 upstream resets", func(t *testing.T) {
		up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		})
		tp := startProxy(t, testConfig(up.URL))
		envelope(t, post(t, tp.url("/v1/completions"), `{}`), 502)
	})
}

func TestDeadBackendIsRetriedElsewhere(t *testing.T) {
	var served atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(200)
	})
	cfg := testConfig(deadAddr(t), up.URL)
	cfg.Route.Policy = "round_robin"
	tp := startProxy(t, cfg)
	for i := 0; i < 20; i++ {
		resp := post(t, tp.url("/v1/completions"), `{"prompt":"x"}`)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200 after a re-pick", i, resp.StatusCode)
		}
	}
	if served.Load() != 20 {
		t.Fatalf("live backend served %d of 20", served.Load())
	}
	if r := tp.counter(t, "probegate_retries_total", nil); r < 1 {
		t.Fatalf("retries_total = %v, want > 0", r)
	}
}

// A request whose connection is reset before the first response byte is
// re-picked within upstream.retries, never twice on the same backend; with
// upstream.retry_on_reset: false it is sent once and answered 502.
func TestResetRequestIsResentOnlyWithinRetries(t *testing.T) {
	for _, onReset := range []bool{true, false} {
		t.Run(fmt.Sprintf("retry_on_reset=%t", onReset), func(t *testing.T) {
			var hits atomic.Int64
			var perBackend [2]atomic.Int64
			reset := func(i int) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					perBackend[i].Add(1)
					c, _, _ := w.(http.Hijacker).Hijack()
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}
			a, b := upstream(t, reset(0)), upstream(t, reset(1))
			cfg := testConfig(a.URL, b.URL)
			cfg.Upstream.RetryOnReset = onReset
			tp := startProxy(t, cfg)
			envelope(t, post(t, tp.url("/v1/completions"), `{}`), 502)
			want := int64(1)
			if onReset {
				want = int64(1 + cfg.Upstream.Retries)
			}
			if hits.Load() != want {
				t.Fatalf("the request was sent %d times, want %d", hits.Load(), want)
			}
			for i := range perBackend {
				if n := perBackend[i].Load(); n > 1 {
					t.Fatalf("backend %d got the request %d times", i, n)
				}
			}
		})
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var hits atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if !isCanary(r) { // the proxy's canary fails with the rest
			hits.Add(1)
		}
		if failing.Load() {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	cfg := testConfig(up.URL)
	tp := startProxy(t, cfg)
	for i := 0; i < 3; i++ { // consecutive_failures = 3
		resp := post(t, tp.url("/v1/completions"), `{}`)
		resp.Body.Close()
		if resp.StatusCode != 500 {
			t.Fatalf("upstream 500 must pass through, got %d", resp.StatusCode)
		}
	}
	// Open: the only backend is not eligible, 503 without touching it.
	envelope(t, post(t, tp.url("/v1/completions"), `{}`), 503)
	if hits.Load() != 3 {
		t.Fatalf("open breaker let a request through (%d hits)", hits.Load())
	}
	if v := tp.counter(t, "probegate_breaker_state", nil); v != 2 {
		t.Fatalf("breaker_state = %v, want 2 (open)", v)
	}
	failing.Store(false)
	time.Sleep(cfg.Breaker.OpenFor.D() + 50*time.Millisecond)
	resp := post(t, tp.url("/v1/completions"), `{}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after open_for the half-open trial must reach the backend, got %d", resp.StatusCode)
	}
	if v := tp.counter(t, "probegate_breaker_state", nil); v != 0 {
		t.Fatalf("breaker_state = %v after a successful trial, want 0", v)
	}
}

func Test429IsNotABreakerFailure(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) })
	tp := startProxy(t, testConfig(up.URL))
	for i := 0; i < 10; i++ {
		resp := post(t, tp.url("/v1/completions"), `{}`)
		resp.Body.Close()
		if resp.StatusCode != 429 {
			t.Fatalf("request %d: %d, want the backend's 429 (breaker must stay closed)", i, resp.StatusCode)
		}
	}
}

func TestClientDisconnectClosesUpstreamStream(t *testing.T) {
	for _, hdr := range []string{"", "Connection: close\r\n"} {
		t.Run(streamPathName(hdr), func(t *testing.T) { testClientDisconnectClosesUpstreamStream(t, hdr) })
	}
}

func testClientDisconnectClosesUpstreamStream(t *testing.T, hdr string) {
	upstreamGone := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for {
			if _, err := fmt.Fprint(w, "data: {}\n\n"); err != nil {
				break
			}
			f.Flush()
			select {
			case <-r.Context().Done():
				close(upstreamGone)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		close(upstreamGone)
	})
	tp := startProxy(t, testConfig(up.URL))
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"stream\":true}", hdr)
	br := bufio.NewReader(conn)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	select {
	case <-upstreamGone:
	case <-time.After(3 * time.Second):
		t.Fatal("the upstream stream kept running after the client left")
	}
	deadline := time.Now().Add(2 * time.Second)
	for tp.counter(t, "probegate_requests_total", map[string]string{"code": "499"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a client that went away must be counted as 499")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := tp.counter(t, "probegate_breaker_state", nil); v != 0 {
		t.Fatal("a client's cancellation must not count against the backend")
	}
}

func TestGracefulShutdownFinishesStreams(t *testing.T) {
	bothStreamPaths(t, testGracefulShutdownFinishesStreams)
}

func testGracefulShutdownFinishesStreams(t *testing.T, post postFunc) {
	up := upstream(t, sseUpstream(6, 100*time.Millisecond))
	cfg := testConfig(up.URL)
	p, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = p.Serve(ln) }()

	resp := post(t, "http://"+ln.Addr().String()+"/v1/completions", `{"stream":true}`)
	// Shut down once the first frame arrived: the stream is under way
	// (ordered by that event, not by a sleep).
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	shutdownErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdownErr <- p.Shutdown(ctx)
	}()
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	b := first + string(rest)
	if err != nil || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Fatalf("in-flight stream cut by shutdown: err %v, body %q", err, b)
	}
	if err := <-shutdownErr; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), 200*time.Millisecond); err == nil {
		t.Fatal("new connections must be refused after shutdown")
	}
}

func TestIdleTimeoutCutsSilentStreamWithErrorFrame(t *testing.T) {
	bothStreamPaths(t, testIdleTimeoutCutsSilentStreamWithErrorFrame)
}

func testIdleTimeoutCutsSilentStreamWithErrorFrame(t *testing.T, post postFunc) {
	// The backend sends one frame, then stays silent until the proxy
	// closes the upstream connection (or the test ends): only the proxy's
	// idle timer can end this stream, and it must end it with an error
	// frame. No wall-clock bound from above: a starved -race process
	// (GOMAXPROCS=1 beside other work) has cut it after 3.5 s instead of
	// 0.3 s. A timer that is not armed leaves the client waiting for its
	// own 10 s timeout, without the frame.
	const idle = 300 * time.Millisecond
	released := make(chan struct{}, 1)
	testDone := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			// The progress watch scrapes a backend whose stream is
			// silent past idle_timeout/2: this one has no metrics.
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"first\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			released <- struct{}{}
		case <-testDone:
		}
	})
	t.Cleanup(func() { close(testDone) }) // runs before up.Close
	cfg := testConfig(up.URL)
	cfg.Upstream.IdleTimeout = config.Duration(idle)
	cfg.Upstream.FirstByteTimeout = config.Duration(time.Minute) // not the timer that cuts
	tp := startProxy(t, cfg)
	start := time.Now()
	resp := post(t, tp.url("/v1/completions"), `{"stream":true}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	el := time.Since(start)
	if !strings.Contains(string(b), `"code":504`) {
		t.Fatalf("after %v (%v): want an error frame after the first, got %q", el, err, b)
	}
	if el < idle {
		t.Fatalf("cut after %v, before upstream.idle_timeout (%v)", el, idle)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend's request is still open 10 s after the proxy cut the stream")
	}
	t.Logf("silent stream cut after %v (idle_timeout %v)", el, idle)
}

// A backend answering HTTP/1.0 with a body delimited by its close: the
// client gets the proxy's own HTTP/1.1 status line over the chunked body
// the proxy streams, and the whole body at once (an "HTTP/1.0" line over
// a chunked body made a client read the chunk framing as the body and
// wait for a close that keep-alive never sent).
func TestHTTP10BackendAnswer(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, n int, head []byte) bool {
		c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello"))
		return false // close: the end of the body
	})
	tp := startProxy(t, testConfig(be.url()))
	start := time.Now()
	r := rawDo(t, tp.addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if d := time.Since(start); r.status != 200 || r.body != "hello" || !strings.HasPrefix(r.head, "HTTP/1.1 200 OK\r\n") || d > 2*time.Second {
		t.Fatalf("after %v: %d %q, head %q; want HTTP/1.1 200 and hello at once", d, r.status, r.body, r.head)
	}
}
