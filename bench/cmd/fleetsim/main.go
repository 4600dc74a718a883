// Command fleetsim runs the virtual-time fleet simulation (bench/fleetsim):
// N pods x R probegate replicas with the production pickers, swept over
// fleet sizes, replica counts, strategies and loads. It writes
// DIR/results.json (deterministic for a seed), DIR/report.md, DIR/timing.json
// and SVG plots. With -validate it replays the live bench's replicas
// scenario instead and writes DIR/validation.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/probegate/probegate/bench/fleetsim"
)

func main() {
	fs := flag.NewFlagSet("fleetsim", flag.ExitOnError)
	quick := fs.Bool("quick", false, "CI-sized sweep: 16, 64 and 256 pods, 1, 4 and 32 replicas, 0.8x load, 5 s simulated (under 3 minutes)")
	out := fs.String("out", "fleetsim-out", "output directory")
	seed := fs.Int64("seed", 1, "seed of every draw: the same seed gives the same results.json")
	dur := fs.Duration("duration", 0, "simulated arrival time of each grid run (default 10s, 5s with -quick)")
	headline := fs.Duration("headline", -1, "simulated time of the largest-fleet run (default 60s, none with -quick; 0 disables)")
	pods := fs.String("pods", "", "comma-separated fleet sizes (default 16,64,256,1024)")
	replicas := fs.String("replicas", "", "comma-separated replica counts (default 1,4,8,16,32)")
	loads := fs.String("loads", "", "comma-separated loads, multiples of capacity (default 0.8,0.95)")
	strategies := fs.String("strategies", "", "comma-separated strategies (default "+strings.Join(fleetsim.Strategies, ",")+")")
	trace := fs.String("trace", "", "also replay this trace (Azure schema) at the largest fleet; \"bench\" for the bench's committed slice")
	crossover := fs.Bool("crossover", true, "run the pod-side cost series (ignored with -quick)")
	validate := fs.Bool("validate", false, "replay the live bench's replicas scenario (8 pods, R 1/4/8) instead of the sweep")
	live := fs.String("live", "", "with -validate: comma-separated live bench results.json files (their seeds and capacities set the replayed runs)")
	workload := fs.String("workload", "lognormal", "the grid's requests: lognormal (the bench's default sizes, fitted to the Azure code trace), uniform, or prefix (the live bench's prefix scenario: uniform sizes behind 8 shared 3,000-character system prompts)")
	h100 := fs.Bool("h100", false, "run the grid on H100-sized pods (256 seats, no slowdown: tens of requests/s per pod) instead of the bench's 4-seat pods")
	stuck := fs.Int("stuck-probe-pods", 0, "pods (the last ones) whose every probe answers 50 ms late, past probe.deadline (a stuck metrics endpoint)")
	general := fs.Bool("general", false, "run the generalization sweep instead (writes DIR/general.json and DIR/general.md): every combination of -sizes, -arrivals, -fleets, -lives, -pods, -replicas and -loads, -seeds seeds each; defaults: see bench/README.md")
	sizes := fs.String("sizes", "", "with -general: comma-separated size distributions ("+strings.Join(fleetsim.GeneralSizes, ",")+"; default all; trace_* need -trace)")
	arrivals := fs.String("arrivals", "", "with -general: comma-separated arrival processes (poisson,onoff,ramp; default all)")
	fleets := fs.String("fleets", "", "with -general: comma-separated fleet kinds ("+strings.Join(fleetsim.GeneralFleets, ",")+"; default all)")
	lives := fs.String("lives", "", "with -general: comma-separated pod ages (fresh,long; default long)")
	seats := fs.String("seats", "", "with -general: comma-separated batch seats per pod (default 4, the bench's pods; a pod with S seats has S/4 times their KV cache)")
	seeds := fs.Int("seeds", 3, "with -general: seeds per cell, from -seed")
	requests := fs.Int("requests", 800, "with -general: measured requests aimed at per seed (a cell runs requests/rate, 10-120 s; -duration sets the upper bound)")
	only := fs.String("only", "", "with -general: run only the cells whose name (sizes/arrivals/fleet/life/nN/rR/loadLL) matches this regexp")
	parallel := fs.Int("parallel", 1, "with -general: simulations run at once")
	probeName := fs.String("probe", "probe", "with -general: the strategy judged against the blind policies and cached")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (read with go tool pprof)")
	_ = fs.Parse(os.Args[1:])

	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fail(err)
		}
		defer stop()
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if *general {
		if err := runGeneral(generalFlags{out: *out, seed: *seed, dur: *dur, pods: *pods, replicas: *replicas, loads: *loads, strategies: *strategies,
			trace: *trace, sizes: *sizes, arrivals: *arrivals, fleets: *fleets, lives: *lives, seeds: *seeds, requests: *requests,
			only: *only, parallel: *parallel, probe: *probeName, seats: *seats}); err != nil {
			fail(err)
		}
		return
	}
	if *validate {
		d := *dur
		if d == 0 {
			d = 15 * time.Second
		}
		vo := fleetsim.ValidateOptions{Seed: *seed, Duration: d, Params: fleetsim.LoopbackParams(), Log: os.Stderr}
		if *live != "" {
			vo.Live = strings.Split(*live, ",")
		}
		err := fleetsim.Validate(vo, *out)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "wrote %s/validation.md\n", *out)
		return
	}
	o := fleetsim.DefaultOptions(*quick)
	o.Seed, o.Log, o.H100 = *seed, os.Stderr, *h100
	o.Params.StuckProbePods = *stuck
	switch *workload {
	case "lognormal":
	case "uniform":
		o.Workload = fleetsim.UniformWorkload()
	case "prefix":
		o.Workload = fleetsim.PrefixWorkload()
	default:
		fail(fmt.Errorf("unknown workload %q", *workload))
	}
	if *dur > 0 {
		o.Duration = *dur
	}
	if *headline >= 0 {
		o.Headline = *headline
	}
	if !*crossover {
		o.Crossover = false
	}
	var err error
	if o.Pods, err = ints(*pods, o.Pods); err != nil {
		fail(err)
	}
	if o.Replicas, err = ints(*replicas, o.Replicas); err != nil {
		fail(err)
	}
	if *loads != "" {
		o.Loads = nil
		for _, f := range strings.Split(*loads, ",") {
			var l float64
			if _, err := fmt.Sscanf(strings.TrimSpace(f), "%g", &l); err != nil || l <= 0 {
				fail(fmt.Errorf("bad load %q", f))
			}
			o.Loads = append(o.Loads, l)
		}
	}
	if *strategies != "" {
		o.Strategies = strings.Split(*strategies, ",")
	}
	if *trace != "" {
		path := *trace
		if path == "bench" {
			path = ""
		}
		w, err := fleetsim.TraceWorkload(path)
		if err != nil {
			fail(err)
		}
		o.Trace = &w
	}
	start := time.Now()
	// Results are rewritten after every scenario: an interrupted sweep
	// leaves what it measured.
	o.Progress = func(res *fleetsim.Results, timings []fleetsim.Timing) {
		if err := fleetsim.WriteAll(res, timings, *out); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim: writing results:", err)
		}
	}
	res, timings, err := fleetsim.Sweep(o)
	if err != nil {
		fail(err)
	}
	if err := fleetsim.WriteAll(res, timings, *out); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s/results.json, report.md, timing.json and plots in %v\n", *out, time.Since(start).Round(time.Second))
}

func ints(s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleetsim:", err)
	os.Exit(1)
}

// startCPUProfile starts profiling the process's CPU into path; the
// returned function stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim: cpu profile:", err)
		}
	}, nil
}
