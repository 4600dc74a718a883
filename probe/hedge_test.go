package probe

import (
	"sync"
	"testing"
	"time"
)

func TestHedgeEstimator(t *testing.T) {
	const deadline = 5 * time.Millisecond
	tests := []struct {
		name    string
		samples func(i int) time.Duration
		n       int
		want    time.Duration
	}{
		{"cold start is half the deadline", func(int) time.Duration { return time.Millisecond }, hedgeMinSample - 1, deadline / 2},
		{"p95 of a uniform spread", func(i int) time.Duration { return time.Duration(i%100+1) * 10 * time.Microsecond }, 1000, 960 * time.Microsecond},
		{"floor", func(int) time.Duration { return time.Microsecond }, 200, hedgeFloor},
		{"capped at the deadline", func(int) time.Duration { return time.Second }, 200, deadline},
		{"recent samples only", func(i int) time.Duration {
			if i < 500 {
				return 4 * time.Millisecond
			}
			return time.Millisecond
		}, 500 + hedgeRing, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newHedgeEstimator(deadline)
			for i := range tt.n {
				e.Observe(tt.samples(i))
			}
			// The estimate is recomputed every hedgeEvery samples.
			if got := e.HedgeAfter(); got < tt.want-20*time.Microsecond || got > tt.want+20*time.Microsecond {
				t.Errorf("HedgeAfter = %v, want about %v", got, tt.want)
			}
		})
	}
	if e := newHedgeEstimator(100 * time.Microsecond); e.HedgeAfter() != 100*time.Microsecond {
		t.Errorf("floor above a tiny deadline: %v", e.HedgeAfter())
	}
}

func TestHedgeEstimatorConcurrent(t *testing.T) {
	e := newHedgeEstimator(10 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				e.Observe(time.Millisecond)
				if h := e.HedgeAfter(); h <= 0 || h > 10*time.Millisecond {
					t.Errorf("HedgeAfter = %v", h)
				}
			}
		})
	}
	wg.Wait()
	if e.HedgeAfter() != time.Millisecond {
		t.Errorf("HedgeAfter = %v", e.HedgeAfter())
	}
}

func TestExportedHedgeEstimator(t *testing.T) {
	h := NewHedgeEstimator(4 * time.Millisecond)
	if got := h.HedgeAfter(); got != 2*time.Millisecond {
		t.Fatalf("cold start HedgeAfter = %v, want half the deadline", got)
	}
	for range hedgeRing {
		h.Observe(time.Millisecond)
	}
	if got := h.HedgeAfter(); got != time.Millisecond {
		t.Fatalf("HedgeAfter after 1ms round trips = %v, want 1ms", got)
	}
}
