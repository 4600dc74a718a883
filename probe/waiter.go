package probe

import (
	"sync"
	"time"
)

// waiter is what one Run needs while it waits for probe answers: the
// channel the flights it waits on deliver to, the flights, and its one
// timer (hedge delay, then its own deadline). Waiters are recycled through
// their Prober's pool (per Prober, not global: a channel or timer made in
// a testing/synctest bubble must not serve another bubble), so a Run that waits allocates nothing: flight.leave
// guarantees that no answer reaches a channel after its Run left, and
// release drains the answers that landed before, so a recycled channel is
// empty.
type waiter struct {
	results  chan int
	waits    []*flight // flights joined or sent, in order
	deadline time.Time // the Run's own deadline (wall clock)
	// late: some flight in waits ends after deadline (a hedge, or another
	// Run's hedge joined), so the flights' own deadlines do not bound the
	// Run's wait: it arms its timer for its deadline.
	late    bool
	timer   *time.Timer // nil until first armed; stopped when released
	pool    *waiterPool // where to recycle it; nil: not recycled
	waitBuf [maxWaits]*flight
}

// waiterPool holds waiters whose results channel has room for maxWaits
// answers (every flight a Run can wait on with route.d + probe.hedges up
// to maxWaits).
type waiterPool struct{ p sync.Pool }

// get returns an empty waiter for a Run that waits on at most n flights.
func (wp *waiterPool) get(n int) *waiter {
	if n > maxWaits {
		w := &waiter{results: make(chan int, n)}
		w.waits = w.waitBuf[:0]
		return w
	}
	if w, ok := wp.p.Get().(*waiter); ok {
		return w
	}
	w := &waiter{results: make(chan int, maxWaits), pool: wp}
	w.waits = w.waitBuf[:0]
	return w
}

// add records that the Run waits on f.
func (w *waiter) add(f *flight) {
	w.waits = append(w.waits, f)
	if f.deadline.After(w.deadline) {
		w.late = true
	}
}

// arm sets the timer to fire d from now and returns its channel. Go's
// timers (1.23 on) deliver no stale value after Reset or Stop.
func (w *waiter) arm(d time.Duration) <-chan time.Time {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	return w.timer.C
}

// release leaves every flight that has not answered (satisfied: the Run's
// quorum was met), stops the timer, drains the answers that arrived after
// the Run stopped reading, and recycles w.
func (w *waiter) release(satisfied bool) {
	for i, f := range w.waits {
		f.leave(w.results, satisfied)
		w.waits[i] = nil
	}
	w.waits = w.waits[:0]
	if w.timer != nil {
		w.timer.Stop()
	}
	for len(w.results) > 0 {
		<-w.results
	}
	w.late = false
	w.deadline = time.Time{}
	if w.pool != nil {
		w.pool.p.Put(w)
	}
}
