package fleetsim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// SearchOptions bound the offline search of one window's assignment.
type SearchOptions struct {
	// Target is the TTFT the search pushes requests under: it minimizes the
	// number of requests over Target, then their summed excess over it.
	Target time.Duration
	// Iters is how many moves are tried: the search's cost (each move
	// replays two pods), and what makes it deterministic for a Seed.
	Iters int
	Seed  uint64
	// Temp is the annealing's starting temperature, in TTFT: a move that
	// worsens the cost by c is kept with probability exp(-c/temp), temp
	// falling linearly to 0 over Iters. 0: plain descent.
	Temp time.Duration
	// From: jobs before it (in job order) keep their pods (decisions
	// already made, for Rolling); only the rest move.
	From int
}

// SearchResult is the best assignment a search found.
type SearchResult struct {
	Assign []int
	TTFT   []time.Duration
	// Over is how many requests still take longer than the target; Excess
	// their summed time over it.
	Over            int
	Excess          time.Duration
	Tried, Accepted int
}

// Search is a clairvoyant local search over request-to-pod assignments (all
// of jobs' arrivals known in advance; each pod's engine FCFS, unchanged),
// scored by the exact replay (PodTTFTs), from start. Each move picks a
// request over the target, then moves it, or a request that reached the
// same pod in the 10 s before it (work queued ahead of it), or any request
// of its burst (arrived from 10 s before it to 2 s after, on any pod: making
// room), to another pod; one move in four instead swaps it with a request
// that reached that pod within 3 s of it. Without annealing (o.Temp 0) a
// move is kept if the pair (requests over the target, summed excess) does
// not get worse, equal moves included, so the search walks plateaus; with
// it, by the annealing rule on the cost below. It returns the best
// assignment seen, and stops when no request is over the target or after
// o.Iters moves. A heuristic: what it finds is an assignment that exists
// (an upper bound on the best achievable tail), not the optimum.
func (f *AssignFleet) Search(jobs []Job, start []int, o SearchOptions) (SearchResult, error) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x626f756e64))
	assign := slices.Clone(start)
	m := members(assign, len(f.Slowdown))
	ttft := make([]time.Duration, len(jobs))
	for p := range m {
		if err := f.PodTTFTs(p, jobs, m[p], ttft); err != nil {
			return SearchResult{}, err
		}
	}
	tmp := make([]time.Duration, len(jobs))
	// cost is what the annealing descends: a request over the target costs
	// the target plus its excess, the excess capped at the target (so
	// that giving one request up for lost, to bring several others under,
	// pays).
	cost := func(t []time.Duration, idx []int) float64 {
		c := 0.0
		for _, j := range idx {
			if d := t[j] - o.Target; d > 0 {
				c += float64(o.Target + min(d, o.Target))
			}
		}
		return c
	}
	score := func(t []time.Duration, idx []int) (int, time.Duration) {
		n, ex := 0, time.Duration(0)
		for _, j := range idx {
			if d := t[j] - o.Target; d > 0 {
				n++
				ex += d
			}
		}
		return n, ex
	}
	res := SearchResult{}
	best := slices.Clone(assign)
	bestN, bestEx := score(ttft, allJobs(len(jobs)))
	curN, curEx := bestN, bestEx
	var over []int
	var near []int
	for res.Tried < o.Iters {
		over = over[:0]
		for j, t := range ttft {
			if t > o.Target {
				over = append(over, j)
			}
		}
		if len(over) == 0 {
			break
		}
		res.Tried++
		v := over[rng.IntN(len(over))]
		j := v
		switch rng.IntN(3) {
		case 1: // work queued ahead of it on its pod
			near = near[:0]
			for _, k := range m[assign[v]] {
				if jobs[k].At <= jobs[v].At && jobs[k].At >= jobs[v].At-10*time.Second {
					near = append(near, k)
				}
			}
			j = near[rng.IntN(len(near))]
		case 2: // any request of its burst, on any pod (making room)
			near = near[:0]
			for k := range jobs {
				if jobs[k].At <= jobs[v].At+2*time.Second && jobs[k].At >= jobs[v].At-10*time.Second {
					near = append(near, k)
				}
			}
			j = near[rng.IntN(len(near))]
		}
		if j < o.From {
			continue
		}
		a := assign[j]
		b := rng.IntN(len(m) - 1)
		if b >= a {
			b++
		}
		// The swap partner, if any: a request on b within 3 s of j.
		k := -1
		if rng.IntN(4) == 0 {
			near = near[:0]
			for _, c := range m[b] {
				if d := jobs[c].At - jobs[j].At; c >= o.From && d > -3*time.Second && d < 3*time.Second {
					near = append(near, c)
				}
			}
			if len(near) > 0 {
				k = near[rng.IntN(len(near))]
			}
		}
		na, nb := without(m[a], j), with(m[b], j)
		if k >= 0 {
			na, nb = with(na, k), without(nb, k)
		}
		oldN, oldEx := score(ttft, m[a])
		n2, ex2 := score(ttft, m[b])
		oldN, oldEx = oldN+n2, oldEx+ex2
		oldC := cost(ttft, m[a]) + cost(ttft, m[b])
		if err := f.PodTTFTs(a, jobs, na, tmp); err != nil {
			return res, err
		}
		if err := f.PodTTFTs(b, jobs, nb, tmp); err != nil {
			return res, err
		}
		newN, newEx := score(tmp, na)
		n2, ex2 = score(tmp, nb)
		newN, newEx = newN+n2, newEx+ex2
		if o.Temp > 0 {
			temp := float64(o.Temp) * (1 - float64(res.Tried)/float64(o.Iters))
			if d := cost(tmp, na) + cost(tmp, nb) - oldC; d > 0 && (temp <= 0 || rng.Float64() >= math.Exp(-d/temp)) {
				continue
			}
		} else if newN > oldN || (newN == oldN && newEx > oldEx) {
			continue
		}
		res.Accepted++
		m[a], m[b] = na, nb
		assign[j] = b
		if k >= 0 {
			assign[k] = a
		}
		for _, c := range na {
			ttft[c] = tmp[c]
		}
		for _, c := range nb {
			ttft[c] = tmp[c]
		}
		curN, curEx = curN-oldN+newN, curEx-oldEx+newEx
		if curN < bestN || (curN == bestN && curEx < bestEx) {
			bestN, bestEx = curN, curEx
			copy(best, assign)
		}
	}
	res.Assign = best
	var err error
	if res.TTFT, err = f.TTFTs(jobs, best); err != nil {
		return res, err
	}
	res.Over, res.Excess = score(res.TTFT, allJobs(len(jobs)))
	return res, nil
}

// without returns idx less j, as a new slice.
func without(idx []int, j int) []int {
	out := make([]int, 0, len(idx))
	for _, c := range idx {
		if c != j {
			out = append(out, c)
		}
	}
	return out
}

// with returns idx plus j in job order, as a new slice.
func with(idx []int, j int) []int {
	out := make([]int, 0, len(idx)+1)
	i, _ := slices.BinarySearch(idx, j)
	out = append(out, idx[:i]...)
	out = append(out, j)
	return append(out, idx[i:]...)
}

func allJobs(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
