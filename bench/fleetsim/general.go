package fleetsim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/vllmsim"
)

// The generalization sweep (issue 13: "route real, heavy-tailed traffic
// better than every blind policy", on workloads the bench does not use).
// Every cell is one combination of request sizes, arrival process, load,
// fleet size, fleet kind, pods' age and replica count; each strategy runs
// it with the same seeds (common random numbers: the same arrivals, sizes
// and pods), and probe's pooled and per-seed TTFT percentiles are compared
// with the best blind policy's (round_robin, random, least_inflight: the
// best of them per cell and percentile) and with cached's.

// Size distributions of the sweep (GeneralWorkload).
const (
	SizesUniform   = "uniform"        // the bench's uniform sizes
	SizesLognormal = "lognormal"      // the bench's default (sigma 0.99 prompts)
	SizesLogn05    = "lognormal_s05"  // prompts sigma 0.5, the same mean prompt
	SizesLogn15    = "lognormal_s15"  // prompts sigma 1.5, the same mean prompt
	SizesBimodal   = "bimodal"        // 80% short chat turns, 20% long documents
	SizesTrace     = "trace_sizes"    // the Azure code trace's rows, drawn at random
	SizesTraceReal = "trace_arrivals" // the trace's rows in order, its gaps rescaled
	SizesDecode    = "decode_heavy"   // chat with long answers: decode-bound (assumed)
	SizesFixed     = "fixed"          // every request 1,024 prompt and 128 output tokens
)

// GeneralSizes are the sweep's size distributions, in report order.
var GeneralSizes = []string{SizesUniform, SizesLognormal, SizesLogn05, SizesLogn15, SizesBimodal, SizesTrace, SizesTraceReal, SizesDecode, SizesFixed}

// Sizes of decode_heavy: a chat service whose answers are long next to its
// prompts, the opposite of the code trace (median 1,469 prompt, 13 output
// tokens). Assumed, not fitted: medians 300 prompt and 250 output tokens,
// so a request holds its batch seat for hundreds of decode steps and the
// time to first token is set by free seats more than by queued prefill.
var (
	decodePromptTokens = bench.LogNormal{Mu: math.Log(300), Sigma: 1.0, Min: 4, Max: 4096}
	decodeOutputTokens = bench.LogNormal{Mu: math.Log(250), Sigma: 0.8, Min: 8, Max: 1024}
)

// Fleet kinds of the sweep (FleetShape).
const (
	FleetHomo     = "homo"     // every pod alike
	FleetOneSlow  = "oneslow"  // the last pod 2x slower
	FleetTwoSpeed = "twospeed" // the second half of the pods 2x slower
	FleetSmallKV  = "smallkv"  // the last pod with a quarter of the KV cache
)

// GeneralFleets are the sweep's fleet kinds.
var GeneralFleets = []string{FleetHomo, FleetOneSlow, FleetTwoSpeed, FleetSmallKV}

// Pods' ages of the sweep.
const (
	LifeFresh = "fresh" // counters at 0, as pods started with the run
	LifeLong  = "long"  // counters hold one earlier window of the workload
)

// sameMeanLognormal is a prompt lognormal with shape sigma and the mean of
// bench.CodePromptTokens (about 2,390 tokens), within its Min and Max.
func sameMeanLognormal(sigma float64) bench.LogNormal {
	l := bench.CodePromptTokens
	mean := l.Mu + l.Sigma*l.Sigma/2
	return bench.LogNormal{Mu: mean - sigma*sigma/2, Sigma: sigma, Min: l.Min, Max: l.Max}
}

