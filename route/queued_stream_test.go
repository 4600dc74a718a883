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
//
// Each timed-out stream is judged by its own wait (progressWitness; the
// proxy judges a silence after the head from the request's send, and no
// sooner than idle_timeout after it): when every one had two reports of
// progress inside it, the breaker must stay closed with every timeout
// excused. An attempt in which the breaker opened while some stream lacked
// them (a starved process), or that proves nothing else, runs again on a
// fresh pod and proxy, up to progressAttempts times.
func TestQueuedStreamsNeverOpenAProgressingBackendsBreaker(t *testing.T) {
	for attempt := 1; ; attempt++ {
		why := queuedStreamsAttempt(t)
		if why == "" {
			return
		}
		if attempt == progressAttempts {
			t.Fatalf("attempt %d: %s; none of %d attempts proved anything: the test needs reports flowing while the streams wait", attempt, why, attempt)
		}
		t.Logf("attempt %d proves nothing, again on a fresh pod and proxy: %s", attempt, why)
	}
}

// queuedStreamsAttempt is one attempt of
// TestQueuedStreamsNeverOpenAProgressingBackendsBreaker: "" when it
// passed, else why it proved nothing; it fails the test when every
// timed-out stream had its reports and the pod was still blamed.
func queuedStreamsAttempt(t *testing.T) string {
	fleet := simFleet(t, 1, func(c *vllmsim.Config) { c.TimeScale = 0.1; c.MaxNumSeqs = 1 })
	cfg := queuedStreamConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	r := progressRig{tp: tp, url: tp.url("/v1/completions"), threshold: cfg.Breaker.ConsecutiveFailures, wait: cfg.Upstream.IdleTimeout.D()}
	if code := postStatus(t, r.url, ftBody(4, false)); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	const streams = 8 // each holds the seat about 180 ms (300 tokens at 0.1 scale)
	before := r.excusedProgress(t)
	w := watchBurst(tp, streams)
	sent, codes := queuedStreams(t, r.url, streams, 300)
	w.end()
	excused := r.excusedProgress(t) - before
	timeouts, had, other := 0, 0, false
	for i, c := range codes {
		switch c {
		case 200:
		case 504:
			timeouts++
			if w.covered(sent[i], r.wait) {
				had++
			}
		default:
			other = true
		}
	}
	var bad string
	switch st := tp.DebugBackends()[0].Breaker; {
	case st != "closed":
		bad = fmt.Sprintf("breaker %s after %d queued streams timed out on a working pod", st, timeouts)
	case other:
		bad = "a stream answered neither 200 nor 504"
	case timeouts < r.threshold:
		return fmt.Sprintf("%d of %d queued streams timed out (%v): the test needs at least breaker.consecutive_failures (%d)", timeouts, streams, codes, r.threshold)
	case had == timeouts && excused != float64(timeouts):
		bad = fmt.Sprintf("excused{progress} +%v, want every timeout (%d)", excused, timeouts)
	}
	switch {
	case bad != "" && !other && had == timeouts:
		t.Fatalf("%s, though every timed-out stream's wait held two reports of the pod's token counters advancing (%v, excused{progress} +%v)", bad, codes, excused)
	case bad != "":
		return fmt.Sprintf("%s, with %d of %d timed-out streams' waits holding two reports of progress (%v, excused{progress} +%v)", bad, had, timeouts, codes, excused)
	case had < timeouts:
		return fmt.Sprintf("the breaker stayed closed, but only %d of %d timed-out streams' waits held two reports of progress", had, timeouts)
	}
	switch code := postStatus(t, r.url, ftBody(1, false)); code {
	case 200:
	case 504:
		return "another client's request after the queued streams answered 504 (its first byte later than first_byte_timeout)"
	default:
		t.Fatalf("another client's request after the queued streams: %d, want 200", code)
	}
	return ""
}

