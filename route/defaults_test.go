package route

import (
	"testing"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// TestRunningProxyUsesConfigDefaults starts a Proxy on config.Default()
// and reads back every default it actually runs with, from the structures
// that use them (settings, picker config, prober, scraper, breaker, HTTP
// clients, server), against config.Default(): no package may re-default a
// key that internal/config owns.
func TestRunningProxyUsesConfigDefaults(t *testing.T) {
	def := config.Default()
	cfg := config.Default()
	cfg.Backends.Static = []string{"http://127.0.0.2:9"}
	p, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	snap := p.snap.Load()
	set := snap.set
	check := func(key string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s: the proxy runs with %v, config.Default() says %v", key, got, want)
		}
	}

	// Server.
	check("server.max_body_bytes", int64(p.server.MaxRequestBodySize), def.Server.MaxBodyBytes)
	check("server.max_body_bytes (handler)", set.maxBody, def.Server.MaxBodyBytes)
	check("server.max_header_bytes", p.server.ReadBufferSize, def.Server.MaxHeaderBytes)
	check("server.read_timeout", p.server.ReadTimeout, def.Server.ReadTimeout.D())

	// Upstream, on the backend's client and in the handler.
	b := snap.pool.Backends()[0]
	check("upstream.max_conns_per_backend", b.hc.MaxConns, def.Upstream.MaxConnsPerBackend)
	check("upstream.idle_conn_ttl", b.hc.MaxIdleConnDuration, def.Upstream.IdleConnTTL.D())
	check("upstream.connect_timeout", b.hc.MaxConnWaitTimeout, def.Upstream.ConnectTimeout.D())
	check("upstream.idle_timeout", set.idle, def.Upstream.IdleTimeout.D())
	check("upstream.retries", set.retries, def.Upstream.Retries)

	// Route: what the pickers run with.
	pc := set.pc
	check("route.policy", pc.Policy, def.Route.Policy)
	// route.d and probe.quorum default to auto: the rule's values for
	// this pool's size (route/auto_d_test.go checks that the rule changes
	// them for a large pool).
	if def.Route.D != config.DAuto || def.Probe.Quorum != config.QuorumAuto {
		t.Fatalf("config.Default() route.d %d, probe.quorum %d; this test expects auto", def.Route.D, def.Probe.Quorum)
	}
	wantD, wantQ := def.Sampling(snap.pool.Len())
	check("route.d", pc.D, wantD)
	check("route.weights.queue", pc.Weights.Queue, def.Route.Weights.Queue)
	check("route.weights.kv_cache", pc.Weights.KVCache, def.Route.Weights.KVCache)
	check("route.weights.prefix", pc.Weights.Prefix, def.Route.Weights.Prefix)
	check("route.weights.lora", pc.Weights.LoRA, def.Route.Weights.LoRA)
	check("route.saturation", pc.Saturation, def.Route.Saturation)
	check("route.affinity_max_queue_gap", pc.AffinityGap, def.Route.AffinityMaxQueueGap)
	check("route.prefix.block_chars", set.blockChars, def.Route.Prefix.BlockChars)
	check("route.prefix.max_blocks", set.maxBlocks, def.Route.Prefix.MaxBlocks)
	check("route.prefix.entries_per_backend", len(b.prefix.slots) >= def.Route.Prefix.EntriesPerBackend && len(b.prefix.slots) < 2*def.Route.Prefix.EntriesPerBackend, true)

	// Probe.
	pr, ok := set.prober.(*probe.Prober)
	if !ok {
		t.Fatalf("the default policy runs no *probe.Prober (got %T)", set.prober)
	}
	pcfg := pr.Config()
	hedge, auto, _ := def.Probe.HedgeDelay()
	check("probe.endpoint", pcfg.Endpoint.String(), def.Probe.Endpoint)
	check("probe.deadline", pcfg.Deadline, def.Probe.Deadline.D())
	check("probe.hedge_after", pcfg.HedgeAfter, hedge)
	check("probe.hedge_after auto", pcfg.AutoHedge, auto)
	check("probe.hedges", pcfg.Hedges, def.Probe.Hedges)
	check("probe.hedges (picker)", pc.Hedges, def.Probe.Hedges)
	check("probe.quorum", pcfg.Quorum, wantQ)
	check("probe.fresh_for", pcfg.FreshFor, def.Probe.FreshFor.D())
	check("probe.orca", set.orca, def.Probe.ORCA)

	// Scrape.
	sc := p.scraper.Config()
	check("scrape.interval", sc.Interval, def.Scrape.Interval.D())
	check("scrape.adaptive", sc.Adaptive, def.Scrape.Adaptive)
	check("scrape.min_interval", sc.MinInterval, def.Scrape.MinInterval.D())
	check("scrape.max_interval", sc.MaxInterval, def.Scrape.MaxInterval.D())
	check("scrape.timeout", sc.Timeout, def.Scrape.Timeout.D())
	check("scrape.foreign_change", sc.ForeignChange, def.Scrape.ForeignChange)
	check("scrape.foreign_budget", sc.ForeignBudget, def.Scrape.ForeignBudget)
	check("scrape.stale_after", pc.StaleAfter, def.Scrape.StaleAfter.D())

	// Breaker.
	check("breaker", b.brk.Config(), def.Breaker)

	// Log.
	check("log.access", set.accessLog, def.Log.Access)

	// Not read back here: server.listen, server.admin_listen,
	// server.shutdown_grace, log.level and log.format are used by main.go
	// as they are; backends.dns_refresh by DNS discovery as it is.
}
