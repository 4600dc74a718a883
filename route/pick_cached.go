package route

import "context"

// cachedPicker is route.policy cached: the best score over every eligible
// backend's cached view (as EPP does), never probing. With a ViewSource
// reading true state it is the benchmark's oracle.
type cachedPicker struct {
	sc scorer
}

func newCachedPicker(pc *PickerConfig, pool *Pool, d *Deps) Picker {
	return &cachedPicker{sc: newScorer(pc, pool, d)}
}

// Pick implements Picker.
func (p *cachedPicker) Pick(_ context.Context, info *RequestInfo, exclude []*Backend, s *Scratch) (*Backend, Decision, error) {
	s.all = s.all[:0]
	for _, b := range p.sc.bs {
		if b.Eligible() && !contains(exclude, b) {
			s.all = append(s.all, b)
		}
	}
	if len(s.all) == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	return p.sc.best(info, s, s.all)
}
