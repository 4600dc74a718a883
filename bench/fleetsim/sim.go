package fleetsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
)

// Config is one simulation run: a fleet, its replicas, a strategy and a load.
type Config struct {
	Pods     int
	Replicas int
	Strategy string // a bench strategy name (bench.StrategyConfig)
	Workload Workload
	// Rate is the offered load in requests/s, split over the replicas
	// (request i goes to replica i mod Replicas, as the bench sends).
	Rate float64
	// Duration is the simulated time during which requests arrive; the run
	// then drains what is in flight.
	Duration time.Duration
	// Warmup: requests arriving before it are simulated but not measured.
	Warmup   time.Duration
	Sim      vllmsim.Config // every pod's engine (Seed is varied per pod)
	Slowdown float64        // engine step multiplier (the bench's TimeScale)
	Params   Params
	Seed     uint64
	// Jobs, when set, replaces the workload's draws (validation runs).
	Jobs []Job
	// Lockstep starts every replica as the live bench starts its proxies:
	// together, with round-robin cursors at 0 and every scrape loop's first
	// scrape at time 0. Otherwise cursors start at a seeded offset and
	// loops at a seeded phase of their first interval, as replicas started
	// at different times would.
	Lockstep bool
	// PodSlowdown, when set, multiplies pod i's step durations by
	// PodSlowdown[i] on top of Slowdown (a hetero fleet: 2 for a pod 2x
	// slower; 0 or 1 for a normal one).
	PodSlowdown []float64
	// PodKVBlocks, when set, gives pod i a KV cache of PodKVBlocks[i]
	// blocks instead of Sim's (0: Sim's): a fleet with a smaller pod.
	PodKVBlocks []int
	// Record, when set, is called with every measured request as it
	// finishes, with every pod's state at its arrival (analysis runs: the
	// snapshot replays each pod's engine forward, which is slow).
	Record func(*Record)
	// Ideal parameterizes the non-greedy ideal strategies (nongreedy.go).
	Ideal IdealParams
	// History, when set, is the traffic the pods served before the run
	// (history.go): their reports then carry its prefill counters, as a
	// long-lived pod's do. Unset: fresh pods, every counter at 0.
	History []Job
	// HistoryRoundRobin deals History round robin over the pods instead
	// of in proportion to their speed.
	HistoryRoundRobin bool
}

// sim is the state of one run. It is driven by one goroutine.
type sim struct {
	cfg      Config
	params   Params
	now      time.Duration
	q        eventQueue
	pods     []*pod
	replicas []*replica
	src      *source
	rng      *rand.Rand
	arrived  int
	srcDone  bool
	inflight int
	m        *metrics
	share    share        // what the replicas share (share.go)
	replay   *replayState // the replaying ideal strategies' knowledge
	tweaks   []tweak      // the strategy's "+key=value" parts (tweak.go)
	// probeDelay, when set (tests), adds to the round trip of every probe
	// to a pod.
	probeDelay func(pod int32) time.Duration
}

// probeLatency draws the round trip of one probe to pod.
func (s *sim) probeLatency(pod int32, rng *rand.Rand) time.Duration {
	d := s.params.probeLatency(rng)
	if int(pod) >= len(s.pods)-s.params.StuckProbePods {
		d += s.params.StuckProbeDelay
	}
	if s.probeDelay != nil {
		d += s.probeDelay(pod)
	}
	return d
}

// Run simulates cfg and returns its measurements.
func Run(cfg Config) (*RunMetrics, error) {
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.loop(); err != nil {
		return nil, err
	}
	return s.m.result(s), nil
}

