package route

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// blindPolicies are the setups whose own reports carry no token counter:
// three policies that read no reports and a scraping one whose endpoint
// is /load. Only the progress watch's scrapes show the backend working.
var blindPolicies = []struct {
	name, policy, endpoint string
}{
	{"least_inflight", "least_inflight", ""},
	{"round_robin", "round_robin", ""},
	{"random", "random", ""},
	{"cached_endpoint_load", "cached", "load"},
}

// blindConfig is one simulated pod behind setup, with a first_byte_timeout
// far below a long generation and a breaker that stays open for the whole
// test once opened. The watch looks every first_byte_timeout/8 (500 ms)
// in the wait's second half and its scrapes may take 250 ms: a timeout is
// excused only by two scrapes answered in those 2 s before the proxy
// judges it. The mechanism is a wall-clock window, so the test cannot
// avoid one; its width is what a starved process must fit. A -race
// process on a loaded machine can wait ~1 s for a processor (bench's
// trace replay: runtime/metrics /sched/latencies up to 0.94 s), and a
// SCHED_IDLE one behind normal-priority work is frozen for longer:
// stopping the test process (SIGSTOP) for 700 ms every 1-3 s failed the
// 2 s timeout these tests had. The setups run in parallel, so the wider
// window costs no wall time.
func blindConfig(url, policy, endpoint string) *config.Config {
	cfg := testConfig(url)
	cfg.Route.Policy = policy
	if endpoint != "" {
		cfg.Probe.Endpoint = endpoint
	}
	cfg.Scrape.Timeout = config.Duration(250 * time.Millisecond)
	cfg.Upstream.FirstByteTimeout = config.Duration(4 * time.Second)
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	return cfg
}

// A client asking a healthy pod for generations longer than
// upstream.first_byte_timeout never opens its breaker under any policy or
// probe.endpoint: the progress watch scrapes the pod's /metrics while the
// requests wait, and its token counters advance. Without the watch (or
// with the rule ignoring its reports) the first burst opens the breaker
// in every setup.
func TestLongGenerationsNeverOpenABreakerUnderBlindPolicies(t *testing.T) {
	for _, tc := range blindPolicies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var last *testProxy
			longGenerationBursts(t, func(t *testing.T) progressRig {
				fleet := ftFleet(t, 1)
				cfg := blindConfig(fleet.URLs()[0], tc.policy, tc.endpoint)
				last = startProxy(t, cfg)
				return progressRig{tp: last, url: last.url("/v1/completions"), threshold: cfg.Breaker.ConsecutiveFailures, wait: cfg.Upstream.FirstByteTimeout.D()}
			}, ftBody(100000, false))
			// Every timeout of a burst that had its reports was excused
			// (longGenerationAttempt); these reports came from the watch.
			if got := last.counter(t, "probegate_progress_scrapes_total", nil); got < 2 {
				t.Errorf("progress scrapes = %v, want at least two per burst", got)
			}
		})
	}
}

// A hung engine whose HTTP server still answers /metrics shows no
// progress under the blind setups either: its first-byte timeouts open the
// breaker after exactly breaker.consecutive_failures of them, though the
// watch scrapes it. It fails if the watch's reports excuse any timeout.
//
// The claim needs reports taken while the requests waited (two, the
// rule's minimum): a round in which the watch got fewer answered (a
// starved process) proves nothing either way, and is run again on a fresh
// proxy, up to three times.
func TestHungEngineStillOpensItsBreakerUnderBlindPolicies(t *testing.T) {
	for _, tc := range blindPolicies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; ; attempt++ {
				scrapes := hungEngineRound(t, tc.policy, tc.endpoint)
				if scrapes >= 2 {
					return
				}
				if attempt == 3 {
					t.Fatalf("progress scrapes of the hung pod = %v in each of %d rounds, want at least 2: the test needs reports flowing", scrapes, attempt)
				}
				t.Logf("round %d: %v progress scrapes while the requests waited; again on a fresh proxy", attempt, scrapes)
			}
		})
	}
}

// hungEngineRound starts one pod behind setup, hangs its engine, sends it
// breaker.consecutive_failures requests at once and fails the test unless
// each is answered 504 and the breaker is then open; it returns the
// progress scrapes answered meanwhile.
func hungEngineRound(t *testing.T, policy, endpoint string) float64 {
	fleet := ftFleet(t, 1)
	pod := fleet.Servers()[0]
	cfg := blindConfig(fleet.URLs()[0], policy, endpoint)
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	if code := postStatus(t, url, ftBody(4, false)); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	pod.SetFaults(vllmsim.Faults{Hang: true})
	before := tp.counter(t, "probegate_progress_scrapes_total", nil)
	// Concurrent, so that the test waits one first_byte_timeout, not one
	// per request.
	codes := make([]int, cfg.Breaker.ConsecutiveFailures)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = postStatus(t, url, ftBody(1, false)) })
	}
	wg.Wait()
	for i, code := range codes {
		if code != 504 {
			t.Fatalf("request %d to the hung pod: %d, want 504", i, code)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s after %d timeouts of a hung pod, want open", st, cfg.Breaker.ConsecutiveFailures)
	}
	envelope(t, post(t, url, ftBody(1, false)), 503)
	return tp.counter(t, "probegate_progress_scrapes_total", nil) - before
}

