package probe

import (
	"slices"
	"sync/atomic"
	"time"
)

// Parameters of the auto hedge estimator.
const (
	hedgeRing      = 128                    // round trips remembered
	hedgeEvery     = 16                     // re-sort the snapshot every this many samples
	hedgeMinSample = 16                     // below this, use the cold-start value
	hedgeFloor     = 200 * time.Microsecond // never hedge earlier than this
	// hedgeQuantile is the share of waits that should not hedge (The Tail
	// at Scale: ~5% extra probes). It is a quantile of the wait for the
	// quorum, not of one probe: see hedge_level.go.
	hedgeQuantile = 0.95
)

// hedgeEstimator derives "auto" hedge_after from recent probe round trips.
// A Run that waits for need answers out of waiting probes hedges after the
// per-probe quantile hedgeLevel(waiting, need) of the last hedgeRing
// successful round trips, so that about 5% of waits hedge whatever the
// quorum: the p95 of one round trip for a Run waiting on one probe, the
// p97.5 for a Run waiting for both of two (the default d=2, quorum 2). The
// delay is clamped to [min(hedgeFloor, deadline), deadline]; before
// hedgeMinSample samples it is half the deadline.
//
// It is lock-free: Observe writes into a ring of atomics and, every
// hedgeEvery samples, the goroutine that crosses the boundary sorts a copy
// of the ring (128 values, about a microsecond) and publishes it into a
// sorted snapshot of atomics; HedgeAfterFor reads one snapshot slot. A
// re-sort may read a ring slot being overwritten, and a reader may see a
// snapshot half rewritten by a re-sort; every value it can read is a recent
// round trip, which the estimate tolerates.
type hedgeEstimator struct {
	deadline time.Duration
	next     atomic.Uint64 // total samples observed; next slot = next % hedgeRing
	ring     [hedgeRing]atomic.Int64
	sorted   [hedgeRing]atomic.Int64 // the published snapshot, ascending, in ns
	size     atomic.Int64            // samples in sorted; 0 until hedgeMinSample
}

func newHedgeEstimator(deadline time.Duration) *hedgeEstimator {
	return &hedgeEstimator{deadline: deadline}
}

func (e *hedgeEstimator) clamp(d time.Duration) time.Duration {
	return min(max(d, min(hedgeFloor, e.deadline)), e.deadline)
}

// Observe records the round trip of a probe that answered.
func (e *hedgeEstimator) Observe(rtt time.Duration) {
	n := e.next.Add(1)
	e.ring[(n-1)%hedgeRing].Store(int64(rtt))
	if n < hedgeMinSample || n%hedgeEvery != 0 {
		return
	}
	var buf [hedgeRing]int64
	k := int(min(n, hedgeRing))
	for i := range k {
		buf[i] = e.ring[i].Load()
	}
	s := buf[:k]
	slices.Sort(s)
	for i, v := range s {
		e.sorted[i].Store(v)
	}
	e.size.Store(int64(k))
}

// HedgeAfterFor returns the hedge delay of a Run waiting for need answers
// out of waiting probes in flight: the hedgeLevel(waiting, need) quantile of
// the snapshot, clamped.
func (e *hedgeEstimator) HedgeAfterFor(waiting, need int) time.Duration {
	k := int(e.size.Load())
	if k == 0 {
		return e.clamp(e.deadline / 2) // cold start
	}
	return e.clamp(time.Duration(e.sorted[quantileRank(hedgeLevel(waiting, need), k)].Load()))
}

// HedgeAfter returns the hedge delay of a Run waiting on one probe (the
// p95 of one round trip).
func (e *hedgeEstimator) HedgeAfter() time.Duration { return e.HedgeAfterFor(1, 1) }

// quantileRank returns the index, in k ascending samples, of the estimate
// of quantile p: the j-th smallest with j = p(k+1) rounded (the j-th of k
// samples sits at quantile j/(k+1) on average), clamped to the samples.
func quantileRank(p float64, k int) int {
	j := int(p*float64(k+1) + 0.5)
	return min(max(j-1, 0), k-1)
}
