package route

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// tlsMetricsUpstream is an https vLLM stand-in reporting waiting requests at
// GET /metrics (counting the GETs) and answering completions.
func tlsMetricsUpstream(t *testing.T, waiting int, gets, served *atomic.Int64) string {
	return newTLSUpstream(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
			gets.Add(1)
			fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"m\"} 2.0\nvllm:num_requests_waiting{model_name=\"m\"} %d.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n", waiting)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"text_completion","choices":[]}`))
	}).URL
}

// The probe policy sees the load of an https fleet: its probes and scrapes
// go over TLS like its requests (they were sent as plain HTTP, failed, and
// left the default policy routing blind on its own counts). One backend
// reports 40 waiting requests, the other none: every request goes to the
// idle one, and no probe fails.
func TestProbePolicySeesHTTPSBackendsLoad(t *testing.T) {
	var busyGets, idleGets, busyServed, idleServed atomic.Int64
	busy := tlsMetricsUpstream(t, 40, &busyGets, &busyServed)
	idle := tlsMetricsUpstream(t, 0, &idleGets, &idleServed)
	cfg := testConfig(busy, idle)
	cfg.Route.Policy = "probe"
	tp := startProxy(t, cfg)
	// The first answers may miss probe.deadline (a TLS handshake under
	// -race): routing waits for nobody, so measure once the proxy holds
	// both backends' reports. A GET the upstream counted is not enough:
	// under load its answer can land after the next pick, which then sees
	// the busy backend as unknown (a tie with the idle one).
	complete(t, tp.url("/v1/completions"), "m", 4, false)
	waitUntil(t, 5*time.Second, func() bool {
		for _, b := range tp.Pool().Backends() {
			if l := b.state.Latest(); l == nil || l.Waiting < 0 {
				return false
			}
		}
		return busyGets.Load() > 0 && idleGets.Load() > 0
	}, "both backends' load read over TLS")
	busyServed.Store(0)
	idleServed.Store(0)
	for range 20 {
		complete(t, tp.url("/v1/completions"), "m", 4, false)
	}
	if n := tp.counter(t, "probegate_probes_total", map[string]string{"outcome": "error"}); n != 0 {
		t.Errorf("%v probes failed", n)
	}
	if busyServed.Load() != 0 || idleServed.Load() != 20 {
		t.Errorf("requests served: busy backend %d, idle %d; want 0 and 20", busyServed.Load(), idleServed.Load())
	}
}
