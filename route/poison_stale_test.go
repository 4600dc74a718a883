package route

import (
	"net"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// resetIdle resets (RST: SO_LINGER 0, then close) every connection u has
// open, as a pod restarted with unread data, a node that vanished, or a
// NAT/conntrack entry that expired leaves the proxy's pooled keep-alive
// connections to it: the pod itself keeps accepting new ones.
func (u *rawBackend) resetIdle() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.open {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// Three pods whose pooled connections were all reset while idle (all
// three restarted at once, say), upstream.retries 2: a request meets a
// stale connection on each pod in turn. None of those attempts reached a
// pod (the write failed on a socket the pod had reset), so none is a drop
// of the poison rule (poison.go) nor spends a retry: the request is
// answered over a fresh connection, and no body is remembered as poison.
// Counted as drops, the first two stale connections made it "dropped
// twice in a row": 502 and a poison verdict on a legitimate body.
func TestStaleResetsAreNotPoisonDrops(t *testing.T) {
	ok := func(c net.Conn, _ int, _ []byte) bool {
		_, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"choices\":[{\"text\":\"ok\"}]}"))
		return err == nil
	}
	var pods []*rawBackend
	var urls []string
	for range 3 {
		u := startRawBackend(t, ok)
		pods, urls = append(pods, u), append(urls, u.url())
	}
	cfg := testConfig(urls...)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.Retries = 2
	cfg.Upstream.RetryOnReset = true
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	body := `{"model":"m","prompt":"fine"}`
	for i := range 6 { // one pooled connection on each pod
		if code := postStatus(t, url, body); code != 200 {
			t.Fatalf("warm-up request %d: %d", i, code)
		}
	}
	for _, u := range pods {
		u.resetIdle()
	}
	time.Sleep(50 * time.Millisecond) // the resets reach the proxy's sockets
	for i := range 3 {
		if code := postStatus(t, url, body); code != 200 {
			t.Fatalf("request %d after every pooled connection was reset: %d, want 200 over a fresh connection (poison verdicts %v, stale retries %v)", i, code,
				tp.counter(t, "probegate_poison_requests_total", nil), tp.counter(t, "probegate_retries_total", map[string]string{"reason": "reset"}))
		}
	}
	if got := tp.counter(t, "probegate_poison_requests_total", nil); got != 0 {
		t.Errorf("poison_requests_total = %v after stale connections only, want 0", got)
	}
	if got := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "reset"}); got < 2 {
		t.Errorf("retries_total{reset} = %v: the test met fewer than two stale connections", got)
	}
	for _, b := range tp.DebugBackends() {
		if b.Breaker != "closed" {
			t.Errorf("backend %s: breaker %s after stale connections", b.Address, b.Breaker)
		}
	}
}
