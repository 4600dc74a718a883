package fleetsim

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Results is fleetsim's results.json, in the bench's conventions
// (DESIGN.md: seed, scenarios[].name/params/strategies[] with the bench's
// field names), extended with the simulation's own figures. It holds
// nothing that depends on the machine: the same seed and options give the
// same bytes. Wall time and CPU are in timing.json and report.md.
type Results struct {
	Seed  int64 `json:"seed"`
	Quick bool  `json:"quick"`
	// Model is the network and pod model (Params, the documented table).
	Model ParamsJSON `json:"model"`
	// Fleet is the pods' engine calibration.
	Fleet FleetJSON `json:"fleet"`
	// PodCapacityRPS is one saturated pod's completions/s, by workload.
	PodCapacityRPS map[string]float64 `json:"pod_capacity_rps"`
	Scenarios      []ScenarioResult   `json:"scenarios"`
	Notes          []string           `json:"notes,omitempty"`
}

// FleetJSON describes the pods' engines.
type FleetJSON struct {
	MaxNumSeqs int     `json:"max_num_seqs"`
	Slowdown   float64 `json:"time_scale"`
}

// ParamsJSON is Params with units in the names.
type ParamsJSON struct {
	RTTUs           float64 `json:"rtt_us"`
	ProbeServiceUs  float64 `json:"probe_service_median_us"`
	ProbeSigma      float64 `json:"probe_service_sigma"`
	ProbeTailP      float64 `json:"probe_tail_p"`
	ProbeTailMs     float64 `json:"probe_tail_ms"`
	ScrapeRenderMs  float64 `json:"scrape_render_ms"`
	ScrapeBytes     int     `json:"scrape_bytes"`
	ProbeBytes      int     `json:"probe_bytes"`
	ORCABytes       int     `json:"orca_bytes"`
	StreamShare     float64 `json:"stream_share"`
	ProxyOverheadUs float64 `json:"proxy_overhead_us"`
	RelayUs         float64 `json:"relay_us"`
	StuckProbePods  int     `json:"stuck_probe_pods,omitempty"`
	StuckProbeMs    float64 `json:"stuck_probe_delay_ms,omitempty"`
}

func paramsJSON(p Params) ParamsJSON {
	us := func(d interface{ Microseconds() int64 }) float64 { return float64(d.Microseconds()) }
	j := ParamsJSON{
		RTTUs: us(p.RTT), ProbeServiceUs: us(p.ProbeService), ProbeSigma: p.ProbeSigma,
		ProbeTailP: p.ProbeTailP, ProbeTailMs: us(p.ProbeTail) / 1000, ScrapeRenderMs: us(p.ScrapeRender) / 1000,
		ScrapeBytes: p.ScrapeBytes, ProbeBytes: p.ProbeBytes, ORCABytes: p.ORCABytes, StreamShare: p.StreamShare,
		ProxyOverheadUs: us(p.ProxyOverhead), RelayUs: us(p.Relay),
	}
	if p.StuckProbePods > 0 {
		j.StuckProbePods, j.StuckProbeMs = p.StuckProbePods, us(p.StuckProbeDelay)/1000
	}
	return j
}

// ScenarioResult is one (workload, pods, replicas, load) point.
type ScenarioResult struct {
	Name       string           `json:"name"`
	Params     ScenarioParams   `json:"params"`
	Strategies []StrategyResult `json:"strategies"`
}

// ScenarioParams are a scenario's parameters.
type ScenarioParams struct {
	Workload  string  `json:"workload"`
	Pods      int     `json:"pods"`
	Replicas  int     `json:"replicas"`
	Load      float64 `json:"load"`
	RateRPS   float64 `json:"rate_rps"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	Arrivals  string  `json:"arrivals"`
}

// StrategyResult is one strategy's run in a scenario.
type StrategyResult struct {
	Name string `json:"name"`
	*RunMetrics
	// TTFTP99RatioToOracle is this run's p99 TTFT over the oracle's in the
	// same scenario (0 when the oracle did not run).
	TTFTP99RatioToOracle float64 `json:"ttft_p99_ratio_to_oracle"`
}

// find returns the strategy named s, or nil.
func (sc *ScenarioResult) find(s string) *StrategyResult {
	for i := range sc.Strategies {
		if sc.Strategies[i].Name == s {
			return &sc.Strategies[i]
		}
	}
	return nil
}

// writeJSON writes v indented to dir/name.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

// WriteAll writes results.json, timing.json, report.md and the plots to dir.
func WriteAll(r *Results, timings []Timing, dir string) error {
	if err := writeJSON(dir, "results.json", r); err != nil {
		return err
	}
	if err := writeJSON(dir, "timing.json", timings); err != nil {
		return err
	}
	if err := WriteReport(r, timings, dir); err != nil {
		return err
	}
	return WritePlots(r, dir)
}
