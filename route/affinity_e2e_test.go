package route

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// metricsUpstream is a fake vLLM whose /metrics reports the given waiting
// count and KV use (or answers 500 when broken), and whose completions
// answer 200 at once.
func metricsUpstream(t *testing.T, waiting *atomic.Int64, broken bool) string {
	t.Helper()
	s := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			if broken {
				w.WriteHeader(500)
				return
			}
			fmt.Fprintf(w, "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 4.0\n"+
				"vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d.0\n"+
				"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n", waiting.Load())
		default:
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	})
	return s.URL
}

func TestShedOnlyWhenEveryCandidateIsKnownSaturated(t *testing.T) {
	var waiting atomic.Int64
	waiting.Store(500)
	a, b := metricsUpstream(t, &waiting, false), metricsUpstream(t, &waiting, false)
	cfg := testConfig(a, b)
	cfg.Route.Policy = "probe"
	cfg.Route.Saturation.Shed = true
	cfg.Route.Saturation.MaxWaiting = 64
	cfg.Probe.FreshFor = 0
	cfg.Probe.Deadline = config.Duration(200 * time.Millisecond)
	cfg.Probe.HedgeAfter = "100ms"
	cfg.Probe.Quorum = 2
	tp := startProxy(t, cfg)

	resp := post(t, tp.url("/v1/completions"), `{"prompt":"x"}`)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 must carry Retry-After")
	}
	envelope(t, resp, 429)
	if tp.counter(t, "probegate_shed_total", nil) != 1 {
		t.Fatal("shed_total must count the shed request")
	}
	waiting.Store(0)
	resp = post(t, tp.url("/v1/completions"), `{"prompt":"x"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the queues drained: %d", resp.StatusCode)
	}

	// Unknown state is never a reason to shed.
	c := metricsUpstream(t, &waiting, true)
	cfg2 := testConfig(c)
	cfg2.Route.Policy = "probe"
	cfg2.Route.Saturation.Shed = true
	tp2 := startProxy(t, cfg2)
	resp = post(t, tp2.url("/v1/completions"), `{"prompt":"x"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a backend whose state is unknown must be tried, got %d", resp.StatusCode)
	}
}

// Requests sharing a long system prompt go back to the server that has it
// cached, while the fleet is not overloaded.
func TestPrefixAffinityOnSimulatedFleet(t *testing.T) {
	f := simFleet(t, 4, func(c *vllmsim.Config) { c.TimeScale = 0.05 })
	tp := startProxy(t, probeConfig(f))
	sys := strings.Repeat("You are a meticulous assistant for the routing team. ", 60)
	model := vllmsim.DefaultConfig().Model
	before := make([]int64, 4)
	for i := 0; i < 4; i++ {
		for j, s := range f.Servers() {
			before[j] = s.State().Finished
		}
		for k := 0; k < 5; k++ {
			body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d-%d"}]}`, model, sys+fmt.Sprint(i), i, k)
			resp := post(t, tp.url("/v1/chat/completions"), body)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		// All five requests of this system prompt went to one server.
		served := 0
		for j, s := range f.Servers() {
			if s.State().Finished > before[j] {
				served++
			}
		}
		if served != 1 {
			t.Fatalf("system prompt %d was spread over %d servers, want 1 (prefix affinity)", i, served)
		}
	}
	var hits, queries int64
	for _, s := range f.Servers() {
		st := s.State()
		hits += st.PrefixHits
		queries += st.PrefixQueries
	}
	if float64(hits) < 0.6*float64(queries) {
		t.Fatalf("prefix cache hit rate %.2f, want >= 0.6", float64(hits)/float64(queries))
	}
}

// Requests for a LoRA adapter go to a server that has it loaded rather than
// forcing another server to load it.
func TestLoRAAffinityOnSimulatedFleet(t *testing.T) {
	adapters := []string{"sql-lora", "chat-lora", "code-lora", "math-lora"}
	f := simFleet(t, 4, func(c *vllmsim.Config) { c.TimeScale = 0.05; c.LoRAs = adapters; c.MaxLoRAs = 1 })
	c := probeConfig(f)
	// Which adapters a server holds comes with its probe answer; a
	// generous deadline keeps the answers in on a loaded machine (with
	// the default 5ms, -race beside other test binaries fell back to
	// cached state and loaded 11 times), so the test is about affinity.
	c.Probe.Deadline = config.Duration(500 * time.Millisecond)
	tp := startProxy(t, c)
	for round := 0; round < 5; round++ {
		for _, a := range adapters {
			complete(t, tp.url("/v1/completions"), a, 2, false)
		}
	}
	var loads int64
	for _, s := range f.Servers() {
		loads += s.State().AdapterLoads
	}
	// Ideal: 4 loads (one adapter per server). Blind routing of 20
	// requests over 4 servers with one slot each loads ~15 times.
	if loads > 8 {
		t.Fatalf("adapter loads %d for 20 requests over 4 adapters, want few (affinity)", loads)
	}
	t.Logf("adapter loads: %d", loads)
}
