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
	// Live are live bench results.json files (go run ./bench/cmd/bench
	// -scenario replicas -seed S -seeds K). Each gives its seeds and its
	// measured capacity, which sets the rate: the simulation replays
	// exactly the request sequences the live bench sent. With none, Seed
	// alone is simulated at the simulated capacity.
	Live     []string
	Seed     int64
	Duration time.Duration // the bench's steady duration (15 s)
	Params   Params
	Log      io.Writer
}

// liveRun is one live seed: its rate and its p99 TTFT by scenario and
// strategy.
type liveRun struct {
	seed int64
	rate float64
	p99  map[string]map[string]float64
}

// Validate replays the live bench's replicas scenario in the simulation and
// writes validation.json (the simulated runs) and validation.md (side by
// side with the live p99 TTFT, mean over seeds, when live results are
// given) to dir. Replicas start in lockstep, as the bench starts its
// proxies.
func Validate(o ValidateOptions, dir string) error {
	const pods, load = 8, 0.85
	w := LognormalWorkload()
	sim := PodSim(w)
	capPod, err := PodCapacity(w, sim, BenchSlowdown, 60*time.Second, uint64(o.Seed))
	if err != nil {
		return err
	}
	runs, err := readLive(o.Live, load)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		runs = []liveRun{{seed: o.Seed, rate: load * capPod * pods}}
	}
	res := &Results{Seed: runs[0].seed, Model: paramsJSON(o.Params), Fleet: FleetJSON{MaxNumSeqs: sim.MaxNumSeqs, Slowdown: BenchSlowdown},
		PodCapacityRPS: map[string]float64{w.Name: round(capPod)}}
	var md strings.Builder
	fmt.Fprintf(&md, "# fleetsim validation against the live bench\n\n8 pods, 0.85x the live bench's measured capacity, lognormal sizes, %v per run, seeds", o.Duration)
	for _, r := range runs {
		fmt.Fprintf(&md, " %d (%.2f req/s)", r.seed, r.rate)
		res.Notes = append(res.Notes, fmt.Sprintf("seed %d: rate %.2f req/s", r.seed, r.rate))
	}
	fmt.Fprintf(&md, ". Simulated pod capacity %.2f req/s (fleet %.2f). Replicas start in lockstep, as the bench starts its proxies.\n\n", capPod, capPod*pods)
	md.WriteString("p99 TTFT in ms, mean over seeds (each seed's p99 over its own requests).\n\n")
	md.WriteString("| R | strategy | sim p50 | sim p99 | live p99 | sim/live | sim rank | live rank |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range []int{1, 4, 8} {
		name := fmt.Sprintf("replicas_r%d", r)
		simP99, liveP99, simP50 := map[string]float64{}, map[string]float64{}, map[string]float64{}
		for _, lr := range runs {
			jobs := BenchJobs(bench.SizesLognormal, lr.rate, o.Duration, lr.seed, sim.BlockSize)
			sc := ScenarioResult{Name: fmt.Sprintf("%s_seed%d", name, lr.seed), Params: ScenarioParams{Workload: w.Name, Pods: pods, Replicas: r, Load: load,
				RateRPS: round(lr.rate), DurationS: o.Duration.Seconds(), Arrivals: "poisson (the bench's schedule)"}}
			for _, s := range Strategies {
				cfg := Config{Pods: pods, Replicas: r, Strategy: s, Workload: w, Rate: lr.rate, Duration: o.Duration + time.Millisecond,
					Sim: sim, Slowdown: BenchSlowdown, Params: o.Params, Seed: uint64(lr.seed), Jobs: jobs, Lockstep: true}
				m, err := Run(cfg)
				if err != nil {
					return fmt.Errorf("%s/%s: %w", sc.Name, s, err)
				}
				sc.Strategies = append(sc.Strategies, StrategyResult{Name: s, RunMetrics: m})
				n := float64(len(runs))
				simP99[s] += m.TTFT.P99 / n
				simP50[s] += m.TTFT.P50 / n
				liveP99[s] += lr.p99[name][s] / n
			}
			if or := sc.find(bench.Oracle); or != nil && or.TTFT.P99 > 0 {
				for i := range sc.Strategies {
					sc.Strategies[i].TTFTP99RatioToOracle = round(sc.Strategies[i].TTFT.P99 / or.TTFT.P99)
				}
			}
			res.Scenarios = append(res.Scenarios, sc)
		}
		simRank, liveRank := rank(simP99), rank(liveP99)
		for _, s := range Strategies {
			ratio := "-"
			if liveP99[s] > 0 {
				ratio = fmt.Sprintf("%.2f", simP99[s]/liveP99[s])
			}
			fmt.Fprintf(&md, "| %d | %s | %.0f | %.0f | %.0f | %s | %d | %d |\n", r, s, simP50[s], simP99[s], liveP99[s], ratio, simRank[s], liveRank[s])
			if o.Log != nil {
				fmt.Fprintf(o.Log, "validate R=%d %-16s sim p99 %8.1f  live p99 %8.1f\n", r, s, simP99[s], liveP99[s])
			}
		}
	}
	if err := writeJSON(dir, "validation.json", res); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "validation.md"), []byte(md.String()), 0o644)
}

// readLive reads the live bench's results: one liveRun per seed, at load
// times the capacity that run measured.
func readLive(paths []string, load float64) ([]liveRun, error) {
	var runs []liveRun
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var lr bench.Results
		if err := json.Unmarshal(b, &lr); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for si, seed := range lr.Seeds {
			run := liveRun{seed: seed, rate: load * lr.Fleet.CapacityRPS, p99: map[string]map[string]float64{}}
			for _, sc := range lr.Scenarios {
				run.p99[sc.Name] = map[string]float64{}
				for _, s := range sc.Strategies {
					if si < len(s.TTFTP99BySeed) {
						run.p99[sc.Name][s.Name] = s.TTFTP99BySeed[si]
					}
				}
			}
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// rank numbers strategies by ascending p99 (1 = best).
func rank(p99 map[string]float64) map[string]int {
	names := slices.Clone(Strategies)
	slices.SortStableFunc(names, func(a, b string) int {
		switch {
		case p99[a] < p99[b]:
			return -1
		case p99[a] > p99[b]:
			return 1
		}
		return 0
	})
	out := map[string]int{}
	for i, n := range names {
		out[n] = i + 1
	}
	return out
}
