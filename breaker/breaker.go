// Package breaker answers "may we send to this backend at all?": one circuit
// breaker per backend.
//
// A breaker opens after breaker.consecutive_failures consecutive failures,
// rejects everything for breaker.open_for, then admits
// breaker.half_open_requests trial requests: if all succeed it closes, and
// the first failure reopens it. What counts as a failure is the caller's
// decision, reported once per admitted request as an Outcome: dial errors,
// 5xx and timeouts are Failure; 429 and a client's cancellation are Ignore,
// which counts neither way.
//
// The breaker keeps the shape of sony/gobreaker/v2's two-step breaker (Allow
// returns done; an outcome from before the last state change is ignored)
// with its own small state machine, which it used to delegate to gobreaker:
// gobreaker reads time.Now internally and has no clock hook, so its open
// state could not follow the proxy's one clock (Options.Now), and Available
// could not be sure to agree with Allow. Here the clock given to New decides
// both.
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

type transition struct{ from, to State }

// Breaker is the circuit breaker of one backend. All its methods are safe
// for concurrent use.
type Breaker struct {
	// Immutable after New.
	name      string
	cfg       config.Breaker
	threshold int           // breaker.consecutive_failures
	trials    int           // breaker.half_open_requests
	openFor   time.Duration // breaker.open_for
	now       func() time.Time
	epoch     time.Time // now() at New: the origin of every timestamp below
	onChange  func(name string, from, to State)
	errOpen   error // wraps ErrOpen; built once so rejections do not allocate
	errFull   error // wraps ErrOpen

	// Written under mu, read lock-free by Available: a copy of the state,
	// and when an open breaker may admit trials (the clock's time since
	// epoch). openUntil is stored before state, so a reader that sees Open
	// sees its deadline.
	state     atomic.Int32
	openUntil atomic.Int64

	// mu guards the state machine and the transition queue. It is never
	// held while calling onChange.
	mu sync.Mutex
	// gen counts state changes; an outcome reported for a request admitted
	// in an earlier generation is ignored.
	gen       uint64
	failures  int // closed: consecutive failures
	taken     int // half-open: trial slots taken (admitted, not Ignored)
	successes int // half-open: successful trials
	// Transitions not yet delivered to onChange. They are queued under mu
	// and delivered by flush once mu is released, so onChange can call
	// back into the breaker.
	hasPending atomic.Bool // fast-path hint: pending may be non-empty
	pending    []transition
	delivering bool
}

// New returns the breaker of the backend called name, configured by cfg
// (which must have passed config.Validate: the breaker converts, it does not
// default or re-check). now is the clock that decides when open_for has
// passed (the proxy's Options.Now); nil means the time package's monotonic
// clock.
//
// onChange, if not nil, is called exactly once per state transition, in
// order, with the breaker's name. It is never called with a lock held, so it
// may call the breaker's methods; it runs on the goroutine whose Allow, done
// or State call made or observed the transition (or on one already
// delivering an earlier transition), so it should be quick (set a gauge, log
// a line). The transition out of open is lazy: an open breaker moves to
// half-open when it is next asked, by Allow, done or State, once the clock
// is past open_for after the opening.
func New(name string, cfg config.Breaker, now func() time.Time, onChange func(name string, from, to State)) *Breaker {
	b := &Breaker{
		name:      name,
		cfg:       cfg,
		threshold: cfg.ConsecutiveFailures,
		trials:    cfg.HalfOpenRequests,
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

// current moves an open breaker whose open_for has passed to half-open and
// returns the state. Call with mu held. Available uses the same test.
func (b *Breaker) current() State {
	s := State(b.state.Load())
	if s == Open && b.elapsed() > b.openUntil.Load() {
		b.setState(HalfOpen)
		return HalfOpen
	}
	return s
}

// setState moves the breaker to s, starts a new generation and queues the
// transition. Call with mu held and s different from the current state.
func (b *Breaker) setState(s State) {
	from := State(b.state.Load())
	b.gen++
	b.failures, b.taken, b.successes = 0, 0, 0
	if s == Open {
		b.openUntil.Store(b.elapsed() + int64(b.openFor))
	}
	b.state.Store(int32(s))
	if b.onChange != nil {
		b.pending = append(b.pending, transition{from, s})
		b.hasPending.Store(true)
	}
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

// Allow asks to send one request to the backend. If the breaker admits it,
// Allow returns done, which the caller must call exactly once with the
// request's Outcome (Ignore if it abandons the request): in half-open an
// unreported trial holds its slot forever. Outcomes of requests admitted
// before the last state change are ignored. If the breaker rejects the
// request (open, or half-open with every trial slot taken), done is nil and
// err wraps ErrOpen; a rejection does not allocate.
func (b *Breaker) Allow() (done func(Outcome), err error) {
	b.mu.Lock()
	switch b.current() {
	case Open:
		err = b.errOpen
	case HalfOpen:
		if b.taken >= b.trials {
			err = b.errFull
		} else {
			b.taken++
		}
	}
	gen := b.gen
	b.mu.Unlock()
	b.flush()
	if err != nil {
		return nil, err
	}
	return func(o Outcome) { b.report(gen, o) }, nil
}

// report applies the outcome of a request admitted in generation gen.
func (b *Breaker) report(gen uint64, o Outcome) {
	b.mu.Lock()
	s := b.current()
	if gen == b.gen {
		switch {
		case o == Success && s == Closed:
			b.failures = 0
		case o == Success && s == HalfOpen:
			if b.successes++; b.successes >= b.trials {
				b.setState(Closed)
			}
		case o == Failure && s == Closed:
			if b.failures++; b.failures >= b.threshold {
				b.setState(Open)
			}
		case o == Failure && s == HalfOpen:
			b.setState(Open)
		case s == HalfOpen: // Ignore (or an unknown value): free the slot
			b.taken--
		}
	}
	b.mu.Unlock()
	b.flush()
}

// Available reports, without locking, whether the breaker may admit a
// request: false only while it is open and the clock is not yet past
// open_for after the opening. Allow decides with the same clock and the
// same test, so once Available is true again Allow admits the half-open
// trial (a half-open breaker whose trial slots are taken still reports true
// and Allow rejects). It is meant for filtering candidates on the hot path;
// Allow has the final word.
func (b *Breaker) Available() bool {
	if State(b.state.Load()) != Open {
		return true
	}
	return b.elapsed() > b.openUntil.Load()
}

// State returns the breaker's current state, moving an open breaker whose
// open_for has passed to half-open (and reporting that transition).
func (b *Breaker) State() State {
	b.mu.Lock()
	s := b.current()
	b.mu.Unlock()
	b.flush()
	return s
}
