package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/probe"
)

const msec = time.Millisecond

// bare returns a sim of n pods behind one replica of strategy with nothing
// scheduled (no arrivals, no scrapes) and no probe tail (every round trip
// well under the 5 ms deadline), so that a test drives the replica's
// prober by hand.
func bare(t *testing.T, n int, strategy string) (*sim, *replica, []*probe.State) {
	t.Helper()
	w := LognormalWorkload()
	cfg := Config{Pods: n, Replicas: 1, Strategy: strategy, Workload: w, Rate: 1, Duration: time.Minute,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: DefaultParams(), Seed: 1}
	cfg.Params.ProbeTailP = 0
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.q = eventQueue{}
	r := s.replicas[0]
	var st []*probe.State
	for _, b := range r.backends {
		st = append(st, b.State())
	}
	return s, r, st
}

// advance fires the probe landings up to t and moves the clock to t.
func advance(s *sim, t time.Duration) {
	for s.q.len() > 0 {
		e := s.q.pop()
		if e.at > t {
			s.q.push(e)
			break
		}
		s.now = e.at
		s.replicas[e.a].prober.land(e.b)
	}
	s.now = t
}

// run is one routing decision's probe Run at the sim's now.
func run(r *replica, cands, spares []*probe.State) probe.Result {
	res := r.prober.Run(context.Background(), cands, spares)
	r.clock.offset = 0
	return res
}

// A candidate whose report is older than probe.fresh_for (2 ms) but younger
// than twice it is used without waiting, and refreshed by one background
// probe at a time; without the rule the request waits for a probe.
func TestRecentReportNotWaitedFor(t *testing.T) {
	for _, strategy := range []string{bench.Probe, bench.Probe + suffixNoSWR} {
		s, r, st := bare(t, 4, strategy)
		swr := strategy == bench.Probe
		for i := range 2 {
			l := s.pods[i].load(epoch, probe.SourceProbe)
			st[i].Report(&l)
		}
		advance(s, 3*msec) // reports 3 ms old
		res := run(r, st[:2], st[2:])
		switch {
		case swr && (res.SkippedRecent != 2 || res.Probed != 0 || res.Waited != 0 || r.prober.stats.Background != 2):
			t.Fatalf("%s: reports 3 ms old: %+v, %d background probes; want both used at once and refreshed in the background", strategy, res, r.prober.stats.Background)
		case !swr && (res.SkippedRecent != 0 || res.Probed != 2 || res.Waited <= 0):
			t.Fatalf("%s: reports 3 ms old: %+v; want both probed and waited for", strategy, res)
		}
		if !swr {
			continue
		}
		// A second request while the refreshes are in the air sends none.
		if res := run(r, st[:2], st[2:]); res.SkippedRecent != 2 || res.Probed != 0 || r.prober.stats.Background != 2 || r.prober.stats.Sent != 2 {
			t.Fatalf("refreshes in the air: %+v, stats %+v; want no new probe", res, r.prober.stats)
		}
		// Their answers land as fresh reports.
		advance(s, 5*msec)
		for i := range 2 {
			if age := epoch.Add(s.now).Sub(st[i].Latest().At); age >= 2*msec {
				t.Fatalf("pod %d: report %v old after its refresh", i, age)
			}
		}
		if res := run(r, st[:2], st[2:]); res.SkippedFresh != 2 || res.Probed != 0 {
			t.Fatalf("after the refresh: %+v; want both fresh", res)
		}
		// Twice fresh_for old or more: probed and waited for.
		advance(s, 12*msec)
		if res := run(r, st[:2], st[2:]); res.SkippedRecent != 0 || res.Probed != 2 || res.Waited <= 0 {
			t.Fatalf("reports 7 ms old: %+v; want both probed", res)
		}
	}
}

// A backend whose probe missed the deadline is not waited for (its cached
// state stands) while one background probe at a time checks it; the first
// answer in time lifts the mark, and so does SlowHold without probes.
// Without the rule, each request waits the whole deadline for it.
func TestSlowBackendNotWaitedFor(t *testing.T) {
	for _, strategy := range []string{bench.ProbeNoHedge, bench.ProbeNoHedge + suffixNoSlow} {
		s, r, st := bare(t, 4, strategy) // d 2, quorum 2, no hedges
		rule := strategy == bench.ProbeNoHedge
		slow := true
		s.probeDelay = func(pod int32) time.Duration {
			if pod == 0 && slow {
				return 50 * msec
			}
			return 0
		}
		res := run(r, st[:2], nil)
		if res.Probed != 2 || res.TimedOut != 1 || res.Waited != 5*msec {
			t.Fatalf("%s: first request: %+v; want pod 0's probe to time out at the 5 ms deadline", strategy, res)
		}
		advance(s, 10*msec)
		res = run(r, st[:2], nil)
		switch {
		case rule && (res.SkippedSlow != 1 || res.Probed != 1 || res.TimedOut != 0 || res.Waited >= 3*msec || r.prober.stats.Background != 1):
			t.Fatalf("%s: pod 0 slow: %+v, %d background probes; want it skipped, checked in the background, and no deadline wait", strategy, res, r.prober.stats.Background)
		case !rule && (res.SkippedSlow != 0 || res.TimedOut != 1 || res.Waited != 5*msec):
			t.Fatalf("%s: pod 0 slow: %+v; want the deadline wait", strategy, res)
		}
		if !rule {
			continue
		}
		// Still slow while the background probe is in the air: skipped,
		// no second background probe.
		advance(s, 11*msec)
		if res := run(r, st[:2], nil); res.SkippedSlow != 1 || r.prober.stats.Background != 1 {
			t.Fatalf("background probe in the air: %+v, %d background probes", res, r.prober.stats.Background)
		}
		// It misses its deadline too (15 ms): the mark is renewed. The
		// next one, sent once pod 0 is fast again, answers and lifts it.
		advance(s, 16*msec)
		slow = false
		if res := run(r, st[:2], nil); res.SkippedSlow != 1 || r.prober.stats.Background != 2 {
			t.Fatalf("pod 0 still marked: %+v, %d background probes", res, r.prober.stats.Background)
		}
		advance(s, 25*msec)
		if res := run(r, st[:2], nil); res.SkippedSlow != 0 || res.Probed != 2 || res.Answered != 2 {
			t.Fatalf("after an answer in time: %+v; want pod 0 waited for again", res)
		}
		// Pods 0 and 3 marked again at 35 ms: until 35 ms + SlowHold,
		// unless a probe answers in time; no probe to pod 3 since, so it
		// is waited for again after that.
		slow = true
		s.probeDelay = func(pod int32) time.Duration {
			if (pod == 0 || pod == 3) && slow {
				return 50 * msec
			}
			return 0
		}
		advance(s, 30*msec)
		if res := run(r, []*probe.State{st[0], st[3]}, nil); res.TimedOut != 2 {
			t.Fatalf("pods 0 and 3 slow again: %+v", res)
		}
		advance(s, 35*msec+probe.SlowHold-msec)
		if res := run(r, st[:2], nil); res.SkippedSlow != 1 {
			t.Fatalf("just before the hold ends: %+v; want pod 0 still skipped", res)
		}
		advance(s, 35*msec+probe.SlowHold+msec)
		if res := run(r, []*probe.State{st[3], st[2]}, nil); res.SkippedSlow != 0 || res.Probed != 2 {
			t.Fatalf("just after the hold ended: %+v; want pod 3 probed and waited for", res)
		}
	}
}