// GeneralWorkload returns the sweep's workload of sizes with arrival
// process shape; trace is the Azure trace's rows (for SizesTrace and
// SizesTraceReal; nil otherwise).
//
//	uniform         prompt 400-1,600 characters, 16-48 output tokens (the bench's)
//	lognormal       bench.CodePromptTokens / CodeOutputTokens (the bench's default)
//	lognormal_s05   prompt sigma 0.5, same mean (median 2,110): narrower
//	lognormal_s15   prompt sigma 1.5, same mean (median 776, 6.6% at the 7,437 cap)
//	bimodal         bench.ChatDocBimodal (the live bench's -sizes bimodal):
//	                80%: prompt 64-512, output 32-256 tokens (chat turns);
//	                20%: prompt 3,000-7,000, output 8-64 (documents), uniform in each
//	trace_sizes     the trace's (prompt, output) rows drawn at random
//	trace_arrivals  the trace's rows in order with its own gaps (shape ignored)
//	decode_heavy    prompt lognormal median 300 (sigma 1.0, 4-4,096), output
//	                median 250 (sigma 0.8, 8-1,024): long answers (assumed)
//	fixed           1,024 prompt and 128 output tokens, every request (a
//	                load generator's fixed-length random prompts)
func GeneralWorkload(sizes, shape string, trace []bench.TraceRow) (Workload, error) {
	if err := checkShape(shape); err != nil {
		return Workload{}, err
	}
	var w Workload
	switch sizes {
	case SizesUniform:
		w = UniformWorkload()
	case SizesLognormal:
		w = LognormalWorkload()
	case SizesLogn05, SizesLogn15:
		sigma := 0.5
		if sizes == SizesLogn15 {
			sigma = 1.5
		}
		pr := sameMeanLognormal(sigma)
		w = Workload{KVBlocks: 1024, Sizes: func(rng *rand.Rand) (int, int) {
			return pr.Draw(rng), bench.CodeOutputTokens.Draw(rng)
		}}
	case SizesBimodal:
		w = Workload{KVBlocks: 1024, Sizes: bench.ChatDocBimodal.Draw}
	case SizesDecode:
		w = Workload{KVBlocks: 1024, Sizes: func(rng *rand.Rand) (int, int) {
			return decodePromptTokens.Draw(rng), decodeOutputTokens.Draw(rng)
		}}
	case SizesFixed:
		w = Workload{KVBlocks: 1024, Sizes: func(*rand.Rand) (int, int) { return 1024, 128 }}
	case SizesTrace, SizesTraceReal:
		if len(trace) < 2 {
			return Workload{}, fmt.Errorf("sizes %s need a trace (-trace)", sizes)
		}
		if sizes == SizesTraceReal {
			w = Workload{Trace: trace, KVBlocks: 1024}
			shape = "trace"
			break
		}
		w = Workload{KVBlocks: 1024, Sizes: func(rng *rand.Rand) (int, int) {
			r := trace[rng.IntN(len(trace))]
			return max(r.Prompt, 1), max(r.Output, 1)
		}}
	default:
		return Workload{}, fmt.Errorf("unknown sizes %q (want one of %s)", sizes, strings.Join(GeneralSizes, ", "))
	}
	if shape == "" {
		shape = ArrivalsPoisson
	}
	w.Name, w.Shape = sizes+"_"+shape, shape
	if w.Trace != nil {
		w.Shape = ""
	}
	return w, nil
}

// FleetShape returns the per-pod slowdowns and KV cache sizes (0: the
// workload's) of a fleet of kind with n pods whose pods hold kv blocks.
// A small KV cache still holds one request of BenchMaxModelLen tokens.
func FleetShape(kind string, n, kv, blockSize int) (slow []float64, blocks []int, err error) {
	slow, blocks = make([]float64, n), make([]int, n)
	for i := range slow {
		slow[i] = 1
	}
	switch kind {
	case FleetHomo:
	case FleetOneSlow:
		slow[n-1] = 2
	case FleetTwoSpeed:
		for i := n / 2; i < n; i++ {
			slow[i] = 2
		}
	case FleetSmallKV:
		blocks[n-1] = max(kv/4, (BenchMaxModelLen+blockSize-1)/blockSize+1)
	default:
		return nil, nil, fmt.Errorf("unknown fleet %q (want one of %s)", kind, strings.Join(GeneralFleets, ", "))
	}
	return slow, blocks, nil
}

