package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Results is results.json: DESIGN.md's schema, extended (never renamed).
type Results struct {
	Seed      int64            `json:"seed"`
	Seeds     []int64          `json:"seeds"`
	Quick     bool             `json:"quick"`
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Machine   Machine          `json:"machine"`
	Fleet     FleetInfo        `json:"fleet"`
	Scenarios []ScenarioResult `json:"scenarios"`
	Overhead  *OverheadResult  `json:"overhead,omitempty"`
	Notes     []string         `json:"notes,omitempty"`
}

// FleetInfo describes the simulated fleet and its measured capacity.
type FleetInfo struct {
	Servers     int     `json:"servers"`
	MaxNumSeqs  int     `json:"max_num_seqs"`
	TimeScale   float64 `json:"time_scale"`
	CapacityRPS float64 `json:"capacity_rps"`
	// Sizes is -sizes (the size distribution of steady, spike, replicas).
	Sizes string `json:"sizes,omitempty"`
	// CapacityBySizes is the capacity measured for each size distribution
	// used (uniform for the other scenarios); CapacityRPS is the one of
	// Sizes when measured, else the uniform one.
	CapacityBySizes map[string]float64 `json:"capacity_rps_by_sizes,omitempty"`
}

// ScenarioResult is one scenario (one load level or replica count).
type ScenarioResult struct {
	Name       string           `json:"name"`
	Params     map[string]any   `json:"params"`
	Strategies []StrategyResult `json:"strategies"`
}

// StrategyResult is one strategy's figures in one scenario, pooled over
// seeds. Latencies count requests sent through the proxies only (requests
// of the external scenario that bypass them are in Direct).
type StrategyResult struct {
	Name             string    `json:"name"`
	Requests         int       `json:"requests"`
	Errors           int       `json:"errors"`
	AchievedRPS      float64   `json:"achieved_rps"`
	OfferedRPS       float64   `json:"offered_rps"`
	TTFT             Quantiles `json:"ttft_ms"`
	E2E              Quantiles `json:"e2e_ms"`
	ITL              Quantiles `json:"itl_ms"`
	ProbesPerRequest float64   `json:"probes_per_request"`
	// ScrapesPerRequest is the background scrapes of every replica
	// (probegate_scrapes_total) per request; 0 for the policies that do
	// not scrape.
	ScrapesPerRequest float64 `json:"scrapes_per_request,omitempty"`
	FallbackRate      float64 `json:"fallback_rate"`
	// Imbalance is max-min over servers of the time-averaged queue
	// (running + waiting), averaged over seeds.
	Imbalance float64 `json:"imbalance"`
	// ImbalanceRequests is max-min of per-server request counts over the
	// mean count (0 = perfectly even), averaged over seeds.
	ImbalanceRequests float64            `json:"imbalance_requests"`
	AdapterLoads      *int64             `json:"adapter_loads,omitempty"`
	PrefixHitRate     *float64           `json:"prefix_hit_rate,omitempty"`
	Decisions         map[string]float64 `json:"decisions,omitempty"`
	Retries           float64            `json:"retries"`
	Preemptions       int64              `json:"preemptions"`
	ScheduleLagMs     Quantiles          `json:"schedule_lag_ms"`
	Behind            bool               `json:"generator_behind"`
	Seeds             int                `json:"seeds"`
	TTFTP99BySeed     []float64          `json:"ttft_p99_by_seed"`
	// LearnedSpeedRatio is the p10, p50 and p90, over 20 ms samples of
	// every proxy in every seed, of the proxy's learned time per prefill
	// token of the last server over the others' mean (RunResult.
	// SpeedRatios); absent when never learned.
	LearnedSpeedRatio []float64 `json:"learned_speed_ratio_p10_p50_p90,omitempty"`
	// PodSpeedRatio is LearnedSpeedRatio for the pod-reported time per
	// prefill token (RunResult.PodSpeedRatios).
	PodSpeedRatio []float64     `json:"pod_speed_ratio_p10_p50_p90,omitempty"`
	Steps         []StepResult  `json:"steps,omitempty"`
	Direct        *DirectResult `json:"direct,omitempty"`
	ErrorSample   string        `json:"error_sample,omitempty"`

	ttftSamples []float64 // pooled TTFTs in ms, for the CDF plots (not in JSON)
}

// StepResult is one load step of the ramp scenario.
type StepResult struct {
	Load     float64   `json:"load"`
	Requests int       `json:"requests"`
	Errors   int       `json:"errors"`
	TTFT     Quantiles `json:"ttft_ms"`
}

// DirectResult summarizes requests that bypassed the proxies.
type DirectResult struct {
	Requests int       `json:"requests"`
	Errors   int       `json:"errors"`
	TTFT     Quantiles `json:"ttft_ms"`
}

