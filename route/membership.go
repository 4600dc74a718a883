package route

import (
	"net/netip"
	"sort"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/upstreamtls"
	"github.com/probegate/probegate/probe"
)

// This file is pool membership: which backends are in the pool, how a new
// set (static list, DNS answer, discovery event) becomes a new published
// snapshot, and how removed backends drain and are forgotten. It runs on
// the control plane, under Proxy.mu, never on the request path.

// applyBackendsLocked starts DNS or Kubernetes discovery, or applies the
// static list. Call with p.mu held.
func (p *Proxy) applyBackendsLocked(cfg, old *config.Config) error {
	if k := cfg.Backends.Kubernetes; k.Enabled() {
		p.stopDNSLocked()
		if p.disc.stop != nil && p.disc.cfg == k {
			p.setBackendsLocked(cfg, p.disc.targets)
			return nil
		}
		p.stopDiscoveryLocked()
		return p.startDiscoveryLocked(cfg)
	}
	p.stopDiscoveryLocked()
	if cfg.Backends.DNS != "" {
		if old == nil || old.Backends.DNS != cfg.Backends.DNS || old.Backends.DNSRefresh != cfg.Backends.DNSRefresh {
			p.stopDNSLocked()
			p.startDNSLocked(cfg)
		} else {
			p.setBackendsLocked(cfg, dnsTargets(cfg.Backends.DNS, p.dnsAddrs))
		}
		return nil
	}
	p.stopDNSLocked()
	targets := make([]Target, 0, len(cfg.Backends.Static))
	for _, u := range cfg.Backends.Static {
		targets = append(targets, Target{URL: u, Origin: "static"})
	}
	p.setBackendsLocked(cfg, targets)
	return nil
}

// setBackendsLocked publishes a pool of exactly targets (base URLs or
// host:port), reusing the Backends of addresses that stay and draining
// those that go. It is the one path every source (static, DNS,
// Kubernetes) applies a set through. Call with p.mu held.
func (p *Proxy) setBackendsLocked(cfg *config.Config, targets []Target) {
	snap := p.snap.Load()
	keep := make(map[string]bool, len(targets))
	next := make([]*Backend, 0, len(targets))
	for _, t := range targets {
		u := t.URL
		addr, tls, ok := cfg.Backends.TargetAddr(u)
		if !ok {
			p.log.Warn().Str("backend", u).Str("origin", t.Origin).Msg("backend ignored: not http(s)://host:port or host:port")
			continue
		}
		if keep[addr] {
			continue
		}
		keep[addr] = true
		b := p.backends[addr]
		if b != nil && b.https != tls {
			// The address is now spoken to another way (backends.scheme
			// or its URL's scheme changed under a reload). Its requests
			// in flight finish on the old Backend, which leaves the pool
			// now.
			p.scraper.Remove(b.state)
			b.draining.Store(true)
			b.closed.Store(true)
			p.closeIdle(b)
			delete(p.backends, addr)
			p.log.Info().Str("backend", addr).Bool("https", tls).Msg("backend scheme changed: replaced")
			b = nil
		}
		if b == nil || b.draining.Load() && b.closed.Load() {
			b = p.newBackend(addr, u, tls, cfg)
			p.backends[addr] = b
			p.metrics.revive(addr)
			p.log.Info().Str("backend", addr).Str("origin", t.Origin).Msg("backend added")
		} else if b.draining.Load() {
			b.draining.Store(false)
			p.log.Info().Str("backend", addr).Msg("backend returned before it finished draining")
		}
		b.setOrigin(t.Origin)
		next = append(next, b)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].addr < next[j].addr })
	for addr, b := range p.backends {
		if !keep[addr] && !b.draining.Load() {
			b.draining.Store(true)
			p.log.Info().Str("backend", addr).Int("inflight", b.state.Inflight()).Msg("backend removed: draining")
		}
	}
	// Scrape exactly the pool's backends when the policy reads reports.
	for addr, b := range p.backends {
		if keep[addr] && snap.set.reports {
			p.scraper.Add(b.state)
		} else {
			p.scraper.Remove(b.state)
		}
	}
	if err := p.publish(snap.set, &Pool{backends: next}); err != nil {
		// Unreachable: these settings built a Picker when loaded.
		p.log.Error().Err(err).Msg("pool not published")
	}
	p.reapLocked()
}

// reapLocked forgets draining backends with nothing in flight and closes
// their idle connections. Call with p.mu held.
func (p *Proxy) reapLocked() {
	for addr, b := range p.backends {
		if b.draining.Load() && b.state.Inflight() == 0 {
			b.closed.Store(true)
			p.closeIdle(b)
			delete(p.backends, addr)
			p.metrics.forget(addr)
			p.log.Info().Str("backend", addr).Msg("backend drained")
		}
	}
}

// newBackend builds a Backend for addr.
func (p *Proxy) newBackend(addr, url string, tls bool, cfg *config.Config) *Backend {
	conns := &connTable{}
	b := &Backend{
		addr:   addr,
		url:    url,
		https:  tls,
		state:  newState(addr, tls),
		hc:     newHostClient(addr, p.tlsHost(addr, tls), cfg.Upstream, conns, p.log),
		conns:  conns,
		prefix: newPrefixTable(cfg.Route.Prefix.EntriesPerBackend),
	}
	if ap, err := netip.ParseAddrPort(addr); err == nil && !tls {
		b.loopAddr = ap
	}
	b.brk = breaker.New(addr, cfg.Breaker, p.brkNow, func(name string, from, to breaker.State) {
		ev := p.log.Warn()
		if to == breaker.Closed {
			ev = p.log.Info()
		}
		ev.Str("backend", name).Str("from", from.String()).Str("to", to.String()).Msg("breaker state changed")
	})
	return b
}

// tlsHost returns the upstream TLS configuration of the backend at addr,
// or nil when it is not an https backend.
func (p *Proxy) tlsHost(addr string, https bool) *upstreamtls.Host {
	if !https {
		return nil
	}
	return p.tls.Host(addr)
}

// newState returns the load state of the backend at addr, probed and
// scraped over TLS when it is an https backend.
func newState(addr string, https bool) *probe.State {
	if https {
		return probe.NewHTTPSState(addr)
	}
	return probe.NewState(addr)
}

// closeIdle closes b's idle upstream connections and, when the fetcher
// keeps per-backend clients (probe.HTTPFetcher), its probe and scrape
// connections.
func (p *Proxy) closeIdle(b *Backend) {
	b.hc.CloseIdleConnections()
	if f, ok := p.fetcher.(interface{ Forget(*probe.State) }); ok {
		f.Forget(b.state)
	}
}
