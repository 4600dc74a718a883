// Command bench runs probegate's benchmark: simulated vLLM fleets on
// loopback, real probegate proxies in front of them, an open-loop streaming
// load generator, and the baselines, side by side. See bench/README.md.
//
//	go run ./bench/cmd/bench [-scenario NAME|all] [-quick] [-out DIR] [-seed N]
//	go run ./bench/cmd/bench -scenario overhead [-pin] [-repeat N] [-profile DIR]
//	go run ./bench/cmd/bench -scenario trace -trace FILE [-trace-offset D] [-trace-load L | -trace-speed X]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/probegate/probegate/bench"
)

func main() {
	bench.ServeUpstreamIfChild()
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	scenario := fs.String("scenario", "", "scenario name, comma-separated list, or all (default: all; with -quick: "+strings.Join(bench.QuickScenarios, ",")+"); one of "+strings.Join(bench.Scenarios, ", "))
	quick := fs.Bool("quick", false, "small runs of steady, spike and replicas (under 5 minutes)")
	out := fs.String("out", "bench-out", "output directory for results.json, report.md and plots")
	seed := fs.Int64("seed", 1, "first seed: schedules, requests and simulator draws derive from it")
	seeds := fs.Int("seeds", 0, "runs per scenario and strategy over seeds seed..seed+n-1 (default 1 quick, 3 full)")
	dur := fs.Duration("duration", 0, "load duration of each steady-state run (default 3s quick, 15s full)")
	strategies := fs.String("strategies", "", "comma-separated subset of strategies (default all)")
	servers := fs.Int("servers", 0, "simulated servers (default 8)")
	burst := fs.Float64("burstiness", 1, "gamma shape of arrival gaps: 1 = Poisson, < 1 = burstier (as vllm bench serve)")
	sizes := fs.String("sizes", bench.SizesLognormal, "request sizes of steady, spike and replicas: "+strings.Join(bench.SizeKinds, ", ")+" (lognormal: fitted to the Azure code trace; trace: pairs drawn from -trace; bimodal: 80% chat turns of 64-512 prompt / 32-256 output tokens, 20% documents of 3,000-7,000 / 8-64, fleetsim -general's, assumed, not fitted)")
	arrivals := fs.String("arrivals", bench.ArrivalsPoisson, "arrival process of steady and replicas: "+strings.Join(bench.ArrivalKinds, ", ")+" (poisson: gamma gaps of -burstiness; onoff: 1.5 s of every 6 s at 3x the mean rate, the rest at 1/3x, fleetsim -general's bursts)")
	capacity := fs.Float64("capacity", 0, "the homogeneous fleet's capacity in requests/s for -sizes, used instead of measuring it, so that every invocation offers the same rates and seed k is the same requests (e.g. to compare two binaries); 0: measured")
	fleet := fs.String("fleet", bench.FleetHomo, "servers of steady, spike and replicas: "+strings.Join(bench.FleetKinds, ", ")+" (fleetsim -general's kinds: oneslow = the last server 2x slower, twospeed = the second half 2x slower; loads are shares of that fleet's own capacity)")
	trace := fs.String("trace", "", "trace in the Azure schema (TIMESTAMP,ContextTokens,GeneratedTokens) for -scenario trace and -sizes trace (default: the committed slice bench/testdata/azure_code_2023_slice.csv)")
	traceOffset := fs.Duration("trace-offset", bench.DefaultTraceOffset, "trace time at which the first seed's replay window starts (each further seed replays the next window)")
	traceSpeed := fs.Float64("trace-speed", 0, "fixed replay speed: the trace's arrival times are divided by it and each seed replays duration x speed of trace time (1: real time); 0 calibrates the replay to -trace-load instead")
	traceRows := fs.Int("trace-rows", 0, "with -trace-speed 0: each seed replays exactly this many rows instead of load x capacity x duration, so that seed k is the same requests in every run (the capacity measured at each run's start varies), and the trace fleet's capacity is then not measured; 0: from -trace-load")
	traceLoad := fs.Float64("trace-load", bench.DefaultTraceLoad, "with -trace-speed 0: each seed replays the next load x capacity x duration rows of the trace from -trace-offset, their gaps scaled to span the duration (capacity: the trace fleet's, measured closed loop with the trace's sizes)")
	variants := fs.String("variants", "", "comma-separated scenario entries to run, e.g. trace_hetero_r1,steady_80 (default all of the selected scenarios)")
	profile := fs.String("profile", "", "overhead: write CPU and allocation profiles of each probegate target under wrk to this directory (read with go tool pprof)")
	pin := fs.Bool("pin", false, "overhead: run the load generators (wrk, vegeta, the Go generator) on the first CPU and each target with its upstreams on the others, the same for every target (Linux; needs 2 CPUs)")
	repeat := fs.Int("repeat", 1, "overhead: measure every target this many rounds, interleaved (each round measures all targets in turn, the order reversed every other round) and report per target the median and min..max of the rounds; the goals use the medians")
	podHistory := fs.Int("pod-history", 0, "long-lived servers: before each run every server serves its share (by speed) of this many earlier runs of the same traffic, in a private engine, and its /metrics counters start with them (0: fresh servers, counters at 0)")
	records := fs.String("records", "", "diagnostic: write one JSON line per request of every load run to DIR/<entry>_<strategy>_s<seed>.jsonl: the replica, the pod it reached, its TTFT and, at its arrival, every pod's true running/waiting and the replica's view of it (queue, pending prefill, learned and pod-reported ns per token, the ns route.load scores it with); compare with ttftwhy -records")
	noProgress := fs.Bool("no-progress", false, "no progress bar on stderr")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := bench.Options{Scenario: *scenario, Quick: *quick, Out: *out, Seed: *seed, Seeds: *seeds,
		Duration: *dur, Servers: *servers, Burstiness: *burst, Progress: os.Stderr, Log: os.Stderr,
		Sizes: *sizes, Arrivals: *arrivals, Fleet: *fleet, Capacity: *capacity, TraceFile: *trace, TraceOffset: *traceOffset, TraceSpeed: *traceSpeed, TraceLoad: *traceLoad, TraceRows: *traceRows,
		ProfileDir: *profile, Pin: *pin, Repeat: *repeat, PodHistory: *podHistory, Records: *records}
	if *variants != "" {
		o.Variants = strings.Split(*variants, ",")
	}
	if *noProgress {
		o.Progress = nil
	}
	if *strategies != "" {
		o.Strategies = strings.Split(*strategies, ",")
	}
	start := time.Now()
	res, err := bench.Run(ctx, o)
	if res != nil {
		fmt.Fprintf(os.Stderr, "wrote %s/results.json and %s/report.md in %v\n", *out, *out, time.Since(start).Round(time.Second))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
