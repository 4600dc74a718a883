package fleetsim

import (
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/vllmsim"
)

// Strategies are the strategies a sweep runs, in report order.
var Strategies = []string{bench.RoundRobin, bench.LeastInflight, bench.Cached, bench.CachedAdaptive, bench.Probe, bench.Oracle}

// PodSim is the pods' engine configuration for workload w: the live bench's
// calibration (4 batch seats, so that routing shows at modest load; the KV
// cache the bench gives w's sizes; steps twice their modelled length, the
// bench's TimeScale 2, applied as BenchSlowdown).
func PodSim(w Workload) vllmsim.Config {
	c := vllmsim.DefaultConfig()
	c.MaxNumSeqs = 4
	c.NumGPUBlocks = max(w.KVBlocks, 512)
	c.DefaultMaxTokens = 64
	return c
}

// BenchMaxModelLen caps prompt + output tokens as the bench's workloads do.
const BenchMaxModelLen = 8192

// BenchSlowdown is the bench's TimeScale, applied to engine steps.
const BenchSlowdown = 2.0

// Options configure a sweep.
type Options struct {
	Quick    bool
	Seed     int64
	Pods     []int
	Replicas []int
	Loads    []float64
	// Strategies nil: Strategies.
	Strategies []string
	Duration   time.Duration // simulated arrival time per grid run
	Warmup     time.Duration
	// Workload is the grid's workload; Trace, if set, is also run at the
	// largest fleet for the smallest and largest replica counts.
	Workload Workload
	Trace    *Workload
	// Headline, if > 0, adds a run of this simulated duration at the
	// largest fleet and replica count, 0.8x load, for HeadlineStrategies.
	Headline           time.Duration
	HeadlineStrategies []string
	// Crossover adds the pod-side cost series: realistic pods (H100Sim) and
	// the bench's uniform sizes (short prompts, so that a pod serves tens of
	// requests per second), 64 pods, 1 and 8 replicas, loads from 0.1 to
	// 0.95, for cached, cached_adaptive and probe.
	Crossover bool
	// H100 runs the grid on H100-sized pods (H100Sim, no slowdown: tens
	// of requests per second per pod, as the crossover series) instead of
	// the bench's 4-seat pods.
	H100   bool
	Params Params
	// Log, if set, gets one line per run.
	Log io.Writer
	// Progress, if set, is called after each scenario with the results so
	// far.
	Progress func(*Results, []Timing)
}

// DefaultOptions returns the sweep (or, quick, a CI-sized one).
func DefaultOptions(quick bool) Options {
	o := Options{
		Quick: quick, Seed: 1,
		Pods: []int{16, 64, 256, 1024}, Replicas: []int{1, 4, 8, 16, 32}, Loads: []float64{0.8, 0.95},
		Duration: 10 * time.Second, Warmup: 2 * time.Second, Params: DefaultParams(),
		Workload: LognormalWorkload(), Headline: 60 * time.Second,
		HeadlineStrategies: []string{bench.Cached, bench.Probe, bench.Oracle}, Crossover: true,
	}
	if quick {
		o.Pods, o.Replicas, o.Loads = []int{16, 64, 256}, []int{1, 4, 32}, []float64{0.8}
		o.Duration, o.Warmup = 5*time.Second, time.Second
		o.Headline, o.Crossover = 0, false
	}
	return o
}

// H100Sim is a pod with the engine's own defaults (one H100: 256 batch
// seats, a real-sized KV cache, no slowdown), for the crossover series
// where a pod must serve tens of requests per second.
func H100Sim() vllmsim.Config {
	c := vllmsim.DefaultConfig()
	c.NumGPUBlocks = 27000
	return c
}

// point is one scenario to run.
type point struct {
	name     string
	w        Workload
	sim      vllmsim.Config
	slowdown float64
	pods     int
	reps     int
	load     float64
	dur      time.Duration
	strats   []string
	h100     bool // H100Sim pods (their capacity is keyed apart)
}

