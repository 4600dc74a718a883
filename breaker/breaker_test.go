package breaker

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/probegate/probegate/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cfg(failures, halfOpen int, openFor time.Duration) config.Breaker {
	return config.Breaker{ConsecutiveFailures: failures, OpenFor: config.Duration(openFor), HalfOpenRequests: halfOpen}
}

// report sends one request through b with outcome o, failing if rejected.
func report(t *testing.T, b *Breaker, o Outcome) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow in state %v: %v", b.State(), err)
	}
	done.Done(o)
}

// recorder collects onChange calls.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) hook(name string, from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, from.String()+">"+to.String())
}

func (r *recorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func TestOpensAfterConsecutiveFailures(t *testing.T) {
	const S, F, I = Success, Failure, Ignore
	tests := []struct {
		name     string
		outcomes []Outcome
		want     State
	}{
		{"N-1 failures", []Outcome{F, F}, Closed},
		{"N failures", []Outcome{F, F, F}, Open},
		{"success interrupts", []Outcome{F, F, S, F, F}, Closed},
		{"success then N", []Outcome{F, F, S, F, F, F}, Open},
		{"ignore neither counts nor resets", []Outcome{F, I, F, I, I, F}, Open},
		{"only ignores", []Outcome{I, I, I, I, I, I}, Closed},
		{"zero outcome is ignore", []Outcome{F, F, Outcome(0), Outcome(0)}, Closed},
		{"unknown outcome is ignore", []Outcome{F, F, Outcome(9)}, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New("b", cfg(3, 1, time.Minute), nil, nil)
			for _, o := range tt.outcomes {
				report(t, b, o)
			}
			if got := b.State(); got != tt.want {
				t.Fatalf("State = %v, want %v", got, tt.want)
			}
			if got, want := b.Available(), tt.want != Open; got != want {
				t.Fatalf("Available = %v, want %v", got, want)
			}
		})
	}
}

func TestOpenRejectsThenHalfOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const openFor = 5 * time.Second
		var rec recorder
		b := New("vllm-1", cfg(2, 1, openFor), nil, rec.hook)
		report(t, b, Failure)
		report(t, b, Failure)

		done, err := b.Allow()
		if done != (Ticket{}) || !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow while open: ticket is zero = %v, err = %v; want zero, ErrOpen", done == (Ticket{}), err)
		}
		if err.Error() != "backend vllm-1: circuit breaker open" {
			t.Fatalf("err = %q", err)
		}
		if b.Available() {
			t.Fatal("Available while open")
		}

		time.Sleep(openFor) // exactly open_for: still open, as in gobreaker
		if b.Available() {
			t.Fatal("Available at exactly open_for")
		}
		if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow at exactly open_for: %v", err)
		}

		time.Sleep(time.Nanosecond)
		if !b.Available() {
			t.Fatal("not Available after open_for")
		}
		done, err = b.Allow()
		if err != nil {
			t.Fatalf("half-open trial rejected: %v", err)
		}
		if s := b.State(); s != HalfOpen {
			t.Fatalf("State = %v, want half-open", s)
		}
		if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("second trial with half_open_requests=1: %v", err)
		}
		done.Done(Success)
		if s := b.State(); s != Closed {
			t.Fatalf("State after trial success = %v, want closed", s)
		}
		want := []string{"closed>open", "open>half-open", "half-open>closed"}
		if got := rec.transitions(); !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
	})
}

func TestHalfOpenFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := New("b", cfg(1, 2, time.Second), nil, rec.hook)
		report(t, b, Failure)
		time.Sleep(time.Second + time.Millisecond)
		d1, err1 := b.Allow()
		d2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("trials rejected: %v, %v", err1, err2)
		}
		d1.Done(Success)
		if s := b.State(); s != HalfOpen {
			t.Fatalf("after 1 of 2 successes: %v, want half-open", s)
		}
		d2.Done(Failure)
		if s := b.State(); s != Open {
			t.Fatalf("after a trial failure: %v, want open", s)
		}
		if b.Available() {
			t.Fatal("Available right after reopening")
		}
		time.Sleep(time.Second + time.Millisecond)
		if !b.Available() {
			t.Fatal("not Available after the second open_for")
		}
		want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open"}
		if got := rec.transitions(); !equal(got, want[:3]) {
			t.Fatalf("transitions = %q, want %q", got, want[:3])
		}
		b.State() // observes the lazy move to half-open
		if got := rec.transitions(); !equal(got, want) {
			t.Fatalf("transitions = %q, want %q", got, want)
		}
	})
}