// A backend that sends a stream's head and then nothing, while its
// /metrics answers with token counters that stand still, still opens its
// breaker after breaker.consecutive_failures such silences: under the
// cached policy (its own scrapes) and under the setups whose only
// reports are the progress watch's.
func TestStreamSilentAfterItsHeadStillOpensAStuckBackendsBreaker(t *testing.T) {
	stuckStreamsOpenTheBreaker(t, hhSSEHead, func(code int, _ string) bool { return code == 504 }, "504")
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
// breaker after breaker.consecutive_failures such silences: under the
// cached policy (its own scrapes) and under the setups whose only
// reports are the progress watch's.
func TestStreamSilentMidwayStillOpensAStuckBackendsBreaker(t *testing.T) {
	stuckStreamsOpenTheBreaker(t, hhSSEHead+"d\r\ndata: first\n\n\r\n", func(code int, body string) bool {
		return code == 200 && strings.Contains(body, "data: first") && strings.Contains(body, `"code":504`)
	}, "the first frame, then the 504 error frame")
}

// A stuck backend whose /metrics does not answer either still opens its
// breaker after breaker.consecutive_failures streams silent after their
// head, under the setups whose only reports are the progress watch's: a
// scrape that gets no answer excuses nothing.
func TestStreamSilentOnABackendWhoseMetricsHangStillOpensItsBreaker(t *testing.T) {
	for _, tc := range blindPolicies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
				if !strings.HasPrefix(string(head), "GET /metrics ") {
					_, _ = io.WriteString(c, hhSSEHead)
				}
				_, _ = io.Copy(io.Discard, c) // silent until the proxy gives up
				return false
			})
			cfg := blindStreamConfig(be.url(), tc.policy, tc.endpoint)
			tp := startProxy(t, cfg)
			url := tp.url("/v1/completions")
			codes := make([]int, cfg.Breaker.ConsecutiveFailures)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() { codes[i] = postStatus(t, url, ftBody(10, true)) })
			}
			wg.Wait()
			for i, code := range codes {
				if code != 504 {
					t.Fatalf("stream %d: %d, want 504", i, code)
				}
			}
			if st := tp.DebugBackends()[0].Breaker; st != "open" {
				t.Fatalf("breaker %s after %d silent streams on a backend whose /metrics hangs, want open", st, len(codes))
			}
		})
	}
}

// stuckStreamSetups are the setups of the stuck-backend tests: the cached
// policy scraping every 50 ms with an idle_timeout of 400 ms
// (queuedStreamConfig), and the setups whose own reports carry no token
// counter (blindPolicies, blindStreamConfig), where the progress watch's
// scrapes are the only reports.
func stuckStreamSetups() []stuckSetup {
	setups := []stuckSetup{{name: "cached", cfg: queuedStreamConfig}}
	for _, tc := range blindPolicies {
		setups = append(setups, stuckSetup{name: tc.name, blind: true, cfg: func(url string) *config.Config {
			return blindStreamConfig(url, tc.policy, tc.endpoint)
		}})
	}
	return setups
}

type stuckSetup struct {
	name  string
	blind bool // the progress watch's scrapes are the only reports
	cfg   func(url string) *config.Config
}

