package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// Options configure one invocation of the benchmark.
type Options struct {
	Scenario   string        // a scenario name, a comma-separated list, or "all"
	Quick      bool          // small runs: steady, spike and replicas in under 5 minutes
	Seed       int64         // first seed; runs are reproducible from it
	Seeds      int           // runs per scenario and strategy (0: 1 quick, 3 full)
	Out        string        // output directory
	Duration   time.Duration // load duration of steady-like runs (0: 3 s quick, 15 s full)
	Strategies []string      // nil: all
	Servers    int           // fleet size (0: 8)
	Progress   io.Writer     // progress bar (nil: none)
	Log        io.Writer     // human-readable log lines (nil: none)
	NoPlots    bool
	// Burstiness is the gamma shape of arrival gaps (1 or 0: Poisson; < 1:
	// burstier), as `vllm bench serve --burstiness`.
	Burstiness float64
}

// Scenarios lists every scenario name in run order.
var Scenarios = []string{"steady", "spike", "ramp", "lora", "prefix", "hetero", "slowprobe", "external", "replicas", "overhead"}

// QuickScenarios are the scenarios -quick runs by default.
var QuickScenarios = []string{"steady", "spike", "replicas"}

// Fleet calibration shared by the scenarios (see bench/README.md): small
// batches so queueing shows at modest concurrency on a 2-core machine, and
// TimeScale 2 (every simulated GPU step lasts twice its modelled time) so
// that the token rate through the proxy stays at a few thousand frames/s.
const (
	defaultServers    = 8
	defaultMaxNumSeqs = 4
	defaultTimeScale  = 2.0
)

func baseSim() vllmsim.Config {
	c := vllmsim.DefaultConfig()
	c.MaxNumSeqs = defaultMaxNumSeqs
	c.NumGPUBlocks = 512
	c.TimeScale = defaultTimeScale
	c.DefaultMaxTokens = 64
	return c
}

func baseWorkload(servers int) Workload {
	return Workload{
		Model:       vllmsim.DefaultConfig().Model,
		PromptChars: [2]int{400, 1600},
		MaxTokens:   [2]int{16, 48},
		Servers:     servers,
	}
}

// variant is one measured configuration of a scenario.
type variant struct {
	name       string
	params     map[string]any
	setup      Setup
	segs       []Segment
	burstiness float64
	work       Workload
	stepLoads  []float64 // ramp only
}

func (v *variant) schedDur() time.Duration {
	var d time.Duration
	for _, s := range v.segs {
		d += s.Dur
	}
	return d
}

func (v *variant) offered() float64 {
	n := 0.0
	for _, s := range v.segs {
		n += s.Rate * s.Dur.Seconds()
	}
	return n / v.schedDur().Seconds()
}

// build draws the variant's request sequence for seed: the arrival
// schedule and the requests, identical for every strategy.
func (v *variant) build(seed int64) []Req {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x73636864))
	arr := Arrivals(v.segs, v.burstiness, rng)
	var steps []int
	if v.stepLoads != nil {
		steps = make([]int, len(arr))
		for i, at := range arr {
			var end time.Duration
			for j, s := range v.segs {
				end += s.Dur
				if at < end {
					steps[i] = j
					break
				}
			}
		}
	}
	return v.work.Build(arr, steps, uint64(seed))
}