func newSim(cfg Config) (*sim, error) {
	if cfg.Pods < 1 || cfg.Replicas < 1 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("fleetsim: Pods, Replicas, Rate and Duration must be > 0")
	}
	if cfg.Slowdown < 1 {
		cfg.Slowdown = 1
	}
	s := &sim{cfg: cfg, params: cfg.Params, rng: rand.New(rand.NewPCG(cfg.Seed, 0x73696d))}
	addrs := make([]string, cfg.Pods)
	podCfg := func(i int) (vllmsim.Config, float64) {
		pc := cfg.Sim
		pc.Seed = int64(cfg.Seed)*100003 + int64(i)
		slow := cfg.Slowdown
		if i < len(cfg.PodSlowdown) && cfg.PodSlowdown[i] > 1 {
			slow *= cfg.PodSlowdown[i]
		}
		if i < len(cfg.PodKVBlocks) && cfg.PodKVBlocks[i] > 0 {
			pc.NumGPUBlocks = cfg.PodKVBlocks[i]
		}
		return pc, slow
	}
	hist, err := historyTotals(&cfg, podCfg, cfg.History)
	if err != nil {
		return nil, err
	}
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d:8000", i>>16&0xff, i>>8&0xff, i&0xff)
		pc, slow := podCfg(i)
		p, err := newPod(i, pc, slow)
		if err != nil {
			return nil, err
		}
		p.histSecs, p.histToks = hist[i][0], hist[i][1]
		s.pods = append(s.pods, p)
	}
	base, tweaks, err := splitTweaks(cfg.Strategy)
	if err != nil {
		return nil, err
	}
	s.tweaks = tweaks
	if isReplay(base) {
		s.replay = newReplayState(cfg)
	}
	maxLen := BenchMaxModelLen // every pod must be able to serve every request
	for _, p := range s.pods {
		maxLen = min(maxLen, p.eng.Config().MaxModelLen)
	}
	s.src = newSource(cfg.Workload, cfg.Rate, cfg.Duration, maxLen, cfg.Seed)
	if cfg.Jobs != nil {
		s.src.replay(cfg.Jobs)
	}
	strategy, sh := splitShare(base)
	s.share = sh
	for i := range cfg.Replicas {
		r, err := newReplica(s, i, strategy, addrs, cfg.Seed)
		if err != nil {
			return nil, err
		}
		s.replicas = append(s.replicas, r)
		// Loops start at a random phase of their first interval: replicas
		// and their loops are not started in lockstep.
		for pi := range r.loops {
			at := time.Duration(0)
			if !cfg.Lockstep {
				at = time.Duration(s.rng.Int64N(int64(r.loops[pi].interval)))
			}
			s.q.push(event{at: at, kind: evScrapeIssue, a: int32(i), b: int32(pi)})
		}
	}
	s.m = newMetrics(s)
	s.scheduleArrival()
	s.q.push(event{at: herdWindow, kind: evWindow})
	return s, nil
}

func (s *sim) scheduleArrival() {
	j, ok := s.src.next()
	if !ok {
		s.srcDone = true
		return
	}
	r := &request{job: j, replica: int32(s.arrived % s.cfg.Replicas), sent: j.At}
	r.stream = s.params.StreamShare >= 1 || s.rng.Float64() < s.params.StreamShare
	r.er = vllmsim.Request{Prompt: j.Prompt, MaxTokens: j.MaxTokens, IgnoreEOS: true, Tag: r}
	s.arrived++
	s.q.push(event{at: j.At, kind: evArrival, req: r})
}

// drainLimit bounds the drain after the last arrival.
const drainLimit = 120 * time.Second

// loop fires events until every request has finished.
func (s *sim) loop() error {
	for s.q.len() > 0 {
		e := s.q.pop()
		s.now = e.at
		s.m.events++
		if s.now > s.cfg.Duration+drainLimit {
			return fmt.Errorf("fleetsim: %d requests still in flight %v after the last arrival", s.inflight, drainLimit)
		}
		switch e.kind {
		case evArrival:
			s.arrive(e.req)
			s.scheduleArrival()
		case evPodArrive:
			p := s.pods[e.req.pod]
			start, err := p.add(e.req, s.now)
			if err != nil {
				return fmt.Errorf("pod %d: %w", p.idx, err)
			}
			if start {
				s.step(p)
			}
		case evStepEnd:
			s.stepEnd(s.pods[e.a])
		case evProxyFirst:
			s.replicas[e.req.replica].firstByte(e.req)
		case evProxyFinish:
			s.proxyFinish(e.req)
		case evScrapeIssue:
			s.scrapeIssue(int(e.a), int(e.b))
		case evScrapeDeliver:
			s.scrapeDeliver(int(e.a), int(e.b))
		case evProbeLand:
			s.replicas[e.a].prober.land(e.b)
		case evWindow:
			s.m.closeWindow(s)
			if s.now < s.cfg.Duration {
				s.q.push(event{at: s.now + herdWindow, kind: evWindow})
			}
		}
		if s.inflight == 0 && s.now >= s.cfg.Duration && !s.arrivalsPending() {
			return nil
		}
	}
	return nil
}

func (s *sim) arrivalsPending() bool { return !s.srcDone }

