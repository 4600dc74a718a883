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
	// PodHistory is how many earlier runs' worth of the same traffic
	// (the requests of seeds seed+1000..., one run each) the servers
	// served before each run (Setup.History): long-lived pods whose
	// /metrics counters already hold them. 0: fresh servers.
	PodHistory int
	// Records, when set, is a directory that receives every load run's
	// ArrivalRecords (Setup.Records) as RecordsName(...).jsonl: where each
	// request went and what the fleet and its replica looked like then.
	Records  string
	Progress io.Writer // progress bar (nil: none)
	Log      io.Writer // human-readable log lines (nil: none)
	NoPlots  bool
	// Burstiness is the gamma shape of arrival gaps (1 or 0: Poisson; < 1:
	// burstier), as `vllm bench serve --burstiness`.
	Burstiness float64
	// ProfileDir, when set, receives CPU and allocation profiles of each
	// probegate target of the overhead scenario, taken under wrk.
	ProfileDir string
	// Pin runs the overhead scenario with the load generators on one CPU
	// and every target with its upstreams on the others (see PinInfo).
	Pin bool
	// Repeat is the number of rounds of the overhead scenario (0 or 1:
	// one; see OverheadOptions.Repeat).
	Repeat int
	// Sizes is the request size distribution of steady, spike and replicas
	// (and of the capacity measurement): SizesLognormal (""), SizesUniform,
	// SizesTrace or SizesBimodal.
	Sizes string
	// Arrivals is the arrival process of steady and replicas:
	// ArrivalsPoisson ("": gamma gaps of shape Burstiness) or
	// ArrivalsOnOff (BurstOnOff; Burstiness must then be 0 or 1).
	Arrivals string
	// Capacity, when > 0, is the homogeneous fleet's capacity (requests/s)
	// for Sizes, used instead of measuring it: the loads of steady, spike
	// and replicas are then the same request rates in every invocation, so
	// that seed k is the same requests for two binaries compared in
	// separate invocations (the measurement varies by ~1 request/s on a
	// shared machine). The other scenarios' capacities are still measured.
	Capacity float64
	// Fleet is the fleet of steady, spike and replicas: FleetHomo ("") or
	// a fleetsim -general kind (FleetOneSlow, FleetTwoSpeed), whose loads
	// are shares of that fleet's own capacity (fleetFaults).
	Fleet string
	// TraceFile is the trace of the trace scenario and of -sizes trace (""
	// for the committed slice of the Azure code trace).
	TraceFile string
	// TraceOffset is where in the trace (trace time) the first seed's
	// replay starts; each further seed replays the next window.
	TraceOffset time.Duration
	// TraceSpeed, when > 0, divides the trace's arrival times (2: twice
	// as fast) and each seed replays duration x TraceSpeed of trace time.
	// 0 (the default) calibrates the replay to TraceLoad instead.
	TraceSpeed float64
	// TraceLoad is the calibrated replay's mean offered load, as a
	// multiple of the trace fleet's measured capacity for the trace's
	// sizes (0: DefaultTraceLoad); see traceVariants.
	TraceLoad float64
	// TraceRows, when > 0, fixes the calibrated replay's rows per seed
	// instead of deriving them from TraceLoad and the capacity measured
	// at the start of the run, so that seed k replays the same requests
	// in every run: the measured capacity varies by a request or two a
	// second between runs on a shared machine, which shifts every seed's
	// window (bench/HISTORY.md, issue 13 session 9).
	TraceRows int
	// Variants, if set, runs only the scenario entries of these names
	// (e.g. trace_hetero_r1,steady_80).
	Variants []string

	serversSet bool // Servers was given (the trace fleet defaults to 4)
	trace      []TraceRow
}

// DefaultTraceSpeed is the replay speed of -trace-speed 1: real time. The
// code trace is bursty (minutes of 0 requests between minutes of
// 400-630); from DefaultTraceOffset on, 15-second windows at real time run
// at 3.3, 10.1 and 8.9 requests/s, up to 1.06x the hetero trace fleet's
// capacity: the default replay is calibrated instead (DefaultTraceLoad).
const DefaultTraceSpeed = 1.0

// DefaultTraceLoad is the default -trace-load: the calibrated replay
// offers 0.7x the trace fleet's measured capacity (a homogeneous fleet, as
// every scenario's load is expressed; the hetero fleet, one server of four
// at half speed, has about 0.89x of it, so this is about 0.8x its own).
const DefaultTraceLoad = 0.7

