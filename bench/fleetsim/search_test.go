package fleetsim

import (
	"cmp"
	"slices"
	"testing"
	"time"
)

// twoPods is a fleet of two equal pods as the trace runs them.
func twoPods() AssignFleet {
	w := LognormalWorkload()
	return NewAssignFleet(Config{Pods: 2, Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams()})
}

// Two 4,000-token prompts then an 8,000-token one, 1 ms apart, on two equal
// pods: greedy spreads the first two, so the third waits behind one of them
// (1.46 s); sending both short ones to the same pod (the second's TTFT
// 0.98 s) leaves the other free for the long one (0.97 s). The search finds
// that from the greedy start; with no moves it stays where it started.
func TestSearchMakesRoomForALateLongPrompt(t *testing.T) {
	f := twoPods()
	jobs := []Job{job(0, 4000, 1), job(time.Millisecond, 4000, 1), job(2*time.Millisecond, 8000, 1)}
	g, err := f.Greedy(jobs)
	if err != nil {
		t.Fatal(err)
	}
	gt, _ := f.TTFTs(jobs, g)
	if gt[2] < 1400*time.Millisecond {
		t.Fatalf("greedy %v: the long prompt's TTFT %v, want it behind a short one (~1.46 s)", g, gt[2])
	}
	o := SearchOptions{Target: 1200 * time.Millisecond, Iters: 200, Seed: 1}
	r, err := f.Search(jobs, g, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Over != 0 || r.Assign[0] != r.Assign[1] || r.Assign[2] == r.Assign[0] {
		t.Fatalf("search: assignment %v, TTFTs %v, %d over %v", r.Assign, r.TTFT, r.Over, o.Target)
	}
	o.Iters = 0
	if r, _ := f.Search(jobs, g, o); r.Over != 1 {
		t.Fatalf("no moves: %d over the target, want greedy's 1", r.Over)
	}
}

// The fluid bound on one pod: two 8,000-token prompts at 0 s. The worst
// TTFT is at least both prefills back to back (16,000 x 120 us), the
// second worst at least one prompt's time alone (a step's base + 8,000 x
// 120 us); the replay (the second behind the first) is above both.
func TestFluidBoundOnePod(t *testing.T) {
	w := LognormalWorkload()
	f := NewAssignFleet(Config{Pods: 1, Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams()})
	jobs := []Job{job(0, 8000, 1), job(0, 8000, 1)}
	lb := f.FluidBound(jobs, 1)
	net := f.ToPod + f.Back
	if want := 16000*120*time.Microsecond + net; lb[0] != want {
		t.Errorf("worst >= %v, want %v", lb[0], want)
	}
	if want := 12*time.Millisecond + 8000*120*time.Microsecond + net; lb[1] != want {
		t.Errorf("second worst >= %v, want %v", lb[1], want)
	}
	tt, err := f.TTFTs(jobs, []int{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if hi, lo := max(tt[0], tt[1]), min(tt[0], tt[1]); hi < lb[0] || lo < lb[1] {
		t.Errorf("replay %v below the bound %v", tt, lb)
	}
}

// On trace windows the bound stays under what the greedy and the search
// reach, for every rank it covers, and PooledBound lets through at most the
// requests it may except.
func TestFluidBoundUnderReachedTails(t *testing.T) {
	var bounds [][]time.Duration
	for k := range 3 {
		jobs, cfg, _, _ := traceWindowRun(t, "least_inflight", k)
		f := NewAssignFleet(cfg)
		g, err := f.Greedy(jobs)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.Search(jobs, g, SearchOptions{Target: time.Second, Iters: 300, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		lb := f.FluidBound(jobs, 10)
		bounds = append(bounds, lb)
		gt, _ := f.TTFTs(jobs, g)
		for _, tt := range [][]time.Duration{gt, r.TTFT} {
			s := sortedDesc(tt)
			for i := range lb {
				if s[i] < lb[i] {
					t.Fatalf("window %d: %d-th worst TTFT %v under the bound %v", k, i+1, s[i], lb[i])
				}
			}
		}
	}
	for _, ex := range []int{0, 3, 10} {
		b := PooledBound(bounds, ex)
		n := 0
		for _, lb := range bounds {
			for _, v := range lb {
				if v > b {
					n++
				}
			}
		}
		if n > ex {
			t.Errorf("PooledBound(%d) = %v leaves %d bounds above it", ex, b, n)
		}
	}
}

func sortedDesc(ts []time.Duration) []time.Duration {
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	return s
}

// One pod; an 8,000-token prompt at 0 and a 100-token one 1 ms later.
// Held to 10 ms and sent smallest first, the short one is served first (its
// TTFT: the 9 ms it was held plus one short step); in arrival order it waits
// behind the long prefill (~0.97 s). Without a hold the replay is the greedy.
func TestHoldGreedyOrdersABatch(t *testing.T) {
	w := LognormalWorkload()
	f := NewAssignFleet(Config{Pods: 1, Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams()})
	jobs := []Job{job(0, 8000, 1), job(time.Millisecond, 100, 1)}
	sjf, err := f.HoldGreedy(jobs, 10*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	fifo, _ := f.HoldGreedy(jobs, 10*time.Millisecond, false)
	if sjf[1] > 50*time.Millisecond || fifo[1] < 900*time.Millisecond {
		t.Fatalf("short prompt's TTFT: %v smallest first, %v in arrival order", sjf[1], fifo[1])
	}
	if sjf[0] < fifo[0]+20*time.Millisecond {
		t.Errorf("long prompt's TTFT %v smallest first, %v in arrival order: want it behind the short one", sjf[0], fifo[0])
	}
	none, _ := f.HoldGreedy(jobs, 0, true)
	g, _ := f.TTFTs(jobs, []int{0, 0})
	if !slices.Equal(none, g) {
		t.Errorf("hold 0: %v, greedy %v", none, g)
	}
}

// Rolling on TestSearchMakesRoomForALateLongPrompt's three prompts: seeing
// 10 ms ahead, the first decision already knows the long prompt is coming
// and leaves it a pod (its TTFT ~0.97 s); seeing 1 ms ahead, each short
// prompt is placed greedily before the long one is known, and it waits
// behind one of them (~1.46 s).
func TestRollingUsesItsSight(t *testing.T) {
	f := twoPods()
	jobs := []Job{job(0, 4000, 1), job(time.Millisecond, 4000, 1), job(2*time.Millisecond, 8000, 1)}
	o := SearchOptions{Target: 1200 * time.Millisecond, Iters: 200, Seed: 1}
	_, far, err := f.Rolling(jobs, 10*time.Millisecond, time.Millisecond, o)
	if err != nil {
		t.Fatal(err)
	}
	_, near, _ := f.Rolling(jobs, time.Millisecond, time.Millisecond, o)
	if far[2] > o.Target || near[2] < 1400*time.Millisecond {
		t.Fatalf("long prompt's TTFT: %v seeing 10 ms ahead, %v seeing 1 ms", far[2], near[2])
	}
}
