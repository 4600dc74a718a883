package config

import (
	"slices"
	"time"
)

// Route policies (route.policy).
const (
	PolicyProbe         = "probe"
	PolicyCached        = "cached"
	PolicyLeastInflight = "least_inflight"
	PolicyRoundRobin    = "round_robin"
	PolicyRandom        = "random"
)

// Probe endpoints (probe.endpoint).
const (
	EndpointMetrics = "metrics" // vLLM's Prometheus /metrics
	EndpointLoad    = "load"    // vLLM's JSON /load
)

// MaxD bounds route.d and probe.hedges: the router keeps its per-request
// scratch space in fixed arrays of this size, so a decision never
// allocates. Sampling more than 64 candidates per request would defeat
// power-of-d anyway (probing cost grows with d, the gain stops at 2-3).
const MaxD = 64

// HedgeAuto is the probe.hedge_after value that lets the prober choose the
// hedge delay from observed probe latency.
const HedgeAuto = "auto"

var policies = []string{PolicyProbe, PolicyCached, PolicyLeastInflight, PolicyRoundRobin, PolicyRandom}

// Policies returns the valid route.policy values, in documentation order, as
// a new slice.
func Policies() []string { return slices.Clone(policies) }

// HedgeDelay interprets probe.hedge_after (it cannot be named HedgeAfter:
// that is the field). auto is true for "auto" (d is then
// 0 and the prober picks the delay); otherwise d is the fixed delay. On a
// Probe that has not passed Validate, an unparsable value yields (0, false).
func (p Probe) HedgeDelay() (d time.Duration, auto bool) {
	if p.HedgeAfter == HedgeAuto {
		return 0, true
	}
	d, err := time.ParseDuration(p.HedgeAfter)
	if err != nil {
		return 0, false
	}
	return d, false
}

// QuorumFor returns how many probe answers end probing when d candidates are
// sampled: probe.quorum if set, else d-1, and never less than 1.
func (p Probe) QuorumFor(d int) int {
	if p.Quorum > 0 {
		return p.Quorum
	}
	return max(1, d-1)
}
