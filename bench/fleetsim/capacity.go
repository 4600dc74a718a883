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
	add := func() error {
		j, _ := src.next()
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