// DefaultTraceOffset is the default -trace-offset: the start of the code
// trace's first busy minute (its minutes 1 and 2 have no request).
const DefaultTraceOffset = 3 * time.Minute

// Trace fleet: the "4 pods, one slow" by default, KV cache of
// 16,384 tokens per server (two p99 prompts of the code trace).
const (
	defaultTraceServers = 4
	traceGPUBlocks      = 1024
)

// Scenarios lists every scenario name in run order.
var Scenarios = []string{"steady", "spike", "ramp", "lora", "prefix", "hetero", "slowprobe", "external", "replicas", "trace", "overhead"}

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

// sizedSim is the simulator of the scenarios -sizes applies to: baseSim,
// with a KV cache of 16,384 tokens when sizes come from the code trace
// (its prompts reach 7,437 tokens).
func sizedSim(sizes string) vllmsim.Config {
	c := baseSim()
	if sizes != SizesUniform {
		c.NumGPUBlocks = traceGPUBlocks
	}
	return c
}

// sizedWorkload is baseWorkload with o's size distribution.
func sizedWorkload(o *Options, servers int) Workload {
	w := baseWorkload(servers)
	w.Sizes = o.Sizes
	w.Pairs = o.trace
	w.MaxModelLen = 8192
	return w
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
	// trace only: the replay of window seed-firstSeed of rows.
	trace      []TraceRow
	traceOff   time.Duration
	traceSpan  time.Duration
	traceSpeed float64
	traceRows  int // > 0: the calibrated replay of traceRows rows a seed
	firstSeed  int64
	// onoff, when set, modulates segs' rates (-arrivals onoff) instead of
	// the gamma gaps of burstiness.
	onoff *OnOff
}

func (v *variant) schedDur() time.Duration {
	var d time.Duration
	for _, s := range v.segs {
		d += s.Dur
	}
	return d
}

func (v *variant) offered() float64 {
	if v.trace != nil {
		return float64(len(v.window(v.firstSeed))) / v.schedDur().Seconds()
	}
	n := 0.0
	for _, s := range v.segs {
		n += s.Rate * s.Dur.Seconds()
	}
	return n / v.schedDur().Seconds()
}

// build draws the variant's request sequence for seed: the arrival
// schedule and the requests, identical for every strategy.
func (v *variant) build(seed int64) []Req {
	if v.trace != nil {
		return TraceRequests(v.window(seed), v.work.Model, v.setup.Replicas, uint64(seed))
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x73636864))
	var arr []time.Duration
	if v.onoff != nil {
		arr = v.onoff.Arrivals(v.segs, rng)
	} else {
		arr = Arrivals(v.segs, v.burstiness, rng)
	}
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

// history returns n runs' worth of v's traffic for Setup.History: the
// requests of seeds seed+1000+h*... (no measured seed's), one after the
// other (run h shifted by h x the run's span).
func (v *variant) history(seed int64, n int) []vllmsim.HistoryRequest {
	var out []vllmsim.HistoryRequest
	for h := range n {
		for _, r := range v.build(seed + 1000 + int64(h)*100) {
			tokens := r.PromptTokens
			if tokens <= 0 {
				tokens = (len(r.Prompt) + vllmsim.BytesPerToken - 1) / vllmsim.BytesPerToken
			}
			out = append(out, vllmsim.HistoryRequest{At: r.At + time.Duration(h)*v.schedDur(),
				Prompt: vllmsim.Prompt{Tokens: tokens}, MaxTokens: r.MaxTokens})
		}
	}
	return out
}

