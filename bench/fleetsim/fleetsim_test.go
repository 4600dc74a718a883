package fleetsim

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/vllmsim"
)

// tiny is the issue's unit-sized run: 16 pods, 2 replicas, 5 s simulated.
func tiny(strategy string, seed uint64) Config {
	w := LognormalWorkload()
	return Config{Pods: 16, Replicas: 2, Strategy: strategy, Workload: w, Rate: 0.8 * 16 * 2.6,
		Duration: 5 * time.Second, Warmup: time.Second, Sim: PodSim(w), Slowdown: BenchSlowdown, Params: DefaultParams(), Seed: seed}
}

func TestTinySweepUnderTenSeconds(t *testing.T) {
	start := time.Now()
	o := DefaultOptions(true)
	o.Pods, o.Replicas, o.Duration = []int{16}, []int{2}, 5*time.Second
	res, timings, err := Sweep(o)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("N=16, R=2, 5 s sweep took %v, want < 10s", el)
	}
	if len(res.Scenarios) != 1 || len(res.Scenarios[0].Strategies) != len(Strategies) || len(timings) != len(Strategies) {
		t.Fatalf("got %d scenarios, %d timings; want 1 scenario of %d strategies", len(res.Scenarios), len(timings), len(Strategies))
	}
	sc := &res.Scenarios[0]
	want := sc.Params.RateRPS * (sc.Params.DurationS - sc.Params.WarmupS)
	for _, s := range sc.Strategies {
		if s.Errors != 0 {
			t.Errorf("%s: %d errors", s.Name, s.Errors)
		}
		// Every measured arrival completes (Poisson count within 5 sigma).
		if got := float64(s.Requests); math.Abs(got-want) > 5*math.Sqrt(want) {
			t.Errorf("%s: %d requests measured, offered %.0f", s.Name, s.Requests, want)
		}
		if s.TTFT.P50 <= 0 || s.TTFT.P99 < s.TTFT.P50 || s.E2E.P99 < s.TTFT.P99 {
			t.Errorf("%s: inconsistent latencies ttft %+v e2e %+v", s.Name, s.TTFT, s.E2E)
		}
	}
	if or := sc.find(bench.Oracle); or.TTFTP99RatioToOracle != 1 || or.Decisions["oracle"] == 0 {
		t.Errorf("oracle: ratio %v, decisions %v", or.TTFTP99RatioToOracle, or.Decisions)
	}
}

func TestProbeCostsAndSources(t *testing.T) {
	cfg := tiny(bench.Probe, 1)
	m, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// d = 2 probes per decision, plus ~5% hedges, minus fresh skips.
	if m.ProbesPerRequest < 1.8 || m.ProbesPerRequest > 2.3 {
		t.Errorf("probes per request %v, want about d = 2", m.ProbesPerRequest)
	}
	if m.Decisions["probe"] < 9*(m.Decisions["scrape"]+m.Decisions["local"]) {
		t.Errorf("decisions %v: probe answers should decide almost every request", m.Decisions)
	}
	// Pods receive what the replicas send: probes per pod per second is
	// probes per request times requests per pod per second.
	if want := m.ProbesPerRequest * m.QPSPerPod; math.Abs(m.PodProbesPerS-want) > 0.15*want {
		t.Errorf("pod probes/s %v, want about %v", m.PodProbesPerS, want)
	}

	cached, err := Run(tiny(bench.Cached, 1))
	if err != nil {
		t.Fatal(err)
	}
	// Two replicas scraping every 50 ms after each answer (RTT + render).
	p := DefaultParams()
	want := 2 / (0.050 + (p.RTT + p.ScrapeRender).Seconds())
	if math.Abs(cached.PodScrapesPerS-want) > 0.05*want {
		t.Errorf("cached: %v scrapes per pod per second, want %v", cached.PodScrapesPerS, want)
	}
	if cached.PodProbesPerS != 0 || cached.Decisions["scrape"] == 0 {
		t.Errorf("cached: probes %v, decisions %v", cached.PodProbesPerS, cached.Decisions)
	}
}

