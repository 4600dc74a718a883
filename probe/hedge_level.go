package probe

import (
	"math"
	"sync"
)

// The hedge level: which quantile of one probe's round trip a Run should
// hedge at, given how many answers it waits for.
//
// A Run hedges when its quorum has not answered by the hedge delay. When it
// waits for need answers out of waiting probes in flight, that is when the
// need-th fastest of the waiting round trips exceeds the delay: the need-th
// order statistic, not one round trip. Hedging at the per-probe quantile q
// would hedge more often than 1-q: waiting for both of two probes (the
// default d=2 with quorum 2), 1-q^2, about 10% of the waits for q = 0.95
// instead of 5%. The level p returned here is the per-probe quantile whose
// delay that order statistic exceeds with probability 1-q, when round trips
// are independent and identically distributed: the p with
//
//	P(at least need of waiting probes answered) = P(Binomial(waiting, p) >= need) = q.
//
// For need = waiting it is q^(1/waiting) (0.975 for q = 0.95 and two
// probes); for need = 1, 1-(1-q)^(1/waiting).

// hedgeLevelTable bounds the waits whose levels are precomputed for the
// package's hedgeQuantile (the same bound as maxWaits): a Run waiting on more
// computes its level when it needs it.
const hedgeLevelTable = maxWaits

// HedgeLevel returns the per-probe round-trip quantile p at which a Run that
// waits for need answers out of waiting independent probes hedges with
// probability 1-q: the p with P(Binomial(waiting, p) >= need) = q. need is
// clamped to [1, waiting] (a Run that needs more answers than it has probes
// in flight hedges at the level of waiting for all of them); waiting < 1
// returns q; q is clamped to [0, 1]. It is pure and allocation-free.
func HedgeLevel(waiting, need int, q float64) float64 {
	q = min(max(q, 0), 1)
	if waiting < 1 || q == 0 || q == 1 {
		return q
	}
	need = min(max(need, 1), waiting)
	switch need {
	case waiting:
		return math.Pow(q, 1/float64(waiting))
	case 1:
		return 1 - math.Pow(1-q, 1/float64(waiting))
	}
	// atLeast(p) grows with p from 0 to 1: bisect to below float64's
	// resolution of the quantiles that matter (2^-50).
	lo, hi := 0.0, 1.0
	for range 50 {
		mid := (lo + hi) / 2
		if binomialAtLeast(waiting, need, mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// binomialAtLeast returns P(Binomial(n, p) >= k) for 0 < p < 1, summing the
// probability mass function by its recurrence (no factorials: exact enough
// for the n <= 64 probes a Run can wait on).
func binomialAtLeast(n, k int, p float64) float64 {
	pmf := math.Pow(1-p, float64(n)) // P(X = 0)
	ratio := p / (1 - p)
	below := 0.0
	for j := range k {
		below += pmf
		pmf *= float64(n-j) / float64(j+1) * ratio
	}
	return 1 - below
}

// hedgeLevels holds HedgeLevel(waiting, need, hedgeQuantile) for waiting and
// need in [1, hedgeLevelTable], computed once, on first use (about 0.3 ms
// on a 2-core Xeon VM), so that a Run's hedge delay is a table read.
var hedgeLevels = sync.OnceValue(func() *[hedgeLevelTable + 1][hedgeLevelTable + 1]float64 {
	var t [hedgeLevelTable + 1][hedgeLevelTable + 1]float64
	for w := 1; w <= hedgeLevelTable; w++ {
		for n := 1; n <= w; n++ {
			t[w][n] = HedgeLevel(w, n, hedgeQuantile)
		}
	}
	return &t
})

// hedgeLevel is HedgeLevel(waiting, need, hedgeQuantile), from the table
// when it is there.
func hedgeLevel(waiting, need int) float64 {
	waiting = max(waiting, 1)
	need = min(max(need, 1), waiting)
	if waiting <= hedgeLevelTable {
		return hedgeLevels()[waiting][need]
	}
	return HedgeLevel(waiting, need, hedgeQuantile)
}
