package config

import (
	"fmt"
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

// MaxRetries bounds upstream.retries: the handler remembers the backends it
// tried in a fixed array, and re-picking more than four times for a request
// that never left only delays its error.
const MaxRetries = 4

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
// that is the field); it is the one parser of that key, used by Validate
// and by the prober's conversion. auto is true for "auto" (d is then 0 and
// the prober picks the delay); otherwise d is the fixed delay. It fails on
// anything but "auto" or a duration >= 0.
func (p Probe) HedgeDelay() (d time.Duration, auto bool, err error) {
	if p.HedgeAfter == HedgeAuto {
		return 0, true, nil
	}
	d, err = time.ParseDuration(p.HedgeAfter)
	if err != nil || d < 0 {
		return 0, false, fmt.Errorf("must be a duration or %q, got %q", HedgeAuto, p.HedgeAfter)
	}
	return d, false, nil
}

// QuorumFor returns how many probe answers end probing when an explicit
// route.d of d candidates is sampled: probe.quorum if > 0, DefaultQuorum(d)
// for 0, and 2 for auto (QuorumAuto beside an explicit route.d). With
// route.d auto, use Config.Sampling, which applies the size rule.
func (p Probe) QuorumFor(d int) int {
	switch {
	case p.Quorum > 0:
		return p.Quorum
	case p.Quorum == QuorumAuto:
		return quorumBesideFixedD
	}
	return DefaultQuorum(d)
}

// DefaultQuorum is the quorum of probe.quorum 0 with d candidates: d-1,
// and never less than 1 (wait for all but the slowest candidate).
func DefaultQuorum(d int) int { return max(1, d-1) }
