package route

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
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
	longGenerationBursts(t, progressRigOf, ftBody(100000, false))
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
	long := `{"stream":true,` + strings.TrimPrefix(ftBody(100000, false), "{")
	longGenerationBursts(t, progressRigOf, long)
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

// progressRig is a proxy in front of one simulated pod for the progress
// rule's tests: its completions URL, the pod's breaker.consecutive_failures
// and the wait its timeouts end (upstream.first_byte_timeout for a
// non-stream request's head, upstream.idle_timeout for a stream's first
// bytes after its head).
type progressRig struct {
	tp        *testProxy
	url       string
	threshold int
	wait      time.Duration
}

// progressRigOf starts a fresh pod and a proxy with progressConfig in
// front of it.
func progressRigOf(t *testing.T) progressRig {
	fleet := ftFleet(t, 1)
	cfg := progressConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	return progressRig{tp: tp, url: tp.url("/v1/completions"), threshold: cfg.Breaker.ConsecutiveFailures, wait: cfg.Upstream.FirstByteTimeout.D()}
}

// excusedProgress is the proxy's probegate_breaker_excused_total{reason="progress"}.
func (r progressRig) excusedProgress(t *testing.T) float64 {
	return r.tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "progress"})
}

// progressAttempts bounds how many fresh pods and proxies a progress test
// tries before it fails for want of reports.
const progressAttempts = 4

// progressWitness tells, for each request of a burst, whether the progress
// rule had what it needs inside that request's own wait: two of the
// backend's reports, both taken after the request was sent and before the
// proxy judged its timeout, showing the token counters advancing. It reads
// the rule's own predicate (probe.State.ProgressedSince) from the side
// while the burst waits:
//
//   - all is a time read after the backend's dispatch count showed every
//     request of the burst dispatched, so after each one's send (the proxy
//     stamps a request's send before it counts its dispatch);
//   - seen is a time read after ProgressedSince(all) returned true. The
//     predicate is monotone (the later of the two reports only moves
//     forward, and an earlier since is easier), so it still holds at each
//     judgment, for each request's own send;
//   - a request the client began sending at c, whose wait ends in a
//     timeout of wait (its deadline is armed after the proxy sent it), is
//     judged no sooner than c+wait.
//
// So a request with seen <= c+wait had its reports (covered); the progress
// rule must excuse its timeout. Without a covered request the test proves
// nothing: the process was starved (s13: a round with one scrape answered
// in its 0.45 s, under 300 ms SIGSTOPs) and the round runs again. Counting
// answered scrapes per burst instead (s13's candidate) was not enough: the
// count from a burst's start is not the count inside each wait.
type progressWitness struct {
	st        *probe.State
	want      uint64 // the dispatch count once every request of the burst was sent
	stop      chan struct{}
	done      chan struct{}
	all, seen time.Time // zero: not (yet) observed
}

// watchBurst starts a witness for a burst of n requests about to be sent to
// the proxy's only backend, whose earlier requests were all dispatched.
func watchBurst(tp *testProxy, n int) *progressWitness {
	st := tp.snap.Load().pool.backends[0].state
	w := &progressWitness{st: st, want: st.Dispatched() + uint64(n), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *progressWitness) run() {
	defer close(w.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if w.all.IsZero() && w.st.Dispatched() >= w.want {
			w.all = time.Now()
		}
		if !w.all.IsZero() && w.st.ProgressedSince(w.all) {
			w.seen = time.Now()
			return
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// end stops the witness; call it once the burst was answered.
func (w *progressWitness) end() {
	close(w.stop)
	<-w.done
}

// covered reports whether a request the client began sending at sent,
// judged no sooner than wait after it, had its reports (see
// progressWitness). Call it after end.
func (w *progressWitness) covered(sent time.Time, wait time.Duration) bool {
	return !w.seen.IsZero() && !w.seen.After(sent.Add(wait))
}

// longGenerationBursts sends two bursts of 2*threshold non-stream requests
// (body long) whose generations outlast upstream.first_byte_timeout to the
// only backend of a proxy that rig starts, and fails the test unless every
// one is answered 504, the backend's breaker is still closed after each
// burst, and a short request after each burst is answered 200. A burst
// makes the timeouts consecutive: nothing succeeds between them.
//
// Each request is judged by its own wait (progressWitness). A burst in
// which every request had two reports of progress inside its wait must
// leave the breaker closed, with every timeout excused; one in which the
// breaker opened, or a request was answered otherwise, while some request
// lacked them (a starved process: its scrapes came late) proves nothing,
// and the test runs again on a fresh pod and proxy, up to
// progressAttempts times; so does an attempt whose warm-up or short
// request timed out (504), and one in which no burst had its reports. A
// proxy that never excuses fails the first burst that had its reports.
func longGenerationBursts(t *testing.T, rig func(*testing.T) progressRig, long string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		why := longGenerationAttempt(t, rig(t), long)
		if why == "" {
			return
		}
		if attempt == progressAttempts {
			t.Fatalf("attempt %d: %s; none of %d attempts proved anything: the test needs reports flowing while the requests wait", attempt, why, attempt)
		}
		t.Logf("attempt %d proves nothing, again on a fresh pod and proxy: %s", attempt, why)
	}
}

// longGenerationAttempt is one attempt of longGenerationBursts on r. It
// returns "" when it passed, or why it proved nothing; it fails the test
// for a burst that had its reports and still counted against the pod.
func longGenerationAttempt(t *testing.T, r progressRig, long string) string {
	t.Helper()
	if code := postStatus(t, r.url, ftBody(4, false)); code == 504 {
		return "the warm-up answered 504 (its first byte later than first_byte_timeout)"
	} else if code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	proven := 0
	for round := range 2 {
		n := 2 * r.threshold
		codes := make([]int, n)
		sent := make([]time.Time, n)
		before := r.excusedProgress(t)
		w := watchBurst(r.tp, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				sent[i] = time.Now()
				codes[i] = postStatus(t, r.url, long)
			})
		}
		wg.Wait()
		w.end()
		excused := r.excusedProgress(t) - before
		had := 0
		for i := range n {
			if w.covered(sent[i], r.wait) {
				had++
			}
		}
		var bad string
		switch st := r.tp.DebugBackends()[0].Breaker; {
		case st != "closed":
			bad = fmt.Sprintf("breaker %s after long generations on a working pod", st)
		case slices.ContainsFunc(codes, func(c int) bool { return c != 504 }):
			bad = "not every request answered 504 (generation longer than first_byte_timeout)"
		case had == n && excused != float64(n):
			bad = fmt.Sprintf("excused{progress} +%v, want every timeout (%d)", excused, n)
		}
		switch {
		case bad != "" && had == n:
			t.Fatalf("round %d: %s, though every request's wait held two reports of the pod's token counters advancing (answers %v, excused{progress} +%v)", round, bad, codes, excused)
		case bad != "":
			return fmt.Sprintf("round %d: %s, with %d of %d requests' waits holding two reports of progress (answers %v, excused{progress} +%v)", round, bad, had, n, codes, excused)
		case had == n:
			proven++
		default:
			t.Logf("round %d: %d of %d requests' waits held two reports of progress; the breaker stayed closed", round, had, n)
		}
		switch code := postStatus(t, r.url, ftBody(1, false)); code {
		case 200:
		case 504:
			return fmt.Sprintf("round %d: a short request after the long ones answered 504 (its first byte later than first_byte_timeout)", round)
		default:
			t.Fatalf("round %d: a short request after the long ones: %d, want 200", round, code)
		}
	}
	if proven == 0 {
		return "no burst had two reports of progress inside every request's wait"
	}
	return ""
}