// stuckStreamsOpenTheBreaker runs, under every stuckStreamSetups setup,
// breaker.consecutive_failures streams at once to a stuck backend
// (startStuckBackend with sent) and fails unless each answer passes want
// and the breaker is then open. The claim needs reports of the standing
// counters taken while the streams were silent: under the blind setups
// two progress stream scrapes (the rule's minimum); a round without them
// (a starved process) proves nothing and runs again on a fresh proxy, up
// to three times.
func stuckStreamsOpenTheBreaker(t *testing.T, sent string, want func(code int, body string) bool, wantText string) {
	for _, tc := range stuckStreamSetups() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; ; attempt++ {
				be := startStuckBackend(t, sent)
				cfg := tc.cfg(be.url())
				tp := startProxy(t, cfg)
				url := tp.url("/v1/completions")
				codes := make([]int, cfg.Breaker.ConsecutiveFailures)
				bodies := make([]string, len(codes))
				var wg sync.WaitGroup
				for i := range codes {
					wg.Go(func() {
						resp := post(t, url, ftBody(10, true))
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						codes[i], bodies[i] = resp.StatusCode, string(b)
					})
				}
				wg.Wait()
				for i := range codes {
					if !want(codes[i], bodies[i]) {
						t.Fatalf("stream %d: %d %q, want %s", i, codes[i], bodies[i], wantText)
					}
				}
				if st := tp.DebugBackends()[0].Breaker; st != "open" {
					t.Fatalf("breaker %s after %d silent streams on a stuck backend, want open", st, len(codes))
				}
				if !tc.blind {
					if r := tp.DebugBackends()[0].Report; r == nil {
						t.Fatal("no report of the backend: the test needs them flowing")
					}
					return
				}
				scrapes := tp.counter(t, "probegate_progress_stream_scrapes_total", nil)
				if scrapes >= 2 {
					return
				}
				if attempt == 3 {
					t.Fatalf("progress stream scrapes of the stuck backend = %v in each of %d rounds, want at least 2: the test needs reports flowing", scrapes, attempt)
				}
				t.Logf("round %d: %v progress stream scrapes while the streams were silent; again on a fresh proxy", attempt, scrapes)
			}
		})
	}
}

// blindStreamConfig is blindConfig (one pod behind setup, whose own
// reports carry no token counter) with an upstream.idle_timeout of 4 s:
// the progress watch looks every 500 ms (idle_timeout/8) for streams
// silent longer than 2 s, so a silence is judged on the reports of the
// watch's scrapes in its second half, a window of 2 s that a starved
// process must fit (see blindConfig). The first_byte_timeout is
// blindConfig's 4 s: a stream's head comes at once. Its scrape.timeout is
// the whole look (500 ms, the most the watch allows), not blindConfig's
// 250 ms: a scrape of the in-process pod then outlives a 300 ms stall of
// the process. In s14 all three rounds of the queued-stream test once got
// 0 or 1 answered scrapes at load 14.
func blindStreamConfig(url, policy, endpoint string) *config.Config {
	cfg := blindConfig(url, policy, endpoint)
	cfg.Upstream.IdleTimeout = config.Duration(4 * time.Second)
	cfg.Scrape.Timeout = config.Duration(500 * time.Millisecond)
	return cfg
}

// Queued streams never open a working pod's breaker under the setups
// whose own reports carry no token counter either: the progress watch
// scrapes the pod while a stream is silent past idle_timeout/2, and its
// counters advance. Without the watch's look at silent streams the
// breaker opens in every setup (before session 11 the watch only looked
// at waits for a head).
func TestQueuedStreamsNeverOpenAProgressingBackendsBreakerUnderBlindPolicies(t *testing.T) {
	blindStreamRounds(t, func(c *vllmsim.Config) { c.TimeScale = 0.1; c.MaxNumSeqs = 1 }, func(t *testing.T, url string) (int, string) {
		// One seat; each stream holds it about 1.2 s (2,000 tokens at
		// 0.1 scale): of 10, the fifth on waits past 4 s.
		_, codes := queuedStreams(t, url, 10, 2000)
		return countTimeouts(t, codes), fmt.Sprintf("queued streams timed out (%v)", codes)
	})
}

// Preempted streams never open a working pod's breaker under the setups
// whose own reports carry no token counter either: the progress watch
// scrapes the pod while a stream is silent past idle_timeout/2, and its
// counters advance. Without the watch's look at silent streams the
// breaker opens in every setup.
func TestPreemptedStreamsNeverOpenAProgressingBackendsBreakerUnderBlindPolicies(t *testing.T) {
	blindStreamRounds(t, preemptingPod, func(t *testing.T, url string) (int, string) {
		return preemptedStreams(t, url, 8, 2500), "of 8 streams were cut silent mid-stream"
	})
}

