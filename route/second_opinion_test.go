package route

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// brokenRoutePod answers the proxy's canary (a one-token "ping"
// completion) and /v1/models, and 500 to every client completion: a pod
// whose engine runs but whose path for real requests is broken. clients
// counts the client requests that reached it.
type brokenRoutePod struct{ clients atomic.Int64 }

func (c *brokenRoutePod) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		return
	}
	if bytes.Contains(body, []byte(`"prompt":"ping"`)) {
		_, _ = io.WriteString(w, `{"choices":[{"text":"pong"}]}`)
		return
	}
	c.clients.Add(1)
	w.WriteHeader(http.StatusInternalServerError)
}

func secondOpinionConfig(urls ...string) *config.Config {
	cfg := testConfig(urls...)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.Retries = 1
	cfg.Upstream.RetryOnReset = true
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second) // no half-open trial during the test
	return cfg
}

// A pod that answers the canary but fails every client request is
// ejected: each of its 500s is re-sent to the other pod, which serves the
// same body, so the 500 counts; after consecutive_failures distinct bodies
// its breaker is open. No client sees an error. With the canary alone
// (the 500s not re-sent) every other client got a 500 and the pod stayed
// in rotation for good.
func TestPodFailingBodiesOthersServeIsEjected(t *testing.T) {
	broken := &brokenRoutePod{}
	healthy := &canaryPod{}
	bu, hu := upstream(t, broken.serve), upstream(t, healthy.serve)
	cfg := secondOpinionConfig(bu.URL, hu.URL)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	for i := range 12 {
		if code := postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"question %d"}`, i)); code != 200 {
			t.Fatalf("request %d: %d, want 200 (a 500 re-sent to the healthy pod)", i, code)
		}
	}
	if st := ftBackend(tp, bu.Listener.Addr().String()).Breaker; st != "open" {
		t.Fatalf("the broken pod's breaker is %s after failing bodies the other pod served, want open", st)
	}
	if got := broken.clients.Load(); got != int64(cfg.Breaker.ConsecutiveFailures) {
		t.Errorf("the broken pod got %d client requests, want exactly consecutive_failures (%d)", got, cfg.Breaker.ConsecutiveFailures)
	}
	if got := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "server_error"}); int(got) != cfg.Breaker.ConsecutiveFailures {
		t.Errorf("retries_total{server_error} = %v, want %d", got, cfg.Breaker.ConsecutiveFailures)
	}
	// An operator sees which pod's 5xx answers were re-sent.
	if got := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": bu.Listener.Addr().String(), "code": "500"}); int(got) != cfg.Breaker.ConsecutiveFailures {
		t.Errorf("resent_server_errors_total{broken pod, 500} = %v, want %d", got, cfg.Breaker.ConsecutiveFailures)
	}
	if got := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": hu.Listener.Addr().String()}); got != 0 {
		t.Errorf("resent_server_errors_total{healthy pod} = %v, want 0", got)
	}
}

// The half-open trial of such a pod is decided the same way: its 500,
// served by the other pod, reopens the breaker at once. (Ignored until its
// second opinion and then counted only while closed, the trial left the
// breaker half-open, and every later pick of the pod was one more trial
// that failed.) The checks after the trial hold for open_for after it
// (1 s): with 200 ms, 8 requests on a loaded machine outlasted the reopened
// breaker's open_for and met the next trial ("got 2 client requests").
func TestBrokenPodsTrialReopensItsBreaker(t *testing.T) {
	broken := &brokenRoutePod{}
	healthy := &canaryPod{}
	bu, hu := upstream(t, broken.serve), upstream(t, healthy.serve)
	cfg := secondOpinionConfig(bu.URL, hu.URL)
	openFor := time.Second
	cfg.Breaker.OpenFor = config.Duration(openFor)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	addr := bu.Listener.Addr().String()
	for i := 0; ftBackend(tp, addr).Breaker == "closed"; i++ {
		if i == 20 {
			t.Fatal("the broken pod's breaker did not open")
		}
		if code := postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"question %d"}`, i)); code != 200 {
			t.Fatalf("request %d: %d, want 200", i, code)
		}
	}
	before := broken.clients.Load()
	time.Sleep(openFor + 50*time.Millisecond)
	var trialAt time.Time // when the request the trial was part of returned
	for i := range 8 {
		if code := postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"later %d"}`, i)); code != 200 {
			t.Fatalf("request %d after open_for: %d, want 200", i, code)
		}
		if trialAt.IsZero() && broken.clients.Load() > before {
			trialAt = time.Now()
			if st := ftBackend(tp, addr).Breaker; st != "open" && time.Since(trialAt) < openFor {
				t.Errorf("the broken pod's breaker is %s after its trial failed, want open", st)
			}
		}
	}
	if trialAt.IsZero() {
		t.Fatal("no request after open_for reached the broken pod: no trial")
	}
	if got := broken.clients.Load() - before; got != 1 {
		if d := time.Since(trialAt); d < openFor {
			t.Errorf("the broken pod got %d client requests after open_for, want 1 (its trial)", got)
		} else {
			t.Logf("%d client requests at the broken pod, but the requests after its trial took %v, past open_for", got, d)
		}
	}
}

// Poison bodies (distinct ones, each making a pod answer 500) never open
// a healthy pod's breaker: each 500 is re-sent, the other pod fails the
// same body too (500) or refuses it (400), so neither answer counts
// (excused{also_failed}) and the client gets the second answer. Other
// clients are served throughout.
func TestPoisonBodiesFailingEverywhereEjectNoPod(t *testing.T) {
	for _, other := range []int{500, 400} {
		t.Run(fmt.Sprintf("other pod answers %d", other), func(t *testing.T) {
			a, b := &canaryPod{}, &canaryPod{poisonCode: other}
			au, bu := upstream(t, a.serve), upstream(t, b.serve)
			cfg := secondOpinionConfig(au.URL, bu.URL)
			tp := startProxy(t, cfg)
			url := tp.url("/v1/completions")
			n := 2 * cfg.Breaker.ConsecutiveFailures
			for round := range 3 {
				codes := make([]int, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						codes[i] = postStatus(t, url, fmt.Sprintf(`{"model":"m","prompt":"poison %d-%d"}`, round, i))
					})
				}
				wg.Wait()
				for i, c := range codes {
					if c != 500 && c != other {
						t.Fatalf("round %d, request %d: %d, want a pod's 500 or %d", round, i, c, other)
					}
				}
				for _, info := range tp.DebugBackends() {
					if info.Breaker != "closed" {
						t.Fatalf("round %d: %s's breaker %s after poison bodies no pod serves", round, info.Address, info.Breaker)
					}
				}
				if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 200 {
					t.Fatalf("round %d: another client's request: %d, want 200", round, code)
				}
			}
			// Every poison request met pod a's 500 once: first (then
			// re-sent to b) or second (after b's 500; b's 400 ends it).
			resent := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "server_error"})
			if got := tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "also_failed"}); got != resent || resent == 0 {
				t.Errorf("excused{also_failed} = %v, want one per re-sent poison request (%v, > 0)", got, resent)
			}
			if other == 500 && int(resent) != 3*n {
				t.Errorf("retries_total{server_error} = %v, want one per poison request (%d)", resent, 3*n)
			}
			// Per backend: the 5xx of whichever pod answered first.
			ra := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": au.Listener.Addr().String(), "code": "500"})
			rb := tp.counter(t, "probegate_resent_server_errors_total", map[string]string{"backend": bu.Listener.Addr().String(), "code": "500"})
			if ra+rb != resent || (other == 400 && rb != 0) {
				t.Errorf("resent_server_errors_total{500}: pod a %v, pod b %v; want them to sum to retries_total{server_error} (%v), b's 400s never re-sent", ra, rb, resent)
			}
		})
	}
}
