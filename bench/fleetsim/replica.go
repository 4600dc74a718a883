package fleetsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// epoch is virtual time 0 as a time.Time, for the production code's clocks.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// vclock is a replica's clock: the simulation's time plus, during a pick,
// the time its probes have waited so far.
type vclock struct {
	s      *sim
	offset time.Duration
}

func (c *vclock) now() time.Time { return epoch.Add(c.s.now + c.offset) }

// replica is one probegate replica: its own Backends (so its own probe.State
// reports, counters, prefix and LoRA memories), the production Picker of its
// strategy over them, and its scrape loops. Replicas share nothing, as
// deployed replicas share nothing.
type replica struct {
	idx      int
	s        *sim
	backends []*route.Backend
	podOf    map[*probe.State]int32
	picker   route.Picker
	scratch  *route.Scratch
	clock    *vclock
	prober   *vprober // nil unless the policy probes
	rng      *rand.Rand
	jitter   *rand.Rand // Params.SpeedJitter's draws (nil: none)
	info     route.RequestInfo
	scrape   probe.ScrapeConfig
	scrapes  bool // the policy reads reports: scrape loops run
	orca     bool
	mem      *route.Memory
	// route.prefix.block_chars and route.load.default_output_tokens, for
	// the token-work accounting (route.WorkTicket); route.prefix.max_blocks
	// for prompt texts.
	blockChars    int
	maxBlocks     int
	body          []byte
	defaultOutput float64
	loops         []scrapeLoop
	decide        [8]int64 // decisions by probe.Source
	errors        int64
}

// scrapeLoop is the state of one production scrape loop (probe.Scraper.loop)
// for one pod: its interval and the adaptive rule's state.
type scrapeLoop struct {
	interval time.Duration
	lastT    time.Duration
	pace     probe.Pace
	pending  probe.Load // the answer on its way from the pod
}

// newReplica builds replica idx with strategy's production configuration
// (bench.StrategyConfig) over the pods at addrs.
func newReplica(s *sim, idx int, strategy string, addrs []string, seed uint64) (*replica, error) {
	strategy, rules := splitRules(strategy)
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "http://" + a
	}
	base := strategy
	if isIdeal(strategy) || isReplay(strategy) {
		base = bench.Oracle
	}
	cfg, err := bench.StrategyConfig(base, urls)
	if err != nil {
		return nil, err
	}
	if err := applyTweaks(cfg, s.tweaks); err != nil {
		return nil, fmt.Errorf("strategy %s: %w", strategy, err)
	}
	r := &replica{
		idx: idx, s: s, clock: &vclock{s: s},
		rng:           rand.New(rand.NewPCG(seed, uint64(idx)+0x7265706c)),
		podOf:         make(map[*probe.State]int32, len(addrs)),
		scratch:       route.NewScratch(),
		scrape:        probe.ScrapeConfigFrom(cfg.Scrape),
		scrapes:       route.PolicyReadsReports(cfg.Route.Policy),
		orca:          cfg.Probe.ORCA,
		mem:           &route.Memory{},
		blockChars:    cfg.Route.Prefix.BlockChars,
		defaultOutput: float64(cfg.Route.Load.DefaultOutputTokens),
	}
	// Only a workload with prompt texts (Job.Text) shares prefixes; for
	// the others prefix tables only ever miss: keep them small (memory at
	// 32 x 1024 backends).
	entries := 64
	if len(s.cfg.Jobs) > 0 && s.cfg.Jobs[0].Text != "" {
		entries = cfg.Route.Prefix.EntriesPerBackend
	}
	r.maxBlocks = cfg.Route.Prefix.MaxBlocks
	r.backends = s.sharedBackends(idx, func() []*route.Backend {
		bs := make([]*route.Backend, len(addrs))
		for i, a := range addrs {
			bs[i] = route.NewBackend(a, entries)
		}
		return bs
	})
	for i, b := range r.backends {
		r.podOf[b.State()] = int32(i)
	}
	// route.d and probe.quorum as the proxy runs them over this pool
	// (route.d auto: from the pool's size).
	d, quorum := cfg.Sampling(len(addrs))
	pc := route.PickerConfigFrom(cfg)
	pc.D = d
	deps := route.Deps{Rand: r.rng.Uint64, Now: r.clock.now, Memory: r.mem}
	if bench.UsesOracle(strategy) {
		deps.Views = oracleViews{s: s, r: r}
	}
	if cfg.Route.Policy == "probe" {
		pcfg := cfg.Probe
		pcfg.Quorum = quorum
		prc, err := probe.ProberConfigFrom(pcfg, d)
		if err != nil {
			return nil, err
		}
		r.prober = newVprober(prc, r, s, rand.New(rand.NewPCG(seed, uint64(idx)+0x70726f62)), rules, len(addrs))
		deps.Prober = r.prober
	} else if rules != (probeRules{}) {
		return nil, fmt.Errorf("strategy %s: the rules suffixes apply to probe strategies only", strategy)
	}
	r.picker, err = route.NewPicker(pc, route.NewPool(r.backends), deps)
	if err != nil {
		return nil, fmt.Errorf("strategy %s: %w", strategy, err)
	}
	if isIdeal(strategy) {
		r.picker = &idealPicker{s: s, r: r, kind: strategy}
	}
	if isReplay(strategy) {
		r.picker = &replayPicker{s: s, r: r, kind: strategy}
	}
	model := []byte(s.cfg.Sim.Model)
	r.info = route.RequestInfo{JSON: true, Model: model, ModelHash: xxhash.Sum64(model), Stream: true, IgnoreEOS: true}
	if cfg.Route.Policy == "round_robin" && !s.cfg.Lockstep {
		// Replicas started at different times hold different cursors; all
		// starting at 0 would send the i-th request of every replica to
		// the same pod. Advance the cursor to a seeded offset.
		for range r.rng.IntN(len(addrs)) {
			if _, _, err := r.picker.Pick(context.Background(), &r.info, nil, r.scratch); err != nil {
				return nil, err
			}
		}
	}
	if r.scrapes {
		r.loops = make([]scrapeLoop, len(addrs))
		for i := range r.loops {
			r.loops[i] = scrapeLoop{interval: r.scrape.Interval, pace: probe.NewPace(r.scrape, 0)}
		}
	}
	return r, nil
}

