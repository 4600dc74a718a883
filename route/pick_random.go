package route

import "context"

// randomPicker is route.policy random: one eligible backend drawn uniformly.
type randomPicker struct {
	bs   []*Backend
	mod  modN
	rand Rand
}

func newRandomPicker(_ *PickerConfig, pool *Pool, d *Deps) Picker {
	return &randomPicker{bs: pool.backends, mod: newModN(len(pool.backends)), rand: d.Rand}
}

// Pick implements Picker.
func (p *randomPicker) Pick(_ context.Context, _ *RequestInfo, exclude []*Backend, s *Scratch) (*Backend, Decision, error) {
	if sampleEligible(p.bs, &p.mod, s.sample[:1], exclude, p.rand) == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	return s.sample[0], Decision{}, nil
}