// Probes that never answer in time: decisions fall back to cached state.
// Without the skipped_slow rule each one waits the whole deadline; with it,
// only those whose candidates' slow marks have lapsed do.
func TestProbesPastDeadlineFallBack(t *testing.T) {
	run := func(strategy string) *RunMetrics {
		cfg := tiny(strategy, 1)
		cfg.Params.ProbeTailP, cfg.Params.ProbeTail = 1, 50*time.Millisecond // every probe misses the deadline
		m, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if m.Decisions["probe"] != 0 || m.FallbackRate != 1 {
			t.Errorf("%s: decisions %v, fallback %v: no probe answers in time, every decision must fall back", strategy, m.Decisions, m.FallbackRate)
		}
		if m.Probes["timeout"] == 0 {
			t.Errorf("%s: probes %v: want timeouts", strategy, m.Probes)
		}
		return m
	}
	off, on := run(bench.Probe+suffixNoSlow), run(bench.Probe)
	deadline := 5.0 // ms, probe.deadline's default
	if off.DecisionWait.P50 != deadline || off.SkippedSlowPerRequest != 0 {
		t.Errorf("without skipped_slow: decision wait %+v, skipped_slow %v/request; want every decision at the %v ms deadline", off.DecisionWait, off.SkippedSlowPerRequest, deadline)
	}
	if on.DecisionWait.P50 != 0 || on.DecisionWait.Mean > deadline/3 || on.SkippedSlowPerRequest < 1 {
		t.Errorf("with skipped_slow: decision wait %+v, skipped_slow %v/request; want most decisions not to wait", on.DecisionWait, on.SkippedSlowPerRequest)
	}
	// The slow pods are still checked, one background probe at a time.
	if on.Probes["background"] == 0 || on.ProbesPerRequest > off.ProbesPerRequest+0.1 {
		t.Errorf("with skipped_slow: probes %v, %v per request (without: %v)", on.Probes, on.ProbesPerRequest, off.ProbesPerRequest)
	}
}

