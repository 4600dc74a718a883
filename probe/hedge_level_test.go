package probe

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// binomialTail is P(Binomial(n, p) >= k) by the textbook sum, written
// independently of binomialAtLeast's recurrence.
func binomialTail(n, k int, p float64) float64 {
	sum := 0.0
	for j := k; j <= n; j++ {
		lc, _ := math.Lgamma(float64(n + 1))
		a, _ := math.Lgamma(float64(j + 1))
		b, _ := math.Lgamma(float64(n - j + 1))
		sum += math.Exp(lc-a-b) * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
	}
	return sum
}

func TestHedgeLevel(t *testing.T) {
	closed := []struct {
		waiting, need int
		q, want       float64
	}{
		{1, 1, 0.95, 0.95},
		{2, 2, 0.95, math.Sqrt(0.95)},     // both of two: ~p97.5
		{2, 1, 0.95, 1 - math.Sqrt(0.05)}, // the first of two: ~p77.6
		{3, 3, 0.9, math.Cbrt(0.9)},
		{2, 5, 0.95, math.Sqrt(0.95)}, // more needed than waiting: wait for all
		{2, 0, 0.95, 1 - math.Sqrt(0.05)},
		{0, 1, 0.95, 0.95},
		{4, 2, 0, 0},
		{4, 2, 1, 1},
	}
	for _, c := range closed {
		if got := HedgeLevel(c.waiting, c.need, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("HedgeLevel(%d, %d, %v) = %v, want %v", c.waiting, c.need, c.q, got, c.want)
		}
	}
	// Every level solves P(Binomial(waiting, p) >= need) = q, and waiting
	// for more answers never hedges earlier.
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		for w := 1; w <= 20; w++ {
			prev := 0.0
			for n := 1; n <= w; n++ {
				p := HedgeLevel(w, n, q)
				if tail := binomialTail(w, n, p); math.Abs(tail-q) > 1e-9 {
					t.Errorf("q=%v w=%d n=%d: level %v gives P(>= n answered) = %v", q, w, n, p, tail)
				}
				if p < prev {
					t.Errorf("q=%v w=%d: level for %d answers %v below that for %d, %v", q, w, n, p, n-1, prev)
				}
				prev = p
			}
		}
	}
	// The table the Prober reads agrees with the function, and beyond it
	// the level is computed.
	for _, c := range [][2]int{{1, 1}, {2, 2}, {2, 1}, {16, 9}, {40, 39}} {
		if got, want := hedgeLevel(c[0], c[1]), HedgeLevel(c[0], c[1], hedgeQuantile); got != want {
			t.Errorf("hedgeLevel(%d, %d) = %v, want %v", c[0], c[1], got, want)
		}
	}
}

func TestHedgeAfterFor(t *testing.T) {
	e := newHedgeEstimator(5 * time.Millisecond)
	if got := e.HedgeAfterFor(2, 2); got != 2500*time.Microsecond {
		t.Fatalf("cold HedgeAfterFor(2, 2) = %v, want half the deadline", got)
	}
	// Round trips 10µs, 20µs, ..., 1280µs: the j-th smallest of 128 sits
	// at quantile j/129.
	for i := range hedgeRing {
		e.Observe(time.Duration(i+1) * 10 * time.Microsecond)
	}
	for _, c := range []struct {
		waiting, need int
		want          time.Duration
	}{
		{1, 1, 1230 * time.Microsecond}, // p95: 0.95 x 129 = 122.6
		{2, 2, 1260 * time.Microsecond}, // p97.5: 0.9747 x 129 = 125.7
		{2, 1, 1000 * time.Microsecond}, // p77.6: 0.776 x 129 = 100.2
		{3, 3, 1270 * time.Microsecond}, // p98.3: 126.8
	} {
		if got := e.HedgeAfterFor(c.waiting, c.need); got != c.want {
			t.Errorf("HedgeAfterFor(%d, %d) = %v, want %v", c.waiting, c.need, got, c.want)
		}
	}
	if e.HedgeAfter() != e.HedgeAfterFor(1, 1) {
		t.Errorf("HedgeAfter %v != HedgeAfterFor(1, 1) %v", e.HedgeAfter(), e.HedgeAfterFor(1, 1))
	}
}

