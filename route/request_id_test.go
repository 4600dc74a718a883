package route

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// TestClientsSharingARequestIDStayApart: two clients send the same
// X-Request-Id at once, through a real proxy over real sockets, to one
// backend that keys its requests by that header as vLLM does (before its PR
// #27987): an id already in flight is refused with vLLM's 400 "Request id
// ... already running". Each client gets its own answer (its own prompt
// echoed) and its own id back; the backend got two distinct ids, each the
// client's with the proxy's suffix (appendUpstreamID); the access log has
// the client's id as request_id and the one sent as upstream_request_id.
// With the client's id forwarded as is (the proxy before this test), the
// backend saw one id twice and one of the two clients got the 400.
func TestClientsSharingARequestIDStayApart(t *testing.T) {
	const id = "shared-id"
	var mu sync.Mutex
	running := map[string]bool{}
	var seen []string
	both := make(chan struct{}) // closed when both requests are in flight
	be := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r) // the proxy's scrapes of /metrics
			return
		}
		rid := r.Header.Get("X-Request-Id")
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if running[rid] {
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"Request id %s already running.","type":"BadRequestError","param":null,"code":400}}`, rid)
			return
		}
		running[rid] = true
		seen = append(seen, rid)
		if len(seen) == 2 {
			close(both)
		}
		mu.Unlock()
		// Hold each request until the other is in flight too, as two
		// clients' requests overlap on a busy pod. A starved test whose
		// second request comes later than this still checks the ids.
		select {
		case <-both:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		delete(running, rid)
		mu.Unlock()
		w.Header().Set("X-Request-Id", rid) // vLLM answers with the id it got
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"echo":%s}`, rid, body)
	})
	cfg := testConfig(be.URL)
	cfg.Log.Access = true
	var logs logSink
	tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })

	type answer struct {
		status   int
		id, body string
		err      error
	}
	prompts := []string{"first client", "second client"}
	answers := make([]answer, len(prompts))
	var wg sync.WaitGroup
	for i, prompt := range prompts {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", tp.url("/v1/completions"), strings.NewReader(`{"model":"m","prompt":"`+prompt+`"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Request-Id", id)
			resp, err := client().Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers[i] = answer{resp.StatusCode, resp.Header.Get("X-Request-Id"), string(b), err}
		})
	}
	wg.Wait()

	mu.Lock()
	ups := slices.Clone(seen)
	mu.Unlock()
	for i, a := range answers {
		if a.err != nil || a.status != 200 {
			t.Fatalf("client %d: status %d, %v, body %s (the backend saw ids %q)", i, a.status, a.err, a.body, ups)
		}
		var got struct {
			ID   string
			Echo struct{ Prompt string }
		}
		if err := json.Unmarshal([]byte(a.body), &got); err != nil || got.Echo.Prompt != prompts[i] {
			t.Errorf("client %d got %s, want the answer to its own prompt %q", i, a.body, prompts[i])
		}
		if a.id != id {
			t.Errorf("client %d got X-Request-Id %q back, want its own %q", i, a.id, id)
		}
	}
	if len(ups) != 2 || ups[0] == ups[1] || !isUpstreamIDOf(ups[0], id) || !isUpstreamIDOf(ups[1], id) {
		t.Fatalf("the backend saw ids %q, want two distinct ones, each %q with the proxy's suffix", ups, id)
	}

	var logged []string
	waitUntil(t, 5*time.Second, func() bool {
		logged = logged[:0]
		for _, line := range strings.Split(logs.String(), "\n") {
			var ev struct {
				ID       string `json:"request_id"`
				Upstream string `json:"upstream_request_id"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.ID == id {
				logged = append(logged, ev.Upstream)
			}
		}
		return len(logged) == 2
	}, "two access log lines with the clients' id")
	slices.Sort(logged)
	slices.Sort(ups)
	if !slices.Equal(logged, ups) {
		t.Errorf("access log upstream_request_id %q, want the ids the backend saw %q", logged, ups)
	}
}

// BenchmarkCleanRequestWithClientID is BenchmarkCleanHeaders' request side
// for a request that carries its client's X-Request-Id, the one whose id
// is suffixed for the backend (appendUpstreamID).
func BenchmarkCleanRequestWithClientID(b *testing.B) {
	const rawReq = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nContent-Type: application/json\r\nX-Request-Id: 3f2c9a1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b\r\nContent-Length: 2\r\n\r\n{}"
	p := &Proxy{rand: func() uint64 { return 0x1234 }}
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(rawReq))); err != nil {
		b.Fatal(err)
	}
	rc := newReqCtx()
	b.ReportAllocs()
	for b.Loop() {
		req.Header.CopyTo(&ctx.Request.Header)
		_, fields := scanFields(req.Header.RawHeaders())
		p.cleanRequest(&ctx, rc, fields)
	}
}
