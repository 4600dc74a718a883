package route

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// progressConfig is a single simulated pod behind the cached policy
// (which scrapes it every 50 ms), with a first_byte_timeout far below a
// long generation and a breaker that stays open for the whole test once
// opened.
func progressConfig(url string) *config.Config {
	cfg := testConfig(url)
	cfg.Route.Policy = "cached"
	cfg.Scrape.Adaptive = false
	cfg.Scrape.Interval = config.Duration(50 * time.Millisecond)
	cfg.Scrape.MinInterval = config.Duration(50 * time.Millisecond)
	cfg.Scrape.MaxInterval = config.Duration(50 * time.Millisecond)
	cfg.Scrape.Timeout = config.Duration(200 * time.Millisecond)
	cfg.Upstream.FirstByteTimeout = config.Duration(400 * time.Millisecond)
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	return cfg
}

// postStatus posts body and returns the status, draining the answer.
func postStatus(t *testing.T, url, body string) int {
	resp := post(t, url, body)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// progressProxy starts a one-pod fleet and a proxy with progressConfig
// in front of it, warmed by one short request; url is the proxy's
// completions endpoint.
func progressProxy(t *testing.T) (*vllmsim.Fleet, *config.Config, *testProxy, string) {
	t.Helper()
	fleet := ftFleet(t, 1)
	cfg := progressConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	if code := postStatus(t, url, ftBody(4, false)); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	return fleet, cfg, tp, url
}

// A client asking a healthy pod for generations longer than
// upstream.first_byte_timeout gets its 504s, but never opens the pod's
// breaker: the pod's token counters advance while the requests wait.
// Without the progress rule, breaker.consecutive_failures such timeouts
// open it and everyone gets 503.
func TestLongGenerationsNeverOpenAProgressingBackendsBreaker(t *testing.T) {
	_, cfg, tp, url := progressProxy(t)
	longGenerationBursts(t, tp, url, ftBody(100000, false), cfg.Breaker.ConsecutiveFailures)
}

// Whether a request streams is read from its body as the model server
// reads it: of a repeated "stream" key the last counts (Python's json
// module, which vLLM's FastAPI parses bodies with, keeps the last; so does
// Go's encoding/json, the simulated pod's). A client sending
// {"stream":true,...,"stream":false} gets a non-stream answer, whose head
// comes after the whole generation; had the proxy taken the first key, it
// would judge that request a stream, whose first-byte timeout always
// counts, and such a client would open a working pod's breaker with
// breaker.consecutive_failures long generations.
func TestRepeatedStreamKeyCannotOpenAProgressingBackendsBreaker(t *testing.T) {
	_, cfg, tp, url := progressProxy(t)
	long := `{"stream":true,` + strings.TrimPrefix(ftBody(100000, false), "{")
	longGenerationBursts(t, tp, url, long, cfg.Breaker.ConsecutiveFailures)
}

// A hung engine whose HTTP server still answers /metrics shows no progress
// (its counters stand still): its first-byte timeouts still open its
// breaker after exactly breaker.consecutive_failures of them, with the
// reports flowing.
//
// "Flowing" is what the claim needs: two scrapes answered while a request
// waited, the rule's minimum, in at least one of the waits (a rule that
// took such reports for progress would excuse that timeout and leave the
// breaker closed). A round in which no wait got them (a starved process:
// the test's 300 ms bound on the report's age failed at 0.77 s in s9)
// proves nothing, and is run again on a fresh proxy, up to three times.
func TestHungEngineWithLiveMetricsStillOpensItsBreaker(t *testing.T) {
	for attempt := 1; ; attempt++ {
		most := hungEngineLiveMetricsRound(t)
		if most >= 2 {
			return
		}
		if attempt == 3 {
			t.Fatalf("at most %v scrapes answered while a request waited, in each of %d rounds, want 2: the test needs reports flowing", most, attempt)
		}
		t.Logf("round %d: at most %v scrapes answered while a request waited; again on a fresh proxy", attempt, most)
	}
}

// hungEngineLiveMetricsRound hangs a progressProxy's pod, sends it
// breaker.consecutive_failures requests one after the other, fails the
// test unless each is answered 504 and the breaker is then open, and
// returns the most scrapes answered while one request waited.
func hungEngineLiveMetricsRound(t *testing.T) float64 {
	fleet, cfg, tp, url := progressProxy(t)
	pod := fleet.Servers()[0]
	pod.SetFaults(vllmsim.Faults{Hang: true})
	ok := map[string]string{"backend": pod.Addr(), "outcome": "ok"}
	most := 0.0
	for i := range cfg.Breaker.ConsecutiveFailures {
		before := tp.counter(t, "probegate_scrapes_total", ok)
		if code := postStatus(t, url, ftBody(1, false)); code != 504 {
			t.Fatalf("request %d to the hung pod: %d, want 504", i, code)
		}
		most = max(most, tp.counter(t, "probegate_scrapes_total", ok)-before)
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s after %d timeouts of a hung pod, want open", st, cfg.Breaker.ConsecutiveFailures)
	}
	envelope(t, post(t, url, ftBody(1, false)), 503)
	return most
}

// A long stream that happens to be a half-open breaker's trial does not
// keep the backend out of everyone's picks for as long as the client's
// generation runs: the trial is decided by the answer's first bytes.
// Before, with one trial slot, every other request got 503 until the
// stream ended.
func TestLongStreamAsHalfOpenTrialDoesNotHoldTheBackend(t *testing.T) {
	release := make(chan struct{})
	var failing atomic.Bool
	failing.Store(true)
	up := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
		switch {
		case failing.Load():
			_, err := io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
			return err == nil
		case bytes.HasPrefix(head, []byte("POST /stream ")):
			if _, err := io.WriteString(c, hhSSEHead+"d\r\ndata: first\n\n\r\n"); err != nil {
				return false
			}
			<-release
			_, err := io.WriteString(c, "0\r\n\r\n")
			return err == nil
		}
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	})
	defer close(release)
	cfg := testConfig(up.url())
	tp := startProxy(t, cfg)
	for range cfg.Breaker.ConsecutiveFailures {
		if code := postStatus(t, tp.url("/quick"), `{}`); code != 500 {
			t.Fatalf("status %d, want the backend's 500", code)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s, want open", st)
	}
	failing.Store(false)
	time.Sleep(cfg.Breaker.OpenFor.D() + 50*time.Millisecond)
	// The trial: a stream that goes on until release.
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte("data: first")) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("the trial stream's first frame: %v (got %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	for i := range 3 {
		if code := postStatus(t, tp.url("/quick"), `{}`); code != 200 {
			t.Fatalf("request %d beside the trial stream: %d, want 200 (breaker %s)", i, code, tp.DebugBackends()[0].Breaker)
		}
	}
}

// longGenerationBursts sends two bursts of 2*threshold non-stream requests
// (body long) whose generations outlast upstream.first_byte_timeout to the proxy's only
// backend, and fails the test unless every one is answered 504, the
// backend's breaker is still closed after each burst, and a short request
// after each burst is answered 200. A burst makes the timeouts
// consecutive: nothing succeeds between them.
func longGenerationBursts(t *testing.T, tp *testProxy, url, long string, threshold int) {
	t.Helper()
	for round := range 2 {
		n := 2 * threshold
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { codes[i] = postStatus(t, url, long) })
		}
		wg.Wait()
		for i, c := range codes {
			if c != 504 {
				t.Fatalf("round %d, request %d: %d, want 504 (generation longer than first_byte_timeout)", round, i, c)
			}
		}
		if st := tp.DebugBackends()[0].Breaker; st != "closed" {
			t.Fatalf("round %d: breaker %s after long generations on a working pod", round, st)
		}
		if code := postStatus(t, url, ftBody(1, false)); code != 200 {
			t.Fatalf("round %d: a short request after the long ones: %d, want 200", round, code)
		}
	}
}
