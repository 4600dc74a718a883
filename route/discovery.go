package route

import (
	"context"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// startDNSLocked starts the loop that resolves backends.dns ("name:port",
// typically a headless Kubernetes Service) every backends.dns_refresh and
// publishes the resulting pool. A failed lookup keeps the previous pool (a
// DNS outage must not empty the fleet); a transition to failing and back is
// logged once each. Call with p.mu held.
func (p *Proxy) startDNSLocked(cfg *config.Config) {
	host, port, err := net.SplitHostPort(cfg.Backends.DNS)
	if err != nil {
		p.log.Error().Err(err).Str("key", "backends.dns").Msg("invalid backends.dns")
		return
	}
	refresh := cfg.Backends.DNSRefresh.D()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.dnsCancel, p.dnsDone = cancel, done
	// Resolve once synchronously so the proxy starts with a pool.
	p.resolveLocked(ctx, cfg, host, port, true)
	go func() {
		defer close(done)
		t := time.NewTicker(refresh)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			p.mu.Lock()
			if ctx.Err() == nil {
				ok := p.resolveLocked(ctx, cfg, host, port, failing)
				failing = !ok
			}
			p.mu.Unlock()
		}
	}()
}

// resolveLocked looks up host and applies the result. It returns false when
// the lookup failed. Call with p.mu held.
func (p *Proxy) resolveLocked(ctx context.Context, cfg *config.Config, host, port string, logOK bool) bool {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	ips, err := p.lookup(lctx, host)
	cancel()
	if err != nil || len(ips) == 0 {
		if logOK {
			p.log.Warn().Err(err).Str("dns", host).Msg("backends.dns lookup failed; keeping the previous backends")
		}
		return false
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	sort.Strings(addrs)
	if slices.Equal(addrs, p.dnsAddrs) {
		return true
	}
	p.dnsAddrs = addrs
	p.log.Info().Str("dns", host).Strs("backends", addrs).Msg("backends.dns resolved")
	p.setBackendsLocked(p.snap.Load().set.cfg, dnsTargets(cfg.Backends.DNS, addrs))
	return true
}

// stopDNSLocked stops the DNS loop, if any. Call with p.mu held; it
// releases and re-takes the lock while waiting for the loop to exit.
func (p *Proxy) stopDNSLocked() {
	if p.dnsCancel == nil {
		return
	}
	cancel, done := p.dnsCancel, p.dnsDone
	p.dnsCancel, p.dnsDone = nil, nil
	cancel()
	p.mu.Unlock()
	<-done
	p.mu.Lock()
}

// dnsTargets labels the addresses resolved from backends.dns with their
// origin.
func dnsTargets(dns string, addrs []string) []Target {
	ts := make([]Target, len(addrs))
	for i, a := range addrs {
		ts[i] = Target{URL: a, Origin: "dns:" + dns}
	}
	return ts
}
