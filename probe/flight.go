package probe

import (
	"context"
	"sync"
	"time"
)

// flight is one probe in progress to one backend, shared by every Run that
// needs that backend's state while it is in the air: the first Run starts
// it (State.flight points at it until it lands), the others join it and
// wait for the same answer instead of sending their own probe (counted as
// OutcomeCoalesced). Each waiter still waits no longer than its own
// deadline.
//
// The probe runs under its own context (probe.deadline from its start), not
// under any single waiter's: a waiter that leaves does not cut the answer
// others wait for. When the last waiter leaves before the answer, the
// probe is cancelled; if that waiter left because its quorum was met, a
// probe that then ends without an answer is counted as OutcomeCancelled,
// not as a timeout.
//
// A flight is safe for concurrent use. mu guards the fields below it and
// is never held across I/O or a channel send that could block.
type flight struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	subs      []chan<- int // each waiter's result channel (buffered: never blocks)
	waiting   int          // waiters that have not left
	landed    bool         // the probe ended; subs were notified
	abandoned bool         // the last waiter left with its quorum met
	subsBuf   [4]chan<- int
}

// newFlight returns a flight with one waiter (the Run that starts it,
// whose result channel is results) and a context of its own that ends
// deadline from now (no request's context: none may cut it, and Fetchers
// read no values from it).
func newFlight(deadline time.Duration, results chan<- int) *flight {
	f := &flight{waiting: 1}
	f.ctx, f.cancel = context.WithTimeout(context.Background(), deadline)
	f.subs = append(f.subsBuf[:0], results)
	return f
}

// join subscribes results to the flight's answer. It returns false when
// the flight has landed or was abandoned: the caller must start its own.
func (f *flight) join(results chan<- int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.landed || f.waiting == 0 {
		return false
	}
	f.waiting++
	f.subs = append(f.subs, results)
	return true
}

// leave records that one waiter stopped waiting before the answer
// (satisfied: its quorum was met elsewhere; otherwise its own deadline or
// its caller's context ended). The last one to leave cancels the probe.
// Leaving a landed flight does nothing.
func (f *flight) leave(satisfied bool) {
	f.mu.Lock()
	if f.landed {
		f.mu.Unlock()
		return
	}
	f.waiting--
	last := f.waiting == 0
	if last {
		f.abandoned = satisfied
	}
	f.mu.Unlock()
	if last {
		f.cancel()
	}
}

// land delivers the probe's result r to every waiter, those that left
// included (their channels are buffered for it), releases the context and
// reports whether the flight had been abandoned by waiters whose quorum
// was met. After land, join fails and leave does nothing.
func (f *flight) land(r int) (abandoned bool) {
	f.mu.Lock()
	f.landed = true
	abandoned = f.abandoned
	subs := f.subs
	f.subs = nil
	f.mu.Unlock()
	for _, c := range subs {
		c <- r
	}
	f.cancel()
	return abandoned
}