// When upstream.first_byte_timeout/8 (or idle_timeout/8, when smaller) is
// below scrape.timeout, the progress watch's scrapes are cut shorter than
// the operator allows scrapes: the proxy says so once, at start, naming
// both keys; a reload that keeps both
// values says nothing more, one that changes them into the same problem
// says it again, and the defaults never do.
func TestProgressCutWarnsOnceNamingTheKeys(t *testing.T) {
	const warning = "upstream.first_byte_timeout/8"
	up := upstream(t, func(w http.ResponseWriter, _ *http.Request) {})
	var logs syncBuffer
	cfg := testConfig(up.URL)
	cfg.Upstream.FirstByteTimeout = config.Duration(400 * time.Millisecond)
	cfg.Scrape.Timeout = config.Duration(100 * time.Millisecond)
	tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })
	if got := logs.count(warning); got != 1 {
		t.Fatalf("warned %d times at start, want once", got)
	}
	if logs.count(`"level":"warn"`) != 1 {
		t.Errorf("the warning is not at warn level: %s", logs.String())
	}
	if logs.count(`"key":"upstream.first_byte_timeout"`) != 1 || logs.count(`"other_key":"scrape.timeout"`) != 1 {
		t.Errorf("the warning does not carry both keys: %s", logs.String())
	}
	same := *cfg
	if err := tp.Reload(&same); err != nil {
		t.Fatal(err)
	}
	if got := logs.count(warning); got != 1 {
		t.Fatalf("warned %d times after a reload that kept both keys, want once", got)
	}
	other := *cfg
	other.Scrape.Timeout = config.Duration(80 * time.Millisecond)
	if err := tp.Reload(&other); err != nil {
		t.Fatal(err)
	}
	if got := logs.count(warning); got != 2 {
		t.Fatalf("warned %d times after a reload into another cut, want twice", got)
	}

	// An idle_timeout below first_byte_timeout sets the look (silent
	// streams are watched too): the warning names it.
	var idleLogs syncBuffer
	idle := testConfig(up.URL)
	idle.Upstream.FirstByteTimeout = config.Duration(time.Minute)
	idle.Upstream.IdleTimeout = config.Duration(400 * time.Millisecond)
	idle.Scrape.Timeout = config.Duration(100 * time.Millisecond)
	startProxy(t, idle, func(o *Options) { o.Logger = zerolog.New(&idleLogs) })
	if idleLogs.count("upstream.idle_timeout/8") != 1 || idleLogs.count(`"key":"upstream.idle_timeout"`) != 1 {
		t.Errorf("an idle_timeout/8 below scrape.timeout is not warned naming upstream.idle_timeout: %s", idleLogs.String())
	}

	var quiet syncBuffer
	def := config.Default()
	def.Backends.Static = []string{up.URL}
	startProxy(t, def, func(o *Options) { o.Logger = zerolog.New(&quiet) })
	if got := quiet.count(warning); got != 0 {
		t.Fatalf("warned %d times with the default timeouts: %q", got, quiet.String())
	}
}

// trialConfig is one pod under least_inflight (blindConfig's scrape
// timeout, first_byte_timeout 2 s) whose breaker half-opens 300 ms after
// opening.
func trialConfig(url string) *config.Config {
	cfg := blindConfig(url, "least_inflight", "")
	cfg.Upstream.FirstByteTimeout = config.Duration(2 * time.Second)
	cfg.Breaker.OpenFor = config.Duration(300 * time.Millisecond)
	return cfg
}

