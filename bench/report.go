package bench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Baselines are the strategies the verdicts compare probe against (the
// oracle is the limit, not a baseline).
var Baselines = []string{RoundRobin, Random, LeastInflight, Cached, CachedAdaptive}

// GoalScenarios are the scenarios the issue states goals for.
var GoalScenarios = []string{"spike", "replicas_r8", "external"}

// Goal thresholds (issue 5): probe's p99 TTFT within 1.3x oracle, at most
// 0.8x cached and 0.6x round_robin, no errors, at most d + 5% probes per
// request (d = 2: 2.1).
const (
	goalVsOracle     = 1.3
	goalVsCached     = 0.8
	goalVsRoundRobin = 0.6
	goalProbesPerReq = 2 * 1.05
)

func (sc *ScenarioResult) strategy(name string) *StrategyResult {
	for i := range sc.Strategies {
		if sc.Strategies[i].Name == name {
			return &sc.Strategies[i]
		}
	}
	return nil
}

// bestBaseline returns the baseline with the lowest p99 TTFT.
func (sc *ScenarioResult) bestBaseline() *StrategyResult {
	var best *StrategyResult
	for _, b := range Baselines {
		s := sc.strategy(b)
		if s != nil && s.Requests > 0 && (best == nil || s.TTFT.P99 < best.TTFT.P99) {
			best = s
		}
	}
	return best
}

// GoalCheck is one goal's verdict.
type GoalCheck struct {
	Scenario string
	Goal     string
	Value    float64
	Limit    float64
	Met      bool
	Missing  bool
	// Rounds, for a goal measured over several rounds (overhead -repeat),
	// is their number: Value is then the ratio of the medians, and Min and
	// Max the smallest and largest of the same ratio within one round.
	Rounds   int
	Min, Max float64
}

// measured renders the value of g, with its rounds if it has several.
func (g GoalCheck) measured() string {
	if g.Rounds < 2 {
		return fmt.Sprintf("%.2f", g.Value)
	}
	return fmt.Sprintf("%.2f (medians of %d rounds; per round %.2f..%.2f)", g.Value, g.Rounds, g.Min, g.Max)
}

// Goals evaluates the goals on r.
func Goals(r *Results) []GoalCheck {
	var out []GoalCheck
	for _, name := range GoalScenarios {
		var sc *ScenarioResult
		for i := range r.Scenarios {
			if r.Scenarios[i].Name == name {
				sc = &r.Scenarios[i]
			}
		}
		if sc == nil {
			continue
		}
		p := sc.strategy(Probe)
		if p == nil {
			continue
		}
		cmp := func(goal, other string, limit float64) {
			o := sc.strategy(other)
			if o == nil || o.TTFT.P99 == 0 {
				out = append(out, GoalCheck{Scenario: name, Goal: goal, Limit: limit, Missing: true})
				return
			}
			v := p.TTFT.P99 / o.TTFT.P99
			out = append(out, GoalCheck{Scenario: name, Goal: goal, Value: v, Limit: limit, Met: v <= limit})
		}
		cmp("p99 TTFT probe/oracle", Oracle, goalVsOracle)
		cmp("p99 TTFT probe/cached", Cached, goalVsCached)
		cmp("p99 TTFT probe/round_robin", RoundRobin, goalVsRoundRobin)
		out = append(out, GoalCheck{Scenario: name, Goal: "probe errors", Value: float64(p.Errors), Limit: 0, Met: p.Errors == 0})
		out = append(out, GoalCheck{Scenario: name, Goal: "probes per request", Value: p.ProbesPerRequest, Limit: goalProbesPerReq, Met: p.ProbesPerRequest <= goalProbesPerReq})
	}
	if oh := r.Overhead; oh != nil {
		// ratioGoal adds the goal f(a)/f(b) (at least limit, or with atMost
		// at most limit) from the medians, with its per-round range in a
		// run of several rounds.
		ratioGoal := func(goal string, a, b *OverheadTarget, f func(*OverheadTarget) float64, limit float64, atMost bool) {
			if a == nil || b == nil || f(a) <= 0 || f(b) <= 0 {
				return
			}
			v := f(a) / f(b)
			g := GoalCheck{Scenario: "overhead", Goal: goal, Value: v, Limit: limit, Met: v >= limit}
			if atMost {
				g.Met = v <= limit
			}
			if oh.Rounds > 1 {
				g.Rounds = oh.Rounds
				g.Min, g.Max = roundRatios(a, b, f)
			}
			out = append(out, g)
		}
		wrkRPS := func(t *OverheadTarget) float64 { return t.WrkRPS }
		li, ng := oh.target("probegate_least_inflight"), oh.target("nginx")
		ratioGoal("req/s probegate(least_inflight)/nginx (wrk)", li, ng, wrkRPS, 1, false)
		ratioGoal("req/s probegate(least_inflight)/nginx (Go generator)", li, ng, func(t *OverheadTarget) float64 { return t.GoRPS }, 1, false)
		pr := oh.target("probegate_probe")
		ratioGoal("req/s probegate(probe)/probegate(least_inflight) (wrk)", pr, li, wrkRPS, 0.8, false)
		if pv, nv := pr.vegetaAt(10000), ng.vegetaAt(10000); pv != nil && nv != nil && nv.Latency.P99 > 0 {
			const goal = "p99 probegate(probe)/nginx at 10k req/s (vegeta)"
			if pv.AchievedRPS < 9500 || nv.AchievedRPS < 9500 {
				// The generator fell behind: the latencies are not at 10k.
				out = append(out, GoalCheck{Scenario: "overhead", Goal: goal + ": rate not reached", Limit: 2, Missing: true})
			} else if q, why := generatorQueued(oh.target("direct"), 10000); q {
				// The machine queued without a proxy: the tails are not
				// the proxies'.
				out = append(out, GoalCheck{Scenario: "overhead", Goal: goal + ": the generator queued (" + why + ")", Limit: 2, Missing: true})
			} else {
				ratioGoal(goal, pr, ng, vegetaP99(10000), 2, true)
			}
		}
	}
	return out
}

// WriteReport writes dir/report.md: one table per scenario, its verdict as
// ratios to the oracle and to the best baseline, the goals, and overhead.
func WriteReport(r *Results, dir string) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	w("# probegate benchmark report\n\n")
	w("Run %s .. %s (%s mode), seeds %v.\n\n", r.Started.Format("2006-01-02 15:04:05Z"), r.Finished.Format("15:04:05Z"), mode, r.Seeds)
	w("Machine: %d CPUs (%s), %d GiB, %s, %s. Everything (simulator, proxies, load generator) shares these CPUs, on loopback.\n\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryGiB, r.Machine.OS, r.Machine.GoVersion)
	if r.Fleet.Servers > 0 && r.Fleet.CapacityRPS > 0 {
		w("Fleet: %d simulated vLLM servers (internal/vllmsim), max_num_seqs %d, time scale %g. Measured capacity: **%.1f requests/s** (closed-loop saturation, %s sizes); loads below are multiples of it.\n\n",
			r.Fleet.Servers, r.Fleet.MaxNumSeqs, r.Fleet.TimeScale, r.Fleet.CapacityRPS, cmp.Or(r.Fleet.Sizes, SizesUniform))
		if len(r.Fleet.CapacityBySizes) > 1 {
			w("Capacity by size distribution (requests/s): %v; steady, spike and replicas use %s sizes, the other load scenarios uniform ones, trace the trace's own.\n\n", r.Fleet.CapacityBySizes, r.Fleet.Sizes)
		}
	}
	for _, n := range r.Notes {
		w("> Note: %s\n\n", n)
	}
	if goals := Goals(r); len(goals) > 0 {
		w("## Goals\n\n| scenario | goal | measured | limit | verdict |\n|---|---|---|---|---|\n")
		for _, g := range goals {
			v := "missed"
			if g.Met {
				v = "met"
			}
			if g.Missing {
				w("| %s | %s | n/a | %.2f | not measured |\n", g.Scenario, g.Goal, g.Limit)
				continue
			}
			w("| %s | %s | %s | %.2f | **%s** |\n", g.Scenario, g.Goal, g.measured(), g.Limit, v)
		}
		w("\n")
	}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		w("## %s\n\n", sc.Name)
		keys := make([]string, 0, len(sc.Params))
		for k := range sc.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var ps []string
		for _, k := range keys {
			ps = append(ps, fmt.Sprintf("%s=%v", k, sc.Params[k]))
		}
		w("Parameters: %s.\n\n", strings.Join(ps, ", "))
		w("| strategy | req | err | rps | TTFT p50 | p90 | p99 | p99.9 | p99 by seed | E2E p50 | p99 | ITL p50 | p99 | probes/req | fallback | imbalance (queue) | imbalance (req) | extra |\n")
		w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range sc.Strategies {
			var extra []string
			if s.AdapterLoads != nil {
				extra = append(extra, fmt.Sprintf("adapter loads %d", *s.AdapterLoads))
			}
			if s.PrefixHitRate != nil {
				extra = append(extra, fmt.Sprintf("prefix hit %.1f%%", *s.PrefixHitRate*100))
			}
			if s.Direct != nil {
				extra = append(extra, fmt.Sprintf("direct: %d req, TTFT p99 %.0f ms", s.Direct.Requests, s.Direct.TTFT.P99))
			}
			if s.Behind {
				extra = append(extra, fmt.Sprintf("GENERATOR BEHIND (lag p99 %.1f ms)", s.ScheduleLagMs.P99))
			}
			if s.Errors > 0 && s.ErrorSample != "" {
				extra = append(extra, "error: "+truncate(s.ErrorSample, 60))
			}
			w("| %s | %d | %d | %.1f | %.0f | %.0f | **%.0f** | %.0f | %s | %.0f | %.0f | %.1f | %.1f | %.2f | %.1f%% | %.2f | %.2f | %s |\n",
				s.Name, s.Requests, s.Errors, s.AchievedRPS, s.TTFT.P50, s.TTFT.P90, s.TTFT.P99, s.TTFT.P999,
				seedSpread(s.TTFTP99BySeed), s.E2E.P50, s.E2E.P99, s.ITL.P50, s.ITL.P99, s.ProbesPerRequest, s.FallbackRate*100,
				s.Imbalance, s.ImbalanceRequests, strings.Join(extra, "; "))
		}
		w("\n")
		if steps := rampTable(sc); steps != "" {
			w("%s\n", steps)
		}
		w("%s\n\n", verdict(sc))
		w("![TTFT CDF](ttft_cdf_%s.svg)\n\n", sc.Name)
	}
	if hasPrefix(r, "ramp") {
		w("![p99 TTFT against offered load](ramp_p99.svg)\n\n")
	}
	if hasPrefix(r, "replicas_") {
		w("![p99 TTFT against replicas](replicas_p99.svg)\n\n")
	}
	if r.Overhead != nil {
		w("%s", overheadReport(r.Overhead))
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

func hasPrefix(r *Results, p string) bool {
	for _, sc := range r.Scenarios {
		if strings.HasPrefix(sc.Name, p) {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func seedSpread(xs []float64) string {
	if len(xs) <= 1 {
		return "-"
	}
	return fmt.Sprintf("%.0f..%.0f", slices.Min(xs), slices.Max(xs))
}

// verdict states how probe and its no-hedge variant compare with the oracle
// and the best baseline, as ratios of p99 TTFT.
func verdict(sc *ScenarioResult) string {
	o, best := sc.strategy(Oracle), sc.bestBaseline()
	var parts []string
	for _, name := range []string{Probe, ProbeNoHedge} {
		p := sc.strategy(name)
		if p == nil || p.TTFT.P99 == 0 {
			continue
		}
		s := fmt.Sprintf("%s p99 TTFT %.0f ms", name, p.TTFT.P99)
		if o != nil && o.TTFT.P99 > 0 {
			s += fmt.Sprintf(" = %.2fx oracle", p.TTFT.P99/o.TTFT.P99)
		}
		if best != nil && best.TTFT.P99 > 0 {
			s += fmt.Sprintf(", %.2fx the best baseline (%s, %.0f ms)", p.TTFT.P99/best.TTFT.P99, best.Name, best.TTFT.P99)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return "**Verdict:** " + strings.Join(parts, "; ") + "."
}

// rampTable renders p99 TTFT per load step and strategy.
func rampTable(sc *ScenarioResult) string {
	if len(sc.Strategies) == 0 || len(sc.Strategies[0].Steps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("p99 TTFT (ms) per load step:\n\n| strategy |")
	for _, st := range sc.Strategies[0].Steps {
		fmt.Fprintf(&b, " %.1fx |", st.Load)
	}
	b.WriteString("\n|---|")
	for range sc.Strategies[0].Steps {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, s := range sc.Strategies {
		fmt.Fprintf(&b, "| %s |", s.Name)
		for _, st := range s.Steps {
			fmt.Fprintf(&b, " %.0f |", st.TTFT.P99)
		}
		b.WriteString("\n")
	}
	return b.String()
}
