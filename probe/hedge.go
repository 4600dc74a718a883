package probe

import (
	"slices"
	"sync/atomic"
	"time"
)

// Parameters of the auto hedge estimator.
const (
	hedgeRing      = 128                    // round trips remembered
	hedgeEvery     = 16                     // recompute the percentile every this many samples
	hedgeMinSample = 16                     // below this, use the cold-start value
	hedgeFloor     = 200 * time.Microsecond // never hedge earlier than this
	hedgeQuantile  = 0.95                   // The Tail at Scale: ~5% extra probes
)

// hedgeEstimator derives "auto" hedge_after from recent probe round trips:
// the 95th percentile of the last hedgeRing successful round trips, clamped
// to [min(hedgeFloor, deadline), deadline]. Hedging at p95 sends an extra
// probe for about 5% of the requests whose probes are slow, exactly the
// ones that would otherwise hit the deadline.
//
// It is lock-free: Observe writes into a ring of atomics and, every
// hedgeEvery samples, the goroutine that crosses the boundary recomputes the
// percentile (a sort of 128 values, about a microsecond) and publishes it
// with one atomic store. HedgeAfter is one atomic load. A recomputation may
// read a slot being overwritten concurrently; the estimate tolerates it.
type hedgeEstimator struct {
	deadline time.Duration
	next     atomic.Uint64 // total samples observed; next slot = next % hedgeRing
	ring     [hedgeRing]atomic.Int64
	current  atomic.Int64 // published estimate in ns
}

func newHedgeEstimator(deadline time.Duration) *hedgeEstimator {
	e := &hedgeEstimator{deadline: deadline}
	e.current.Store(int64(e.clamp(deadline / 2))) // cold start: half the deadline
	return e
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
	q := s[min(int(float64(k)*hedgeQuantile), k-1)]
	e.current.Store(int64(e.clamp(time.Duration(q))))
}

// HedgeAfter returns the current estimate.
func (e *hedgeEstimator) HedgeAfter() time.Duration { return time.Duration(e.current.Load()) }
