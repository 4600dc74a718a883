package fleetsim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/probegate/probegate/bench"
)

// WriteReport writes report.md to dir: the model table, one table per
// scenario, the goals at the largest point, and each run's cost.
func WriteReport(r *Results, timings []Timing, dir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# fleetsim report (seed %d%s)\n\n", r.Seed, map[bool]string{true: ", quick", false: ""}[r.Quick])
	b.WriteString("Virtual-time simulation: N pods of internal/vllmsim's engine behind R replicas running the production\n")
	b.WriteString("pickers (route.NewPicker), probe.State views, the adaptive scrape rule and the auto hedge estimator.\n")
	b.WriteString("Latencies in ms of virtual time. Pod costs are load-report requests each pod receives per second.\n")
	b.WriteString("recent/req and slow/req: candidates per request used without waiting for a probe because their report was\n")
	b.WriteString("younger than 2 x probe.fresh_for (skipped_recent) or their last probe missed the deadline (skipped_slow);\n")
	b.WriteString("probe wait: the decision's wait for probes, ms. Suffix _norules: both rules off (_noswr, _noslow: one).\n\n")
	m := r.Model
	b.WriteString("## Model\n\n| parameter | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| RTT | %.0f µs |\n| probe service (lognormal median, sigma) | %.0f µs, %.2f |\n| probe tail (p, extra) | %.3f, %.1f ms |\n",
		m.RTTUs, m.ProbeServiceUs, m.ProbeSigma, m.ProbeTailP, m.ProbeTailMs)
	fmt.Fprintf(&b, "| scrape render | %.1f ms |\n| scrape / probe / ORCA bytes | %d / %d / %d |\n| streaming share | %.2f |\n| proxy overhead, relay | %.0f µs, %.0f µs |\n",
		m.ScrapeRenderMs, m.ScrapeBytes, m.ProbeBytes, m.ORCABytes, m.StreamShare, m.ProxyOverheadUs, m.RelayUs)
	if m.StuckProbePods > 0 {
		fmt.Fprintf(&b, "| pods whose probes are stuck, extra delay | %d, %.0f ms |\n", m.StuckProbePods, m.StuckProbeMs)
	}
	fmt.Fprintf(&b, "| pod batch seats, time scale | %d, %g |\n\n", r.Fleet.MaxNumSeqs, r.Fleet.Slowdown)
	b.WriteString("Pod capacity (requests/s, one saturated pod): ")
	for _, k := range sortedKeys(r.PodCapacityRPS) {
		fmt.Fprintf(&b, "%s %.2f; ", k, r.PodCapacityRPS[k])
	}
	b.WriteString("\n\n")
	goals(&b, r)
	b.WriteString("## Runs\n\n")
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		p := sc.Params
		fmt.Fprintf(&b, "### %s\n\n%s, %d pods, %d replicas, %.2fx capacity (%.1f req/s), %gs simulated (%gs warmup)\n\n",
			sc.Name, p.Workload, p.Pods, p.Replicas, p.Load, p.RateRPS, p.DurationS, p.WarmupS)
		b.WriteString("| strategy | requests | TTFT p50 | TTFT p99 | E2E p99 | p99/oracle | herd | probes/req | recent/req | slow/req | probe wait p99 | probes/pod/s | scrapes/pod/s | report KB/pod/s | decisions |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range sc.Strategies {
			kb := (s.PodProbeBytesPerS + s.PodScrapeBytesPerS + s.PodORCABytesPerS) / 1000
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %.2f | %.1f | %.2f | %.3f | %.3f | %.2f | %.1f | %.1f | %.1f | %s |\n",
				s.Name, s.Requests, s.TTFT.P50, s.TTFT.P99, s.E2E.P99, s.TTFTP99RatioToOracle, s.HerdIndex,
				s.ProbesPerRequest, s.SkippedRecentPerRequest, s.SkippedSlowPerRequest, s.DecisionWait.P99,
				s.PodProbesPerS, s.PodScrapesPerS, kb, decisions(s.Decisions))
		}
		b.WriteString("\n")
	}
	if len(timings) > 0 {
		b.WriteString("## Cost of the simulation (this machine, shared)\n\n| run | simulated s | wall s | CPU s | speed-up | events | events/s |\n|---|---|---|---|---|---|---|\n")
		for _, t := range timings {
			fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.1fx | %d | %.0f |\n", t.Name, t.SimS, t.WallS, t.CPUS, t.Speedup, t.Events, t.EventsPS)
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

// goals writes the goals at the largest fleet and replica count,
// 0.8x load (the headline run when there is one).
func goals(b *strings.Builder, r *Results) {
	var sc *ScenarioResult
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		if s.Params.Load != 0.8 || s.find(bench.Probe) == nil || s.find(bench.Oracle) == nil || s.find(bench.Cached) == nil {
			continue
		}
		if strings.HasPrefix(s.Name, "crossover") {
			continue
		}
		if sc == nil || s.Params.Pods*s.Params.Replicas > sc.Params.Pods*sc.Params.Replicas ||
			(s.Params.Pods*s.Params.Replicas == sc.Params.Pods*sc.Params.Replicas && s.Params.DurationS > sc.Params.DurationS) {
			sc = s
		}
	}
	if sc == nil {
		return
	}
	p, o, c := sc.find(bench.Probe), sc.find(bench.Oracle), sc.find(bench.Cached)
	scrapeAll := 20.0 * float64(sc.Params.Replicas)
	fmt.Fprintf(b, "## Goals at %s\n\n| goal | value | met |\n|---|---|---|\n", sc.Name)
	row := func(goal string, v, limit float64) {
		fmt.Fprintf(b, "| %s | %.3f (limit %.3f) | %v |\n", goal, v, limit, v <= limit)
	}
	row("probe p99 TTFT / oracle <= 1.3", p.TTFT.P99/o.TTFT.P99, 1.3)
	row("probe p99 TTFT / cached(50 ms) <= 0.6", p.TTFT.P99/c.TTFT.P99, 0.6)
	row(fmt.Sprintf("probes per pod per s <= 1/10 of %d replicas scraping every 50 ms", sc.Params.Replicas), p.PodProbesPerS, scrapeAll/10)
	row("probes per request <= d + 5% (d = 2)", p.ProbesPerRequest, 2.1)
	b.WriteString("\n")
}

func decisions(d map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(d) {
		parts = append(parts, fmt.Sprintf("%s %d", k, d[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
