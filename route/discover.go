package route

import (
	"errors"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// Target is one backend found by a discovery source: its base URL or
// host:port, and where it came from (shown by /debug/backends as origin,
// e.g. "static", "dns:vllm:8000", "kubernetes:endpointslice/models/vllm-abc").
type Target struct {
	URL    string
	Origin string
}

// Discover starts a discovery source that watches an external system (the
// Kubernetes API) for the backend set described by k. It returns the
// initial set (it may wait a bounded time for a first answer; an empty set
// when there was none) and later calls publish, from one goroutine at a
// time and in order, with every complete set that differs from the previous
// one. Each set is applied at once: new backends join, removed ones drain
// (no new requests; their streams finish).
//
// publish may block until the proxy's control plane is free; stop ends the
// source and waits for its goroutines, and must not be called from publish.
// After stop returns, publish is never called again.
//
// route declares this narrow hook so that the request path's package does
// not depend on a Kubernetes client; main supplies the implementation.
type Discover func(k config.Kubernetes, log zerolog.Logger, publish func([]Target)) (initial []Target, stop func(), err error)

var errNoDiscover = errors.New("backends.kubernetes: this build of probegate has no Kubernetes discovery")

// discovery is the running external source; guarded by Proxy.mu.
type discovery struct {
	cfg     config.Kubernetes
	stop    func()
	gen     uint64   // bumped at each start and stop: a publish of another generation is ignored
	targets []Target // the last set applied
}

// startDiscoveryLocked starts the external discovery of cfg and applies its
// initial set. Call with p.mu held.
func (p *Proxy) startDiscoveryLocked(cfg *config.Config) error {
	if p.discover == nil {
		return errNoDiscover
	}
	p.disc.gen++
	gen := p.disc.gen
	publish := func(ts []Target) {
		ts = append([]Target(nil), ts...)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed || p.disc.gen != gen {
			return
		}
		p.disc.targets = ts
		p.setBackendsLocked(p.snap.Load().set.cfg, ts)
	}
	initial, stop, err := p.discover(cfg.Backends.Kubernetes, p.log, publish)
	if err != nil {
		return err
	}
	p.disc.cfg, p.disc.stop, p.disc.targets = cfg.Backends.Kubernetes, stop, initial
	p.setBackendsLocked(cfg, initial)
	return nil
}

// stopDiscoveryLocked stops the external discovery, if any. Call with p.mu
// held; it releases and re-takes the lock while the source winds down, so
// that a publish blocked on the lock can return.
func (p *Proxy) stopDiscoveryLocked() {
	if p.disc.stop == nil {
		return
	}
	stop := p.disc.stop
	p.disc.gen++
	p.disc.stop, p.disc.targets, p.disc.cfg = nil, nil, config.Kubernetes{}
	p.mu.Unlock()
	stop()
	p.mu.Lock()
}
