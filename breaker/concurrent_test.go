package breaker

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/testutil"
)

// Tests of Allow and Done racing around transitions. Each runs many
// goroutines released together and is repeated, so that under -race the
// interleavings that matter (several goroutines reaching a limit at once, a
// stale outcome arriving while a window is replaced) happen.

// countingHook records transitions and how often each was delivered.
type countingHook struct {
	mu    sync.Mutex
	chain []transition
}

func (h *countingHook) hook(_ string, from, to State) {
	h.mu.Lock()
	h.chain = append(h.chain, transition{from, to})
	h.mu.Unlock()
}

func (h *countingHook) strings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for _, t := range h.chain {
		s = append(s, t.from.String()+">"+t.to.String())
	}
	return s
}

// TestConcurrentFailuresOpenOnce: many admitted requests failing at once
// open the breaker exactly once, and it then rejects.
func TestConcurrentFailuresOpenOnce(t *testing.T) {
	for range 50 {
		var h countingHook
		b := New("b", cfg(5, 1, time.Hour), newFakeClock().now, h.hook)
		tickets := make([]Ticket, 64)
		for i := range tickets {
			tk, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			tickets[i] = tk
		}
		testutil.Together(len(tickets), func(i int) { tickets[i].Done(Failure) })
		if got, want := h.strings(), []string{"closed>open"}; !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
		if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow after opening: %v", err)
		}
	}
}

// yieldingNow is clk's time, read after yielding the processor: goroutines
// that saw the same state then interleave before acting on it.
func yieldingNow(clk *fakeClock) func() time.Time {
	return func() time.Time {
		runtime.Gosched()
		return clk.now()
	}
}

// TestHalfOpenNeverExceedsTrials: goroutines hammering a breaker that has
// just become eligible to half-open make the open>half-open move once, and
// never hold more than half_open_requests trials at the same time (a trial
// that reports Ignore frees its slot for the next).
func TestHalfOpenNeverExceedsTrials(t *testing.T) {
	const trials = 3
	for range 10 {
		var h countingHook
		clk := newFakeClock()
		b := New("b", cfg(1, trials, time.Second), yieldingNow(clk), h.hook)
		report(t, b, Failure)
		clk.advance(time.Second + time.Nanosecond)

		var inFlight, most, admitted atomic.Int64
		testutil.Together(32, func(int) {
			for range 500 {
				tk, err := b.Allow()
				if err != nil {
					if !errors.Is(err, ErrOpen) {
						t.Errorf("rejection %v does not wrap ErrOpen", err)
					}
					runtime.Gosched()
					continue
				}
				admitted.Add(1)
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched()
				inFlight.Add(-1)
				tk.Done(Ignore)
			}
		})
		if m := most.Load(); m > trials {
			t.Fatalf("%d trials in flight at once, half_open_requests is %d", m, trials)
		}
		if admitted.Load() < trials {
			t.Fatalf("only %d trials admitted", admitted.Load())
		}
		if got, want := h.strings(), []string{"closed>open", "open>half-open"}; !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
	}
}

// TestHalfOpenRaceAdmitsExactlyTrials: of 64 goroutines asking at once,
// exactly half_open_requests are admitted; their successes, reported at
// once, close the breaker once.
func TestHalfOpenRaceAdmitsExactlyTrials(t *testing.T) {
	const trials, callers = 8, 64
	for range 50 {
		var h countingHook
		clk := newFakeClock()
		b := New("b", cfg(1, trials, time.Second), clk.now, h.hook)
		report(t, b, Failure)
		clk.advance(2 * time.Second)

		var (
			mu      sync.Mutex
			tickets []Ticket
		)
		testutil.Together(callers, func(int) {
			if tk, err := b.Allow(); err == nil {
				mu.Lock()
				tickets = append(tickets, tk)
				mu.Unlock()
			}
		})
		if len(tickets) != trials {
			t.Fatalf("admitted %d of %d callers, want exactly %d", len(tickets), callers, trials)
		}
		testutil.Together(trials, func(i int) { tickets[i].Done(Success) })
		want := []string{"closed>open", "open>half-open", "half-open>closed"}
		if got := h.strings(); !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
	}
}

