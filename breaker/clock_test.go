package breaker

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is an injected clock that moves only when told, far from the
// wall clock (2031), so a breaker that read time.Now would be caught.
type fakeClock struct{ ns atomic.Int64 }

var clockT0 = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock               { return &fakeClock{} }
func (c *fakeClock) now() time.Time          { return clockT0.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) set(d time.Duration)     { c.ns.Store(int64(d)) }

// TestInjectedClockDecidesOpenFor drives a breaker with a fake clock only:
// it stays open however much wall time passes while the clock stands still,
// and half-opens exactly when the clock passes open_for, with Available and
// Allow agreeing at every step.
func TestInjectedClockDecidesOpenFor(t *testing.T) {
	const openFor = 10 * time.Second
	clk := newFakeClock()
	var rec recorder
	b := New("b", cfg(2, 1, openFor), clk.now, rec.hook)
	clk.advance(time.Hour) // the breaker's timestamps are relative to New
	report(t, b, Failure)
	report(t, b, Failure)
	opened := time.Hour

	// Steps of the clock around the deadline, each checked twice: Available,
	// then whether Allow admits. Until the deadline both say no.
	for _, at := range []time.Duration{0, time.Nanosecond, openFor / 2, openFor - time.Nanosecond, openFor} {
		clk.set(opened + at)
		if b.Available() {
			t.Fatalf("Available %v after opening (open_for %v)", at, openFor)
		}
		if done, err := b.Allow(); done != (Ticket{}) || !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow admitted %v after opening (open_for %v), err %v", at, openFor, err)
		}
		if s := b.State(); s != Open {
			t.Fatalf("State %v after opening = %v, want open", at, s)
		}
	}
	clk.set(opened + openFor + time.Nanosecond)
	if !b.Available() {
		t.Fatal("not Available once the clock passed open_for")
	}
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Available said yes, Allow rejected: %v", err)
	}
	done.Done(Failure) // the trial fails: open again, for open_for from now
	if b.Available() {
		t.Fatal("Available right after the trial failed")
	}
	clk.advance(openFor)
	if b.Available() {
		t.Fatal("Available at exactly open_for after reopening")
	}
	clk.advance(time.Nanosecond)
	if !b.Available() {
		t.Fatal("not Available once the clock passed the second open_for")
	}
	report(t, b, Success)
	want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed"}
	if got := rec.transitions(); !equal(got, want) {
		t.Fatalf("transitions = %q, want %q", got, want)
	}
}

// TestWallTimeDoesNotCount: with a tiny open_for and a clock that stands
// still, real time passing (certainly more than a nanosecond between these
// calls) must not half-open the breaker. A breaker that read time.Now
// internally, as gobreaker does, fails this.
func TestWallTimeDoesNotCount(t *testing.T) {
	clk := newFakeClock()
	b := New("b", cfg(1, 1, time.Nanosecond), clk.now, nil)
	report(t, b, Failure)
	for range 1000 {
		if b.Available() {
			t.Fatal("Available while the injected clock stood still")
		}
		if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow while the injected clock stood still: %v", err)
		}
	}
	if s := b.State(); s != Open {
		t.Fatalf("State = %v, want open", s)
	}
	clk.advance(2 * time.Nanosecond)
	if s := b.State(); s != HalfOpen {
		t.Fatalf("State after the clock moved = %v, want half-open", s)
	}
}

// TestLazyMoveOnDone: a request admitted while closed whose outcome arrives
// after open_for has passed is stale (it belongs to an earlier generation),
// and reporting it makes the lazy move to half-open as Allow and State do.
func TestLazyMoveOnDone(t *testing.T) {
	clk := newFakeClock()
	var rec recorder
	b := New("b", cfg(1, 1, time.Second), clk.now, rec.hook)
	old, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	report(t, b, Failure)
	clk.advance(2 * time.Second)
	old.Done(Failure) // stale: must not reopen
	want := []string{"closed>open", "open>half-open"}
	if got := rec.transitions(); !equal(got, want) {
		t.Fatalf("transitions = %q, want %q", got, want)
	}
	if _, err := b.Allow(); err != nil {
		t.Fatalf("half-open trial rejected after a stale failure: %v", err)
	}
}

// TestClosingCountsAfresh: a breaker that recovered (open, half-open,
// closed) needs consecutive_failures new failures to open again.
func TestClosingCountsAfresh(t *testing.T) {
	clk := newFakeClock()
	b := New("b", cfg(3, 1, time.Second), clk.now, nil)
	for range 3 {
		report(t, b, Failure)
	}
	clk.advance(2 * time.Second)
	report(t, b, Success) // the trial closes it
	report(t, b, Failure)
	report(t, b, Failure)
	if s := b.State(); s != Closed {
		t.Fatalf("2 failures after recovering (threshold 3): %v, want closed", s)
	}
	report(t, b, Failure)
	if s := b.State(); s != Open {
		t.Fatalf("3 failures after recovering: %v, want open", s)
	}
}
