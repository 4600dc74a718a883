package route

import (
	"context"

	"github.com/probegate/probegate/probe"
)

// leastInflightPicker is route.policy least_inflight: power-of-d choices on
// this proxy's own in-flight counts (no reports).
type leastInflightPicker struct {
	bs   []*Backend
	mod  modN
	d    int
	rand Rand
}

func newLeastInflightPicker(pc *PickerConfig, pool *Pool, d *Deps) Picker {
	return &leastInflightPicker{bs: pool.backends, mod: newModN(len(pool.backends)), d: pc.D, rand: d.Rand}
}

// Pick implements Picker.
func (p *leastInflightPicker) Pick(_ context.Context, _ *RequestInfo, exclude []*Backend, s *Scratch) (*Backend, Decision, error) {
	k := sampleEligible(p.bs, &p.mod, s.sample[:p.d], exclude, p.rand)
	if k == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	s.cands = s.cands[:0]
	for i := 0; i < k; i++ {
		s.cands = append(s.cands, Candidate{Index: i, Queue: float64(s.sample[i].state.Inflight())})
	}
	i := PickLeast(s.cands, p.rand())
	return s.sample[s.cands[i].Index], Decision{Source: probe.SourceLocal}, nil
}
