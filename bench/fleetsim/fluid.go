package fleetsim

import (
	"slices"
	"time"
)

// FluidBound returns lb, where lb[k] is a lower bound on the (k+1)-th
// worst TTFT of jobs (k = 0..maxK) under ANY routing and ANY scheduling on
// f's pods, FCFS or not: a relaxation where the fleet is one fluid server
// as fast as all pods' prefill together (tokens x PrefillPerToken x
// slowdown, no step base, no decode, no KV limit, a prompt split across
// pods at will). Two bounds, the larger kept:
//   - for any run of arrivals a..b, the prefill of all but its k largest
//     prompts cannot end before At[a] + their tokens / fleet speed, and the
//     request whose prefill ends last arrived by At[b]: some request other
//     than k excepted ones waits at least that minus At[b] - At[a];
//   - the (k+1)-th largest time any one request needs alone on the
//     fastest pod (a step's base plus its prompt).
//
// The network and proxy time (ToPod + Back) is added to both.
func (f *AssignFleet) FluidBound(jobs []Job, maxK int) []time.Duration {
	c := f.Sim
	// The fleet's prefill speed in tokens per ns, and the fastest pod's
	// time per token and per step.
	speed, fast := 0.0, f.Slowdown[0]
	for _, s := range f.Slowdown {
		speed += 1 / (float64(c.PrefillPerToken) * s)
		fast = min(fast, s)
	}
	lb := make([]time.Duration, maxK+1)
	alone := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		alone[i] = time.Duration(float64(c.StepBase+time.Duration(j.Prompt.Tokens)*c.PrefillPerToken) * fast)
	}
	slices.Sort(alone)
	for k := 0; k <= maxK && k < len(alone); k++ {
		lb[k] = alone[len(alone)-1-k]
	}
	// top holds the interval's maxK+1 largest prompts, ascending.
	top := make([]int, 0, maxK+2)
	for a := range jobs {
		top = top[:0]
		sum := 0
		for b := a; b < len(jobs); b++ {
			t := jobs[b].Prompt.Tokens
			sum += t
			i, _ := slices.BinarySearch(top, t)
			top = slices.Insert(top, i, t)
			if len(top) > maxK+1 {
				top = top[1:]
			}
			ex := 0 // the k largest, excepted
			for k := 0; k <= maxK; k++ {
				if k > 0 {
					if k > len(top) {
						break
					}
					ex += top[len(top)-k]
				}
				w := time.Duration(float64(sum-ex)/speed) - (jobs[b].At - jobs[a].At)
				lb[k] = max(lb[k], w)
			}
		}
	}
	for k := range lb {
		lb[k] += f.ToPod + f.Back
	}
	return lb
}

// PooledBound is the least T such that the windows' bounds (FluidBound of
// each) allow at most except requests over T in all: with at most except
// requests excepted in all, the rest cannot all be under T. So the
// (except+1)-th worst TTFT of the pooled windows, under any routing, is at
// least the result.
func PooledBound(bounds [][]time.Duration, except int) time.Duration {
	var cand []time.Duration
	for _, lb := range bounds {
		cand = append(cand, lb...)
	}
	slices.Sort(cand)
	for _, t := range cand {
		n := 0
		for _, lb := range bounds {
			k := 0
			for k < len(lb) && lb[k] > t {
				k++
			}
			n += k
		}
		if n <= except {
			return t
		}
	}
	return 0
}
