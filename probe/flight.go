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
// The probe runs under the flight's own context (the flight itself: it
// ends at the flight's deadline, not with any single waiter), so a waiter
// that leaves does not cut the answer others wait for. When the last waiter
// leaves before the answer, the probe is cancelled; if that waiter left
// because its quorum was met, a probe that then ends without an answer is
// counted as OutcomeCancelled, not as a timeout.
//
// The flight lands at the latest at its deadline: its one timer delivers a
// timeout to every waiter then, whether or not the Fetcher has returned (a
// Fetcher like fasthttp's cannot be interrupted; its late answer is still
// Reported by fly). So a waiter whose own deadline is not before the
// flight's needs no timer of its own to stop waiting in time.
//
// A flight is safe for concurrent use. mu guards the fields below it. The
// results are sent while mu is held: every subscribed channel is buffered
// for all the answers its Run can receive, so a send never blocks, and once
// leave has returned no answer can still be sent to the waiter that left
// (which lets a Run recycle its channel).
type flight struct {
	state    *State      // the backend probed
	deadline time.Time   // immutable; the probe's context deadline
	timer    *time.Timer // ends the context at deadline (expire)

	// background: sent for a backend whose probes are slow, with no
	// waiter (Prober.refresh); it runs to its answer or its deadline even
	// when the waiters that joined it leave.
	background bool

	mu        sync.Mutex
	subs      []chan<- int // the result channels of the waiters that have not left
	waiting   int          // waiters that have not left (len(subs) before landing)
	landed    bool         // the waiters were given the result (or the timeout)
	abandoned bool         // the last waiter left with its quorum met
	err       error        // the context's error once it ended
	done      chan struct{}
	subsBuf   [4]chan<- int
}

var _ context.Context = (*flight)(nil)

// closedDone is the Done channel of a flight whose context ended before
// anyone asked for its Done channel.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newFlight returns a flight to s with one waiter (the Run that starts it,
// whose result channel is results), or none when results is nil (a
// background flight), that ends at deadline, which must be after now: its
// timer fires d from now (d = deadline - now; the caller has both, so no
// clock is read here).
func newFlight(s *State, deadline time.Time, d time.Duration, results chan<- int) *flight {
	f := &flight{state: s, deadline: deadline}
	if results != nil {
		f.waiting = 1
		f.subs = append(f.subsBuf[:0], results)
	} else {
		f.background = true
	}
	f.timer = time.AfterFunc(d, f.expire)
	return f
}

// drop ends a flight that was never shared (it lost the race to be the
// backend's flight) and that nobody waits for.
func (f *flight) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end(context.Canceled)
	f.timer.Stop()
}

// Deadline implements context.Context.
func (f *flight) Deadline() (time.Time, bool) { return f.deadline, true }

// Done implements context.Context. The channel is made on first use: the
// HTTP fetcher never asks for it.
func (f *flight) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		if f.err != nil {
			return closedDone
		}
		f.done = make(chan struct{})
	}
	return f.done
}

// Err implements context.Context: context.DeadlineExceeded after the
// deadline, context.Canceled after the last waiter left, else nil.
func (f *flight) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Value implements context.Context: a flight carries no values (no
// request's context is its parent).
func (f *flight) Value(any) any { return nil }

// end ends the context with err; mu must be held.
func (f *flight) end(err error) {
	if f.err != nil {
		return
	}
	f.err = err
	if f.done != nil {
		close(f.done)
	}
}

// expire runs at the deadline: the context ends, the waiters still there
// are given a timeout (the probe itself may answer later, then fly still
// Reports it) and the backend is marked slow (see Prober.Run).
func (f *flight) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end(context.DeadlineExceeded)
	f.deliver(probeTimeout)
	f.state.markSlow(f.deadline)
}

// deliver sends r to every waiter once; mu must be held.
func (f *flight) deliver(r int) {
	if f.landed {
		return
	}
	f.landed = true
	for i, c := range f.subs {
		c <- r // buffered: never blocks
		f.subs[i] = nil
	}
	f.subs = nil
}

// join subscribes results to the flight's answer. It returns false when
// the flight has landed or was abandoned: the caller must start its own.
func (f *flight) join(results chan<- int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.landed || (f.waiting == 0 && !f.background) {
		return false
	}
	f.waiting++
	f.subs = append(f.subs, results)
	return true
}

// leave records that the waiter with channel results stopped waiting
// before the answer (satisfied: its quorum was met elsewhere; otherwise
// its own deadline or its caller's context ended) and unsubscribes it: no
// result is sent to results after leave returns. The last one to leave
// cancels the probe, unless it is a background flight. Leaving a landed
// flight does nothing (its result is already in results).
func (f *flight) leave(results chan<- int, satisfied bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.landed {
		return
	}
	for i, c := range f.subs {
		if c == results {
			last := len(f.subs) - 1
			f.subs[i], f.subs[last] = f.subs[last], nil
			f.subs = f.subs[:last]
			break
		}
	}
	f.waiting--
	if f.waiting == 0 && !f.background {
		f.abandoned = satisfied
		f.end(context.Canceled)
		f.timer.Stop()
	}
}

// land delivers the probe's result r to the waiters still there (unless
// the deadline already gave them a timeout), ends the context and reports
// whether the flight had been abandoned by waiters whose quorum was met.
// After land, join fails and leave does nothing.
func (f *flight) land(r int) (abandoned bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliver(r)
	f.end(context.Canceled)
	f.timer.Stop()
	return f.abandoned
}
