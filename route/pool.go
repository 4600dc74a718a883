package route

// Pool is an immutable snapshot of the backends in service. The control
// plane (config reload, DNS refresh) builds a new Pool and publishes it with
// one atomic swap; the request path only loads it and never locks.
type Pool struct {
	backends []*Backend
}

// Backends returns the pool's backends; the slice must not be modified.
func (p *Pool) Backends() []*Backend { return p.backends }

// Len returns the number of backends in the pool.
func (p *Pool) Len() int { return len(p.backends) }

// anyEligible reports whether at least one backend may be sampled.
func (p *Pool) anyEligible() bool {
	for _, b := range p.backends {
		if b.Eligible() {
			return true
		}
	}
	return false
}
