package probe

import "time"

// This file exports, unchanged, the pieces of the scraper's and the prober's
// logic that a virtual-time simulator (bench/fleetsim) drives without
// goroutines or timers: the adaptive scrape rule, the auto hedge
// estimator and the thresholds of the prober's skip rules. The production
// loops call the unexported forms directly.

// NextInterval is the adaptive scrape rule of the Scraper (see
// nextInterval): the next interval after cur when the dispatch rate to the
// backend, averaged as the Scraper averages it (UpdateRate), is rate
// requests/s. c should come from ScrapeConfigFrom of a validated configuration.
func (c ScrapeConfig) NextInterval(cur time.Duration, rate float64) time.Duration {
	return c.nextInterval(cur, max(rate, 0))
}

// UpdateRate is the Scraper's average of the dispatch rate: the rate r
// measured over the last scrape period, averaged with weight 1/2 into the
// previous average prev (negative before the first period).
func UpdateRate(prev, r float64) float64 {
	if prev < 0 {
		return r
	}
	return (prev + r) / 2
}

// HedgeEstimator is the Prober's auto hedge_after estimator (see
// hedgeEstimator): for a Run waiting for need answers out of waiting probes,
// the HedgeLevel(waiting, need, 0.95) quantile of recent probe round trips
// (the p95 for one probe, about the p97.5 for both of two), clamped to
// [200µs, deadline], half the deadline until enough samples. It is safe for
// concurrent use.
type HedgeEstimator struct{ e *hedgeEstimator }

// NewHedgeEstimator returns the estimator of a Prober with this deadline.
func NewHedgeEstimator(deadline time.Duration) *HedgeEstimator {
	return &HedgeEstimator{e: newHedgeEstimator(deadline)}
}

// Observe records the round trip of a probe that answered.
func (h *HedgeEstimator) Observe(rtt time.Duration) { h.e.Observe(rtt) }

// HedgeAfter returns the current estimate for a Run waiting on one probe.
func (h *HedgeEstimator) HedgeAfter() time.Duration { return h.e.HedgeAfter() }

// HedgeAfterFor returns the current estimate for a Run waiting for need
// answers out of waiting probes in flight, as Prober.Run uses it.
func (h *HedgeEstimator) HedgeAfterFor(waiting, need int) time.Duration {
	return h.e.HedgeAfterFor(waiting, need)
}

// RecentFor is the age below which Run uses a candidate's report that is
// no longer fresh (older than FreshFor) without waiting for a probe, and
// refreshes it with a probe no Run waits for (stale-while-revalidate,
// OutcomeSkippedRecent): twice FreshFor.
func (c ProberConfig) RecentFor() time.Duration { return c.recentFor() }

// SlowHold is how long after a probe of a backend missed its deadline Runs
// do not wait for that backend (OutcomeSkippedSlow), unless a probe answers
// in time first.
const SlowHold = slowHold
