package fleetsim

import (
	"math"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/probe"
)

// herdWindow is the width of the herd index's windows.
const herdWindow = 100 * time.Millisecond

// RunMetrics are one run's measurements, from requests that arrived after
// the warmup (pod-side costs: over the measured arrival period).
type RunMetrics struct {
	Requests    int             `json:"requests"`
	Errors      int             `json:"errors"`
	OfferedRPS  float64         `json:"offered_rps"`
	AchievedRPS float64         `json:"achieved_rps"`
	TTFT        bench.Quantiles `json:"ttft_ms"`
	E2E         bench.Quantiles `json:"e2e_ms"`
	// ProbesPerRequest counts every probe sent (hedges included) per routed
	// request; FallbackRate is the share of decisions not made on a probe
	// answer (probe strategies only).
	ProbesPerRequest float64 `json:"probes_per_request"`
	FallbackRate     float64 `json:"fallback_rate"`
	// SkippedRecentPerRequest and SkippedSlowPerRequest count, per routed
	// request, the candidates and spares a Run did not wait for because
	// their report was recent (stale-while-revalidate) or their probes
	// slow; CoalescedPerRequest the probes in flight a Run joined instead
	// of sending its own (probe strategies only).
	SkippedRecentPerRequest float64 `json:"skipped_recent_per_request"`
	SkippedSlowPerRequest   float64 `json:"skipped_slow_per_request"`
	CoalescedPerRequest     float64 `json:"coalesced_per_request"`
	// DecisionWait is the time each measured request's routing decision
	// waited for probes (0 for policies that do not probe).
	DecisionWait bench.Quantiles `json:"decision_wait_ms"`
	// Imbalance is max-min of per-pod request counts over the mean.
	Imbalance float64 `json:"imbalance_requests"`
	// HerdIndex is the largest, over 100 ms windows, of the most requests
	// landing on one pod divided by the window's fair share (requests in the
	// window / pods); HerdMean is its mean over windows. A uniform random
	// split has a herd index of a few at these sizes; herding shows as a
	// multiple of the oracle's.
	HerdIndex float64 `json:"herd_index"`
	HerdMean  float64 `json:"herd_index_mean"`
	// Pod-side cost: load-report requests (and bytes) each pod receives per
	// second, averaged over pods.
	PodProbesPerS      float64 `json:"pod_probes_per_s"`
	PodScrapesPerS     float64 `json:"pod_scrapes_per_s"`
	PodProbeBytesPerS  float64 `json:"pod_probe_bytes_per_s"`
	PodScrapeBytesPerS float64 `json:"pod_scrape_bytes_per_s"`
	PodORCABytesPerS   float64 `json:"pod_orca_bytes_per_s"`
	QPSPerPod          float64 `json:"qps_per_pod"`
	// Decisions counts routing decisions by deciding source.
	Decisions map[string]int64 `json:"decisions"`
	// Probes counts probe outcomes as probegate_probes_total does.
	Probes map[string]int64 `json:"probes,omitempty"`
	// Events is the number of simulation events fired.
	Events int64 `json:"events"`
}

// metrics collects a run's samples.
type metrics struct {
	warmup    time.Duration
	ttft, e2e []float64 // ms
	wait      []float64 // ms
	errors    int
	perPod    []int64
	herdMax   float64
	herdSum   float64
	herdN     int
	winTotal  int64
	events    int64
}

func newMetrics(s *sim) *metrics {
	n := int(s.cfg.Rate * s.cfg.Duration.Seconds() * 1.1)
	return &metrics{warmup: s.cfg.Warmup, ttft: make([]float64, 0, n), e2e: make([]float64, 0, n), wait: make([]float64, 0, n), perPod: make([]int64, len(s.pods))}
}

func (m *metrics) measured(r *request) bool { return r.sent >= m.warmup }

func (m *metrics) failed(r *request) {
	if m.measured(r) {
		m.errors++
	}
}

// landed counts a request sent to pod now, for the herd index.
func (m *metrics) landed(pod int32, now time.Duration) {
	m.winTotal++
	if now >= m.warmup {
		m.perPod[pod]++
	}
}