// Sweep runs o's scenarios and returns results.json's content and each
// run's timing.
func Sweep(o Options) (*Results, []Timing, error) {
	if len(o.Strategies) == 0 {
		o.Strategies = Strategies
	}
	if o.Workload.Name == "" {
		o.Workload = LognormalWorkload()
	}
	gridSim, gridSlowdown := PodSim(o.Workload), BenchSlowdown
	if o.H100 {
		gridSim, gridSlowdown = H100Sim(), 1
	}
	res := &Results{Seed: o.Seed, Quick: o.Quick, Model: paramsJSON(o.Params),
		Fleet: FleetJSON{MaxNumSeqs: gridSim.MaxNumSeqs, Slowdown: gridSlowdown}, PodCapacityRPS: map[string]float64{}}
	var pts []point
	// The cheap series first: an interrupted sweep keeps them.
	if o.Crossover {
		for _, r := range []int{1, 8} {
			for _, l := range []float64{0.1, 0.3, 0.5, 0.8, 0.95} {
				pts = append(pts, point{name: "crossover", h100: true, w: UniformWorkload(), sim: H100Sim(), slowdown: 1, pods: 64, reps: r, load: l, dur: o.Duration,
					strats: []string{bench.Cached, bench.CachedAdaptive, bench.Probe}})
			}
		}
	}
	for _, n := range o.Pods {
		for _, r := range o.Replicas {
			for _, l := range o.Loads {
				pts = append(pts, point{w: o.Workload, sim: gridSim, slowdown: gridSlowdown, h100: o.H100, pods: n, reps: r, load: l, dur: o.Duration, strats: o.Strategies})
			}
		}
	}
	maxN, minR, maxR := slices.Max(o.Pods), slices.Min(o.Replicas), slices.Max(o.Replicas)
	if o.Trace != nil {
		for _, r := range []int{minR, maxR} {
			pts = append(pts, point{w: *o.Trace, sim: PodSim(*o.Trace), slowdown: BenchSlowdown, pods: maxN, reps: r, load: 0.8, dur: o.Duration, strats: o.Strategies})
		}
	}
	if o.Headline > 0 {
		pts = append(pts, point{name: "headline", w: o.Workload, sim: gridSim, slowdown: gridSlowdown, h100: o.H100, pods: maxN, reps: maxR, load: 0.8, dur: o.Headline, strats: o.HeadlineStrategies})
	}
	var timings []Timing
	for _, pt := range pts {
		capKey := pt.w.Name
		if pt.h100 {
			capKey += "_h100"
		}
		capPod, ok := res.PodCapacityRPS[capKey]
		if !ok {
			c, err := PodCapacity(pt.w, pt.sim, pt.slowdown, 60*time.Second, uint64(o.Seed))
			if err != nil {
				return nil, nil, err
			}
			capPod = round(c)
			res.PodCapacityRPS[capKey] = capPod
		}
		name := fmt.Sprintf("%s_n%d_r%d_load%02.0f", pt.w.Name, pt.pods, pt.reps, pt.load*100)
		if pt.name != "" {
			name = pt.name + "_" + name
		}
		rate := pt.load * capPod * float64(pt.pods)
		sc := ScenarioResult{Name: name, Params: ScenarioParams{Workload: pt.w.Name, Pods: pt.pods, Replicas: pt.reps, Load: pt.load,
			RateRPS: round(rate), DurationS: pt.dur.Seconds(), WarmupS: o.Warmup.Seconds(), Arrivals: arrivalsOf(pt.w)}}
		var jobs []Job
		if pt.w.Name == PrefixName {
			jobs = PrefixJobs(rate, pt.dur, o.Seed, blockSize(pt.sim))
		}
		for _, s := range pt.strats {
			cfg := Config{Pods: pt.pods, Replicas: pt.reps, Strategy: s, Workload: pt.w, Rate: rate, Duration: pt.dur, Warmup: o.Warmup,
				Sim: pt.sim, Slowdown: pt.slowdown, Params: o.Params, Seed: uint64(o.Seed), Jobs: jobs}
			m, t, err := measure(name+"/"+s, cfg)
			if err != nil {
				return nil, nil, err
			}
			timings = append(timings, t)
			sc.Strategies = append(sc.Strategies, StrategyResult{Name: s, RunMetrics: m})
			if o.Log != nil {
				fmt.Fprintf(o.Log, "%-36s %-16s ttft p99 %8.1f ms  herd %5.1f  probes/pod/s %6.1f  scrapes/pod/s %6.1f  wall %6.1fs cpu %6.1fs\n",
					name, s, m.TTFT.P99, m.HerdIndex, m.PodProbesPerS, m.PodScrapesPerS, t.WallS, t.CPUS)
			}
		}
		if or := sc.find(bench.Oracle); or != nil && or.TTFT.P99 > 0 {
			for i := range sc.Strategies {
				sc.Strategies[i].TTFTP99RatioToOracle = round(sc.Strategies[i].TTFT.P99 / or.TTFT.P99)
			}
		}
		res.Scenarios = append(res.Scenarios, sc)
		if o.Progress != nil {
			o.Progress(res, timings)
		}
	}
	return res, timings, nil
}

// blockSize is the KV block size of pods with engine configuration c.
func blockSize(c vllmsim.Config) int {
	if c.BlockSize > 0 {
		return c.BlockSize
	}
	return vllmsim.DefaultConfig().BlockSize
}

func arrivalsOf(w Workload) string {
	if w.Trace != nil {
		return "trace gaps, rescaled to the rate"
	}
	return "poisson"
}

// Timing is what a run cost the machine that simulated it. It is kept out of
// results.json, which must not depend on the machine (timing.json and
// report.md carry it).
type Timing struct {
	Name     string  `json:"name"`
	WallS    float64 `json:"wall_s"`
	CPUS     float64 `json:"cpu_s"`
	SimS     float64 `json:"simulated_s"`
	Speedup  float64 `json:"speedup"` // simulated seconds per wall second
	Events   int64   `json:"events"`
	EventsPS float64 `json:"events_per_s"`
}

// measure runs cfg and times it (wall clock and process CPU).
func measure(name string, cfg Config) (*RunMetrics, Timing, error) {
	cpu0 := cpuTime()
	t0 := time.Now()
	m, err := Run(cfg)
	wall := time.Since(t0)
	cpu := cpuTime() - cpu0
	if err != nil {
		return nil, Timing{}, fmt.Errorf("%s: %w", name, err)
	}
	sim := cfg.Duration.Seconds()
	t := Timing{Name: name, WallS: wall.Seconds(), CPUS: cpu.Seconds(), SimS: cfg.Duration.Seconds(), Events: m.Events}
	if wall > 0 {
		t.Speedup = sim / wall.Seconds()
		t.EventsPS = float64(m.Events) / wall.Seconds()
	}
	return m, t, nil
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
