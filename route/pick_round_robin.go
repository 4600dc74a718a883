package route

import (
	"context"

	"github.com/probegate/probegate/probe"
)

// roundRobinPicker is route.policy round_robin: the next eligible backend
// after a shared cursor (Memory), ignoring load.
type roundRobinPicker struct {
	bs []*Backend
	rr *Memory
}

func newRoundRobinPicker(_ *PickerConfig, pool *Pool, d *Deps) Picker {
	return &roundRobinPicker{bs: pool.backends, rr: d.Memory}
}

// Pick implements Picker.
func (p *roundRobinPicker) Pick(_ context.Context, _ *RequestInfo, exclude []*Backend, _ *Scratch) (*Backend, Decision, error) {
	n := uint64(len(p.bs))
	if n == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	start := p.rr.rr.Add(1)
	for i := uint64(0); i < n; i++ {
		b := p.bs[(start+i)%n]
		if b.Eligible() && !contains(exclude, b) {
			return b, Decision{Source: probe.SourceNone}, nil
		}
	}
	return nil, Decision{}, ErrNoBackend
}
