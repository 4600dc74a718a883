package route

import (
	"context"
	"fmt"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// A Picker chooses the backend of one attempt. There is one Picker type per
// route.policy, each in its own file (pick_*.go), registered in the policies
// table below.
//
// Contract:
//   - A Picker is immutable once built: NewPicker captures the pool snapshot,
//     the reloadable settings (PickerConfig) and the dependencies (Deps). The
//     proxy builds a new Picker whenever the pool or the configuration
//     changes and publishes it together with that pool in one atomic swap,
//     so a request always picks over the pool its Picker was built for.
//   - State that must outlive a Picker lives on long-lived structs: the
//     round-robin cursor and the learned adapter set on Memory; the prefix
//     table, LoRA memory and load state (probe.State) on each Backend.
//   - Pick is a function of the pool snapshot, the per-backend views
//     (Deps.Views), the request (RequestInfo), Deps.Rand and Deps.Now. It
//     holds no *Proxy, does no I/O except through Deps.Prober, takes no lock
//     and does not allocate: all scratch space is in s.
//   - Pick never returns a backend that is in exclude or not Eligible. It
//     returns ErrNoBackend when nothing is eligible, and ErrSaturated when
//     shedding is on and every candidate is known to be saturated.
//   - Pick is safe for concurrent use with distinct Scratch values.
type Picker interface {
	Pick(ctx context.Context, info *RequestInfo, exclude []*Backend, s *Scratch) (*Backend, Decision, error)
}

// Decision is what a Picker reports about one choice, for metrics and logs:
// the source of the view that decided and its age.
type Decision struct {
	Source probe.Source
	Age    time.Duration
}

// PickerConfig is the reloadable part of the configuration that pickers
// read, already converted: PickerConfigFrom builds it from a validated
// config.Config. A simulator may fill it directly.
type PickerConfig struct {
	// Policy is a route.policy value (config.Policy*).
	Policy string
	// D is the number of candidates sampled (route.d), in 1..config.MaxD,
	// or config.DAuto (0): NewPicker takes config.AutoSampling's d for the
	// policy and the pool's size. The proxy passes the d of
	// config.Config.Sampling, which it also gives the prober's quorum.
	D int
	// Hedges is the number of spare candidates handed to the prober
	// (probe.hedges), in 0..config.MaxD.
	Hedges int
	// Weights are the scorer weights (route.weights).
	Weights Weights
	// Saturation is route.saturation.
	Saturation config.Saturation
	// AffinityGap is route.affinity_max_queue_gap, in requests.
	AffinityGap int
	// StaleAfter is scrape.stale_after: older reports are ignored.
	StaleAfter time.Duration
	// Load is route.load: request counts or expected time to first token
	// from token work (load.go).
	Load LoadModel
	// BlockChars is route.prefix.block_chars: a matched prefix block saves
	// BlockChars/4 prompt tokens of prefill.
	BlockChars int
}

// PickerConfigFrom converts the route section (and the two keys of other
// sections pickers read) of a validated configuration.
func PickerConfigFrom(cfg *config.Config) PickerConfig {
	w := cfg.Route.Weights
	return PickerConfig{
		Policy:      cfg.Route.Policy,
		D:           cfg.Route.D,
		Hedges:      cfg.Probe.Hedges,
		Weights:     Weights{Queue: w.Queue, KVCache: w.KVCache, Prefix: w.Prefix, LoRA: w.LoRA},
		Saturation:  cfg.Route.Saturation,
		AffinityGap: cfg.Route.AffinityMaxQueueGap,
		StaleAfter:  cfg.Scrape.StaleAfter.D(),
		Load:        LoadModel{Tokens: cfg.Route.Load.Mode == config.LoadTokens, DecodeWeight: cfg.Route.Load.DecodeWeight, RunningWeight: cfg.Route.Load.RunningWeight, WaitingWeight: cfg.Route.Load.WaitingWeight, IgnoreSpeed: !cfg.Route.Load.LearnSpeed, PodSpeed: cfg.Route.Load.PodSpeed, PodSamples: cfg.Route.Load.PodSpeedSamples, PodForeign: cfg.Route.Load.PodSpeedForeign, PodFresh: cfg.Route.Load.PodSpeedFresh, SpeedBand: cfg.Route.Load.SpeedBand, SeatWeight: cfg.Route.Load.SeatWeight, SeatFreeShare: cfg.Route.Load.SeatFreeShare},
		BlockChars:  cfg.Route.Prefix.BlockChars,
	}
}

// Prober refreshes the load state of candidates before the probe policy
// scores them. *probe.Prober implements it over HTTP; a virtual-time
// simulator supplies its own. Run must return by its own deadline, Report
// what it learns into the States, and set Result.SparesUsed to the number
// of spares (from the front) it probed or found fresh.
type Prober interface {
	Run(ctx context.Context, cands, spares []*probe.State) probe.Result
}

// ViewSource returns one backend's load view at now, ignoring reports
// older than staleAfter. The default, StateViews, reads the backend's
// probe.State. The benchmark installs a source that reads the simulator's
// true state (the "oracle" strategy). Implementations must be safe for
// concurrent use and should not allocate.
type ViewSource interface {
	View(b *Backend, now time.Time, staleAfter time.Duration) probe.View
}

// StateViews is the production ViewSource: the backend's probe.State.View.
type StateViews struct{}

// View implements ViewSource.
func (StateViews) View(b *Backend, now time.Time, staleAfter time.Duration) probe.View {
	return b.state.View(now, staleAfter)
}

// Deps are what a Picker uses besides the pool and its PickerConfig. Every
// field but Memory may be left zero: Rand defaults to math/rand/v2, Now to
// time.Now, Views to StateViews; a nil Prober makes the probe policy score
// its sample on cached views without probing.
type Deps struct {
	Rand   Rand
	Now    func() time.Time
	Views  ViewSource
	Prober Prober
	// Memory is the state shared by successive pickers (round-robin
	// cursor, learned adapters). Required; keep one per router.
	Memory *Memory
}

// policyEntry is one row of the policies table.
type policyEntry struct {
	// build returns the policy's Picker over pool.
	build func(pc *PickerConfig, pool *Pool, d *Deps) Picker
	// reports is true when the policy reads load reports, so the proxy
	// scrapes its backends and asks them for ORCA headers.
	reports bool
}

// policies maps each route.policy value (listed once, in internal/config)
// to its Picker. Adding a policy: a pick_<name>.go file with the type and
// its constructor, a constant in internal/config, and one line here.
var policies = map[string]policyEntry{
	config.PolicyProbe:         {newProbePicker, true},
	config.PolicyCached:        {newCachedPicker, true},
	config.PolicyLeastInflight: {newLeastInflightPicker, false},
	config.PolicyRoundRobin:    {newRoundRobinPicker, false},
	config.PolicyRandom:        {newRandomPicker, false},
}

// PolicyReadsReports reports whether the policy reads load reports (and so
// needs the scraper and ORCA headers).
func PolicyReadsReports(policy string) bool { return policies[policy].reports }

// NewPicker builds the Picker of pc.Policy over pool. It fails on an unknown
// policy or a D outside 1..config.MaxD (D 0, auto, is resolved here once
// for the pool's size: config.AutoSampling). d is copied; its zero fields
// are defaulted (see Deps).
func NewPicker(pc PickerConfig, pool *Pool, d Deps) (Picker, error) {
	e, ok := policies[pc.Policy]
	if !ok {
		return nil, fmt.Errorf("route.policy: unknown policy %q", pc.Policy)
	}
	if pool == nil {
		pool = &Pool{}
	}
	if pc.D == config.DAuto {
		pc.D, _ = config.AutoSampling(pc.Policy, pool.Len())
	}
	if pc.D < 1 || pc.D > config.MaxD {
		return nil, fmt.Errorf("route.d: must be auto (0) or in 1..%d, got %d", config.MaxD, pc.D)
	}
	pc.Hedges = min(max(pc.Hedges, 0), config.MaxD)
	if d.Memory == nil {
		return nil, fmt.Errorf("route: Deps.Memory is required")
	}
	if d.Rand == nil {
		d.Rand = defaultRand
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Views == nil {
		d.Views = StateViews{}
	}
	return e.build(&pc, pool, &d), nil
}

// Scratch is the per-attempt scratch space of Pick: fixed arrays sized by
// config.MaxD, so a pick does not allocate. Get one from NewScratch and
// reuse it (one per goroutine, or pooled); it is not safe for concurrent use.
type Scratch struct {
	sample      [2*config.MaxD + 1]*Backend
	spare       [config.MaxD]*Backend
	memo        [memoryScan + 1]*Backend // + the prefix holder
	memoCands   [memoryScan + 1]Candidate
	memoBriefs  [memoryScan + 1]probe.Brief
	excl        []*Backend
	all         []*Backend
	cands       []Candidate
	views       []probe.View
	states      []*probe.State
	spareStates []*probe.State
}

// NewScratch returns scratch space for Pick.
func NewScratch() *Scratch {
	s := &Scratch{}
	s.init()
	return s
}

func (s *Scratch) init() {
	s.excl = make([]*Backend, 0, 2*config.MaxD)
	s.cands = make([]Candidate, 0, 2*config.MaxD)
	s.views = make([]probe.View, 0, 2*config.MaxD)
	s.states = make([]*probe.State, 0, config.MaxD)
	s.spareStates = make([]*probe.State, 0, config.MaxD)
}