// A half-open breaker whose trial is a long non-stream generation is closed
// as soon as the pod's token counters advance, before the trial's answer:
// until then the trial slot keeps the pod out of every pick (here, the
// only pod: 503 for everyone). Without it the breaker stays half-open until
// the trial ends at first_byte_timeout.
func TestLongTrialClosesTheBreakerOnProgress(t *testing.T) {
	fleet := ftFleet(t, 1)
	pod := fleet.Servers()[0]
	cfg := trialConfig(fleet.URLs()[0])
	tp := startProxy(t, cfg)
	url := tp.url("/v1/completions")
	pod.SetFaults(vllmsim.Faults{FailRate: 1}) // the canary fails too
	for i := range cfg.Breaker.ConsecutiveFailures {
		if code := postStatus(t, url, ftBody(1, false)); code != 500 {
			t.Fatalf("request %d: %d, want the failing pod's 500", i, code)
		}
	}
	if st := tp.DebugBackends()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s, want open", st)
	}
	pod.SetFaults(vllmsim.Faults{})
	time.Sleep(cfg.Breaker.OpenFor.D() + 50*time.Millisecond)
	started := time.Now()
	trial := make(chan int, 1)
	go func() { trial <- postStatus(t, url, ftBody(100000, false)) }()
	fbt := cfg.Upstream.FirstByteTimeout.D()
	for tp.DebugBackends()[0].Breaker != "closed" {
		select {
		case code := <-trial:
			t.Fatalf("the trial ended (%d after %v) with the breaker still %s", code, time.Since(started), tp.DebugBackends()[0].Breaker)
		default:
		}
		if time.Since(started) > fbt {
			t.Fatalf("breaker %s %v after the trial started", tp.DebugBackends()[0].Breaker, fbt)
		}
		time.Sleep(10 * time.Millisecond)
	}
	closedAfter := time.Since(started)
	if code := postStatus(t, url, ftBody(1, false)); code != 200 {
		t.Fatalf("a request beside the trial: %d, want 200", code)
	}
	if code := <-trial; code != 504 {
		t.Fatalf("the trial: %d, want 504 (longer than first_byte_timeout)", code)
	}
	if st := tp.DebugBackends()[0].Breaker; st != "closed" {
		t.Fatalf("breaker %s after the trial's timeout, want closed", st)
	}
	t.Logf("closed %v after the trial started (first_byte_timeout %v)", closedAfter, fbt)
}

// A hung pod's trial shows no progress: the watch scrapes it while the
// trial waits, but the breaker never closes, and the trial's timeout opens
// it again. The breaker's transitions are read from the log: the state
// after the trial may already be half-open again (open_for is 300 ms, and
// a starved test can look later than that).
func TestHungTrialDoesNotCloseTheBreaker(t *testing.T) {
	fleet := ftFleet(t, 1)
	pod := fleet.Servers()[0]
	cfg := trialConfig(fleet.URLs()[0])
	var logs syncBuffer
	tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })
	url := tp.url("/v1/completions")
	pod.SetFaults(vllmsim.Faults{FailRate: 1})
	for range cfg.Breaker.ConsecutiveFailures {
		postStatus(t, url, ftBody(1, false))
	}
	pod.SetFaults(vllmsim.Faults{Hang: true})
	time.Sleep(cfg.Breaker.OpenFor.D() + 50*time.Millisecond)
	const reopened, closed = `"from":"half-open","to":"open"`, `"to":"closed"`
	before := tp.counter(t, "probegate_progress_scrapes_total", nil)
	reopenedBefore := logs.count(reopened)
	trial := make(chan int, 1)
	go func() { trial <- postStatus(t, url, ftBody(1, false)) }()
	for {
		select {
		case code := <-trial:
			if code != 504 {
				t.Fatalf("the hung trial: %d, want 504", code)
			}
			waitUntil(t, 5*time.Second, func() bool { return logs.count(reopened) > reopenedBefore },
				"the hung trial's timeout to open the breaker again")
			if logs.count(closed) != 0 {
				t.Fatal("the breaker closed while a hung pod's trial waited")
			}
			if got := tp.counter(t, "probegate_progress_scrapes_total", nil) - before; got < 2 {
				t.Fatalf("%v progress scrapes while the trial waited, want at least 2: the test needs reports", got)
			}
			return
		default:
		}
		if st := tp.DebugBackends()[0].Breaker; st == "closed" {
			t.Fatal("breaker closed while a hung pod's trial waits")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The progress watch sees a response body whose read has waited since
// before its bound (a silent stream), and not one whose read returned (a
// connection idle in the pool, whatever its deadline): silentSince reads
// when the read under way began.
func TestSilentSinceSeesOnlyAReadUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up, down := net.Pipe()
		defer down.Close()
		var table connTable
		c := &deadlineConn{Conn: up, firstByte: time.Minute, idle: 4 * time.Second, conns: &table}
		table.add(c)
		defer c.Close()
		read := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 16))
			read <- err
		}()
		synctest.Wait() // the read is under way, silent
		start := time.Now()
		if table.silentSince(start.Add(-time.Nanosecond)) {
			t.Fatal("a read that began now counts as silent since before now")
		}
		time.Sleep(3 * time.Second)
		if !table.silentSince(time.Now().Add(-2 * time.Second)) {
			t.Fatal("a read silent for 3 s is not seen as silent for 2 s")
		}
		if table.silentSince(start.Add(-time.Second)) {
			t.Fatal("a read silent for 3 s is seen as silent for 4 s")
		}
		if _, err := down.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // idle, as in the pool
		if table.silentSince(time.Now().Add(-2 * time.Second)) {
			t.Fatal("a connection whose read returned is seen as silent")
		}
	})
}
