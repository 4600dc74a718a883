package config

// The size-aware default of route.d and probe.quorum. Both keys default to
// auto: the probe policy then samples SmallPoolD candidates and waits for
// all of them in pools of fewer than LargePool backends, and LargePoolD
// (waiting for all of them) from LargePool backends up.
//
// The figures are in bench/HISTORY.md ("A size-aware d (session 3)", under
// session 3) and bench/results/2026-12-01/auto_d. The proxy cannot
// know how many replicas share the fleet, so the boundary is the smallest
// measured pool size at which d=4 with quorum 4 had a lower p99 TTFT than
// d=2 with quorum 2 at every replica count: 32 pods, live at 1, 4 and 8
// replicas (one replica: 5 of 6 seeds) and on the prefix-sharing bench, and
// in the fleet simulation at 1, 8 and 32 replicas in 18 of 18 long runs (36
// of 36 runs at 64-1,024 pods). At 16 pods it lost live with one replica,
// at 8 pods on the prefix-sharing bench, so small pools keep 2. d=4 with
// quorum 2 was worse than d=2 at 8-32 replicas: the quorum must follow d.
const (
	// DAuto is route.d's default: d from the pool's size (YAML 0 or auto).
	DAuto = 0
	// QuorumAuto is probe.quorum's default (YAML auto): the quorum of
	// route.d's rule when route.d is auto, else quorumBesideFixedD.
	// probe.quorum 0 keeps its documented meaning, d-1.
	QuorumAuto = -1

	// LargePool is the pool size (backends in the pool, eligible or not)
	// from which route.d auto samples LargePoolD candidates.
	LargePool = 32
	// SmallPoolD is route.d auto in pools of fewer than LargePool backends.
	SmallPoolD = 2
	// LargePoolD is route.d auto in pools of LargePool backends or more.
	LargePoolD = 4

	// quorumBesideFixedD is probe.quorum auto when route.d is set
	// explicitly: 2, the default before the rule, so that a configuration
	// that sets route.d keeps the quorum it had.
	quorumBesideFixedD = 2
)

// AutoSampling is the rule of route.d auto for policy over a pool of n
// backends: the number of candidates to sample and the quorum that goes
// with it (every candidate's answer). The rule was measured for the probe
// policy; the other policies that sample (least_inflight) keep SmallPoolD.
func AutoSampling(policy string, n int) (d, quorum int) {
	if policy == PolicyProbe && n >= LargePool {
		return LargePoolD, LargePoolD
	}
	return SmallPoolD, SmallPoolD
}

// Sampling returns the route.d and probe.quorum a proxy runs with over a
// pool of n backends: explicit values as they are (probe.quorum 0 = d-1,
// auto beside an explicit route.d = 2), auto ones from AutoSampling. Call
// it when the pool changes, not per request; c must be valid.
func (c *Config) Sampling(n int) (d, quorum int) {
	if c.Route.D != DAuto {
		return c.Route.D, c.Probe.QuorumFor(c.Route.D)
	}
	d, quorum = AutoSampling(c.Route.Policy, n)
	if c.Probe.Quorum != QuorumAuto {
		quorum = c.Probe.QuorumFor(d)
	}
	return d, quorum
}