// arrive routes r at its replica and forwards it.
func (s *sim) arrive(r *request) {
	rep := s.replicas[r.replica]
	if s.cfg.Record != nil && s.m.measured(r) {
		s.snapshot(r)
	}
	pod, wait, ok := rep.pick(r)
	if !ok {
		s.m.failed(r)
		return
	}
	r.pod, r.wait = pod, wait
	s.shareDispatch(r)
	s.inflight++
	s.m.landed(pod, s.now)
	s.q.push(event{at: s.now + wait + s.params.ProxyOverhead + s.params.RTT/2, kind: evPodArrive, req: r})
}

func (s *sim) step(p *pod) {
	if end, ok := p.step(s.now); ok {
		s.q.push(event{at: end, kind: evStepEnd, a: int32(p.idx)})
	}
}

// stepEnd hands out the tokens of p's step that ended now and starts the next.
func (s *sim) stepEnd(p *pod) {
	half := s.params.RTT / 2
	for i := range p.events {
		ev := &p.events[i]
		r := ev.Req.Tag.(*request)
		if ev.Output == 1 {
			r.ttft = s.now + half + s.params.Relay - r.sent
			if r.stream {
				s.q.push(event{at: s.now + half, kind: evProxyFirst, req: r})
			}
		}
		if ev.Finished {
			s.q.push(event{at: s.now + half, kind: evProxyFinish, req: r})
		}
	}
	s.step(p)
}

// proxyFinish: the last frame of r passes its replica now.
func (s *sim) proxyFinish(r *request) {
	rep := s.replicas[r.replica]
	var orca *probe.Load
	if !r.stream {
		p := s.pods[r.pod]
		l := p.orca(rep.clock.now())
		orca = &l
		s.podCost(r.pod, func(p *pod) { p.orcaBytes += int64(s.params.ORCABytes) })
	}
	s.shareFinish(r)
	rep.finish(r, orca)
	s.inflight--
	s.m.done(r, s.now+s.params.Relay-r.sent)
	if s.cfg.Record != nil && r.snap != nil {
		rec := &Record{At: r.sent, Prompt: r.job.Prompt.Tokens, Out: r.job.MaxTokens, Replica: int(r.replica), Pod: int(r.pod),
			TTFT: r.ttft, Pods: r.snap}
		s.cfg.Record(rec)
	}
}

// podProbed counts one probe received by pod (while arrivals last).
func (s *sim) podProbed(idx int32) {
	s.podCost(idx, func(p *pod) { p.probes++; p.probeBytes += int64(s.params.ProbeBytes) })
}

func (s *sim) podCost(idx int32, f func(*pod)) {
	if s.now >= s.cfg.Warmup && s.now < s.cfg.Duration {
		f(s.pods[idx])
	}
}

// scrapeIssue: replica ri's scrape loop for pod pi fires now. The pod
// answers with its state as the scrape reaches it; the answer arrives after
// the round trip and the render time. Loops stop once arrivals are over
// (and pod costs no longer counted): no decision reads a report after the
// last request is routed, so scraping through the drain would only cost
// simulation time (a sixth of the events of the 60 s cached run at
// N=1,024, R=32: bench/HISTORY.md, cost of the simulation).
func (s *sim) scrapeIssue(ri, pi int) {
	if s.now >= s.cfg.Duration && s.srcDone {
		return
	}
	l := &s.replicas[ri].loops[pi]
	l.pending = s.pods[pi].load(time.Time{}, probe.SourceScrape)
	s.podCost(int32(pi), func(p *pod) { p.scrapes++; p.scrapeBytes += int64(s.params.ScrapeBytes) })
	s.q.pushLane(laneScrapeDeliver, event{at: s.now + s.params.RTT + s.params.ScrapeRender, kind: evScrapeDeliver, a: int32(ri), b: int32(pi)})
}

// scrapeDeliver: the answer reaches the replica; it is Reported and the loop
// sleeps its interval, adapted as probe.Scraper adapts it.
func (s *sim) scrapeDeliver(ri, pi int) {
	r := s.replicas[ri]
	l := &r.loops[pi]
	st := r.backends[pi].State()
	ld := l.pending
	ld.At = r.clock.now()
	st.Report(&ld)
	if r.scrape.Adaptive {
		l.interval = l.pace.Next(r.scrape, s.now-l.lastT, st.Dispatched(), st.Inflight(), ld.Queue())
		l.lastT = s.now
	}
	s.q.pushLane(laneScrapeIssue, event{at: s.now + l.interval, kind: evScrapeIssue, a: int32(ri), b: int32(pi)})
}
