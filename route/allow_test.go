package route

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
)

// pathRecorder is a fake model server that records the request line of
// every request that reaches it.
type pathRecorder struct {
	mu   sync.Mutex
	seen []string // "METHOD target"
}

func (r *pathRecorder) handler(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.RequestURI)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{}`))
}

func (r *pathRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// rawRequest sends one request with a request target written byte for
// byte (no client-side cleaning) and returns the status.
func rawRequest(t *testing.T, addr, method, target string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	body := "{}"
	if method == "GET" || method == "HEAD" {
		body = "" // refused with a body (carriesBody)
	}
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, target, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 404 || resp.StatusCode == 405 {
		if !strings.Contains(string(b), "route.allow_paths") || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %s: %d without the envelope naming the key: %s", method, target, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// Every path vLLM's OpenAI-compatible server exposes is either allowed
// (inference) and forwarded as is, or refused (operator) and never reaches
// a pod.
func TestAllowPathsDefaultOverVLLMRoutes(t *testing.T) {
	rec := &pathRecorder{}
	up := upstream(t, rec.handler)
	cfg := withDefaultAllow(testConfig(up.URL))
	tp := startProxy(t, cfg)
	cases := []struct {
		method, path string
		want         int
	}{
		// Inference.
		{"POST", "/v1/chat/completions", 200},
		{"POST", "/v1/completions", 200},
		{"POST", "/v1/embeddings", 200},
		{"POST", "/v1/responses", 200},
		{"POST", "/v1/audio/transcriptions", 200},
		{"POST", "/v1/audio/translations", 200},
		{"POST", "/v1/score", 200},
		{"POST", "/score", 200},
		{"POST", "/v1/rerank", 200},
		{"POST", "/rerank", 200},
		{"POST", "/v2/rerank", 200},
		{"POST", "/pooling", 200},
		{"POST", "/classify", 200},
		{"POST", "/tokenize", 200},
		{"POST", "/detokenize", 200},
		{"GET", "/v1/models", 200},
		{"HEAD", "/v1/models", 200},
		{"GET", "/health", 200},
		// Operator endpoints.
		{"GET", "/metrics", 404},
		{"GET", "/load", 404},
		{"GET", "/ping", 404},
		{"POST", "/ping", 404},
		{"GET", "/version", 404},
		{"GET", "/server_info", 404},
		{"POST", "/reset_prefix_cache", 404},
		{"POST", "/reset_mm_cache", 404},
		{"POST", "/sleep?level=1", 404},
		{"POST", "/wake_up", 404},
		{"GET", "/is_sleeping", 404},
		{"POST", "/collective_rpc", 404},
		{"POST", "/start_profile", 404},
		{"POST", "/stop_profile", 404},
		{"POST", "/v1/load_lora_adapter", 404},
		{"POST", "/v1/unload_lora_adapter", 404},
		{"POST", "/scale_elastic_ep", 404},
		{"POST", "/is_scaling_elastic_ep", 404},
		{"POST", "/invocations", 404},
		{"GET", "/openapi.json", 404},
		{"GET", "/docs", 404},
		{"GET", "/redoc", 404},
		{"GET", "/v1/responses/resp_123", 404},
		{"POST", "/v1/responses/resp_123/cancel", 404},
		{"POST", "/update_weights", 404},
		// Inference paths with the wrong method.
		{"GET", "/v1/chat/completions", 405},
		{"DELETE", "/v1/completions", 405},
		{"POST", "/v1/models", 405},
		{"PUT", "/health", 405},
	}
	for _, c := range cases {
		got := rawRequest(t, tp.addr, c.method, c.path)
		seen := rec.take()
		if got != c.want {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, got, c.want)
		}
		switch {
		case c.want == 200 && (len(seen) != 1 || seen[0] != c.method+" "+c.path):
			t.Errorf("%s %s: the pod saw %q, want exactly the request", c.method, c.path, seen)
		case c.want != 200 && len(seen) > 0:
			t.Errorf("%s %s: refused, yet the pod saw %q", c.method, c.path, seen)
		}
	}
	if got := tp.counter(t, "probegate_requests_total", map[string]string{"backend": "none", "code": "404"}); got == 0 {
		t.Error("refused paths are not counted as requests_total{backend=none,code=404}")
	}
}

// No spelling of a request target smuggles an operator path through, and
// what reaches the pod is exactly the normalized path that was decided on.
func TestAllowPathsTricks(t *testing.T) {
	rec := &pathRecorder{}
	up := upstream(t, rec.handler)
	tp := startProxy(t, withDefaultAllow(testConfig(up.URL)))
	cases := []struct {
		target  string
		want    int
		forward string // what the pod must see when allowed
	}{
		{"//v1/../sleep", 404, ""},
		{"/v1/../sleep", 404, ""},
		{"/v1/chat/../../sleep", 404, ""},
		{"/v1/%2e%2e/sleep", 404, ""},
		{"/v1/%2E%2E/reset_prefix_cache", 404, ""},
		{"/%2e%2e/%2e%2e/metrics", 404, ""},
		{"/v1/completions/../load_lora_adapter", 404, ""},
		{"/v1/completions%2f..%2fload_lora_adapter", 404, ""},
		{"/v1%2fload_lora_adapter", 404, ""},
		{"/..", 404, ""},
		{"/v1/completions%00", 404, ""},
		{"/v1/completions%", 404, ""},
		{"/v1/completions%zz", 404, ""},
		{`/v1\..\sleep`, 404, ""},
		{"/SLEEP", 404, ""},
		{"/Metrics", 404, ""},
		{"/V1/Chat/Completions", 404, ""},
		{"http://gw/sleep", 404, ""},
		{"http://gw/v1/../collective_rpc", 404, ""},
		{"HTTPS://gw/start_profile", 404, ""},
		{"http://gw?/v1/completions", 404, ""},
		{"*", 400, ""}, // refused before routing
		// Added red-teaming in session 14: path parameters, encoded
		// separators, overlong and bidi UTF-8, encoded whitespace, a
		// trailing dot, 2,000 segments climbed back out of.
		{"/v1/completions;/../../metrics", 404, ""},
		{"/v1/completions/..;/metrics", 404, ""},
		{"/v1/completions;x", 404, ""},
		{"/v1/completions%3b", 404, ""},
		{"/v1/completions%23/../../metrics", 404, ""},
		{"/v1/completions%2F", 404, ""},
		{"/v1/models/..%5c..%5cmetrics", 404, ""},
		{"/v1/%c0%ae%c0%ae/metrics", 404, ""}, // overlong "."
		{"/v1/%e2%80%ae", 404, ""},            // U+202E
		{"/v1/completions%20", 404, ""},
		{"/v1/completions%09", 404, ""},
		{"/v1/completions.", 404, ""},
		{"/./metrics", 404, ""},
		{"/" + strings.Repeat("a/", 2000) + strings.Repeat("../", 2000) + "metrics", 404, ""},
		// The authority of an absolute URI ends at "/", "?" or "#" (RFC
		// 3986 section 3.2): here it is "gw", the path empty and the rest
		// a fragment, which no request target carries (RFC 9112 section
		// 3.2). Taking the path after the "#" forwarded it.
		{"http://gw#/v1/completions", 404, ""},
		{"http://gw#/metrics", 404, ""},
		{"http://g#w/v1/completions", 404, ""},
		// Allowed spellings are forwarded in their normalized form.
		{"/" + strings.Repeat("a/", 2000) + strings.Repeat("../", 2000) + "v1/completions", 200, "/v1/completions"},
		{"/v1/completions/.", 200, "/v1/completions"},
		{"/v1/completions?/../metrics", 200, "/v1/completions?/../metrics"},
		{"//v1//completions", 200, "/v1/completions"},
		{"/v1/./completions/", 200, "/v1/completions"},
		{"/v1/models/../completions", 200, "/v1/completions"},
		{"/v1/%63ompletions?x=1&y=%20", 200, "/v1/completions?x=1&y=%20"},
		{"http://gw/v1/completions", 200, "/v1/completions"},
		{"HTTP://evil.example:99/v1/completions?a=b", 200, "/v1/completions?a=b"},
	}
	for _, c := range cases {
		got := rawRequest(t, tp.addr, "POST", c.target)
		seen := rec.take()
		if got != c.want {
			t.Errorf("POST %s: status %d, want %d", c.target, got, c.want)
			continue
		}
		if c.want == 200 && (len(seen) != 1 || seen[0] != "POST "+c.forward) {
			t.Errorf("POST %s: the pod saw %q, want %q", c.target, seen, "POST "+c.forward)
		}
		if c.want != 200 && len(seen) > 0 {
			t.Errorf("POST %s: refused, yet the pod saw %q", c.target, seen)
		}
	}
}

// ["/*"] forwards everything untouched, as before the key existed; a
// custom list with prefix patterns and methods is applied as written.
func TestAllowPathsCustom(t *testing.T) {
	rec := &pathRecorder{}
	up := upstream(t, rec.handler)
	t.Run("all", func(t *testing.T) {
		cfg := testConfig(up.URL)
		cfg.Route.AllowPaths = []string{"/*"}
		tp := startProxy(t, cfg)
		for _, target := range []string{"/sleep?level=1", "/v1/load_lora_adapter", "//v1/../x"} {
			if got := rawRequest(t, tp.addr, "POST", target); got != 200 {
				t.Errorf("POST %s: %d, want 200 with /*", target, got)
			}
			if seen := rec.take(); len(seen) != 1 || seen[0] != "POST "+target {
				t.Errorf("POST %s: the pod saw %q, want it untouched", target, seen)
			}
		}
	})
	t.Run("prefix", func(t *testing.T) {
		cfg := testConfig(up.URL)
		cfg.Route.AllowPaths = []string{"POST /v1/completions", "GET,DELETE /v1/files/*", "/custom/*"}
		tp := startProxy(t, cfg)
		for _, c := range []struct {
			method, target string
			want           int
		}{
			{"POST", "/v1/completions", 200},
			{"GET", "/v1/files/abc", 200},
			{"DELETE", "/v1/files/abc/content", 200},
			{"POST", "/v1/files/abc", 405},
			{"GET", "/v1/files", 404}, // the pattern covers what is below it
			{"GET", "/v1/files/../completions", 405},
			{"PUT", "/custom/x", 200},
			{"GET", "/v1/chat/completions", 404},
		} {
			if got := rawRequest(t, tp.addr, c.method, c.target); got != c.want {
				t.Errorf("%s %s: %d, want %d", c.method, c.target, got, c.want)
			}
			rec.take()
		}
	})
}

// Bad patterns are configuration errors naming the entry (what -check
// prints).
func TestAllowPathsValidation(t *testing.T) {
	for _, bad := range [][]string{
		{},
		{"v1/completions"},
		{"/v1/../sleep"},
		{"/v1//x"},
		{"/v1/*/x"},
		{"/v1/x/"},
		{"FETCH /v1/x"},
		{"/v1/%2e"},
		{"/"},
	} {
		c := testConfig("http://127.0.0.1:1")
		c.Route.AllowPaths = bad
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "route.allow_paths") {
			t.Errorf("allow_paths %q: error %v, want one naming route.allow_paths", bad, err)
		}
	}
	c := testConfig("http://127.0.0.1:1")
	c.Route.AllowPaths = append([]string{"/*", "GET,HEAD /x/*"}, config.DefaultAllowPaths...)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkAllowPath(b *testing.B) {
	a, err := compileAllow(config.DefaultAllowPaths)
	if err != nil {
		b.Fatal(err)
	}
	rc := newReqCtx()
	for _, target := range []string{"/v1/chat/completions", "//v1/./chat/completions?x=1"} {
		b.Run("target="+target, func(b *testing.B) {
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			b.ReportAllocs()
			for b.Loop() {
				req.SetRequestURI(target)
				if st := judgeAndForward(a, &req, rc); st != 0 {
					b.Fatal(st)
				}
			}
		})
	}
}

// A request target already in the form forwardDecided forwards (origin form,
// normalized path) is left as it is: the URI fasthttp parsed before the
// handler is not reset and parsed again (a change made to it beforehand,
// here a marker host, survives). A target that needs normalizing is set
// anew, as before.
// judgeAndForward is what Handle does with route.allow_paths: judge the
// request's target, then set the target it goes upstream with.
func judgeAndForward(a *allowList, req *fasthttp.Request, rc *reqCtx) int {
	query, status, _ := a.judge(req.Header.Method(), req.Header.RequestURI(), rc)
	if status == 0 {
		a.forwardDecided(req, rc, query)
	}
	return status
}

func TestAdmitPathKeepsANormalTarget(t *testing.T) {
	a, err := compileAllow(config.Default().Route.AllowPaths)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target, forward string
		kept            bool
	}{
		{"/v1/completions", "/v1/completions", true},
		{"/v1/completions?x=1&y=%20", "/v1/completions?x=1&y=%20", true},
		{"/v1//completions", "/v1/completions", false},
		{"/v1/%63ompletions?x=1", "/v1/completions?x=1", false},
		{"http://gw/v1/completions", "/v1/completions", false},
	} {
		var req fasthttp.Request
		raw := "POST " + c.target + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
		if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatal(err)
		}
		req.URI().SetHost("marker.invalid")
		rc := newReqCtx()
		if status := judgeAndForward(a, &req, rc); status != 0 {
			t.Fatalf("%s refused: %d", c.target, status)
		}
		if got := string(req.Header.RequestURI()); got != c.forward {
			t.Errorf("%s: forwarded as %q, want %q", c.target, got, c.forward)
		}
		if kept := string(req.URI().Host()) == "marker.invalid"; kept != c.kept {
			t.Errorf("%s: parsed URI kept %v, want %v", c.target, kept, c.kept)
		}
	}
}