// variants expands scenario name into its measured configurations, with
// loads expressed as multiples of capacity (requests/s).
func variants(name string, o *Options, capacity float64) []variant {
	n := o.Servers
	dur := o.Duration
	if dur == 0 {
		dur = 15 * time.Second
		if o.Quick {
			dur = 3 * time.Second
		}
	}
	base := Setup{Servers: n, Sim: baseSim(), Replicas: 1}
	w := baseWorkload(n)
	steady := func(load float64) []Segment { return []Segment{{Rate: load * capacity, Dur: dur}} }
	mk := func(vname string, params map[string]any, su Setup, segs []Segment, wk Workload) variant {
		params["scenario"] = name
		b := 1.0
		if o.Burstiness > 0 && o.Burstiness != 1 {
			b = o.Burstiness
			params["arrivals"] = fmt.Sprintf("gamma, burstiness %g", b)
		}
		return variant{name: vname, params: params, setup: su, segs: segs, burstiness: b, work: wk}
	}
	switch name {
	case "steady":
		var out []variant
		for _, l := range []float64{0.5, 0.8, 0.95} {
			out = append(out, mk(fmt.Sprintf("steady_%02.0f", l*100), map[string]any{"load": l, "arrivals": "poisson", "duration_s": dur.Seconds()}, base, steady(l), w))
		}
		return out
	case "spike":
		tail := 4 * time.Second
		if o.Quick {
			tail = 2 * time.Second
		}
		segs := []Segment{{Rate: 2 * capacity, Dur: time.Second}, {Rate: 0.5 * capacity, Dur: tail}}
		return []variant{mk("spike", map[string]any{"load": 2.0, "burst_s": 1.0, "tail_load": 0.5, "tail_s": tail.Seconds(), "arrivals": "poisson", "pool": "idle, fresh proxies"}, base, segs, w)}
	case "ramp":
		step := dur / 4
		if step < 2*time.Second {
			step = 2 * time.Second
		}
		var segs []Segment
		var loads []float64
		for _, l := range []float64{1.0, 1.2, 1.4, 1.6, 1.8} {
			segs = append(segs, Segment{Rate: l * capacity, Dur: step})
			loads = append(loads, l)
		}
		v := mk("ramp", map[string]any{"loads": loads, "step_s": step.Seconds(), "arrivals": "poisson"}, base, segs, w)
		v.stepLoads = loads
		return []variant{v}
	case "lora":
		su := base
		su.Sim.MaxLoRAs = 2
		for i := range 16 {
			su.Sim.LoRAs = append(su.Sim.LoRAs, fmt.Sprintf("adapter-%02d", i))
		}
		wk := w
		wk.Adapters = su.Sim.LoRAs
		wk.ZipfS = 1.2
		return []variant{mk("lora", map[string]any{"load": 0.7, "adapters": 16, "max_loras": 2, "popularity": "zipf s=1.2"}, su, steady(0.7), wk)}
	case "prefix":
		wk := w
		wk.SystemPrompt = 8
		wk.SystemChars = 3000
		wk.PromptChars = [2]int{200, 600}
		return []variant{mk("prefix", map[string]any{"load": 0.8, "system_prompts": 8, "system_chars": 3000}, base, steady(0.8), wk)}
	case "hetero":
		su := base
		su.Faults = map[int]vllmsim.Faults{}
		for i := 0; i < n/4; i++ {
			su.Faults[n-1-i] = vllmsim.Faults{Slowdown: 2}
		}
		return []variant{mk("hetero", map[string]any{"load": 0.75, "slow_servers": n / 4, "slowdown": 2}, su, steady(0.75), w)}
	case "slowprobe":
		su := base
		su.Faults = map[int]vllmsim.Faults{0: {ProbeDelay: 20 * time.Millisecond}}
		return []variant{mk("slowprobe", map[string]any{"load": 0.8, "probe_delay_ms": 20, "slow_probe_servers": 1}, su, steady(0.8), w)}
	case "external":
		wk := w
		wk.DirectShare = 0.3
		return []variant{mk("external", map[string]any{"load": 0.8, "external_share": 0.3, "measured": "proxied requests only; direct ones under strategies[].direct"}, base, steady(0.8), wk)}
	case "replicas":
		var out []variant
		for _, r := range []int{1, 4, 8} {
			su := base
			su.Replicas = r
			wk := w
			wk.Replicas = r
			out = append(out, mk(fmt.Sprintf("replicas_r%d", r), map[string]any{"load": 0.85, "replicas": r, "split": "client-side, request i to replica i mod R"}, su, steady(0.85), wk))
		}
		return out
	}
	return nil
}