// window returns the trace rows seed replays: with traceRows, rowsWindow;
// else the span of trace time starting at traceOff + (seed - firstSeed) *
// traceSpan, wrapping around the trace's end, scaled by traceSpeed.
func (v *variant) window(seed int64) []TraceRow {
	if v.traceRows > 0 {
		return v.rowsWindow(seed)
	}
	total := TraceDuration(v.trace) + time.Nanosecond
	off := v.traceOff + time.Duration(seed-v.firstSeed)*v.traceSpan
	off %= total
	return TraceWindow(v.trace, off, v.traceSpan, v.traceSpeed)
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
	// -sizes and -fleet apply to steady, spike and replicas; -arrivals to
	// steady and replicas. Run has checked o.Fleet.
	sized, sw := base, w
	sized.Sim = sizedSim(o.Sizes)
	sw = sizedWorkload(o, n)
	faults, share, _ := fleetFaults(o.Fleet, n)
	sized.Faults = faults
	sizeParam := func(p map[string]any) map[string]any {
		p["sizes"] = o.Sizes
		if faults != nil {
			p["fleet"] = o.Fleet
			p["fleet_capacity_share"] = round3(share)
		}
		return p
	}
	steady := func(load float64) []Segment { return []Segment{{Rate: load * capacity, Dur: dur}} }
	sizedSteady := func(load float64) []Segment { return []Segment{{Rate: load * capacity * share, Dur: dur}} }
	mk := func(vname string, params map[string]any, su Setup, segs []Segment, wk Workload) variant {
		params["scenario"] = name
		b := 1.0
		if o.Burstiness > 0 && o.Burstiness != 1 {
			b = o.Burstiness
			params["arrivals"] = fmt.Sprintf("gamma, burstiness %g", b)
		}
		return variant{name: vname, params: params, setup: su, segs: segs, burstiness: b, work: wk}
	}
	// mkArr is mk for the scenarios -arrivals applies to.
	mkArr := func(vname string, params map[string]any, su Setup, segs []Segment, wk Workload) variant {
		v := mk(vname, params, su, segs, wk)
		if o.Arrivals == ArrivalsOnOff {
			p := BurstOnOff
			v.onoff = &p
			low, _ := p.Factor(p.On)
			v.params["arrivals"] = fmt.Sprintf("onoff: %v of every %v at %gx the mean rate, the rest at %.3gx", p.On, p.Period, p.High, low)
		}
		return v
	}
	switch name {
	case "steady":
		var out []variant
		for _, l := range []float64{0.5, 0.8, 0.95} {
			out = append(out, mkArr(fmt.Sprintf("steady_%02.0f", l*100), sizeParam(map[string]any{"load": l, "arrivals": "poisson", "duration_s": dur.Seconds()}), sized, sizedSteady(l), sw))
		}
		return out
	case "spike":
		tail := 4 * time.Second
		if o.Quick {
			tail = 2 * time.Second
		}
		segs := []Segment{{Rate: 2 * capacity * share, Dur: time.Second}, {Rate: 0.5 * capacity * share, Dur: tail}}
		return []variant{mk("spike", sizeParam(map[string]any{"load": 2.0, "burst_s": 1.0, "tail_load": 0.5, "tail_s": tail.Seconds(), "arrivals": "poisson", "pool": "idle, fresh proxies"}), sized, segs, sw)}
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
			su := sized
			su.Replicas = r
			wk := sw
			wk.Replicas = r
			out = append(out, mkArr(fmt.Sprintf("replicas_r%d", r), sizeParam(map[string]any{"load": 0.85, "replicas": r, "split": "client-side, request i to replica i mod R"}), su, sizedSteady(0.85), wk))
		}
		return out
	case "trace":
		return traceVariants(o, dur, capacity)
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
	o.serversSet = o.Servers > 0
	if o.Servers <= 0 {
		o.Servers = defaultServers
	}
	if o.Sizes == "" {
		o.Sizes = SizesLognormal
	}
	if err := checkSizes(o.Sizes); err != nil {
		return nil, err
	}
	if err := checkArrivals(o.Arrivals, o.Burstiness); err != nil {
		return nil, err
	}
	if _, _, err := fleetFaults(o.Fleet, o.Servers); err != nil {
		return nil, err
	}
	if o.Sizes == SizesTrace || slices.Contains(names, "trace") {
		if o.trace, err = LoadTrace(o.TraceFile); err != nil {
			return nil, err
		}
	}
	if o.Seeds <= 0 {
		o.Seeds = 3
		if o.Quick {
			o.Seeds = 1
		}
	}
	if o.Capacity < 0 {
		return nil, fmt.Errorf("-capacity must be 0 (measured) or requests/s, got %g", o.Capacity)
	}
	if o.TraceRows < 0 {
		return nil, fmt.Errorf("-trace-rows must be 0 (from -trace-load) or a number of rows, got %d", o.TraceRows)
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
	sim := sizedSim(o.Sizes)
	res.Fleet = FleetInfo{Servers: o.Servers, MaxNumSeqs: sim.MaxNumSeqs, TimeScale: sim.TimeScale}

	loadScen := slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "overhead" })
	if len(loadScen) > 0 {
		var all []variant
		for _, name := range loadScen {
			for _, v := range variants(name, &o, 0) {
				if len(o.Variants) == 0 || slices.Contains(o.Variants, v.name) {
					all = append(all, v)
				}
			}
		}
		// Capacity first, for each size distribution the selected entries
		// use: closed-loop saturation of a fresh fleet. The trace scenario
		// replays at the trace's own rate and needs none.
		warm, dur := 1*time.Second, 5*time.Second
		if o.Quick {
			warm, dur = 500*time.Millisecond, 3*time.Second
		}
		capacity := map[string]float64{}
		for _, v := range all {
			kind := sizesOf(v.name, &o)
			if _, done := capacity[kind]; done || kind == "" {
				continue
			}
			if kind == o.Sizes && o.Capacity > 0 {
				capacity[kind] = o.Capacity
				logf("capacity (%s sizes): %.1f requests/s, from -capacity", kind, o.Capacity)
				continue
			}
			servers, cwarm, cdur := o.Servers, warm, dur
			csim, cwork := baseSim(), baseWorkload(o.Servers)
			switch {
			case kind == traceFleetCapacity:
				servers = traceServers(&o)
				csim, cwork = sizedSim(SizesTrace), sizedWorkload(&o, servers)
				cwork.Sizes = SizesTrace
				// The trace's requests stay seconds in a saturated
				// fleet: a 1 s warmup counts the short ones of the
				// initial fill first (a 15 s measurement read 12.7
				// requests/s where 200 s of virtual time on the same
				// engine give 10.8). Warm up 10 s, measure 30 s.
				cwarm, cdur = 10*warm, 6*dur
			case kind != SizesUniform:
				csim, cwork = sizedSim(kind), sizedWorkload(&o, o.Servers)
			}
			logf("measuring fleet capacity, %s sizes (%d servers x %d seats, closed loop, %v after %v)...", kind, servers, csim.MaxNumSeqs, cdur, cwarm)
			c, err := MeasureCapacity(ctx, Setup{Servers: servers, Sim: csim}, cwork.Build(make([]time.Duration, 4000), nil, uint64(o.Seed)), cwarm, cdur)
			if err != nil {
				return nil, err
			}
			capacity[kind] = c
			logf("capacity (%s sizes): %.1f requests/s", kind, c)
		}
		res.Fleet.Sizes = o.Sizes
		res.Fleet.CapacityBySizes = map[string]float64{}
		for k, c := range capacity {
			res.Fleet.CapacityBySizes[k] = round3(c)
		}
		if c, ok := capacity[o.Sizes]; ok {
			res.Fleet.CapacityRPS = round3(c)
		} else {
			res.Fleet.CapacityRPS = round3(capacity[SizesUniform])
		}
		all = all[:0]
		for _, name := range loadScen {
			for _, v := range variants(name, &o, capacity[sizesOf(name, &o)]) {
				if len(o.Variants) == 0 || slices.Contains(o.Variants, v.name) {
					all = append(all, v)
				}
			}
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
					su.History = v.history(seed, o.PodHistory)
					su.Records = o.Records != ""
					rr, err := RunOne(ctx, su, s, reqs, 60*time.Second, prog.Tick)
					prog.End()
					if err != nil {
						return res, fmt.Errorf("%s/%s: %w", v.name, s, err)
					}
					if su.Records {
						for i := range rr.Records {
							rr.Records[i].Strategy, rr.Records[i].Seed = s, seed
						}
						if err := WriteRecords(o.Records, RecordsName(v.name, s, seed), rr.Records); err != nil {
							return res, fmt.Errorf("%s/%s: records: %w", v.name, s, err)
						}
						rr.Records = nil
					}
					runs[s] = append(runs[s], rr)
				}
			}
			sc := ScenarioResult{Name: v.name, Params: v.params}
			sc.Params["offered_rps"] = round3(v.offered())
			sc.Params["servers"] = v.setup.Servers
			if o.PodHistory > 0 {
				sc.Params["pod_history_runs"] = o.PodHistory
			}
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
		oh, err := RunOverhead(ctx, OverheadOptions{Quick: o.Quick, Log: logf, Progress: prog, ProfileDir: o.ProfileDir, Pin: o.Pin, Repeat: o.Repeat})
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

// sizesOf returns the size distribution whose capacity scenario (or one of
// its entries) is measured against: o.Sizes for steady, spike and replicas,
// uniform for the rest; for trace, traceFleetCapacity when the replay's
// rows per seed come from it (-trace-load), else "" (a fixed speed or
// fixed rows per seed: no capacity needed).
func sizesOf(name string, o *Options) string {
	base, _, _ := strings.Cut(name, "_")
	switch base {
	case "steady", "spike", "replicas":
		return o.Sizes
	case "trace":
		if o.TraceSpeed > 0 || o.TraceRows > 0 {
			return "" // the trace's own rate or fixed rows: no capacity needed
		}
		return traceFleetCapacity
	}
	return SizesUniform
}
