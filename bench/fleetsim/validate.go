package fleetsim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/probegate/probegate/bench"
)

// ValidateOptions configure the comparison with the live bench's replicas
// scenario (8 servers, R in {1, 4, 8}, 0.85x capacity, lognormal sizes).
type ValidateOptions struct {
	Seed int64
	// Live is the live bench's results.json (go run ./bench/cmd/bench
	// -scenario replicas); its measured capacity sets the rate, so both
	// replay the same request sequence. Empty: the simulated capacity.
	Live     string
	Duration time.Duration // the bench's steady duration (15 s)
	Params   Params
	Log      io.Writer
}

// Validate replays the live bench's replicas scenario in the simulation and
// writes validation.json and validation.md (side by side with the live
// figures when opts.Live is given) to dir.
func Validate(o ValidateOptions, dir string) error {
	const pods, load = 8, 0.85
	w := LognormalWorkload()
	sim := PodSim(w)
	var live *bench.Results
	capFleet := 0.0
	if o.Live != "" {
		b, err := os.ReadFile(o.Live)
		if err != nil {
			return err
		}
		live = &bench.Results{}
		if err := json.Unmarshal(b, live); err != nil {
			return fmt.Errorf("%s: %w", o.Live, err)
		}
		capFleet = live.Fleet.CapacityRPS
	}
	capPod, err := PodCapacity(w, sim, BenchSlowdown, 60*time.Second, uint64(o.Seed))
	if err != nil {
		return err
	}
	if capFleet <= 0 {
		capFleet = capPod * pods
	}
	rate := load * capFleet
	jobs := BenchJobs(bench.SizesLognormal, rate, o.Duration, o.Seed, sim.BlockSize)
	res := &Results{Seed: o.Seed, Model: paramsJSON(o.Params), Fleet: FleetJSON{MaxNumSeqs: sim.MaxNumSeqs, Slowdown: BenchSlowdown},
		PodCapacityRPS: map[string]float64{w.Name: round(capPod)}}
	res.Notes = append(res.Notes, fmt.Sprintf("rate %.2f req/s = 0.85 x capacity %.2f (%s)", rate, capFleet, map[bool]string{true: "the live bench's", false: "simulated"}[live != nil]))
	var md strings.Builder
	fmt.Fprintf(&md, "# fleetsim validation against the live bench\n\n8 pods, 0.85x capacity (%.2f req/s, %s), lognormal sizes, %d requests (the bench's sequence for seed %d), %v.\n",
		rate, map[bool]string{true: "live capacity " + fmt.Sprint(capFleet), false: "simulated capacity"}[live != nil], len(jobs), o.Seed, o.Duration)
	fmt.Fprintf(&md, "Simulated pod capacity %.2f req/s (fleet %.2f).\n\n", capPod, capPod*pods)
	md.WriteString("| R | strategy | sim TTFT p50 | live TTFT p50 | sim TTFT p99 | live TTFT p99 | sim/live p99 |\n|---|---|---|---|---|---|---|\n")
	for _, r := range []int{1, 4, 8} {
		sc := ScenarioResult{Name: fmt.Sprintf("replicas_r%d", r), Params: ScenarioParams{Workload: w.Name, Pods: pods, Replicas: r, Load: load,
			RateRPS: round(rate), DurationS: o.Duration.Seconds(), Arrivals: "poisson (the bench's schedule)"}}
		var ls *bench.ScenarioResult
		if live != nil {
			for i := range live.Scenarios {
				if live.Scenarios[i].Name == sc.Name {
					ls = &live.Scenarios[i]
				}
			}
		}
		for _, s := range Strategies {
			cfg := Config{Pods: pods, Replicas: r, Strategy: s, Workload: w, Rate: rate, Duration: o.Duration + time.Millisecond,
				Sim: sim, Slowdown: BenchSlowdown, Params: o.Params, Seed: uint64(o.Seed), Jobs: jobs, Lockstep: true}
			m, err := Run(cfg)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", sc.Name, s, err)
			}
			sc.Strategies = append(sc.Strategies, StrategyResult{Name: s, RunMetrics: m})
			lp50, lp99 := 0.0, 0.0
			if ls != nil {
				if i := slices.IndexFunc(ls.Strategies, func(x bench.StrategyResult) bool { return x.Name == s }); i >= 0 {
					lp50, lp99 = ls.Strategies[i].TTFT.P50, ls.Strategies[i].TTFT.P99
				}
			}
			ratio := "-"
			if lp99 > 0 {
				ratio = fmt.Sprintf("%.2f", m.TTFT.P99/lp99)
			}
			fmt.Fprintf(&md, "| %d | %s | %.1f | %.1f | %.1f | %.1f | %s |\n", r, s, m.TTFT.P50, lp50, m.TTFT.P99, lp99, ratio)
			if o.Log != nil {
				fmt.Fprintf(o.Log, "validate R=%d %-16s sim p99 %8.1f  live p99 %8.1f\n", r, s, m.TTFT.P99, lp99)
			}
		}
		if or := sc.find(bench.Oracle); or != nil && or.TTFT.P99 > 0 {
			for i := range sc.Strategies {
				sc.Strategies[i].TTFTP99RatioToOracle = round(sc.Strategies[i].TTFT.P99 / or.TTFT.P99)
			}
		}
		res.Scenarios = append(res.Scenarios, sc)
	}
	if err := writeJSON(dir, "validation.json", res); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "validation.md"), []byte(md.String()), 0o644)
}