// TestHalfOpenAdmitsExactly checks that concurrent callers get exactly
// half_open_requests trials, that Ignore frees a slot, and that all trials
// succeeding closes the breaker.
func TestHalfOpenAdmitsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const trials = 3
		b := New("b", cfg(1, trials, time.Second), nil, nil)
		report(t, b, Failure)
		time.Sleep(2 * time.Second)

		var (
			mu    sync.Mutex
			dones []Ticket
			wg    sync.WaitGroup
			full  atomic.Int32
		)
		for range 20 {
			wg.Go(func() {
				done, err := b.Allow()
				if err != nil {
					if !errors.Is(err, ErrOpen) {
						t.Errorf("rejection %v does not wrap ErrOpen", err)
					}
					full.Add(1)
					return
				}
				mu.Lock()
				dones = append(dones, done)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(dones) != trials || full.Load() != 20-trials {
			t.Fatalf("admitted %d, rejected %d; want %d, %d", len(dones), full.Load(), trials, 20-trials)
		}

		dones[0].Done(Ignore) // frees its slot without counting
		if s := b.State(); s != HalfOpen {
			t.Fatalf("after Ignore: %v, want half-open", s)
		}
		again, err := b.Allow()
		if err != nil {
			t.Fatalf("slot freed by Ignore not reusable: %v", err)
		}
		if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
			t.Fatalf("admitted beyond half_open_requests: %v", err)
		}
		dones[1].Done(Success)
		dones[2].Done(Success)
		if s := b.State(); s != HalfOpen {
			t.Fatalf("after 2 of 3 successes: %v, want half-open", s)
		}
		again.Done(Success)
		if s := b.State(); s != Closed {
			t.Fatalf("after 3 successes: %v, want closed", s)
		}
	})
}

// TestStaleOutcomeIgnored checks that a request admitted before a state
// change cannot affect the new state.
func TestStaleOutcomeIgnored(t *testing.T) {
	b := New("b", cfg(2, 1, time.Minute), nil, nil)
	old, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	report(t, b, Failure)
	report(t, b, Failure) // opens
	if b.State() != Open {
		t.Fatal("not open")
	}
	old.Done(Success) // from the closed generation: ignored
	if s := b.State(); s != Open {
		t.Fatalf("stale success changed the state to %v", s)
	}
}

// TestOnChangeMayCallBreaker checks that onChange runs without a lock held:
// it calls the breaker's methods, which would deadlock otherwise.
func TestOnChangeMayCallBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b *Breaker
		var seen []State
		b = New("b", cfg(1, 1, time.Second), nil, func(_ string, _, to State) {
			seen = append(seen, b.State())
			_ = b.Available()
			if done, err := b.Allow(); err == nil {
				done.Done(Ignore)
			}
		})
		report(t, b, Failure)
		time.Sleep(2 * time.Second)
		report(t, b, Success)
		if len(seen) != 3 {
			t.Fatalf("onChange called %d times, want 3 (%v)", len(seen), seen)
		}
	})
}

func TestOnChangePanicDoesNotWedge(t *testing.T) {
	var rec recorder
	first := true
	clk := newFakeClock()
	b := New("b", cfg(1, 1, time.Millisecond), clk.now, func(name string, from, to State) {
		rec.hook(name, from, to)
		if first {
			first = false
			panic("boom")
		}
	})
	func() {
		defer func() { _ = recover() }()
		report(t, b, Failure)
	}()
	clk.advance(2 * time.Millisecond)
	b.State()
	want := []string{"closed>open", "open>half-open"}
	if got := rec.transitions(); !equal(got, want) {
		t.Fatalf("transitions = %q, want %q", got, want)
	}
}

