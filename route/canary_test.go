package route

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// canaryPod is a model server that serves "m": its completions answer 500
// with an empty body (vLLM's answer to an EngineGenerateError, and to an
// EngineDeadError) when the body holds "poison", or to everything once
// dead is set (/v1/models still answers, as vLLM's API server does while
// its engine is dead); completions counts what reached it.
type canaryPod struct {
	poisonCode  int // the status of a poison body's answer; 0: 500
	dead        atomic.Bool
	completions atomic.Int64
	canaries    atomic.Int64
}

func (c *canaryPod) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		return
	case "/v1/completions":
	default:
		http.NotFound(w, r)
		return
	}
	c.completions.Add(1)
	if bytes.Contains(body, []byte(`"prompt":"ping"`)) {
		c.canaries.Add(1)
	}
	if c.dead.Load() || bytes.Contains(body, []byte("poison")) {
		code := http.StatusInternalServerError
		if c.poisonCode != 0 && !c.dead.Load() {
			code = c.poisonCode
		}
		w.WriteHeader(code)
		return
	}
	_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
}

func canaryConfig(url string) *config.Config {
	cfg := testConfig(url)
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second) // no half-open trial during the test
	return cfg
}

// A client whose requests make a healthy pod answer 500 (bursts of them,
// so that nothing succeeds between them) gets its 500s but never opens
// the pod's breaker: the pod answers the proxy's canary, and each 500 is
// judged before its client has it. Without the canary the first burst
// opens the breaker and everyone gets 503.
func TestPoisonRequestsNeverOpenAHealthyPodsBreaker(t *testing.T) {
	pod := &canaryPod{}
	up := upstream(t, pod.serve)
	cfg := canaryConfig(up.URL)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	n := 2 * cfg.Breaker.ConsecutiveFailures
	for round := range 3 {
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { codes[i] = postStatus(t, url, `{"model":"m","prompt":"poison"}`) })
		}
		wg.Wait()
		for i, c := range codes {
			if c != 500 {
				t.Fatalf("round %d, request %d: %d, want the pod's 500", round, i, c)
			}
		}
		// Judged by the canary: before the client had its 500 when the
		// canary answered within canaryWait, else soon after.
		waitUntil(t, 5*time.Second, func() bool {
			return tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "healthy"}) == float64((round+1)*n)
		}, fmt.Sprintf("round %d: excused{healthy} = %d", round, (round+1)*n))
		if st := tp.DebugBackends()[0].Breaker; st != "closed" {
			t.Fatalf("round %d: breaker %s after poison requests to a healthy pod", round, st)
		}
		if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 200 {
			t.Fatalf("round %d: another client's request: %d, want 200", round, code)
		}
		if round == 1 {
			// Past the verdict's second: the next burst asks again.
			time.Sleep(canaryVerdictFor + 50*time.Millisecond)
		}
	}
	// One canary per verdict, not one per 500: rounds 0 and 1 share one
	// (unless the machine took over a second between them), round 2 asks
	// again.
	if got := pod.canaries.Load(); got < 2 || got > 3 {
		t.Errorf("%d canaries for %d 500s in 3 bursts, want 2 or 3", got, 3*n)
	}
}

// A pod whose engine died answers every request 500, the canary too: its
// breaker opens after exactly breaker.consecutive_failures 500s, as
// before the canary, and the next request gets 503.
func TestDeadEngineStillOpensItsBreaker(t *testing.T) {
	pod := &canaryPod{}
	up := upstream(t, pod.serve)
	cfg := canaryConfig(up.URL)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	pod.dead.Store(true)
	for i := range cfg.Breaker.ConsecutiveFailures {
		if code := postStatus(t, url, `{"model":"m","prompt":"fine"}`); code != 500 {
			t.Fatalf("request %d to the dead pod: %d, want 500", i, code)
		}
	}
	// Counted before the client had its 500 when the canary's 500 came
	// within canaryWait (a dead engine's comes at once), else soon after.
	waitUntil(t, 5*time.Second, func() bool { return tp.DebugBackends()[0].Breaker == "open" },
		fmt.Sprintf("breaker open after %d 500s of a dead engine", cfg.Breaker.ConsecutiveFailures))
	envelope(t, post(t, url, `{"model":"m","prompt":"fine"}`), 503)
	if got := tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "healthy"}); got != 0 {
		t.Errorf("excused{healthy} = %v for a dead pod's 500s, want 0", got)
	}
}

// isCanary reports whether r is one of the proxy's canary requests
// (canary.go), which tests counting the requests clients sent leave out.
func isCanary(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("X-Request-Id"), canaryID)
}
