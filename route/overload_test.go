package route

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// overloadedPod answers every client completion with status (and
// Retry-After: 1 when retryAfter), and the canary's "ping" and /v1/models
// as a working vLLM would, unless canaryToo: then the canary gets the same
// overload answer (its queue is full for everyone). clients counts the
// client requests that reached it.
type overloadedPod struct {
	status     int
	retryAfter atomic.Bool
	canaryToo  bool
	clients    atomic.Int64
}

func (o *overloadedPod) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		return
	}
	ping := bytes.Contains(body, []byte(`"prompt":"ping"`))
	if ping && !o.canaryToo {
		_, _ = io.WriteString(w, `{"choices":[{"text":"pong"}]}`)
		return
	}
	if !ping {
		o.clients.Add(1)
	}
	if o.retryAfter.Load() {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(o.status)
}

// A pod answering 503 with Retry-After (its own word that it is
// overloaded) while another pod serves the same bodies is not ejected:
// each such answer is re-sent, the client gets the other pod's 200, and
// the breaker is told neither success nor failure. A 503 without
// Retry-After is still a failure there (the broken pod of
// TestPodFailingBodiesOthersServeIsEjected), and so is this pod once it
// drops the header. With no retry left, the overload answer reaches the
// client and still counts for nothing, even when the canary, queued behind
// the same overload, gets it too.
func TestOverloadAnswersDoNotOpenTheBreaker(t *testing.T) {
	const n = 12
	t.Run("re-sent to a pod that serves it", func(t *testing.T) {
		busy, healthy := &overloadedPod{status: 503}, &canaryPod{}
		busy.retryAfter.Store(true)
		bu, hu := upstream(t, busy.serve), upstream(t, healthy.serve)
		cfg := secondOpinionConfig(bu.URL, hu.URL)
		tp := startProxy(t, cfg)
		url := tp.url("/v1/completions")
		for i := range n {
			if code := postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"question %d"}`, i)); code != 200 {
				t.Fatalf("request %d: %d, want 200 (re-sent to the other pod)", i, code)
			}
		}
		addr := bu.Listener.Addr().String()
		if st := ftBackend(tp, addr).Breaker; st != "closed" {
			t.Fatalf("the overloaded pod's breaker is %s after %d overload answers others served, want closed", st, busy.clients.Load())
		}
		got := busy.clients.Load()
		if got < n/2-1 {
			t.Fatalf("the overloaded pod got %d of %d requests: round robin should keep offering it half", got, n)
		}
		if ex := tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "overloaded"}); int64(ex) != got {
			t.Errorf("excused{overloaded} = %v, want one per overload answer (%d)", ex, got)
		}
		if rs := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": addr, "code": "503"}); int64(rs) != got {
			t.Errorf("resent_server_errors_total{overloaded pod, 503} = %v, want %d", rs, got)
		}
		// The same pod without Retry-After is a broken pod: ejected.
		busy.retryAfter.Store(false)
		for i := 0; ftBackend(tp, addr).Breaker == "closed"; i++ {
			if i == 4*cfg.Breaker.ConsecutiveFailures {
				t.Fatal("a pod answering 503 without Retry-After to bodies another pod serves was not ejected")
			}
			if code := postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"later %d"}`, i)); code != 200 {
				t.Fatalf("later request %d: %d, want 200", i, code)
			}
		}
	})
	t.Run("nothing to re-send to", func(t *testing.T) {
		busy := &overloadedPod{status: 503, canaryToo: true}
		busy.retryAfter.Store(true)
		bu := upstream(t, busy.serve)
		cfg := secondOpinionConfig(bu.URL)
		tp := startProxy(t, cfg)
		url := tp.url("/v1/completions")
		for i := range 2 * cfg.Breaker.ConsecutiveFailures {
			resp := post(t, url, fmt.Sprintf(`{"model":"m","prompt":"question %d"}`, i))
			resp.Body.Close()
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("request %d: %d Retry-After %q, want the pod's 503 with Retry-After 1", i, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}
		if st := ftBackend(tp, bu.Listener.Addr().String()).Breaker; st != "closed" {
			t.Fatalf("breaker %s after overload answers, want closed", st)
		}
		if ex := tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "overloaded"}); int(ex) != 2*cfg.Breaker.ConsecutiveFailures {
			t.Errorf("excused{overloaded} = %v, want %d", ex, 2*cfg.Breaker.ConsecutiveFailures)
		}
	})
	t.Run("429 is never a failure", func(t *testing.T) {
		busy := &overloadedPod{status: 429, canaryToo: true}
		busy.retryAfter.Store(true)
		bu := upstream(t, busy.serve)
		tp := startProxy(t, secondOpinionConfig(bu.URL))
		for i := range 6 {
			if code := postStatus(t, tp.url("/v1/completions"), fmt.Sprintf(`{"model":"m","prompt":"q %d"}`, i)); code != 429 {
				t.Fatalf("request %d: %d, want the pod's 429", i, code)
			}
		}
		if st := ftBackend(tp, bu.Listener.Addr().String()).Breaker; st != "closed" {
			t.Fatalf("breaker %s after 429s, want closed", st)
		}
	})
}