// TestStaleOutcomesNeverCountInTheNewWindow: outcomes of requests admitted
// before a transition, reported concurrently with the new window's own
// traffic, change nothing: stale successes do not close a half-open
// breaker, stale Ignores do not free its trial slots, stale failures do not
// open the closed breaker that follows.
func TestStaleOutcomesNeverCountInTheNewWindow(t *testing.T) {
	for range 20 {
		var h countingHook
		clk := newFakeClock()
		b := New("b", cfg(3, 2, time.Second), clk.now, h.hook)
		stale := make([]Ticket, 600)
		for i := range stale {
			tk, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			stale[i] = tk
		}
		for range 3 {
			report(t, b, Failure)
		}
		clk.advance(2 * time.Second)
		t1, err1 := b.Allow()
		t2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("trials rejected: %v, %v", err1, err2)
		}

		// Half-open with both slots taken: 200 stale successes and 200
		// stale Ignores, while other goroutines keep asking for a slot.
		var admitted atomic.Int64
		testutil.Together(40, func(i int) {
			if i < 20 {
				for j := range 10 {
					stale[i*10+j].Done(Success)
					stale[200+i*10+j].Done(Ignore)
				}
				return
			}
			for range 20 {
				if tk, err := b.Allow(); err == nil {
					admitted.Add(1)
					tk.Done(Ignore)
				}
			}
		})
		if n := admitted.Load(); n != 0 {
			t.Fatalf("%d requests admitted while both trial slots were held (stale Ignores freed slots)", n)
		}
		if s := b.State(); s != HalfOpen {
			t.Fatalf("after stale successes: %v, want half-open", s)
		}

		t1.Done(Success)
		t2.Done(Success)
		// Closed again: 200 stale failures against live successes.
		testutil.Together(40, func(i int) {
			if i < 20 {
				for j := range 10 {
					stale[400+i*10+j].Done(Failure)
				}
				return
			}
			for range 20 {
				report(t, b, Success)
			}
		})
		if s := b.State(); s != Closed {
			t.Fatalf("after stale failures: %v, want closed", s)
		}
		want := []string{"closed>open", "open>half-open", "half-open>closed"}
		if got := h.strings(); !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
	}
}

// leastAllocs is testing.AllocsPerRun(1000, f) repeated up to five times,
// keeping the smallest figure: the race runtime or a goroutine of an
// earlier test may add a stray allocation to one run, while an allocation
// in f shows in all of them.
func leastAllocs(f func()) float64 {
	least := testing.AllocsPerRun(1000, f)
	for i := 1; i < 5 && least > 0; i++ {
		least = min(least, testing.AllocsPerRun(1000, f))
	}
	return least
}

// TestNoAllocationPerRequest: admitting, rejecting and reporting allocate
// nothing; only a transition does.
func TestNoAllocationPerRequest(t *testing.T) {
	clk := newFakeClock()
	b := New("b", cfg(1000, 1, time.Second), clk.now, nil)
	if n := leastAllocs(func() {
		tk, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(Failure)
		tk, _ = b.Allow()
		tk.Done(Success)
	}); n != 0 {
		t.Errorf("closed Allow+Done: %v allocs/op", n)
	}

	b = New("b", cfg(1, 1, time.Second), clk.now, nil)
	report(t, b, Failure)
	if n := leastAllocs(func() {
		if _, err := b.Allow(); err == nil {
			t.Fatal("admitted while open")
		}
	}); n != 0 {
		t.Errorf("open rejection: %v allocs/op", n)
	}

	clk.advance(2 * time.Second)
	b.State() // the transition to half-open allocates its window
	if n := leastAllocs(func() {
		tk, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Allow(); err == nil {
			t.Fatal("second trial admitted")
		}
		tk.Done(Ignore)
	}); n != 0 {
		t.Errorf("half-open Allow+Done: %v allocs/op", n)
	}
}

// TestZeroTicketDoneIsNoop: the Ticket of a rejection may be reported
// without effect.
func TestZeroTicketDoneIsNoop(t *testing.T) {
	b := New("b", cfg(1, 1, time.Hour), nil, nil)
	report(t, b, Failure)
	tk, err := b.Allow()
	if err == nil {
		t.Fatal("admitted while open")
	}
	tk.Done(Success)
	tk.Done(Failure)
	if s := b.State(); s != Open {
		t.Fatalf("State = %v, want open", s)
	}
}
