package probe

import (
	"math"
	"sync"
	"testing"
	"time"
)

// sample feeds s one speed sample of ns nanoseconds per token over 1,000
// tokens of work, as a request's first byte would.
func sample(s *State, ns float64) {
	s.AddWork(1000, 0)
	s.PrefillDone(1000, time.Duration(ns*1000), 1000)
}

func learned(s *State) float64 {
	_, _, ns := s.Work()
	return ns
}

// A few first bytes stalled by the machine (a scheduler hiccup, a GC pause,
// other clients' work in prefill) do not make a backend look slow: with 12
// samples at 100 ns a token and 3 at 2,000, the learned speed stays 100 (a
// mean over the last ten requests would read 2.6x slower).
func TestLearnedSpeedShrugsOffStalledSamples(t *testing.T) {
	s := NewState("a:1")
	for range 12 {
		sample(s, 100)
	}
	for range 3 {
		sample(s, 2000)
	}
	if ns := learned(s); ns != 100 {
		t.Fatalf("learned %v ns/token after 3 stalled samples of 15, want 100", ns)
	}
	// Once the slow samples are the window's majority, the backend is slow.
	for range 6 {
		sample(s, 2000)
	}
	if ns := learned(s); ns != 2000 {
		t.Fatalf("learned %v ns/token with 9 of the last 16 samples at 2000, want 2000", ns)
	}
}

// A backend that really slows down is learned slow within a window: after
// 16 samples at 100 ns a token, 9 at 200 make it 200 (not 161, where a
// mean with a tenth's weight per sample would still be).
func TestLearnedSpeedFollowsARealChange(t *testing.T) {
	s := NewState("a:1")
	for range speedWindow {
		sample(s, 100)
	}
	for i := range 9 {
		sample(s, 200)
		if ns := learned(s); i < 7 && ns != 100 {
			t.Fatalf("after %d samples at 200: learned %v, want still 100", i+1, ns)
		}
	}
	if ns := learned(s); ns != 200 {
		t.Fatalf("learned %v ns/token after 9 of 16 samples at 200, want 200", ns)
	}
}

// The first samples count as they come: one sample is the speed, two their
// mean; short prompts (under minSpeedTokens of work) teach nothing.
func TestLearnedSpeedFirstSamples(t *testing.T) {
	s := NewState("a:1")
	s.AddWork(100, 0)
	s.PrefillDone(100, time.Second, 100)
	if ns := learned(s); ns != 0 {
		t.Fatalf("a 100-token sample taught %v ns/token, want nothing", ns)
	}
	sample(s, 300)
	if ns := learned(s); ns != 300 {
		t.Fatalf("one sample: %v, want 300", ns)
	}
	sample(s, 100)
	if ns := learned(s); ns != 200 {
		t.Fatalf("two samples: %v, want their mean 200", ns)
	}
}

// Concurrent first bytes (one per request goroutine) keep the accounting
// exact and the learned speed among the samples; run under -race.
func TestLearnedSpeedConcurrent(t *testing.T) {
	s := NewState("a:1")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				sample(s, float64(100+(g*200+i)%50))
			}
		}()
	}
	wg.Wait()
	pre, _, ns := s.Work()
	if pre != 0 || s.prefillWaiting.Load() != 0 {
		t.Fatalf("pending prefill %v (%d requests) after every first byte, want 0", pre, s.prefillWaiting.Load())
	}
	if ns < 100 || ns >= 150 || math.IsNaN(ns) {
		t.Fatalf("learned %v ns/token, want within the samples' 100..149", ns)
	}
}

// A first byte's speed sample does not allocate (it runs on every streamed
// response).
func TestPrefillDoneDoesNotAllocate(t *testing.T) {
	s := NewState("a:1")
	ns := 100.0
	if n := testing.AllocsPerRun(100, func() { ns++; sample(s, ns) }); n != 0 {
		t.Fatalf("%.1f allocations per speed sample, want 0", n)
	}
}
