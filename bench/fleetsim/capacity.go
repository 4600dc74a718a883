package fleetsim

import (
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// PodCapacity returns the requests/s one pod completes for workload w when
// it is kept saturated (twice its batch seats in flight, closed loop, as
// bench.MeasureCapacity saturates a live fleet), measured over dur of
// virtual time after a warmup of dur/5. The fleet's capacity is Pods times
// this: loads are expressed as multiples of it, as in the bench.
func PodCapacity(w Workload, sim vllmsim.Config, slowdown float64, dur time.Duration, seed uint64) (float64, error) {
	e, err := vllmsim.NewEngine(sim)
	if err != nil {
		return 0, err
	}
	e.SetSlowdown(max(slowdown, 1))
	c := e.Config()
	// Arrival times are irrelevant here: only the sizes are drawn.
	src := newSource(w, 1e6, time.Duration(1<<62), min(c.MaxModelLen, BenchMaxModelLen), seed)
	var jobs []Job
	if w.Name == PrefixName {
		// The prefix scenario's prompts, in a loop: one pod holds the 8
		// system prompts, so this is the capacity of a fleet whose
		// requests all hit their prefix (the loads are fractions of it).
		jobs = PrefixJobs(1000, 4*time.Second, int64(seed), blockSize(c))
		src.replay(jobs)
	}
	return podCapacity(e, dur, func() Job {
		j, ok := src.next()
		if !ok && jobs != nil {
			src.replay(jobs)
			j, _ = src.next()
		}
		return j
	})
}

// podCapacity is PodCapacity on engine e with the jobs next draws.
func podCapacity(e *vllmsim.Engine, dur time.Duration, next func() Job) (float64, error) {
	c := e.Config()
	add := func() error {
		j := next()
		return e.Add(&vllmsim.Request{Prompt: j.Prompt, MaxTokens: j.MaxTokens, IgnoreEOS: true})
	}
	inflight := 0
	for inflight < 2*c.MaxNumSeqs {
		if err := add(); err != nil {
			return 0, err
		}
		inflight++
	}
	warm := dur / 5
	done := 0
	for e.Now() < warm+dur {
		res := e.Step()
		for _, ev := range res.Events {
			if !ev.Finished {
				continue
			}
			if e.Now() >= warm {
				done++
			}
			if err := add(); err != nil {
				return 0, err
			}
		}
	}
	return float64(done) / dur.Seconds(), nil
}
