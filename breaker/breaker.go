// Package breaker answers "may we send to this backend at all?": one circuit
// breaker per backend.
//
// A breaker opens after breaker.consecutive_failures consecutive failures,
// rejects everything for breaker.open_for, then admits
// breaker.half_open_requests trial requests: if all succeed it closes, and
// the first failure reopens it; the caller's evidence that the backend
// works may also close it while a trial is under way
// (CloseOnTrialProgress). What counts as a failure is the caller's
// decision, reported once per admitted request as an Outcome: dial errors,
// 5xx and timeouts are Failure; 429 and a client's cancellation are Ignore,
// which counts neither way.
//
// The breaker keeps the shape of sony/gobreaker/v2's two-step breaker (Allow
// admits, the request reports its outcome once; an outcome from before the
// last state change is ignored) with its own small state machine, which it
// used to delegate to gobreaker: gobreaker reads time.Now internally and has
// no clock hook, so its open state could not follow the proxy's one clock
// (Options.Now), and Available could not be sure to agree with Allow. Here
// the clock given to New decides both.
//
// Allow and Ticket.Done are on every request's path, so they take no lock
// and do not allocate: see window for how. Only a state transition takes
// the breaker's mutex.
//
// The package imports no metrics library; the proxy observes transitions
// through the onChange hook given to New.
package breaker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// State is a breaker's state. Its values are those of the
// probegate_breaker_state metric.
type State int