// Requests stop paying the deadline for a backend whose probes always
// miss it (the live symptom: a pod whose metrics endpoint is stuck), over
// a whole run.
func TestSlowPodRun(t *testing.T) {
	waits := map[string]*RunMetrics{}
	for _, strategy := range []string{bench.ProbeNoHedge, bench.ProbeNoHedge + suffixNoSlow} {
		cfg := tiny(strategy, 1)
		cfg.Pods, cfg.Replicas, cfg.Rate, cfg.Duration = 4, 1, 0.8*4*2.6, 20*time.Second
		cfg.Params.StuckProbePods = 1 // pod 3's probes all answer 50 ms late
		m, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		waits[strategy] = m
	}
	on, off := waits[bench.ProbeNoHedge], waits[bench.ProbeNoHedge+suffixNoSlow]
	// d = 2 of 4 pods: pod 3 is a candidate of half the requests.
	if off.DecisionWait.P90 != 5 || off.SkippedSlowPerRequest != 0 {
		t.Errorf("without skipped_slow: decision wait %+v; want the 5 ms deadline for a candidate in two", off.DecisionWait)
	}
	if on.DecisionWait.P90 > 2 || on.SkippedSlowPerRequest < 0.3 {
		t.Errorf("with skipped_slow: decision wait %+v, %v skipped per request; want pod 3 skipped", on.DecisionWait, on.SkippedSlowPerRequest)
	}
}

// At a high per-pod rate (one replica in front of 4 H100-sized pods, tens of
// requests per second each) reports are often 2-4 ms old: requests use them
// without waiting, and the count reaches results.json.
func TestRecentReportsAtHighRate(t *testing.T) {
	got := map[string]*RunMetrics{}
	for _, strategy := range []string{bench.Probe, bench.Probe + suffixNoSWR} {
		w := UniformWorkload()
		m, err := Run(Config{Pods: 4, Replicas: 1, Strategy: strategy, Workload: w, Rate: 0.8 * 4 * 55.9, Duration: 3 * time.Second,
			Warmup: time.Second, Sim: H100Sim(), Slowdown: 1, Params: DefaultParams(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		got[strategy] = m
	}
	on, off := got[bench.Probe], got[bench.Probe+suffixNoSWR]
	if on.SkippedRecentPerRequest < 0.1 || on.Probes["skipped_recent"] == 0 || on.Probes["background"] == 0 {
		t.Errorf("with the rule: %v skipped_recent per request, probes %v", on.SkippedRecentPerRequest, on.Probes)
	}
	if off.SkippedRecentPerRequest != 0 || on.DecisionWait.Mean >= off.DecisionWait.Mean {
		t.Errorf("without the rule: %v skipped_recent per request; decision wait mean %v with the rule, %v without", off.SkippedRecentPerRequest, on.DecisionWait.Mean, off.DecisionWait.Mean)
	}
}

// The _slowknown variant (not production's rule) counts a candidate
// skipped as slow towards the quorum: with d 2 and quorum 2, the other
// candidate's answer ends the Run, where production's rule hedges to a
// spare for the missing answer.
func TestSlowKnownVariant(t *testing.T) {
	for _, strategy := range []string{bench.Probe, bench.Probe + suffixSlowKnown} {
		s, r, st := bare(t, 4, strategy)
		s.probeDelay = func(pod int32) time.Duration {
			if pod == 0 {
				return 50 * msec
			}
			return 0
		}
		run(r, st[:2], st[2:])
		advance(s, 10*msec) // pod 0's probe missed its deadline at 5 ms
		res := run(r, st[:2], st[2:])
		if res.SkippedSlow != 1 {
			t.Fatalf("%s: %+v; want pod 0 skipped", strategy, res)
		}
		if known := strategy != bench.Probe; known != (res.Hedged == 0) || res.Answered != 2-btoi(known) {
			t.Errorf("%s: %+v; want a hedge only without _slowknown", strategy, res)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