// blindStreamRounds runs, under every blind setup (blindPolicies,
// blindStreamConfig), one simulated pod (mut) behind a proxy and silences
// on it (run: how many streams were cut, and what they were), and fails
// unless the breaker stays closed and another client's request is then
// served. A round proves nothing when the pod or the proxy was starved (a
// -race process behind other work): fewer silences than
// breaker.consecutive_failures, or a breaker opened while the watch got
// fewer than two answered scrapes per silence (the rule's minimum, had
// the silences not overlapped). Such a round runs again on a fresh pod
// and proxy, up to progressAttempts times; without the watch's look at
// silent streams every round opens the breaker with no scrape.
func blindStreamRounds(t *testing.T, mut func(*vllmsim.Config), run func(t *testing.T, url string) (int, string)) {
	for _, tc := range blindPolicies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; ; attempt++ {
				fleet := simFleet(t, 1, mut)
				cfg := blindStreamConfig(fleet.URLs()[0], tc.policy, tc.endpoint)
				tp := startProxy(t, cfg)
				url := tp.url("/v1/completions")
				if code := postStatus(t, url, ftBody(4, false)); code != 200 {
					t.Fatalf("warm-up: %d", code)
				}
				n, what := run(t, url)
				st := tp.DebugBackends()[0].Breaker
				excused := tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "progress"})
				scrapes := tp.counter(t, "probegate_progress_stream_scrapes_total", nil)
				var why string
				switch {
				case n < cfg.Breaker.ConsecutiveFailures:
					why = fmt.Sprintf("%d %s: the test needs at least breaker.consecutive_failures (%d)", n, what, cfg.Breaker.ConsecutiveFailures)
				case st != "closed" && scrapes < float64(2*n):
					why = fmt.Sprintf("breaker %s after %d %s (excused{progress} %v, progress stream scrapes %v: fewer than two per silence)", st, n, what, excused, scrapes)
				case st != "closed":
					t.Fatalf("breaker %s after %d %s on a working pod (excused{progress} %v, progress stream scrapes %v)", st, n, what, excused, scrapes)
				default:
					if excused < 1 {
						t.Errorf("excused{progress} = %v after %d %s", excused, n, what)
					}
					if code := postStatus(t, url, ftBody(1, false)); code != 200 {
						t.Fatalf("another client's request after them: %d, want 200", code)
					}
					return
				}
				if attempt == progressAttempts {
					t.Fatalf("round %d: %s", attempt, why)
				}
				t.Logf("round %d proves nothing, again on a fresh pod and proxy: %s", attempt, why)
			}
		})
	}
}

// preemptingPod is a simulated pod whose KV cache (300 blocks of 16
// tokens) holds fewer than eight 2,500-token streams, with steps of 3 ms
// (StepBase 30 ms at 0.1 scale): the newest are preempted, silent for
// seconds while the oldest run on (5 of 8 cut at idle_timeout 4 s here).
func preemptingPod(c *vllmsim.Config) {
	c.TimeScale = 0.1
	c.StepBase = 30 * time.Millisecond
	c.NumGPUBlocks = 300
	c.MaxModelLen = 4800
}

// preemptedStreams starts n streams of tokens each, 30 ms apart (the later
// ones are the newest, preempted first), reads them to their end and
// returns how many were cut with the 504 error frame after their first
// frames.
func preemptedStreams(t *testing.T, url string, n, tokens int) int {
	t.Helper()
	cut := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp := post(t, url, ftBody(tokens, true))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cut[i] = resp.StatusCode == 200 && strings.Contains(string(b), `"code":504`)
		})
		time.Sleep(30 * time.Millisecond)
	}
	wg.Wait()
	k := 0
	for _, c := range cut {
		if c {
			k++
		}
	}
	return k
}

// queuedStreams sends n streams of tokens each at once and returns when
// the client began sending each, and each one's status.
func queuedStreams(t *testing.T, url string, n, tokens int) ([]time.Time, []int) {
	t.Helper()
	sent := make([]time.Time, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sent[i] = time.Now()
			codes[i] = postStatus(t, url, ftBody(tokens, true))
		})
	}
	wg.Wait()
	return sent, codes
}

// countTimeouts returns how many of codes are 504 (a first token that
// waited past upstream.idle_timeout), and fails t for any status but 200
// or 504.
func countTimeouts(t *testing.T, codes []int) int {
	t.Helper()
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
	return timeouts
}