// The breaker states.
const (
	Closed   State = 0 // requests flow; failures are counted
	HalfOpen State = 1 // a few trial requests decide whether to close or reopen
	Open     State = 2 // requests are rejected until open_for has passed
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Outcome is what an admitted request tells the breaker about its backend.
// The zero value is Ignore, so an unset outcome never counts.
type Outcome uint8

// The outcomes.
const (
	// Ignore counts as neither success nor failure: 429 (the backend is
	// healthy, just busy), a client that went away, a request abandoned
	// before it reached the backend. In half-open it frees the trial slot.
	Ignore Outcome = iota
	// Success resets the consecutive-failure count; in half-open, enough of
	// them close the breaker.
	Success
	// Failure is a dial error, a 5xx or a timeout: consecutive_failures of
	// them in a row open the breaker; one in half-open reopens it.
	Failure
)

// String returns "ignore", "success" or "failure".
func (o Outcome) String() string {
	switch o {
	case Ignore:
		return "ignore"
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// ErrOpen is wrapped by the error Allow returns when it rejects a request:
// the breaker is open, or half-open with all its trial slots taken. Test for
// it with errors.Is. A rejected request never reached the backend, so it may
// be re-picked.
var ErrOpen = errors.New("circuit breaker open")

// Breaker is the circuit breaker of one backend. All its methods are safe
// for concurrent use.
type Breaker struct {
	// Immutable after New.
	name      string
	cfg       config.Breaker
	threshold int64         // breaker.consecutive_failures
	trials    int64         // breaker.half_open_requests
	openFor   time.Duration // breaker.open_for
	now       func() time.Time
	epoch     time.Time // now() at New: the origin of every timestamp below
	onChange  func(name string, from, to State)
	errOpen   error // wraps ErrOpen; built once so rejections do not allocate
	errFull   error // wraps ErrOpen

	// cur is the current window. Read lock-free by everyone; replaced only
	// by transition, under mu.
	cur atomic.Pointer[window]

	// mu serializes transitions and guards the transition queue. It is
	// never held while calling onChange, nor by Allow or Done unless they
	// make a transition.
	mu sync.Mutex
	// Transitions not yet delivered to onChange. They are queued under mu
	// and delivered by flush once mu is released, so onChange can call
	// back into the breaker.
	hasPending atomic.Bool // fast-path hint: pending may be non-empty
	pending    []transition
	delivering bool
}

// window is one generation of a breaker: the state one transition entered
// and that state's counters. A transition never changes a window; it
// installs a new one (one small allocation per transition, none per
// request). A Ticket names the window its request was admitted in, so an
// outcome always lands in that window's counters: an outcome from before a
// transition moves only counters nobody consults any more, and can never
// count in the new window. A counter that reaches its limit asks for a
// transition away from its own window, which happens only if that window is
// still current (checked under the breaker's mutex), so each window is left
// exactly once whatever the number of goroutines racing to leave it.
//
// Per request, the closed state costs Allow one atomic load and Done one
// more (a success writes only when it ends a run of failures); the open
// state's rejection costs an atomic load and a clock read; half-open admits
// with a compare-and-swap on taken, which never exceeds the trial count.
type window struct {
	b         *Breaker
	state     State
	openUntil int64        // Open: the clock's time since epoch after which it may half-open
	failures  atomic.Int64 // Closed: consecutive failures
	taken     atomic.Int64 // HalfOpen: trial slots taken (admitted, not Ignored)
	successes atomic.Int64 // HalfOpen: successful trials
	trialAt   atomic.Int64 // HalfOpen: the clock's time since epoch of the first trial admitted; 0: none
}

type transition struct{ from, to State }

// New returns the breaker of the backend called name, configured by cfg
// (which must have passed config.Validate: the breaker converts, it does not
// default or re-check). now is the clock that decides when open_for has
// passed (the proxy's Options.Now); nil means the time package's monotonic
// clock.
//
// onChange, if not nil, is called exactly once per state transition, in
// order, with the breaker's name. It is never called with a lock held, so it
// may call the breaker's methods; it runs on the goroutine whose Allow, Done
// or State call made the transition (or on one already delivering an
// earlier transition), so it should be quick (set a gauge, log a line). The
// transition out of open is lazy: an open breaker moves to half-open when
// it is next asked, by Allow, Done or State, once the clock is past
// open_for after the opening.
func New(name string, cfg config.Breaker, now func() time.Time, onChange func(name string, from, to State)) *Breaker {
	b := &Breaker{
		name:      name,
		cfg:       cfg,
		threshold: int64(cfg.ConsecutiveFailures),
		trials:    int64(cfg.HalfOpenRequests),
		openFor:   cfg.OpenFor.D(),
		now:       now,
		onChange:  onChange,
		errOpen:   fmt.Errorf("backend %s: %w", name, ErrOpen),
		errFull:   fmt.Errorf("backend %s: %w (half-open, trial requests in flight)", name, ErrOpen),
	}
	if now == nil {
		b.epoch = time.Now()
	} else {
		b.epoch = now()
	}
	b.cur.Store(&window{b: b, state: Closed})
	return b
}

// elapsed returns the clock's time since epoch. Without an injected clock
// it reads only the monotonic clock (time.Since's fast path, about half the
// cost of time.Now: Available calls it for every open breaker a pick
// samples); with one it is whatever that clock says.
func (b *Breaker) elapsed() int64 {
	if b.now == nil {
		return int64(time.Since(b.epoch))
	}
	return int64(b.now().Sub(b.epoch))
}

// current returns the current window, first moving an open breaker whose
// open_for has passed to half-open. Available uses the same test.
func (b *Breaker) current() *window {
	w := b.cur.Load()
	if w.state == Open && b.elapsed() > w.openUntil {
		b.transition(w, HalfOpen)
		w = b.cur.Load()
	}
	return w
}

// transition replaces from, if it is still the current window, by a fresh
// window in state to, and delivers the transition to onChange. If another
// goroutine already left from, it does nothing.
func (b *Breaker) transition(from *window, to State) {
	b.transitionIf(from, to)
}

// transitionIf is transition, reporting whether it made the transition.
func (b *Breaker) transitionIf(from *window, to State) bool {
	b.mu.Lock()
	if b.cur.Load() != from {
		b.mu.Unlock()
		return false
	}
	w := &window{b: b, state: to}
	if to == Open {
		w.openUntil = b.elapsed() + int64(b.openFor)
	}
	b.cur.Store(w)
	if b.onChange != nil {
		b.pending = append(b.pending, transition{from.state, to})
		b.hasPending.Store(true)
	}
	b.mu.Unlock()
	b.flush()
	return true
}

// flush delivers queued transitions to onChange. Only one goroutine
// delivers at a time, which keeps transitions in order; the others return at
// once, and the deliverer loops until it sees the queue empty (clearing
// delivering in the same critical section), so every queued transition is
// delivered exactly once and none is stranded.
func (b *Breaker) flush() {
	if !b.hasPending.Load() {
		return
	}
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.hasPending.Store(false)
		b.mu.Unlock()
		b.deliver(batch)
		b.mu.Lock()
	}
	b.delivering = false
	b.mu.Unlock()
}

// deliver calls onChange for each transition of batch. If onChange panics,
// it gives up the deliverer role before the panic propagates, so that later
// transitions are still delivered.
func (b *Breaker) deliver(batch []transition) {
	ok := false
	defer func() {
		if !ok {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for _, t := range batch {
		b.onChange(b.name, t.from, t.to)
	}
	ok = true
}

// Name returns the name given to New.
func (b *Breaker) Name() string { return b.name }

// Config returns the configuration the breaker runs with.
func (b *Breaker) Config() config.Breaker { return b.cfg }

// Ticket is an admitted request's claim on its breaker, returned by Allow:
// a small value (no allocation) to be kept until the request ends and then
// passed its Outcome with Done. The zero Ticket belongs to no breaker; its
// Done does nothing. Tickets compare equal (==) when they were admitted in
// the same state of the same breaker, and such tickets are interchangeable:
// n of them may be decided by n calls of one's Done.
type Ticket struct{ w *window }

// Allow asks to send one request to the backend. If the breaker admits it,
// Allow returns a Ticket whose Done the caller must call exactly once with
// the request's Outcome (Ignore if it abandons the request): in half-open
// an unreported trial holds its slot forever. Outcomes of requests admitted
// before the last state change are ignored. If the breaker rejects the
// request (open, or half-open with every trial slot taken), the Ticket is
// the zero Ticket and err wraps ErrOpen. Neither admitting nor rejecting
// allocates or takes a lock, unless the call moves the breaker from open to
// half-open.
func (b *Breaker) Allow() (Ticket, error) {
	for {
		w := b.current()
		switch w.state {
		case Closed:
			return Ticket{w}, nil
		case Open:
			return Ticket{}, b.errOpen
		}
		n := w.taken.Load()
		if n >= b.trials {
			return Ticket{}, b.errFull
		}
		if !w.taken.CompareAndSwap(n, n+1) {
			continue
		}
		if b.cur.Load() == w {
			// The slot was taken while w was current: the request is
			// one of w's trials.
			if w.trialAt.Load() == 0 {
				w.trialAt.CompareAndSwap(0, max(b.elapsed(), 1))
			}
			return Ticket{w}, nil
		}
		// w was left (a trial failed or all succeeded) before the slot was
		// taken: this is no trial of w, and w's counters no longer matter.
	}
}

// Trial reports whether t admitted one of a half-open breaker's trial
// requests (whose Done decides whether the breaker closes).
func (t Ticket) Trial() bool { return t.w != nil && t.w.state == HalfOpen }

// Done reports the outcome of the request t admitted. It must be called
// exactly once per admitted request.
func (t Ticket) Done(o Outcome) {
	w := t.w
	if w == nil {
		return
	}
	b := w.b
	if b.current() != w {
		return // a stale outcome: its window was left
	}
	switch w.state {
	case Closed:
		switch o {
		case Success:
			if w.failures.Load() != 0 {
				w.failures.Store(0)
			}
		case Failure:
			// The counter only steps by one or resets, so exactly one
			// failure of a run sees the threshold.
			if w.failures.Add(1) == b.threshold {
				b.transition(w, Open)
			}
		}
	case HalfOpen:
		switch o {
		case Success:
			if w.successes.Add(1) == b.trials {
				b.transition(w, Closed)
			}
		case Failure:
			b.transition(w, Open)
		default: // Ignore (or an unknown value): free the slot
			w.taken.Add(-1)
		}
	}
}

// Available reports, without locking, whether the breaker may admit a
// request: false only while it is open and the clock is not yet past
// open_for after the opening. Allow decides with the same clock and the
// same test, so once Available is true again Allow admits the half-open
// trial (a half-open breaker whose trial slots are taken still reports true
// and Allow rejects). It is meant for filtering candidates on the hot path;
// Allow has the final word.
func (b *Breaker) Available() bool {
	w := b.cur.Load()
	if w.state != Open {
		return true
	}
	return b.elapsed() > w.openUntil
}

// TrialUnderWay reports, without locking, whether the breaker is
// half-open with a trial request admitted and not yet decided.
func (b *Breaker) TrialUnderWay() bool {
	w := b.cur.Load()
	return w.state == HalfOpen && w.taken.Load() > w.successes.Load()
}

// CloseOnTrialProgress closes a half-open breaker whose trial is under
// way when progressed reports that the backend worked after the first
// trial was admitted (progressed is given that time, on the breaker's
// clock), and reports whether it did. It is for a trial whose answer takes
// long (a non-stream generation's head comes after the whole generation):
// evidence that the backend works, such as its token counters advancing
// (probe.State.ProgressedSince), decides it before the answer, so the
// backend is not kept out of every pick for as long as one client's
// generation runs. The trial's own outcome, when it comes, is then stale
// and ignored. Only the caller's evidence closes the breaker: progressed
// must not be true of a backend that merely answers.
func (b *Breaker) CloseOnTrialProgress(progressed func(since time.Time) bool) bool {
	w := b.current()
	if w.state != HalfOpen {
		return false
	}
	at := w.trialAt.Load()
	if at == 0 || w.taken.Load() <= w.successes.Load() || !progressed(b.epoch.Add(time.Duration(at))) {
		return false
	}
	return b.transitionIf(w, Closed)
}

// State returns the breaker's current state, moving an open breaker whose
// open_for has passed to half-open (and reporting that transition).
func (b *Breaker) State() State {
	return b.current().state
}