// GeneralOptions configure a generalization sweep: the cells are every
// combination of the lists.
type GeneralOptions struct {
	Sizes, Arrivals, Fleets, Lives []string
	Loads                          []float64
	Pods, Replicas                 []int
	// Seats are the pods' batch seats (vLLM's max_num_seqs) of the cells:
	// PodSim's 4 (the bench's pods) when nil. A pod with s seats has s/4
	// times PodSim's KV cache, the same blocks per seat.
	Seats []int
	// Strategies: GeneralStrategies when nil. The comparisons need probe,
	// cached and at least one blind policy among them.
	Strategies []string
	// Probe names the strategy judged (default bench.Probe): another
	// probe variant can stand in its place.
	Probe string
	Seeds int   // seeds per cell (Seed .. Seed+Seeds-1)
	Seed  int64 // first seed
	// Requests is the measured requests aimed at per seed: a cell's
	// arrival time is Requests / rate after the warmup, within
	// [MinDuration, MaxDuration].
	Requests                 int
	Warmup                   time.Duration
	MinDuration, MaxDuration time.Duration
	Trace                    []bench.TraceRow
	Params                   Params
	// Only, when set, keeps the cells whose name it matches.
	Only *regexp.Regexp
	// Parallel runs this many simulations at once (each is one
	// goroutine; results do not depend on it).
	Parallel int
	Log      io.Writer
	// Progress, if set, is called after each cell with the cells so far.
	Progress func([]GeneralCell)
}

// GeneralStrategies are the sweep's default strategies: the blind ones,
// cached and probe.
var GeneralStrategies = []string{bench.RoundRobin, bench.Random, bench.LeastInflight, bench.Cached, bench.Probe}

// blind reports whether strategy s routes without load reports.
func blind(s string) bool {
	return s == bench.RoundRobin || s == bench.Random || s == bench.LeastInflight
}

// DefaultGeneralOptions is the sweep's full grid (hours of CPU: pick
// lists on the command line).
func DefaultGeneralOptions() GeneralOptions {
	return GeneralOptions{
		Sizes: GeneralSizes, Arrivals: ArrivalShapes, Fleets: GeneralFleets, Lives: []string{LifeLong},
		Loads: []float64{0.3, 0.6, 0.8, 0.95}, Pods: []int{4, 16, 64}, Replicas: []int{1, 8},
		Seeds: 3, Seed: 1, Requests: 800, Warmup: 2 * time.Second,
		MinDuration: 10 * time.Second, MaxDuration: 120 * time.Second, Params: DefaultParams(), Parallel: 1,
	}
}

// GeneralRun is one strategy's figures in a cell.
type GeneralRun struct {
	Name     string    `json:"name"`
	Requests int       `json:"requests"`
	Errors   int       `json:"errors"`
	P50      float64   `json:"ttft_p50_ms"` // pooled over the seeds
	P99      float64   `json:"ttft_p99_ms"`
	SeedP50  []float64 `json:"seed_ttft_p50_ms"`
	SeedP99  []float64 `json:"seed_ttft_p99_ms"`
}

// GeneralVerdict is probe against one rival at one percentile.
type GeneralVerdict struct {
	Rival string  `json:"rival"`
	Ratio float64 `json:"ratio"` // probe's pooled percentile / the rival's
	Worse int     `json:"seeds_worse"`
	// Loss: worse in every seed and by more than 5% pooled.
	Loss bool `json:"loss"`
	// Win: better in every seed and by more than 5% pooled.
	Win bool `json:"win"`
}

// GeneralCell is one cell's result.
type GeneralCell struct {
	Name      string       `json:"name"`
	Sizes     string       `json:"sizes"`
	Arrivals  string       `json:"arrivals"`
	Fleet     string       `json:"fleet"`
	Life      string       `json:"life"`
	Pods      int          `json:"pods"`
	Seats     int          `json:"seats"`
	Replicas  int          `json:"replicas"`
	Load      float64      `json:"load"`
	RateRPS   float64      `json:"rate_rps"`
	DurationS float64      `json:"duration_s"`
	Runs      []GeneralRun `json:"strategies"`
	// Probe against the best blind policy and against cached, at p99
	// and p50.
	BlindP99  GeneralVerdict `json:"vs_blind_p99"`
	BlindP50  GeneralVerdict `json:"vs_blind_p50"`
	CachedP99 GeneralVerdict `json:"vs_cached_p99"`
	CachedP50 GeneralVerdict `json:"vs_cached_p50"`
}

// generalCell is a cell to run.
type generalCell struct {
	sizes, arrivals, fleet, life string
	pods, reps, seats            int
	load                         float64
}

// name is the cell's name: sizes/arrivals/fleet/life/nN/rR/loadLL, with
// /sS after nN when the pods have S seats other than PodSim's 4.
func (c generalCell) name() string {
	seats := ""
	if c.seats != podSeats {
		seats = fmt.Sprintf("/s%d", c.seats)
	}
	return fmt.Sprintf("%s/%s/%s/%s/n%d%s/r%d/load%02.0f", c.sizes, c.arrivals, c.fleet, c.life, c.pods, seats, c.reps, c.load*100)
}