// sweepJSON runs the sweep o and returns its results and their JSON (the
// bytes of results.json).
func sweepJSON(t *testing.T, o Options) ([]byte, *Results) {
	t.Helper()
	res, _, err := Sweep(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b, res
}

func TestSameSeedSameBytes(t *testing.T) {
	run := func(seed int64) []byte {
		o := DefaultOptions(true)
		o.Seed, o.Pods, o.Replicas, o.Duration = seed, []int{16}, []int{2}, 3*time.Second
		b, _ := sweepJSON(t, o)
		return b
	}
	a, b, c := run(7), run(7), run(8)
	if !bytes.Equal(a, b) {
		t.Error("two runs with seed 7 gave different results.json")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 7 and 8 gave identical results.json")
	}
}

func TestEventQueueOrder(t *testing.T) {
	var q eventQueue
	for i, at := range []time.Duration{5, 1, 3, 1, 2, 5, 0} {
		q.push(event{at: at, a: int32(i)})
	}
	var got []int32
	var last time.Duration
	for q.len() > 0 {
		e := q.pop()
		if e.at < last {
			t.Fatalf("event at %v after %v", e.at, last)
		}
		last = e.at
		got = append(got, e.a)
	}
	// Ties fire in scheduling order: 1 before 3 (at 1), 0 before 5 (at 5).
	want := []int32{6, 1, 3, 4, 2, 0, 5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

// TestEventQueueLanes: events scheduled in the FIFO lanes, in or out of
// time order, interleaved with heap events and pops as the simulation does
// (time never goes back), come out exactly as from one ordered list.
func TestEventQueueLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q eventQueue
	var ref []event // the reference: every pending event, popped by a scan
	refPop := func() event {
		m := 0
		for i := range ref {
			if ref[i].before(&ref[m]) {
				m = i
			}
		}
		e := ref[m]
		ref = append(ref[:m], ref[m+1:]...)
		return e
	}
	now, pops, lane := time.Duration(0), 0, 0
	for i := range 10000 {
		var e event
		switch r := rng.IntN(10); {
		case r < 5:
			if q.len() != len(ref) {
				t.Fatalf("len %d, want %d", q.len(), len(ref))
			}
			if len(ref) == 0 {
				continue
			}
			got, want := q.pop(), refPop()
			if got.seq != want.seq || got.a != want.a {
				t.Fatalf("pop %d: got (at %v seq %d), want (at %v seq %d)", pops, got.at, got.seq, want.at, want.seq)
			}
			now = got.at
			pops++
			continue
		case r < 7:
			e = event{at: now + time.Duration(rng.IntN(50)), a: int32(i)}
			q.push(e)
		case r < 8:
			e = event{at: now + 7, a: int32(i)} // a constant delay
			q.pushLane(laneScrapeDeliver, e)
			lane++
		default:
			// Mostly in order, sometimes earlier than the lane's tail.
			e = event{at: now + time.Duration(rng.IntN(30)), a: int32(i)}
			q.pushLane(laneScrapeIssue, e)
			lane++
		}
		e.seq = q.seq
		ref = append(ref, e)
	}
	for len(ref) > 0 {
		if got, want := q.pop(), refPop(); got.seq != want.seq {
			t.Fatalf("drain: got seq %d, want %d", got.seq, want.seq)
		}
		pops++
	}
	if q.len() != 0 || pops < 3000 || lane < 2000 {
		t.Fatalf("len %d after %d pops, %d lane pushes", q.len(), pops, lane)
	}
}

func TestTraceArrivalsFollowTheRate(t *testing.T) {
	w, err := TraceWorkload("")
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(w, 200, 20*time.Second, BenchMaxModelLen, 3)
	n := 0
	for {
		j, ok := src.next()
		if !ok {
			break
		}
		if j.Prompt.Tokens < 1 || j.MaxTokens < 1 || j.Prompt.Tokens+j.MaxTokens > BenchMaxModelLen {
			t.Fatalf("job %d: %d + %d tokens", n, j.Prompt.Tokens, j.MaxTokens)
		}
		n++
	}
	// The trace's gaps rescaled to 200 req/s over 20 s (bursty: 15%).
	if n < 3400 || n > 4600 {
		t.Errorf("%d arrivals in 20 s at 200 req/s", n)
	}
}

// Explicit jobs are replayed whole whatever the workload: a trace workload
// starts its own cursor at a seeded row, which must not skip any of them.
func TestExplicitJobsReplayedWhole(t *testing.T) {
	w, err := TraceWorkload("")
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]Job, 50)
	for i := range jobs {
		jobs[i] = Job{At: time.Duration(i) * time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 10 + i}, MaxTokens: 1 + i}
	}
	for seed := range uint64(8) {
		src := newSource(w, 200, 20*time.Second, BenchMaxModelLen, seed)
		src.replay(jobs)
		for i := range jobs {
			j, ok := src.next()
			if !ok || j.At != jobs[i].At || j.Prompt.Tokens != jobs[i].Prompt.Tokens || j.MaxTokens != jobs[i].MaxTokens {
				t.Fatalf("seed %d: job %d = %+v, %v; want %+v", seed, i, j, ok, jobs[i])
			}
		}
		if j, ok := src.next(); ok {
			t.Fatalf("seed %d: a job after the last: %+v", seed, j)
		}
	}
}