// rttFetcher answers each backend after the round trip set for it before
// its Run, like HTTPFetcher: deaf to cancellation (fasthttp cannot abandon
// a request in flight, so a probe left behind by its Run still answers and
// is observed), a timeout at the ctx deadline.
type rttFetcher struct {
	mu  sync.Mutex
	rtt map[*State]time.Duration
}

func (f *rttFetcher) Fetch(ctx context.Context, s *State, _ Endpoint) (Load, error) {
	f.mu.Lock()
	d := f.rtt[s]
	delete(f.rtt, s)
	f.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		time.Sleep(time.Until(dl))
		return Load{}, ErrTimeout
	}
	time.Sleep(d)
	return Unknown(time.Now(), SourceNone), nil
}

// TestProberQuorumHedgeRate: with auto hedging, about 5% of the Runs hedge
// whether a Run waits on one probe or for both of two (quorum 2, d=2).
// Hedging at the p95 of one round trip would hedge a Run that waits for
// two whenever either is slower, 1-0.95^2, about 10% of them.
func TestProberQuorumHedgeRate(t *testing.T) {
	for _, tc := range []struct{ d, quorum int }{{1, 1}, {2, 2}} {
		t.Run(fmt.Sprintf("d=%d/quorum=%d", tc.d, tc.quorum), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &rttFetcher{rtt: map[*State]time.Duration{}}
				p := NewProber(ProberConfig{Deadline: 5 * ms, AutoHedge: true, Hedges: 1, Quorum: tc.quorum}, f, nil, nil)
				// Round trips: 200µs plus a lognormal service time of
				// median 300µs (the fleet simulation's probe model), all
				// well inside the deadline.
				rng := rand.New(rand.NewPCG(11, uint64(tc.d)))
				rtt := func() time.Duration {
					return 200*time.Microsecond + time.Duration(300e3*math.Exp(0.6*rng.NormFloat64()))
				}
				const warm, runs = 200, 4000
				hedged, probed := 0, 0
				for i := range warm + runs {
					cands, spares := make([]*State, tc.d), []*State{NewState("spare")}
					f.mu.Lock()
					for j := range cands {
						cands[j] = NewState("cand")
						f.rtt[cands[j]] = rtt()
					}
					f.rtt[spares[0]] = rtt()
					f.mu.Unlock()
					res := p.Run(context.Background(), cands, spares)
					if res.Answered < tc.quorum {
						t.Fatalf("Run %d = %+v: quorum not met", i, res)
					}
					if i >= warm {
						hedged += res.Hedged
						probed += res.Probed
					}
					// Late answers of this Run land before the next one.
					time.Sleep(5 * ms)
				}
				rate := float64(hedged) / runs
				t.Logf("hedged %.2f%% of %d Runs, %.3f probes per Run", 100*rate, runs, float64(probed)/runs)
				if rate < 0.025 || rate > 0.075 {
					t.Errorf("hedged %.2f%% of Runs, want about 5%%", 100*rate)
				}
			})
		})
	}
}

// BenchmarkHedgeAfterFor is the per-request cost of the auto hedge delay
// (one table read and two atomic loads) and of observing a round trip.
func BenchmarkHedgeAfterFor(b *testing.B) {
	e := newHedgeEstimator(5 * time.Millisecond)
	for i := range hedgeRing {
		e.Observe(time.Duration(i+1) * time.Microsecond)
	}
	b.Run("waiting=2/need=2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = e.HedgeAfterFor(2, 2)
		}
	})
	b.Run("observe", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			e.Observe(time.Duration(i%1000) * time.Microsecond)
		}
	})
}
