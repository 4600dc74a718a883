package route

import (
	"fmt"
	"testing"
)

// A 429 from one pod (its own admission limit: vLLM never sends one) is
// re-sent to another eligible pod, once per request, and the client gets
// that pod's answer; the 429 never counts against the breaker. When every
// pod answers 429, the client gets the last one with its Retry-After, after
// one re-send. With nowhere to re-send (one pod), the 429 goes to the
// client at once. Before, every 429 went to the client, who can choose no
// pod and only backs off, though another pod had room.
func TestTooManyRequestsIsResentToAnotherPod(t *testing.T) {
	const n = 12
	t.Run("another pod serves it", func(t *testing.T) {
		limited, healthy := &overloadedPod{status: 429}, &canaryPod{}
		limited.retryAfter.Store(true)
		lu, hu := upstream(t, limited.serve), upstream(t, healthy.serve)
		tp := startProxy(t, secondOpinionConfig(lu.URL, hu.URL))
		for i := range n {
			if code := postStatus(t, tp.url("/v1/completions"), fmt.Sprintf(`{"model":"m","prompt":"q %d"}`, i)); code != 200 {
				t.Fatalf("request %d: %d, want 200 from the pod with room", i, code)
			}
		}
		got := limited.clients.Load()
		if got < n/2-1 {
			t.Fatalf("the limited pod got %d of %d requests: round robin should keep offering it half", got, n)
		}
		if st := ftBackend(tp, lu.Listener.Addr().String()).Breaker; st != "closed" {
			t.Fatalf("the limited pod's breaker is %s after %d 429s", st, got)
		}
		if r := rtRetries(t, tp, "too_many_requests"); int64(r) != got {
			t.Errorf("retries_total{too_many_requests} = %v, want one per 429 (%d)", r, got)
		}
	})
	t.Run("every pod is limited", func(t *testing.T) {
		pods := []*overloadedPod{{status: 429}, {status: 429}, {status: 429}}
		var urls, addrs []string
		for _, p := range pods {
			p.retryAfter.Store(true)
			u := upstream(t, p.serve)
			urls, addrs = append(urls, u.URL), append(addrs, u.Listener.Addr().String())
		}
		cfg := secondOpinionConfig(urls...)
		cfg.Upstream.Retries = 3 // still one re-send of a 429 per request
		tp := startProxy(t, cfg)
		for i := range 4 {
			resp := post(t, tp.url("/v1/completions"), fmt.Sprintf(`{"model":"m","prompt":"q %d"}`, i))
			resp.Body.Close()
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("request %d: %d Retry-After %q, want a pod's 429 with Retry-After 1", i, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}
		sent := int64(0)
		for _, p := range pods {
			sent += p.clients.Load()
		}
		if sent != 8 {
			t.Errorf("the pods got %d attempts for 4 requests, want 8 (one re-send each)", sent)
		}
		for _, a := range addrs {
			if st := ftBackend(tp, a).Breaker; st != "closed" {
				t.Errorf("breaker of %s is %s after 429s", a, st)
			}
		}
	})
	t.Run("one pod", func(t *testing.T) {
		limited := &overloadedPod{status: 429}
		lu := upstream(t, limited.serve)
		tp := startProxy(t, secondOpinionConfig(lu.URL))
		for i := range 6 {
			if code := postStatus(t, tp.url("/v1/completions"), fmt.Sprintf(`{"model":"m","prompt":"q %d"}`, i)); code != 429 {
				t.Fatalf("request %d: %d, want the pod's 429", i, code)
			}
		}
		if r := rtRetries(t, tp, ""); r != 0 {
			t.Errorf("retries_total = %v with no other pod", r)
		}
		if st := ftBackend(tp, lu.Listener.Addr().String()).Breaker; st != "closed" {
			t.Fatalf("breaker %s after 429s, want closed", st)
		}
	})
}
