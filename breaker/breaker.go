// Package breaker answers "may we send to this backend at all?": one circuit
// breaker per backend, built on sony/gobreaker/v2's two-step breaker.
//
// A breaker opens after breaker.consecutive_failures consecutive failures,
// rejects everything for breaker.open_for, then admits
// breaker.half_open_requests trial requests: if all succeed it closes, and
// the first failure reopens it. What counts as a failure is the caller's
// decision, reported once per admitted request as an Outcome: dial errors,
// 5xx and timeouts are Failure; 429 and a client's cancellation are Ignore,
// which counts neither way.
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

	"github.com/sony/gobreaker/v2"

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

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return HalfOpen
	case gobreaker.StateOpen:
		return Open
	default:
		return Closed
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

// Sentinels passed to gobreaker's done; only their identity matters.
var (
	errFailure = errors.New("breaker: failure")
	errIgnore  = errors.New("breaker: ignored outcome")
)

type transition struct{ from, to State }

// Breaker is the circuit breaker of one backend. All its methods are safe
// for concurrent use.
type Breaker struct {
	// Immutable after New.
	name     string
	cfg      config.Breaker
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	openFor  time.Duration
	epoch    time.Time // origin of openUntil, so that it uses the monotonic clock
	onChange func(name string, from, to State)
	errOpen  error // wraps ErrOpen; built once so rejections do not allocate
	errFull  error // wraps ErrOpen

	// Written in gobreaker's OnStateChange, under gobreaker's mutex, and
	// read lock-free by Available: a cached copy of the state, and when an
	// open breaker may admit trials (nanoseconds since epoch). openUntil is
	// stored before state, so a reader that sees Open sees its deadline.
	state     atomic.Int32
	openUntil atomic.Int64

	// Transitions not yet delivered to onChange. gobreaker calls
	// OnStateChange with its mutex held, where onChange must not run (it
	// could call back into the breaker and deadlock), so transitions are
	// queued there and delivered by flush once gobreaker has returned.
	hasPending atomic.Bool // fast-path hint: pending may be non-empty
	mu         sync.Mutex  // guards pending and delivering; never held while calling out
	pending    []transition
	delivering bool
}

// New returns the breaker of the backend called name, configured by cfg
// (which must have passed config.Validate: the breaker converts, it does not
// default or re-check).
//
// onChange, if not nil, is called exactly once per state transition, in
// order, with the breaker's name. It is never called with a lock held, so it
// may call the breaker's methods; it runs on the goroutine whose Allow, done
// or State call made or observed the transition (or on one already
// delivering an earlier transition), after that gobreaker call returned, so
// it should be quick (set a gauge, log a line). Transitions out of open are
// lazy: gobreaker moves an open breaker to half-open when it is next asked,
// after open_for, by Allow or State.
func New(name string, cfg config.Breaker, onChange func(name string, from, to State)) *Breaker {
	b := &Breaker{
		name:     name,
		cfg:      cfg,
		openFor:  cfg.OpenFor.D(),
		epoch:    time.Now(),
		onChange: onChange,
		errOpen:  fmt.Errorf("backend %s: %w", name, ErrOpen),
		errFull:  fmt.Errorf("backend %s: %w (half-open, trial requests in flight)", name, ErrOpen),
	}
	failures := uint32(cfg.ConsecutiveFailures)
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(cfg.HalfOpenRequests),
		Interval:    0, // never clear counts while closed: only consecutive failures matter
		Timeout:     b.openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= failures
		},
		OnStateChange: b.onStateChange,
		IsExcluded: func(err error) bool {
			return err == errIgnore // exact sentinel identity; never wrapped
		},
	})
	return b
}

// onStateChange runs under gobreaker's mutex: it only updates atomics and
// queues the transition.
func (b *Breaker) onStateChange(_ string, from, to gobreaker.State) {
	if to == gobreaker.StateOpen {
		// Called right after gobreaker computed its own expiry from an
		// earlier time.Now, so this deadline is never before gobreaker's.
		b.openUntil.Store(int64(time.Since(b.epoch) + b.openFor))
	}
	b.state.Store(int32(fromGobreaker(to)))
	if b.onChange == nil {
		return
	}
	b.mu.Lock()
	b.pending = append(b.pending, transition{fromGobreaker(from), fromGobreaker(to)})
	b.hasPending.Store(true)
	b.mu.Unlock()
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
	gdone, err := b.cb.Allow()
	b.flush()
	if err != nil {
		if errors.Is(err, gobreaker.ErrTooManyRequests) {
			return nil, b.errFull
		}
		return nil, b.errOpen
	}
	return func(o Outcome) {
		switch o {
		case Success:
			gdone(nil)
		case Failure:
			gdone(errFailure)
		default:
			gdone(errIgnore)
		}
		b.flush()
	}, nil
}

// Available reports, without locking, whether the breaker may admit a
// request: false only while it is open and open_for has not yet passed.
// Once open_for has passed it is true again, so that the backend is sampled
// and its half-open trial can happen; a half-open breaker whose trial slots
// are taken still reports true and Allow rejects. It is meant for filtering
// candidates on the hot path; Allow has the final word.
func (b *Breaker) Available() bool {
	if State(b.state.Load()) != Open {
		return true
	}
	return int64(time.Since(b.epoch)) > b.openUntil.Load()
}

// State returns the breaker's current state, moving an open breaker whose
// open_for has passed to half-open (and reporting that transition).
func (b *Breaker) State() State {
	s := fromGobreaker(b.cb.State())
	b.flush()
	return s
}