func (m *metrics) done(r *request, e2e time.Duration) {
	if !m.measured(r) {
		return
	}
	m.ttft = append(m.ttft, ms(r.ttft))
	m.e2e = append(m.e2e, ms(e2e))
	m.wait = append(m.wait, ms(r.wait))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// closeWindow ends a herd window: the busiest pod's arrivals over the fair
// share. Arrivals are counted where the replica sent them (pod.window).
func (m *metrics) closeWindow(s *sim) {
	var top int32
	for _, p := range s.pods {
		top = max(top, p.window)
		p.window = 0
	}
	total := m.winTotal
	m.winTotal = 0
	if s.now <= m.warmup || total == 0 {
		return
	}
	h := float64(top) / (float64(total) / float64(len(s.pods)))
	m.herdMax = max(m.herdMax, h)
	m.herdSum += h
	m.herdN++
}

func (m *metrics) result(s *sim) *RunMetrics {
	measured := (s.cfg.Duration - s.cfg.Warmup).Seconds()
	r := &RunMetrics{
		Requests: len(m.ttft), Errors: m.errors,
		OfferedRPS: s.cfg.Rate,
		TTFT:       quantiles(m.ttft), E2E: quantiles(m.e2e), DecisionWait: quantiles(m.wait),
		HerdIndex: round(m.herdMax), Decisions: map[string]int64{}, Events: m.events,
	}
	if measured > 0 {
		r.AchievedRPS = round(float64(len(m.ttft)) / measured)
		r.QPSPerPod = round(float64(len(m.ttft)) / measured / float64(len(s.pods)))
	}
	if m.herdN > 0 {
		r.HerdMean = round(m.herdSum / float64(m.herdN))
	}
	var decisions, probeAnswered int64
	var ps probeStats
	for _, rep := range s.replicas {
		for src, n := range rep.decide {
			if n > 0 {
				r.Decisions[probe.Source(src).String()] += n
				decisions += n
			}
		}
		if rep.prober != nil {
			st := rep.prober.stats
			ps.Sent += st.Sent
			ps.OK += st.OK
			ps.Timeout += st.Timeout
			ps.Hedge += st.Hedge
			ps.SkippedFresh += st.SkippedFresh
			ps.Cancelled += st.Cancelled
			ps.Coalesced += st.Coalesced
			ps.SkippedRecent += st.SkippedRecent
			ps.SkippedSlow += st.SkippedSlow
			ps.Background += st.Background
		}
		probeAnswered += rep.decide[probe.SourceProbe]
	}
	if ps.Sent > 0 || ps.SkippedFresh > 0 {
		r.Probes = map[string]int64{"sent": ps.Sent, "ok": ps.OK, "timeout": ps.Timeout, "hedge": ps.Hedge, "skipped_fresh": ps.SkippedFresh, "cancelled": ps.Cancelled,
			"coalesced": ps.Coalesced, "skipped_recent": ps.SkippedRecent, "skipped_slow": ps.SkippedSlow, "background": ps.Background}
		if decisions > 0 {
			r.ProbesPerRequest = round(float64(ps.Sent) / float64(decisions))
			r.SkippedRecentPerRequest = round(float64(ps.SkippedRecent) / float64(decisions))
			r.SkippedSlowPerRequest = round(float64(ps.SkippedSlow) / float64(decisions))
			r.CoalescedPerRequest = round(float64(ps.Coalesced) / float64(decisions))
			r.FallbackRate = round(1 - float64(probeAnswered)/float64(decisions))
		}
	}
	var probes, scrapes, pb, sb, ob, lo, hi, sum int64
	lo = math.MaxInt64
	for i, p := range s.pods {
		probes += p.probes
		scrapes += p.scrapes
		pb += p.probeBytes
		sb += p.scrapeBytes
		ob += p.orcaBytes
		lo, hi = min(lo, m.perPod[i]), max(hi, m.perPod[i])
		sum += m.perPod[i]
	}
	if measured > 0 {
		per := measured * float64(len(s.pods))
		r.PodProbesPerS = round(float64(probes) / per)
		r.PodScrapesPerS = round(float64(scrapes) / per)
		r.PodProbeBytesPerS = round(float64(pb) / per)
		r.PodScrapeBytesPerS = round(float64(sb) / per)
		r.PodORCABytesPerS = round(float64(ob) / per)
	}
	if sum > 0 {
		r.Imbalance = round(float64(hi-lo) / (float64(sum) / float64(len(s.pods))))
	}
	return r
}

func quantiles(xs []float64) bench.Quantiles {
	if len(xs) == 0 {
		return bench.Quantiles{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return bench.Quantiles{
		P50: round(bench.Percentile(xs, 50)), P90: round(bench.Percentile(xs, 90)),
		P99: round(bench.Percentile(xs, 99)), P999: round(bench.Percentile(xs, 99.9)),
		Mean: round(sum / float64(len(xs))),
	}
}

// round keeps 4 significant decimals so results.json stays readable and
// stable.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }
