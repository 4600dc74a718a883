package route

// Pool is an immutable snapshot of the backends in service. The control
// plane (config reload, DNS refresh) builds a new Pool and publishes it with
// one atomic swap; the request path only loads it and never locks.
type Pool struct {
	backends []*Backend
}

// NewPool returns a pool of bs, for a simulator or a test driving pickers
// directly (NewPicker). bs must not be modified afterwards; the proxy builds
// its own pools.
func NewPool(bs []*Backend) *Pool { return &Pool{backends: bs} }

// Backends returns the pool's backends; the slice must not be modified.
func (p *Pool) Backends() []*Backend { return p.backends }

// Len returns the number of backends in the pool.
func (p *Pool) Len() int { return len(p.backends) }

// anyHealthy reports whether at least one backend is eligible and not
// failing its background scrapes. Breakers only learn from requests, so
// without traffic a fleet that died looks eligible; its failing scrapes
// tell. Backends that are not scraped (blind policies) count as healthy.
func (p *Pool) anyHealthy() bool {
	for _, b := range p.backends {
		if b.Eligible() && !b.state.ScrapeFailing() {
			return true
		}
	}
	return false
}
