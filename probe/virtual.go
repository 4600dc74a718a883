package probe

import "time"

// This file exports, unchanged, the pieces of the scraper's and the prober's
// logic that a virtual-time simulator (bench/fleetsim) drives without
// goroutines or timers: the adaptive scrape rule (Pace; NextInterval and
// UpdateRate, its parts), the auto hedge
// estimator and the thresholds of the prober's skip rules. The production
// loops call the unexported forms directly.

// Pace is the adaptive scrape rule of one backend's scrape loop (see
// pace): a simulator keeps one per loop, as the Scraper does, and calls
// Next after each scrape. The zero value is not ready: use NewPace.
type Pace struct{ p pace }

// NewPace returns the rule's state of a loop under c that has not scraped
// yet, when this proxy has dispatched disp requests to the backend.
func NewPace(c ScrapeConfig, disp uint64) Pace { return Pace{p: newPace(c, disp)} }

// Next returns the interval until the next scrape, after a scrape that
// ended el after the previous one (the first: after the loop started),
// with this proxy's dispatch count disp and in-flight count inflight read
// when the answer arrived, and the answer's queue (Load.Queue; -1 for a
// failed scrape). c must be the configuration NewPace was given.
func (p *Pace) Next(c ScrapeConfig, el time.Duration, disp uint64, inflight, queue int) time.Duration {
	return p.p.next(c, el, disp, inflight, queue)
}

// Interval returns the interval Next last returned (the starting interval
// before the first call).
func (p *Pace) Interval() time.Duration { return p.p.interval }

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