// podSeats is PodSim's batch seats (the bench's pods).
const podSeats = 4

// GeneralPodSim is PodSim(w) with seats batch seats (0: PodSim's) and the
// KV cache grown in proportion, the same blocks per seat.
func GeneralPodSim(w Workload, seats int) vllmsim.Config {
	sim := PodSim(w)
	if seats > 0 && seats != sim.MaxNumSeqs {
		sim.NumGPUBlocks = sim.NumGPUBlocks * seats / sim.MaxNumSeqs
		sim.MaxNumSeqs = seats
	}
	return sim
}

// GeneralSweep runs o's cells, in order, and returns their results.
func GeneralSweep(o GeneralOptions) ([]GeneralCell, error) {
	if len(o.Strategies) == 0 {
		o.Strategies = GeneralStrategies
	}
	if o.Probe == "" {
		o.Probe = bench.Probe
	}
	if !slices.Contains(o.Strategies, o.Probe) || !slices.Contains(o.Strategies, bench.Cached) || !slices.ContainsFunc(o.Strategies, blind) {
		return nil, fmt.Errorf("strategies %v: need %s, cached and a blind policy", o.Strategies, o.Probe)
	}
	if o.Seeds < 1 || o.Requests < 1 {
		return nil, fmt.Errorf("seeds and requests must be >= 1")
	}
	if len(o.Seats) == 0 {
		o.Seats = []int{podSeats}
	}
	for _, n := range o.Seats {
		if n < 1 {
			return nil, fmt.Errorf("seats must be >= 1, got %d", n)
		}
	}
	var cells []generalCell
	for _, sz := range o.Sizes {
		for _, ar := range o.Arrivals {
			if sz == SizesTraceReal && ar != o.Arrivals[0] {
				continue // the trace's own arrivals: one shape
			}
			for _, fl := range o.Fleets {
				for _, life := range o.Lives {
					for _, n := range o.Pods {
						for _, seats := range o.Seats {
							for _, r := range o.Replicas {
								for _, l := range o.Loads {
									c := generalCell{sizes: sz, arrivals: ar, fleet: fl, life: life, pods: n, reps: r, seats: seats, load: l}
									if sz == SizesTraceReal {
										c.arrivals = "trace"
									}
									if o.Only == nil || o.Only.MatchString(c.name()) {
										cells = append(cells, c)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	caps := &capCache{m: map[string]float64{}}
	var out []GeneralCell
	for _, c := range cells {
		gc, err := runCell(o, c, caps)
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.name(), err)
		}
		out = append(out, *gc)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%-58s p99 %s/blind(%s) %.3f (%d/%d worse) /cached %.3f (%d/%d)  p50 /blind %.3f /cached %.3f\n",
				gc.Name, o.Probe, gc.BlindP99.Rival, gc.BlindP99.Ratio, gc.BlindP99.Worse, o.Seeds, gc.CachedP99.Ratio, gc.CachedP99.Worse, o.Seeds,
				gc.BlindP50.Ratio, gc.CachedP50.Ratio)
		}
		if o.Progress != nil {
			o.Progress(out)
		}
	}
	return out, nil
}

// capCache memoizes pod capacities by workload and pod kind.
type capCache struct {
	mu sync.Mutex
	m  map[string]float64
}

func (cc *capCache) get(key string, f func() (float64, error)) (float64, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if v, ok := cc.m[key]; ok {
		return v, nil
	}
	v, err := f()
	if err != nil {
		return 0, err
	}
	cc.m[key] = v
	return v, nil
}

// runCell runs every strategy of o over cell c's seeds.
func runCell(o GeneralOptions, c generalCell, caps *capCache) (*GeneralCell, error) {
	shape := c.arrivals
	if shape == "trace" {
		shape = ""
	}
	w, err := GeneralWorkload(c.sizes, shape, o.Trace)
	if err != nil {
		return nil, err
	}
	sim := GeneralPodSim(w, c.seats)
	bs := blockSize(sim)
	slow, kv, err := FleetShape(c.fleet, c.pods, sim.NumGPUBlocks, bs)
	if err != nil {
		return nil, err
	}
	// The fleet's capacity: the sum of its pods' (each kind measured
	// saturated, as the bench measures a fleet's), so that a load is a
	// share of what this fleet can serve.
	var capacity float64
	for i := range slow {
		ps := sim
		if kv[i] > 0 {
			ps.NumGPUBlocks = kv[i]
		}
		key := fmt.Sprintf("%s/%g/%d/%d", c.sizes, slow[i], ps.NumGPUBlocks, ps.MaxNumSeqs)
		v, err := caps.get(key, func() (float64, error) {
			return PodCapacity(w, ps, BenchSlowdown*slow[i], 60*time.Second, uint64(o.Seed))
		})
		if err != nil {
			return nil, err
		}
		capacity += v
	}
	rate := c.load * capacity
	dur := o.Warmup + time.Duration(float64(o.Requests)/rate*float64(time.Second))
	dur = min(max(dur, o.MinDuration), o.MaxDuration).Round(time.Second)
	gc := &GeneralCell{Name: c.name(), Sizes: c.sizes, Arrivals: c.arrivals, Fleet: c.fleet, Life: c.life, Pods: c.pods, Seats: c.seats, Replicas: c.reps,
		Load: c.load, RateRPS: round(rate), DurationS: dur.Seconds()}
	type job struct {
		si, k int
	}
	ttft := make([][][]float64, len(o.Strategies)) // [strategy][seed] samples
	errs := make([][]int, len(o.Strategies))
	for i := range ttft {
		ttft[i], errs[i] = make([][]float64, o.Seeds), make([]int, o.Seeds)
	}
	histories := make([][]Job, o.Seeds)
	for k := range o.Seeds {
		if c.life == LifeLong {
			histories[k] = DrawJobs(w, rate, dur, uint64(o.Seed)+uint64(k)+1000)
		}
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range max(o.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				cfg := Config{Pods: c.pods, Replicas: c.reps, Strategy: o.Strategies[j.si], Workload: w, Rate: rate, Duration: dur, Warmup: o.Warmup,
					Sim: sim, Slowdown: BenchSlowdown, Params: o.Params, Seed: uint64(o.Seed) + uint64(j.k), PodSlowdown: slow, PodKVBlocks: kv,
					History: histories[j.k]}
				s, err := newSim(cfg)
				if err == nil {
					err = s.loop()
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s seed %d: %w", o.Strategies[j.si], cfg.Seed, err)
				}
				if err == nil {
					ttft[j.si][j.k], errs[j.si][j.k] = s.m.ttft, s.m.errors
				}
				mu.Unlock()
			}
		}()
	}
	for si := range o.Strategies {
		for k := range o.Seeds {
			jobs <- job{si, k}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for si, s := range o.Strategies {
		run := GeneralRun{Name: s}
		var all []float64
		for k := range o.Seeds {
			xs := ttft[si][k]
			all = append(all, xs...)
			run.Errors += errs[si][k]
			run.SeedP50 = append(run.SeedP50, round(bench.Percentile(xs, 50)))
			run.SeedP99 = append(run.SeedP99, round(bench.Percentile(xs, 99)))
		}
		run.Requests = len(all)
		sort.Float64s(all)
		run.P50, run.P99 = round(bench.Percentile(all, 50)), round(bench.Percentile(all, 99))
		gc.Runs = append(gc.Runs, run)
	}
	pr := gc.run(o.Probe)
	gc.BlindP99 = verdict(pr, gc.bestBlind(true), true)
	gc.BlindP50 = verdict(pr, gc.bestBlind(false), false)
	gc.CachedP99 = verdict(pr, gc.run(bench.Cached), true)
	gc.CachedP50 = verdict(pr, gc.run(bench.Cached), false)
	return gc, nil
}

// run returns strategy s's figures in the cell.
func (gc *GeneralCell) run(s string) *GeneralRun {
	for i := range gc.Runs {
		if gc.Runs[i].Name == s {
			return &gc.Runs[i]
		}
	}
	return nil
}

// bestBlind is the blind policy with the lowest pooled p99 (p50).
func (gc *GeneralCell) bestBlind(p99 bool) *GeneralRun {
	var best *GeneralRun
	for i := range gc.Runs {
		r := &gc.Runs[i]
		if !blind(r.Name) {
			continue
		}
		if best == nil || pick(r, p99) < pick(best, p99) {
			best = r
		}
	}
	return best
}

func pick(r *GeneralRun, p99 bool) float64 {
	if p99 {
		return r.P99
	}
	return r.P50
}

func seedPick(r *GeneralRun, k int, p99 bool) float64 {
	if p99 {
		return r.SeedP99[k]
	}
	return r.SeedP50[k]
}

// lossMargin is the pooled ratio beyond which a difference that every
// seed shows counts as a loss (or, below its inverse, a win).
const lossMargin = 1.05

// verdict compares probe with rival at p99 (or p50).
func verdict(probe, rival *GeneralRun, p99 bool) GeneralVerdict {
	v := GeneralVerdict{Rival: rival.Name}
	if pick(rival, p99) > 0 {
		v.Ratio = round(pick(probe, p99) / pick(rival, p99))
	}
	better := 0
	for k := range probe.SeedP99 {
		switch a, b := seedPick(probe, k, p99), seedPick(rival, k, p99); {
		case a > b:
			v.Worse++
		case a < b:
			better++
		}
	}
	n := len(probe.SeedP99)
	v.Loss = v.Worse == n && v.Ratio > lossMargin
	v.Win = better == n && v.Ratio > 0 && v.Ratio < 1/lossMargin
	return v
}

// WriteGeneralMarkdown writes the cells as a table, one row per cell,
// with the losses and wins counted first.
func WriteGeneralMarkdown(w io.Writer, cells []GeneralCell, probeName string) {
	count := func(f func(*GeneralCell) bool) int {
		n := 0
		for i := range cells {
			if f(&cells[i]) {
				n++
			}
		}
		return n
	}
	fmt.Fprintf(w, "%d cells. A loss (win): %s worse (better) than the rival in every seed and by more than 5%% pooled.\n\n", len(cells), probeName)
	fmt.Fprintln(w, "| against | p99 losses | p99 wins | p50 losses | p50 wins | p99 ratio geomean | p99 worst |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, vs := range []struct {
		name     string
		p99, p50 func(*GeneralCell) *GeneralVerdict
	}{
		{"best blind", func(c *GeneralCell) *GeneralVerdict { return &c.BlindP99 }, func(c *GeneralCell) *GeneralVerdict { return &c.BlindP50 }},
		{"cached", func(c *GeneralCell) *GeneralVerdict { return &c.CachedP99 }, func(c *GeneralCell) *GeneralVerdict { return &c.CachedP50 }},
	} {
		var lsum float64
		worst, worstName := 0.0, ""
		for i := range cells {
			r := vs.p99(&cells[i]).Ratio
			lsum += math.Log(max(r, 1e-9))
			if r > worst {
				worst, worstName = r, cells[i].Name
			}
		}
		gm := 0.0
		if len(cells) > 0 {
			gm = math.Exp(lsum / float64(len(cells)))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.3f | %.3f (%s) |\n", vs.name,
			count(func(c *GeneralCell) bool { return vs.p99(c).Loss }), count(func(c *GeneralCell) bool { return vs.p99(c).Win }),
			count(func(c *GeneralCell) bool { return vs.p50(c).Loss }), count(func(c *GeneralCell) bool { return vs.p50(c).Win }),
			gm, worst, worstName)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Ratios are %s's pooled TTFT percentile over the rival's (seeds worse in brackets); LOSS / win as above. p99 and p50 in ms, pooled.\n\n", probeName)
	fmt.Fprintln(w, "| cell | rate/s | s | p99 "+probeName+" | best blind p99 | /blind p99 | cached p99 | /cached p99 | p50 "+probeName+" | /blind p50 | /cached p50 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	mark := func(v GeneralVerdict) string {
		s := fmt.Sprintf("%.3f (%d)", v.Ratio, v.Worse)
		switch {
		case v.Loss:
			s += " **LOSS**"
		case v.Win:
			s += " win"
		}
		return s
	}
	for i := range cells {
		c := &cells[i]
		pr, bl, ca := c.run(probeName), c.run(c.BlindP99.Rival), c.run(bench.Cached)
		if pr == nil || bl == nil || ca == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.0f | %.0f %s | %s | %.0f | %s | %.0f | %s | %s |\n", c.Name, c.RateRPS, c.DurationS,
			pr.P99, bl.P99, bl.Name, mark(c.BlindP99), ca.P99, mark(c.CachedP99), pr.P50, mark(c.BlindP50), mark(c.CachedP50))
	}
}
