package route

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// crashPod is a model server whose process "dies" on a poison body: the
// connection that carried it is reset, its listener closes (dials are
// refused) and every request still reaching it over a pooled connection
// is reset too.
type crashPod struct {
	srv     *httptest.Server
	dead    atomic.Bool
	poisons atomic.Int64 // poison bodies that reached it
}

func (c *crashPod) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !c.dead.Load() && bytes.Contains(body, []byte("poison")) {
		c.poisons.Add(1)
		c.dead.Store(true)
		_ = c.srv.Listener.Close()
	}
	if c.dead.Load() {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		}
		return
	}
	_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
}

func startCrashPods(t *testing.T, n int) ([]*crashPod, []string) {
	pods := make([]*crashPod, n)
	urls := make([]string, n)
	for i := range pods {
		c := &crashPod{}
		c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
		t.Cleanup(c.srv.Close)
		pods[i], urls[i] = c, c.srv.URL
	}
	return pods, urls
}

func crashed(pods []*crashPod) (n int64) {
	for _, c := range pods {
		n += c.poisons.Load()
	}
	return n
}

// A request that crashes every pod it reaches is re-sent once at most,
// whatever upstream.retries allows, so it crashes two pods, not
// retries+1; and once two pods dropped it, the same body sent again (a
// client's or its SDK's retry) is not re-sent after it crashes one more.
// Each time the client gets the 502 envelope, and the last pod still
// serves. Without the limit the first request alone crashes all four pods.
func TestPoisonRequestIsNotResentToEveryPod(t *testing.T) {
	pods, urls := startCrashPods(t, 4)
	cfg := testConfig(urls...)
	cfg.Upstream.Retries = 3
	cfg.Upstream.RetryOnReset = true
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	poison := `{"model":"m","prompt":"poison"}`

	envelope(t, post(t, url, poison), 502)
	if got := crashed(pods); got != 2 {
		t.Fatalf("the poison request crashed %d pods, want 2", got)
	}
	if got := tp.counter(t, "probegate_poison_requests_total", nil); got != 1 {
		t.Errorf("poison_requests_total = %v, want 1", got)
	}
	envelope(t, post(t, url, poison), 502)
	if got := crashed(pods); got != 3 {
		t.Fatalf("after the same body again: %d pods crashed, want 3 (one more)", got)
	}
	if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 200 {
		t.Fatalf("a request after the poison: %d, want 200 from the last pod", code)
	}
}

// A pod that dies under a request that is not the cause (a restart, a
// kill) still costs its client nothing: the request is re-sent once and
// answered. The limit does not touch the retry it exists beside.
func TestDroppedRequestIsStillResentOnce(t *testing.T) {
	pods, urls := startCrashPods(t, 2)
	pods[0].dead.Store(true) // resets whatever reaches it
	cfg := testConfig(urls...)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.Retries = 1
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	for i := range 4 {
		if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 200 {
			t.Fatalf("request %d: %d, want 200 (re-sent after the reset)", i, code)
		}
	}
	if got := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "reset"}); got < 1 {
		t.Errorf("retries_total{reset} = %v, want at least 1", got)
	}
}
