package fleetsim

import (
	"cmp"
	"slices"
	"time"
)

// HoldGreedy replays an online router that holds every request until the
// next multiple of hold, then dispatches the batch it holds, 1 us apart,
// each to the pod where its first token comes soonest given everything
// dispatched before it (the exact greedy, as oracle_replay). With sjf the
// batch goes out smallest prompt first, otherwise in arrival order; either
// way each pod's engine serves what reaches it FCFS. It returns each job's
// TTFT from its arrival, the hold included. An analysis of what a short
// hold buys (sight of a burst's next arrivals, and a router-side order);
// hold 0 is the exact greedy.
func (f *AssignFleet) HoldGreedy(jobs []Job, hold time.Duration, sjf bool) ([]time.Duration, error) {
	batch := func(at time.Duration) time.Duration {
		if hold <= 0 {
			return at
		}
		return (at/hold + 1) * hold
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(batch(jobs[a].At), batch(jobs[b].At)); c != 0 || !sjf {
			return c
		}
		return cmp.Compare(jobs[a].Prompt.Tokens, jobs[b].Prompt.Tokens)
	})
	disp := make([]Job, len(jobs))
	for i, j := range order {
		disp[i] = jobs[j]
		if hold > 0 {
			k := 0 // place in its batch
			for k < i && batch(jobs[order[i-k-1]].At) == batch(jobs[j].At) {
				k++
			}
			disp[i].At = batch(jobs[j].At) + time.Duration(k)*time.Microsecond
		}
	}
	g, err := f.Greedy(disp)
	if err != nil {
		return nil, err
	}
	tt, err := f.TTFTs(disp, g)
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(jobs))
	for i, j := range order {
		out[j] = tt[i] + disp[i].At - jobs[j].At
	}
	return out, nil
}
