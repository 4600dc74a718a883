package fleetsim

import (
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/vllmsim"
)

// AssignFleet replays a fixed request-to-pod assignment, for the offline
// bound (Search): the pods of a Config and the time fleetsim adds around an
// ideal strategy's pick (which never probes). With an assignment fixed,
// each pod's FCFS engine sees only the requests sent to it, so pods replay
// independently: PodTTFTs gives, for one pod, the TTFT each of its requests
// gets in a fleetsim run that sent exactly those requests there.
type AssignFleet struct {
	Sim vllmsim.Config
	// Slowdown is each pod's step multiplier (Config.Slowdown x
	// Config.PodSlowdown).
	Slowdown []float64
	// ToPod is a request's way from its replica to its pod (proxy
	// overhead + RTT/2); Back its first token's way from the pod's step
	// end to the client (RTT/2 + the relay).
	ToPod, Back time.Duration
}

// NewAssignFleet is cfg's fleet (Pods, Sim, Slowdown, PodSlowdown, Params).
func NewAssignFleet(cfg Config) AssignFleet {
	f := AssignFleet{Sim: cfg.Sim, ToPod: cfg.Params.ProxyOverhead + cfg.Params.RTT/2, Back: cfg.Params.RTT/2 + cfg.Params.Relay}
	for i := range cfg.Pods {
		s := max(cfg.Slowdown, 1)
		if i < len(cfg.PodSlowdown) && cfg.PodSlowdown[i] > 1 {
			s *= cfg.PodSlowdown[i]
		}
		f.Slowdown = append(f.Slowdown, s)
	}
	return f
}

// PodTTFTs replays pod p with exactly the jobs idx (indices into jobs, in
// arrival order) as fleetsim drives a pod (an arrival at an idle engine
// starts a step at once; arrivals during a step join its queue at the step's
// end), and stores each one's TTFT in ttft[idx[k]]. The replay stops at the
// last first token (later decode steps change no TTFT).
func (f *AssignFleet) PodTTFTs(p int, jobs []Job, idx []int, ttft []time.Duration) error {
	if len(idx) == 0 {
		return nil
	}
	e, err := vllmsim.NewEngine(f.Sim)
	if err != nil {
		return err
	}
	e.SetSlowdown(f.Slowdown[p])
	reqs := make([]vllmsim.Request, len(idx))
	for k, j := range idx {
		reqs[k] = vllmsim.Request{Prompt: jobs[j].Prompt, MaxTokens: max(jobs[j].MaxTokens, 1), IgnoreEOS: true, Tag: k}
	}
	next, left, stepping := 0, len(idx), false
	for left > 0 {
		if !stepping {
			at := jobs[idx[next]].At + f.ToPod
			e.AdvanceTo(at)
			if err := e.AddAt(&reqs[next], at); err != nil {
				return err
			}
			next++
		}
		start := e.Now()
		res := e.Step()
		if res.Idle {
			stepping = false
			continue
		}
		stepping = true
		end := e.Now()
		for _, ev := range res.Events {
			if ev.Output == 1 {
				k := ev.Req.Tag.(int)
				ttft[idx[k]] = end + f.Back - jobs[idx[k]].At
				left--
			}
		}
		// fleetsim fires equal times in scheduling order: the arrival
		// (scheduled when the request reached its replica) before the
		// step's end (scheduled at the step's start) if it was scheduled
		// first.
		for next < len(idx) {
			j := jobs[idx[next]]
			at := j.At + f.ToPod
			if at > end || (at == end && j.At >= start) {
				break
			}
			if err := e.AddAt(&reqs[next], at); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// TTFTs replays every pod under assign (assign[j] is job j's pod) and
// returns each job's TTFT.
func (f *AssignFleet) TTFTs(jobs []Job, assign []int) ([]time.Duration, error) {
	ttft := make([]time.Duration, len(jobs))
	for p, idx := range members(assign, len(f.Slowdown)) {
		if err := f.PodTTFTs(p, jobs, idx, ttft); err != nil {
			return nil, err
		}
	}
	return ttft, nil
}

// members lists, per pod, the jobs assign sends there, in job order.
func members(assign []int, pods int) [][]int {
	m := make([][]int, pods)
	for j, p := range assign {
		m[p] = append(m[p], j)
	}
	return m
}

// Greedy is the assignment oracle_sim makes (each job, in arrival order, to
// the pod where its first token comes soonest given the jobs before it; ties
// to the lowest pod), by replay. It is the offline search's start.
func (f *AssignFleet) Greedy(jobs []Job) ([]int, error) { return f.GreedyFrom(jobs, nil) }

// GreedyFrom is Greedy for the jobs after fixed: jobs[:len(fixed)] keep the
// pods fixed gives them.
func (f *AssignFleet) GreedyFrom(jobs []Job, fixed []int) ([]int, error) {
	assign := make([]int, len(jobs))
	copy(assign, fixed)
	m := members(assign[:len(fixed)], len(f.Slowdown))
	ttft := make([]time.Duration, len(jobs))
	for j := len(fixed); j < len(jobs); j++ {
		best, bestT := 0, time.Duration(-1)
		for p := range m {
			idx := append(m[p], j)
			if err := f.PodTTFTs(p, jobs, idx, ttft); err != nil {
				return nil, err
			}
			if bestT < 0 || ttft[j] < bestT {
				best, bestT = p, ttft[j]
			}
		}
		assign[j] = best
		m[best] = append(m[best], j)
	}
	return assign, nil
}

// CalibratedJobs is the live bench's calibrated trace replay as jobs:
// window k (from 0) of n rows from the first at offset, spanning dur
// (bench.CalibratedTraceWindow), sizes capped to the bench's model length
// as the bench caps them (the output first).
func CalibratedJobs(rows []bench.TraceRow, offset time.Duration, n, k int, dur time.Duration) []Job {
	win := bench.CalibratedTraceWindow(rows, offset, n, k, dur)
	jobs := make([]Job, len(win))
	for i, r := range win {
		p, o := r.Prompt, r.Output
		if p+o > BenchMaxModelLen {
			o = max(BenchMaxModelLen-p, 1)
			p = min(p, BenchMaxModelLen-o)
		}
		jobs[i] = Job{At: r.At, Prompt: vllmsim.Prompt{Tokens: p}, MaxTokens: o}
	}
	return jobs
}