// -workload prefix: the live bench's prefix scenario in a sweep. Its runs
// replay PrefixJobs (texts routed on their prefix blocks), its pods hit
// their prefix caches (one pod completes more of its requests per second
// than of the same requests without block hashes), and a seed gives the
// same bytes.
func TestPrefixSweep(t *testing.T) {
	o := DefaultOptions(true)
	o.Pods, o.Replicas, o.Duration, o.Workload = []int{8}, []int{2}, 3*time.Second, PrefixWorkload()
	o.Strategies = []string{bench.Probe, bench.Cached}
	a, res := sweepJSON(t, o)
	if b, _ := sweepJSON(t, o); !bytes.Equal(a, b) {
		t.Error("two prefix sweeps with seed 1 gave different results.json")
	}
	sc := &res.Scenarios[0]
	want := sc.Params.RateRPS * (sc.Params.DurationS - sc.Params.WarmupS)
	for _, s := range sc.Strategies {
		if s.Errors != 0 || math.Abs(float64(s.Requests)-want) > 5*math.Sqrt(want) {
			t.Errorf("%s: %d requests, %d errors; offered %.0f", s.Name, s.Requests, s.Errors, want)
		}
	}
	w := PrefixWorkload()
	sim := PodSim(w)
	rate := 0.8 * res.PodCapacityRPS[PrefixName] * 8
	jobs := PrefixJobs(rate, o.Duration, o.Seed, blockSize(sim))
	m, err := Run(Config{Pods: 8, Replicas: 2, Strategy: bench.Probe, Workload: w, Rate: rate, Duration: o.Duration, Warmup: o.Warmup,
		Sim: sim, Slowdown: BenchSlowdown, Params: o.Params, Seed: uint64(o.Seed), Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	if p := sc.find(bench.Probe); p.TTFT != m.TTFT || p.Requests != m.Requests {
		t.Errorf("sweep's probe run: TTFT %+v, %d requests; the PrefixJobs run: %+v, %d", p.TTFT, p.Requests, m.TTFT, m.Requests)
	}
	capacity := func(strip bool) float64 {
		e, err := vllmsim.NewEngine(sim)
		if err != nil {
			t.Fatal(err)
		}
		e.SetSlowdown(BenchSlowdown)
		i := 0
		c, err := podCapacity(e, 60*time.Second, func() Job {
			j := jobs[i%len(jobs)]
			i++
			if strip {
				j.Prompt.BlockHashes = nil
			}
			return j
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The sweep's capacity is that of these prompts, with their hashes.
	if hit, miss := capacity(false), capacity(true); hit < 1.5*miss || math.Abs(res.PodCapacityRPS[PrefixName]-hit) > 0.1*hit {
		t.Errorf("pod capacity %v req/s with prefix hashes (sweep: %v), %v without: the prefix cache is not hit", hit, res.PodCapacityRPS[PrefixName], miss)
	}
}

// TestScrapePaceFollowsOtherReplicas: the simulated scrape loops run the
// production rule (probe.Pace). With 8 replicas in front of a busy fleet,
// each pod changes mostly through the other replicas' requests, and
// scrape.foreign_change scrapes it several times faster than the rule
// that follows each replica's own rate (probe_ownpace), which leaves every
// pod at max_interval (1 s: 8 scrapes per pod per second). One replica
// alone sees no foreign change: the two rules scrape alike. 60 s: the
// foreign pace's budget (scrape.foreign_budget) starts empty and each
// replica sends each pod a request only every ~4 s here, so a 5 s run
// would measure mostly its start.
func TestScrapePaceFollowsOtherReplicas(t *testing.T) {
	run := func(strategy string, replicas int) float64 {
		t.Helper()
		cfg := tiny(strategy, 1)
		cfg.Pods, cfg.Replicas, cfg.Rate, cfg.Duration = 8, replicas, 0.8*8*2.6, time.Minute
		m, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m.PodScrapesPerS
	}
	own8, new8 := run("probe_ownpace", 8), run(bench.Probe, 8)
	if own8 < 7.5 || own8 > 8.5 {
		t.Errorf("own rate alone, 8 replicas: %v scrapes per pod per second, want about 8 (each at 1 s)", own8)
	}
	if new8 < 3*own8 {
		t.Errorf("foreign pace, 8 replicas: %v scrapes per pod per second, want > 3x the own-rate rule's %v", new8, own8)
	}
	if own1, new1 := run("probe_ownpace", 1), run(bench.Probe, 1); new1 != own1 {
		t.Errorf("one replica: %v scrapes per pod per second with the foreign pace, %v without; want the same", new1, own1)
	}
}