// pick routes req arriving now and dispatches it as the proxy does (token
// work, counters, affinity notes). It returns the pod, the time the
// decision took (probe wait), and false when no backend could be chosen.
func (r *replica) pick(req *request) (int32, time.Duration, bool) {
	r.clock.offset = 0
	if req.job.Text != "" {
		// The proxy's view of a completion request with this prompt.
		r.body = append(r.body[:0], `{"model":`...)
		r.body = strconv.AppendQuote(r.body, r.s.cfg.Sim.Model)
		r.body = append(r.body, `,"prompt":`...)
		r.body = strconv.AppendQuote(r.body, req.job.Text)
		r.body = append(r.body, `,"max_tokens":`...)
		r.body = strconv.AppendInt(r.body, int64(req.job.MaxTokens), 10)
		r.body = append(r.body, `,"ignore_eos":true,"stream":`...)
		r.body = strconv.AppendBool(r.body, req.stream)
		r.body = append(r.body, '}')
		route.ExtractInfo(r.body, r.blockChars, r.maxBlocks, &r.info)
	}
	r.info.Stream = req.stream
	r.info.PromptTokens = req.job.Prompt.Tokens
	r.info.MaxTokens = req.job.MaxTokens
	b, dec, err := r.picker.Pick(context.Background(), &r.info, nil, r.scratch)
	wait := r.clock.offset
	now := r.clock.now()
	r.clock.offset = 0
	if err != nil {
		r.errors++
		return -1, wait, false
	}
	r.decide[dec.Source]++
	req.work = r.mem.BeginWork(&r.info, b, r.blockChars, r.defaultOutput, now)
	b.State().Dispatch()
	r.mem.NoteDispatch(b, &r.info, now)
	return r.podOf[b.State()], wait, true
}

// sseFrame stands for the first chunk of a streamed answer.
var sseFrame = []byte("data: {}\n\n")

// firstByte records that req's first response bytes passed the replica.
func (r *replica) firstByte(req *request) {
	now := r.clock.now()
	if p := &r.s.cfg.Params; p.SpeedJitter > 0 && p.SpeedJitterP > 0 {
		if r.jitter == nil {
			r.jitter = rand.New(rand.NewPCG(r.s.cfg.Seed, uint64(r.idx)+0x6a6974746572))
		}
		if r.jitter.Float64() < p.SpeedJitterP {
			now = now.Add(time.Duration(r.jitter.ExpFloat64() * float64(p.SpeedJitter)))
		}
	}
	r.s.shareFirstByte(req, now)
	req.work.SawBytes(r.backends[req.pod], sseFrame, now)
}

// finish records that req ended at this replica, with the ORCA header of
// its response when it had one.
func (r *replica) finish(req *request, orca *probe.Load) {
	b := r.backends[req.pod]
	// The last bytes of the stream: they time its decode.
	req.work.SawBytes(b, sseFrame, r.clock.now())
	r.mem.EndWork(b, &req.work, true)
	st := b.State()
	st.Finish()
	if orca != nil && r.orca {
		st.Report(orca)
	}
}

// oracleViews is the oracle strategy's route.ViewSource: each pod's true
// engine state at the decision, as bench.OracleViews gives for a live fleet
// (the token work in flight is this replica's own prediction, as there).
type oracleViews struct {
	s *sim
	r *replica
}

// View implements route.ViewSource.
func (o oracleViews) View(b *route.Backend, now time.Time, _ time.Duration) probe.View {
	st := b.State()
	p := o.s.pods[o.r.podOf[st]]
	w := p.waiting
	pre, dec, ns := st.Work()
	return probe.View{
		Queue: float64(p.running + w), Waiting: w, KVUse: p.kvUse,
		MaxLoRA: p.maxLoRA, BaseModel: p.baseName, Source: probe.SourceOracle, Inflight: st.Inflight(),
		PrefillTokens: pre, DecodeTokens: dec, NsPerToken: ns, PrefillRequests: st.View(now, 0).PrefillRequests,
	}
}