// TestConcurrentHammer runs many goroutines through one breaker with real
// time and random outcomes. Under -race it checks the synchronization; it
// also checks that onChange saw a consistent chain of transitions, each
// exactly once and in order.
func TestConcurrentHammer(t *testing.T) {
	var (
		mu    sync.Mutex
		chain []transition
	)
	b := New("b", cfg(3, 2, 2*time.Millisecond), nil, func(_ string, from, to State) {
		mu.Lock()
		chain = append(chain, transition{from, to})
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3000 {
				_ = b.Available()
				done, err := b.Allow()
				if err != nil {
					if !errors.Is(err, ErrOpen) {
						t.Errorf("Allow: %v", err)
						return
					}
					continue
				}
				switch p := r.IntN(10); {
				case p < 4:
					done.Done(Failure)
				case p < 5:
					done.Done(Ignore)
				default:
					done.Done(Success)
				}
			}
		})
	}
	wg.Wait()
	final := b.State()

	mu.Lock()
	defer mu.Unlock()
	if len(chain) == 0 {
		t.Fatal("no transitions under a 40% failure rate")
	}
	prev := Closed
	for i, tr := range chain {
		if tr.from != prev || tr.from == tr.to {
			t.Fatalf("transition %d is %v>%v after %v", i, tr.from, tr.to, prev)
		}
		prev = tr.to
	}
	if prev != final {
		t.Fatalf("last transition ends in %v, State is %v", prev, final)
	}
	t.Logf("%d transitions", len(chain))
}

func TestStrings(t *testing.T) {
	for s, want := range map[State]string{Closed: "closed", HalfOpen: "half-open", Open: "open", 7: "State(7)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
	for o, want := range map[Outcome]string{Ignore: "ignore", Success: "success", Failure: "failure", 7: "Outcome(7)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
	if New("x", cfg(1, 1, time.Second), nil, nil).Name() != "x" {
		t.Error("Name")
	}
}

func TestConfigIsWhatItRunsWith(t *testing.T) {
	c := cfg(3, 2, 7*time.Second)
	if got := New("b", c, nil, nil).Config(); got != c {
		t.Fatalf("Config() = %+v, want %+v", got, c)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkAllowDone(b *testing.B) {
	br := New("b", cfg(5, 1, time.Second), nil, func(string, State, State) {})
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done.Done(Success)
	}
}

func BenchmarkAllowDoneParallel(b *testing.B) {
	br := New("b", cfg(5, 1, time.Second), nil, func(string, State, State) {})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done.Done(Success)
		}
	})
}

func BenchmarkAllowRejected(b *testing.B) {
	br := New("b", cfg(1, 1, time.Hour), nil, nil)
	done, _ := br.Allow()
	done.Done(Failure)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted while open")
		}
	}
}

func BenchmarkAvailable(b *testing.B) {
	for _, tc := range []struct {
		name string
		open bool
	}{{"state=closed", false}, {"state=open", true}} {
		b.Run(tc.name, func(b *testing.B) {
			br := New("b", cfg(1, 1, time.Hour), nil, nil)
			if tc.open {
				done, _ := br.Allow()
				done.Done(Failure)
			}
			b.ReportAllocs()
			for b.Loop() {
				if br.Available() == tc.open {
					b.Fatal("wrong availability")
				}
			}
		})
	}
}

func BenchmarkAvailableParallel(b *testing.B) {
	br := New("b", cfg(1, 1, time.Hour), nil, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = br.Available()
		}
	})
}

// Trial tells a half-open breaker's trial tickets from the others.
func TestTicketTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("b", cfg(1, 1, time.Second), nil, nil)
		tk, _ := b.Allow()
		if tk.Trial() {
			t.Fatal("a closed breaker's ticket is a trial")
		}
		tk.Done(Failure)
		if (Ticket{}).Trial() {
			t.Fatal("the zero ticket is a trial")
		}
		time.Sleep(time.Second + time.Millisecond)
		tk, err := b.Allow()
		if err != nil || !tk.Trial() {
			t.Fatalf("after open_for: trial %v, err %v; want a trial", tk.Trial(), err)
		}
		tk.Done(Success)
		if b.State() != Closed {
			t.Fatalf("state %v after a successful trial", b.State())
		}
	})
}