// aggregate pools the runs of one strategy over seeds. schedDur is the
// length of the arrival schedule; stepLoads the ramp's loads (nil
// elsewhere).
func aggregate(name string, runs []*RunResult, schedDur time.Duration, offered float64, stepLoads []float64) StrategyResult {
	sr := StrategyResult{Name: name, Seeds: len(runs), OfferedRPS: round3(offered)}
	var ttft, e2e, itl, lag, dttft []time.Duration
	var ps ProxyStats
	sent, ok, cancelled := 0, 0, 0
	var imb, imbReq float64
	var adapters, pq, ph int64
	steps := make([]struct {
		ttft []time.Duration
		n, e int
	}, len(stepLoads))
	var derr, dn int
	var ratios, podRatios []float64
	for _, rr := range runs {
		ratios = append(ratios, rr.SpeedRatios...)
		podRatios = append(podRatios, rr.PodSpeedRatios...)
		var seedTTFT []time.Duration
		for i := range rr.Outcomes {
			o := &rr.Outcomes[i]
			if o.Err == errNotSent {
				cancelled++
			} else {
				sent++
				lag = append(lag, o.Lag)
			}
			if o.Direct {
				dn++
				if o.OK() {
					dttft = append(dttft, o.TTFT)
				} else {
					derr++
				}
				continue
			}
			sr.Requests++
			if o.Step < len(steps) {
				steps[o.Step].n++
			}
			if !o.OK() {
				sr.Errors++
				if sr.ErrorSample == "" {
					sr.ErrorSample = o.Err
				}
				if o.Step < len(steps) {
					steps[o.Step].e++
				}
				continue
			}
			ok++
			ttft = append(ttft, o.TTFT)
			seedTTFT = append(seedTTFT, o.TTFT)
			e2e = append(e2e, o.E2E)
			itl = append(itl, o.ITLs...)
			if o.Step < len(steps) {
				steps[o.Step].ttft = append(steps[o.Step].ttft, o.TTFT)
			}
		}
		sr.TTFTP99BySeed = append(sr.TTFTP99BySeed, quantilesMs(seedTTFT, false).P99)
		ps.Add(rr.Proxy)
		imb += spread(rr.AvgQueue)
		var counts []float64
		mean := 0.0
		for _, c := range rr.PerServer {
			counts = append(counts, float64(c))
			mean += float64(c)
		}
		if len(counts) > 0 && mean > 0 {
			mean /= float64(len(counts))
			imbReq += spread(counts) / mean
		}
		adapters += rr.AdapterLds
		pq += rr.PrefixQ
		ph += rr.PrefixH
		sr.Preemptions += rr.Preempt
	}
	n := float64(max(len(runs), 1))
	if len(ratios) > 0 {
		for _, q := range []float64{10, 50, 90} {
			sr.LearnedSpeedRatio = append(sr.LearnedSpeedRatio, round3(Percentile(ratios, q)))
		}
	}
	if len(podRatios) > 0 {
		for _, q := range []float64{10, 50, 90} {
			sr.PodSpeedRatio = append(sr.PodSpeedRatio, round3(Percentile(podRatios, q)))
		}
	}
	sr.TTFT = quantilesMs(ttft, true)
	for _, d := range ttft {
		sr.ttftSamples = append(sr.ttftSamples, float64(d)/1e6)
	}
	sr.E2E = quantilesMs(e2e, false)
	sr.ITL = quantilesMs(itl, false)
	sr.ScheduleLagMs = quantilesMs(lag, true)
	lagMax := 0.0
	if len(lag) > 0 {
		lagMax = float64(slices.Max(lag)) / 1e6
	}
	sr.AchievedRPS = round3(float64(sent) / n / schedDur.Seconds())
	// The generator is behind when its sends slipped noticeably against the
	// schedule (p99 over 20 ms, or one over 200 ms), or it could not send all.
	sr.Behind = sr.ScheduleLagMs.P99 > 20 || lagMax > 200 || cancelled > 0
	sr.Imbalance = round3(imb / n)
	sr.ImbalanceRequests = round3(imbReq / n)
	if dec := ps.DecisionTotal(); dec > 0 {
		sr.Decisions = ps.Decisions
		switch {
		case isProbe(name):
			sr.FallbackRate = round3((dec - ps.Decisions["probe"]) / dec)
		case name == Cached || name == CachedAdaptive:
			sr.FallbackRate = round3(ps.Decisions["local"] / dec)
		}
	}
	if sr.Requests > 0 {
		sr.ProbesPerRequest = round3(ps.ProbesSent() / float64(sr.Requests))
		sr.ScrapesPerRequest = round3(ps.Scrapes / float64(sr.Requests))
	}
	sr.Retries = ps.Retries
	if adapters > 0 {
		sr.AdapterLoads = &adapters
	}
	if pq > 0 {
		r := round3(float64(ph) / float64(pq))
		sr.PrefixHitRate = &r
	}
	for i, st := range steps {
		sr.Steps = append(sr.Steps, StepResult{Load: stepLoads[i], Requests: st.n, Errors: st.e, TTFT: quantilesMs(st.ttft, false)})
	}
	if dn > 0 {
		sr.Direct = &DirectResult{Requests: dn, Errors: derr, TTFT: quantilesMs(dttft, false)}
	}
	return sr
}

func spread(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs) - slices.Min(xs)
}

// WriteJSON writes r to dir/results.json.
func (r *Results) WriteJSON(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
}