// selected resolves Options.Scenario.
func selected(o *Options) ([]string, error) {
	s := strings.TrimSpace(o.Scenario)
	if s == "" {
		if o.Quick {
			return QuickScenarios, nil
		}
		s = "all"
	}
	if s == "all" {
		return Scenarios, nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Scenarios, name) {
			return nil, fmt.Errorf("unknown scenario %q (have %s, all)", name, strings.Join(Scenarios, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// Run executes the benchmark and writes results.json, report.md and plots
// to o.Out. It returns the results even when writing fails.
func Run(ctx context.Context, o Options) (*Results, error) {
	names, err := selected(&o)
	if err != nil {
		return nil, err
	}
	if o.Servers <= 0 {
		o.Servers = defaultServers
	}
	if o.Seeds <= 0 {
		o.Seeds = 3
		if o.Quick {
			o.Seeds = 1
		}
	}
	strategies := o.Strategies
	if len(strategies) == 0 {
		strategies = AllStrategies
	}
	for _, s := range strategies {
		if !slices.Contains(AllStrategies, s) && !slices.Contains(ExtraStrategies, s) {
			return nil, fmt.Errorf("unknown strategy %q", s)
		}
	}
	if o.Out == "" {
		o.Out = "bench-out"
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {}
	prog := NewProgress(o.Progress, 0)
	if o.Progress != nil {
		logf = prog.Log
	} else if o.Log != nil {
		logf = func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	}
	res := &Results{Seed: o.Seed, Quick: o.Quick, Started: time.Now().UTC(), Machine: CurrentMachine()}
	for i := range o.Seeds {
		res.Seeds = append(res.Seeds, o.Seed+int64(i))
	}
	sim := baseSim()
	res.Fleet = FleetInfo{Servers: o.Servers, MaxNumSeqs: sim.MaxNumSeqs, TimeScale: sim.TimeScale}

	loadScen := slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "overhead" })
	if len(loadScen) > 0 {
		// Capacity first: closed-loop saturation of a fresh fleet.
		warm, dur := 1*time.Second, 5*time.Second
		if o.Quick {
			warm, dur = 500*time.Millisecond, 3*time.Second
		}
		logf("measuring fleet capacity (%d servers x %d seats, closed loop, %v)...", o.Servers, sim.MaxNumSeqs, dur)
		capReqs := baseWorkload(o.Servers).Build(make([]time.Duration, 2000), nil, uint64(o.Seed))
		capacity, err := MeasureCapacity(ctx, Setup{Servers: o.Servers, Sim: sim}, capReqs, warm, dur)
		if err != nil {
			return nil, err
		}
		res.Fleet.CapacityRPS = round3(capacity)
		logf("capacity: %.1f requests/s", capacity)

		var all []variant
		for _, name := range loadScen {
			all = append(all, variants(name, &o, capacity)...)
		}
		prog.AddRuns(len(all) * o.Seeds * len(strategies))
		for _, v := range all {
			runs := map[string][]*RunResult{}
			for si := range o.Seeds {
				seed := o.Seed + int64(si)
				reqs := v.build(seed)
				for _, s := range strategies {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					prog.Begin(fmt.Sprintf("%s/%s seed %d", v.name, s, seed), len(reqs))
					su := v.setup
					su.Sim.Seed = seed * 1000
					rr, err := RunOne(ctx, su, s, reqs, 60*time.Second, prog.Tick)
					prog.End()
					if err != nil {
						return res, fmt.Errorf("%s/%s: %w", v.name, s, err)
					}
					runs[s] = append(runs[s], rr)
				}
			}
			sc := ScenarioResult{Name: v.name, Params: v.params}
			sc.Params["offered_rps"] = round3(v.offered())
			sc.Params["servers"] = v.setup.Servers
			base, _ := v.params["scenario"].(string)
			for _, s := range strategies {
				sr := aggregate(s, runs[s], v.schedDur(), v.offered(), v.stepLoads)
				// Adapter loads and prefix hit rate where they apply.
				if base != "lora" {
					sr.AdapterLoads = nil
				}
				if base != "prefix" {
					sr.PrefixHitRate = nil
				}
				sc.Strategies = append(sc.Strategies, sr)
			}
			res.Scenarios = append(res.Scenarios, sc)
			logf("%s", oneLine(&sc))
			// Write as we go: a long run interrupted still leaves results.
			res.Finished = time.Now().UTC()
			_ = res.WriteJSON(o.Out)
		}
	}
	if slices.Contains(names, "overhead") {
		oh, err := RunOverhead(ctx, OverheadOptions{Quick: o.Quick, Log: logf, Progress: prog})
		if err != nil {
			res.Notes = append(res.Notes, "overhead: "+err.Error())
		}
		res.Overhead = oh
	}
	prog.Done()
	res.Finished = time.Now().UTC()
	var errs []error
	errs = append(errs, res.WriteJSON(o.Out))
	errs = append(errs, WriteReport(res, o.Out))
	if !o.NoPlots {
		errs = append(errs, WritePlots(res, o.Out))
	}
	return res, errors.Join(errs...)
}

// oneLine summarizes a scenario's p99 TTFT per strategy for the log.
func oneLine(sc *ScenarioResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s p99 TTFT ms:", sc.Name)
	for _, s := range sc.Strategies {
		fmt.Fprintf(&b, " %s=%.0f", s.Name, s.TTFT.P99)
		if s.Errors > 0 {
			fmt.Fprintf(&b, "(%d err)", s.Errors)
		}
	}
	return b.String()
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryGiB int    `json:"memory_gib"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

// CurrentMachine reads the machine description from the runtime and /proc.
func CurrentMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = (kb + (1 << 19)) >> 20
		}
	}
	return m
}
