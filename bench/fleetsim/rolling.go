package fleetsim

import "time"

// Rolling replays a router with foresight: every step of virtual time it
// fixes the pods of the jobs arriving in the next step, chosen by Search
// over the jobs it can see (those arriving before now + sight; the later
// ones unknown), from the greedy extension of the decisions already made,
// the target, iterations and seed of o applying to each step's search. A
// job arriving at a is thus placed knowing the arrivals up to between
// sight - step and sight after a. With sight as long as the window it is
// Search from the greedy, step by step. It returns each job's pod and TTFT.
func (f *AssignFleet) Rolling(jobs []Job, sight, step time.Duration, o SearchOptions) ([]int, []time.Duration, error) {
	var fixed []int
	for t := time.Duration(0); len(fixed) < len(jobs); t += step {
		known := 0
		for known < len(jobs) && jobs[known].At < t+sight {
			known++
		}
		decide := len(fixed)
		for decide < len(jobs) && jobs[decide].At < t+step {
			decide++
		}
		if decide == len(fixed) {
			continue
		}
		known = max(known, decide)
		g, err := f.GreedyFrom(jobs[:known], fixed)
		if err != nil {
			return nil, nil, err
		}
		o.From = len(fixed)
		r, err := f.Search(jobs[:known], g, o)
		if err != nil {
			return nil, nil, err
		}
		fixed = r.Assign[:decide]
	}
	tt, err := f.TTFTs(jobs, fixed)
	return fixed, tt, err
}
