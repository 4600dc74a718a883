package route

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// queuedStreamConfig is progressConfig with an idle_timeout short enough
// that a stream queued behind others falls silent past it after its head,
// and a first_byte_timeout no head reaches.
func queuedStreamConfig(url string) *config.Config {
	cfg := progressConfig(url)
	cfg.Upstream.IdleTimeout = config.Duration(400 * time.Millisecond)
	cfg.Upstream.FirstByteTimeout = config.Duration(5 * time.Second)
	return cfg
}

// stuckMetrics is a vLLM /metrics answer whose token counters never move.
const stuckMetrics = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 1\n" +
	"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n" +
	"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=\"m\"} 100\n" +
	"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{model_name=\"m\"} 200\n"

// startStuckBackend is a raw backend whose /metrics answers stuckMetrics
// and whose every other request gets sent, then silence until the proxy
// closes it: a stuck engine.
func startStuckBackend(t *testing.T, sent string) *rawBackend {
	t.Helper()
	return startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
		if strings.HasPrefix(string(head), "GET /metrics ") {
			_, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(stuckMetrics), stuckMetrics)
			return err == nil
		}
		if _, err := io.WriteString(c, sent); err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, c) // silent until the proxy gives up
		return false
	})
}

// A client that queues streams on a working pod (here one batch seat;
// with vLLM, its seats or its KV cache full) gets 504s for the streams
// whose first token waits past upstream.idle_timeout after their head,
// but does not open the pod's breaker for everyone: the pod's token
// counters advance while they wait. Before, each such silence counted
// against the pod, and the breaker opened after
// breaker.consecutive_failures of the client's own queued streams.
func TestQueuedStreamsNeverOpenAProgressingBackendsBreaker(t *testing.T) {
	fleet := simFleet(t, 1, func(c *vllmsim.Config) { c.TimeScale = 0.1; c.MaxNumSeqs = 1 })
	cfg := queuedStreamConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	if code := postStatus(t, url, ftBody(4, false)); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	const streams = 8 // each holds the seat about 180 ms (300 tokens at 0.1 scale)
	codes := make([]int, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() { codes[i] = postStatus(t, url, ftBody(300, true)) })
	}
	wg.Wait()
	timeouts := 0
	for i, c := range codes {
		switch c {
		case 200:
		case 504:
			timeouts++
		default:
			t.Fatalf("stream %d: %d, want 200 or 504 (%v)", i, c, codes)
		}
	}
	if timeouts < cfg.Breaker.ConsecutiveFailures {
		t.Fatalf("%d of %d queued streams timed out (%v): the test needs at least breaker.consecutive_failures (%d)", timeouts, streams, codes, cfg.Breaker.ConsecutiveFailures)
	}
	if st := tp.DebugBackends()[0].Breaker; st != "closed" {
		t.Fatalf("breaker %s after %d queued streams timed out on a working pod (%v)", st, timeouts, codes)
	}
	if code := postStatus(t, url, ftBody(1, false)); code != 200 {
		t.Fatalf("another client's request after the queued streams: %d, want 200", code)
	}
}

// A backend that sends a stream's head and then nothing, while its
// /metrics answers with token counters that stand still, still opens its
// breaker after breaker.consecutive_failures such silences.
func TestStreamSilentAfterItsHeadStillOpensAStuckBackendsBreaker(t *testing.T) {
	be := startStuckBackend(t, hhSSEHead)
	cfg := queuedStreamConfig(be.url())
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	for i := range cfg.Breaker.ConsecutiveFailures {
		if code := postStatus(t, url, ftBody(10, true)); code != 504 {
			t.Fatalf("stream %d: %d, want 504", i, code)
		}
		if r := tp.DebugBackends()[0].Report; r == nil {
			t.Fatalf("stream %d: no report of the backend: the test needs them flowing", i)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s after %d streams silent after their head on a stuck backend, want open", st, cfg.Breaker.ConsecutiveFailures)
	}
}

// A client whose streams fill a working pod's KV cache gets its preempted
// streams cut with the 504 error frame once they fall silent past
// upstream.idle_timeout (vLLM preempts the newest requests and recomputes
// them later), but does not open the pod's breaker for everyone: the
// pod's token counters advance during the silence. Before, each such
// silence counted against the pod, and the breaker opened.
func TestPreemptedStreamsNeverOpenAProgressingBackendsBreaker(t *testing.T) {
	// 200 blocks of 16 tokens: three of the eight 1,500-token streams fit.
	fleet := simFleet(t, 1, func(c *vllmsim.Config) {
		c.TimeScale = 0.1
		c.NumGPUBlocks = 200
		c.MaxModelLen = 3200
	})
	cfg := queuedStreamConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	if code := postStatus(t, url, ftBody(4, false)); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	const streams = 8
	cut := make([]bool, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			resp := post(t, url, ftBody(1500, true))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cut[i] = resp.StatusCode == 200 && strings.Contains(string(b), `"code":504`)
		})
		time.Sleep(30 * time.Millisecond) // the later ones are the newest, preempted first
	}
	wg.Wait()
	n := 0
	for _, c := range cut {
		if c {
			n++
		}
	}
	if n < cfg.Breaker.ConsecutiveFailures {
		t.Fatalf("%d of %d streams were cut mid-stream (%v): the test needs at least breaker.consecutive_failures (%d)", n, streams, cut, cfg.Breaker.ConsecutiveFailures)
	}
	if st := tp.DebugBackends()[0].Breaker; st != "closed" {
		t.Fatalf("breaker %s after %d streams were cut silent on a working pod", st, n)
	}
	if code := postStatus(t, url, ftBody(1, false)); code != 200 {
		t.Fatalf("another client's request after the preempted streams: %d, want 200", code)
	}
}

// A backend that falls silent in the middle of its streams, while its
// /metrics answers with token counters that stand still, still opens its
// breaker after breaker.consecutive_failures such silences.
func TestStreamSilentMidwayStillOpensAStuckBackendsBreaker(t *testing.T) {
	be := startStuckBackend(t, hhSSEHead+"d\r\ndata: first\n\n\r\n")
	cfg := queuedStreamConfig(be.url())
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	for i := range cfg.Breaker.ConsecutiveFailures {
		resp := post(t, url, ftBody(10, true))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "data: first") || !strings.Contains(string(b), `"code":504`) {
			t.Fatalf("stream %d: %d %q, want the first frame, then the 504 error frame", i, resp.StatusCode, b)
		}
		if r := tp.DebugBackends()[0].Report; r == nil {
			t.Fatalf("stream %d: no report of the backend: the test needs them flowing", i)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s after %d streams fell silent midway on a stuck backend, want open", st, cfg.Breaker.ConsecutiveFailures)
	}
}
