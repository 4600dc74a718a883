package route

import (
	"context"
	"errors"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// dnsLookupTimeout bounds one resolution of backends.dns.
const dnsLookupTimeout = 2 * time.Second

// startDNSLocked starts the loop that resolves backends.dns ("name:port",
// typically a headless Kubernetes Service) at once and then every
// backends.dns_refresh, and publishes the resulting pool. The lookup runs
// without p.mu (a slow resolver must not stall settle, reap, Reload or
// Close, which take it); only applying a changed answer takes the lock. A
// failed lookup keeps the previous pool (a DNS outage must not empty the
// fleet). The first failure is logged once (warn) and the recovery once
// (info). p.dnsReady is closed once the first lookup is over, so that New
// and Reload can wait for a pool without holding the lock. Call with p.mu
// held.
func (p *Proxy) startDNSLocked(cfg *config.Config) {
	host, port, err := net.SplitHostPort(cfg.Backends.DNS)
	if err != nil {
		p.log.Error().Err(err).Str("key", "backends.dns").Msg("invalid backends.dns")
		return
	}
	refresh := cfg.Backends.DNSRefresh.D()
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan struct{}), make(chan struct{})
	p.dnsCancel, p.dnsDone, p.dnsReady = cancel, done, ready
	go func() {
		defer close(done)
		defer func() {
			if ready != nil {
				close(ready) // stopped before the first lookup ended
			}
		}()
		t := time.NewTicker(refresh)
		defer t.Stop()
		failing := false
		for {
			failing = p.refreshDNS(ctx, cfg.Backends.DNS, host, port, failing)
			if ready != nil {
				close(ready)
				ready = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// refreshDNS resolves host once without p.mu, logs a transition of the
// lookup between failing and working, and applies a successful answer
// under p.mu unless ctx was cancelled meanwhile (the loop was stopped: the
// answer belongs to an old configuration). It returns whether lookups are
// failing now.
func (p *Proxy) refreshDNS(ctx context.Context, dns, host, port string, failing bool) bool {
	addrs, err := p.resolve(ctx, host, port)
	if ctx.Err() != nil {
		return failing
	}
	switch {
	case err != nil && !failing:
		p.log.Warn().Err(err).Str("dns", host).Msg("backends.dns lookup failing; keeping the previous backends")
	case err == nil && failing:
		p.log.Info().Str("dns", host).Msg("backends.dns lookup recovered")
	}
	if err != nil {
		return true
	}
	p.mu.Lock()
	if ctx.Err() == nil {
		p.applyDNSLocked(dns, host, addrs)
	}
	p.mu.Unlock()
	return false
}

// resolve looks up host (bounded by dnsLookupTimeout) and returns the
// sorted "ip:port" addresses. It takes no lock. An empty answer is an
// error: it must not empty the pool.
func (p *Proxy) resolve(ctx context.Context, host, port string) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, dnsLookupTimeout)
	ips, err := p.lookup(lctx, host)
	cancel()
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, errors.New("no addresses")
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	sort.Strings(addrs)
	return addrs, nil
}

// applyDNSLocked publishes the pool for a resolved answer if it changed.
// Call with p.mu held.
func (p *Proxy) applyDNSLocked(dns, host string, addrs []string) {
	if slices.Equal(addrs, p.dnsAddrs) {
		return
	}
	p.dnsAddrs = addrs
	p.log.Info().Str("dns", host).Strs("backends", addrs).Msg("backends.dns resolved")
	p.setBackendsLocked(p.snap.Load().set.cfg, dnsTargets(dns, addrs))
}

// awaitDNS waits, without p.mu, until the first lookup of a DNS loop just
// started is over (bounded by dnsLookupTimeout), so that New and Reload
// return with the resolved pool in place.
func awaitDNS(ready <-chan struct{}) {
	if ready == nil {
		return
	}
	t := time.NewTimer(dnsLookupTimeout + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	}
}

// stopDNSLocked stops the DNS loop, if any. Call with p.mu held; it
// releases and re-takes the lock while waiting for the loop to exit.
func (p *Proxy) stopDNSLocked() {
	if p.dnsCancel == nil {
		return
	}
	cancel, done := p.dnsCancel, p.dnsDone
	p.dnsCancel, p.dnsDone, p.dnsReady = nil, nil, nil
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
