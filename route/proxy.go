// Package route answers "which backend gets this request?" and forwards it.
// It holds the pool of backends, sampling, scoring and picking (pure
// functions over values), prefix and LoRA affinity, the fasthttp forwarding
// handler with streaming, error mapping, metrics and the admin endpoints.
//
// The request path loads one immutable snapshot (the settings of the
// configuration, the pool and the Picker built over both) through an atomic
// pointer and takes no lock; the control plane (reload, DNS refresh) builds
// a new snapshot and swaps it in. See docs/architecture.md.
package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/upstreamtls"
	"github.com/probegate/probegate/probe"
)

// Options are the dependencies of a Proxy. Only Config is required.
type Options struct {
	// Config is the validated configuration.
	Config *config.Config
	// Logger receives access and state-transition logs. Default: disabled.
	Logger zerolog.Logger
	// Registerer receives the probegate_* metrics. Default: a private
	// registry (see Proxy.Gatherer).
	Registerer prometheus.Registerer
	// Gatherer serves /metrics on the admin handler. Default: the private
	// registry, or Registerer when it is a *prometheus.Registry.
	Gatherer prometheus.Gatherer
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Rand is the request path's randomness. Default: math/rand/v2.Uint64.
	Rand Rand
	// LookupHost resolves backends.dns. Default: net.DefaultResolver.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// Fetcher fetches load for probes and scrapes. Default: a
	// probe.HTTPFetcher on the proxy's upstream.tls (a Fetcher given here
	// speaks to https backends with its own TLS settings).
	Fetcher probe.Fetcher
	// Discover starts Kubernetes discovery (backends.kubernetes). Default:
	// nil, and a config with backends.kubernetes is rejected.
	Discover Discover
	// Views, when set, replaces the backends' reports as the pickers' view
	// of load (the benchmark's oracle reads the simulator's true state).
	// The proxy then neither scrapes nor asks for ORCA headers. Default:
	// nil, StateViews.
	Views ViewSource
}

// Proxy is a running probegate router. Create it with New, serve with
// Serve, reload with Reload, stop with Shutdown. Safe for concurrent use.
type Proxy struct {
	// Immutable after New.
	log zerolog.Logger
	now func() time.Time
	// brkNow is Options.Now as given, for the breakers and the prober: nil
	// when the proxy runs on the time package, so they take the monotonic
	// clock's fast path (the same clock as time.Now's; the prober then
	// reads the clock once per Run instead of twice).
	brkNow  func() time.Time
	rand    Rand
	lookup  func(ctx context.Context, host string) ([]string, error)
	fetcher probe.Fetcher
	// tls is upstream.tls, shared by the https backends' dialers and the
	// default fetcher; replaced (not modified) by Reload.
	tls      *upstreamtls.Source
	views    ViewSource
	discover Discover
	metrics  *Metrics
	gather   prometheus.Gatherer
	server   *fasthttp.Server
	rcPool   sync.Pool
	// idleRelease is clientIdleRelease (tests shorten it).
	idleRelease time.Duration

	// The published snapshot, loaded lock-free on the request path and
	// stored under mu.
	snap atomic.Pointer[snapshot]

	// Lock-free counters and tables.
	memory   Memory       // what routing remembers across pickers
	inflight atomic.Int64 // requests whose response is not yet settled
	holds    headHolds    // responses whose head is held (first_bytes.go)

	// upSeq numbers the requests whose client chose its X-Request-Id, for
	// the suffix that makes the id sent upstream unique (headers.go,
	// appendUpstreamID). It starts at a random value, so that two
	// replicas in front of one fleet do not count alike.
	upSeq atomic.Uint64

	// watch scrapes backends with a long wait for a first byte
	// (progress_watch.go); started by New, stopped by Close.
	watch progressWatch
	// poison remembers bodies two backends dropped in a row (poison.go).
	poison poisonTable

	// Control plane, guarded by mu.
	mu        sync.Mutex
	backends  map[string]*Backend // every backend in the pool or draining
	scraper   *probe.Scraper
	dnsCancel context.CancelFunc
	dnsDone   chan struct{}
	dnsReady  chan struct{} // closed after the DNS loop's first lookup
	dnsAddrs  []string
	disc      discovery
	closed    bool

	// Client connections open now: Shutdown closes those still open when
	// its grace ends, cutting the streams they carry. Lock-free.
	conns connSet
	// SSE streams pumped over hijacked client connections (hijack.go),
	// and whether Shutdown has begun; lock-free.
	hijacks hijackRegistry
	// listeners are Serve's, closed by Shutdown (server.go).
	listeners serveListeners
	// loops are ServeLoops' event loops (server.event_loop; evloop_linux.go),
	// guarded by mu; loopPool holds their requests' *loopReq.
	loops    loopServer
	loopPool sync.Pool
}

// New builds a Proxy from opts and starts its background loops (scrapes,
// DNS refresh). It does not listen: call Serve.
func New(opts Options) (*Proxy, error) {
	if opts.Config == nil {
		return nil, errors.New("route: Options.Config is required")
	}
	p := &Proxy{
		log:      opts.Logger,
		now:      opts.Now,
		brkNow:   opts.Now,
		rand:     opts.Rand,
		lookup:   opts.LookupHost,
		fetcher:  opts.Fetcher,
		views:    opts.Views,
		discover: opts.Discover,
		backends: make(map[string]*Backend),
		tls:      &upstreamtls.Source{},

		idleRelease: clientIdleRelease,
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = defaultRand
	}
	p.upSeq.Store(p.rand())
	if p.lookup == nil {
		p.lookup = net.DefaultResolver.LookupHost
	}
	if p.fetcher == nil {
		p.fetcher = &probe.HTTPFetcher{Now: p.now, TLS: p.tls}
	}
	reg := opts.Registerer
	gather := opts.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gather = r, r
	} else if gather == nil {
		if r, ok := reg.(*prometheus.Registry); ok {
			gather = r
		} else {
			gather = prometheus.DefaultGatherer
		}
	}
	p.gather = gather
	m, err := newMetrics(reg, p)
	if err != nil {
		return nil, err
	}
	p.metrics = m
	p.rcPool.New = func() any { return newReqCtx() }
	p.loopPool.New = func() any { return &loopReq{rc: newReqCtx()} }

	set, err := p.buildSettings(opts.Config)
	if err != nil {
		return nil, err
	}
	p.applyTLS(set.tls, true)
	p.memory.SizePrefixIndex(opts.Config.Route.Prefix.IndexEntries)
	if err := p.publish(set, &Pool{}); err != nil {
		return nil, err
	}
	sc := probe.ScrapeConfigFrom(opts.Config.Scrape)
	ep, err := probe.ParseEndpoint(opts.Config.Probe.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("probe.endpoint: %w", err)
	}
	p.scraper = probe.NewScraper(sc, p.fetcher, ep, m, p.log, p.now)
	p.server = p.newServer(opts.Config)

	p.mu.Lock()
	if err := p.applyBackendsLocked(opts.Config, nil); err != nil {
		p.mu.Unlock()
		p.scraper.Close()
		return nil, err
	}
	ready := p.dnsReady
	p.mu.Unlock()
	awaitDNS(ready) // start with the resolved pool
	p.warnProgressCut(opts.Config, nil)
	p.startProgressWatch()
	return p, nil
}

// buildSettings resolves cfg into the request path's settings and checks
// that a Picker can be built from them. cfg is validated first, by
// internal/config (the one owner of bounds): the proxy refuses exactly what
// -check refuses.
func (p *Proxy) buildSettings(cfg *config.Config) (*settings, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	allow, err := compileAllow(cfg.Route.AllowPaths)
	if err != nil {
		return nil, fmt.Errorf("route.allow_paths: %w", err)
	}
	// Read again (Validate read them too): the files may have changed
	// since, and a reload is how a rotated certificate is picked up.
	ctls, err := cfg.Upstream.TLS.Load()
	if err != nil {
		return nil, err
	}
	pc := PickerConfigFrom(cfg)
	reports := PolicyReadsReports(pc.Policy) && p.views == nil
	set := &settings{
		cfg:           cfg,
		pc:            pc,
		reports:       reports,
		orca:          cfg.Probe.ORCA && reports,
		allow:         allow,
		retries:       cfg.Upstream.Retries,
		retryOnReset:  cfg.Upstream.RetryOnReset,
		blockChars:    cfg.Route.Prefix.BlockChars,
		maxBlocks:     cfg.Route.Prefix.MaxBlocks,
		maxBody:       cfg.Server.MaxBodyBytes,
		idle:          cfg.Upstream.IdleTimeout.D(),
		firstByte:     cfg.Upstream.FirstByteTimeout.D(),
		accessLog:     cfg.Log.Access,
		defaultOutput: float64(cfg.Route.Load.DefaultOutputTokens),
		tls:           ctls,
	}
	// Fail here, before anything is published, on what NewPicker or the
	// prober's conversion refuses. publish sizes the settings again for
	// the pool they are published with.
	set, err = p.sized(set, 0)
	if err != nil {
		return nil, err
	}
	if _, err := p.newPicker(set, &Pool{}); err != nil {
		return nil, err
	}
	return set, nil
}

// sized returns set for a pool of n backends: route.d and probe.quorum as
// internal/config's Sampling gives them (route.d auto: from the pool's
// size), in pc.D and in the probe policy's Prober. It returns set itself
// when that is what set already runs with, else a copy; a changed quorum
// gets a new Prober (its hedge estimator starts afresh, as on a reload).
func (p *Proxy) sized(set *settings, n int) (*settings, error) {
	d, q := set.cfg.Sampling(n)
	probing := set.pc.Policy == config.PolicyProbe
	if set.pc.D == d && (!probing || set.prober != nil && set.quorum == q) {
		return set, nil
	}
	s := *set
	s.pc.D = d
	if probing && (set.prober == nil || set.quorum != q) {
		pcfg := set.cfg.Probe
		pcfg.Quorum = q // resolved: ProberConfigFrom takes it as is
		pconf, err := probe.ProberConfigFrom(pcfg, d)
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		s.prober = probe.NewProber(pconf, p.fetcher, p.metrics, p.brkNow)
		s.quorum = q
	}
	return &s, nil
}

// newPicker builds the Picker of set over pool with the proxy's clock,
// randomness, view source and memory.
func (p *Proxy) newPicker(set *settings, pool *Pool) (Picker, error) {
	d := Deps{Rand: p.rand, Now: p.now, Views: p.views, Memory: &p.memory}
	if set.prober != nil {
		d.Prober = set.prober
	}
	return NewPicker(set.pc, pool, d)
}

// publish sizes set for pool (route.d auto), builds the Picker of set over
// pool and publishes the three as the snapshot the request path reads. It
// logs when a change of the pool makes route.d auto change d. Call with
// p.mu held, or before p is shared.
func (p *Proxy) publish(set *settings, pool *Pool) error {
	set, err := p.sized(set, pool.Len())
	if err != nil {
		return err
	}
	pk, err := p.newPicker(set, pool)
	if err != nil {
		return err
	}
	old := p.snap.Swap(&snapshot{set: set, pool: pool, picker: pk})
	// Only a change the pool caused: a reload publishes its settings over
	// the old pool first, then over the new one.
	if set.cfg.Route.D == config.DAuto && old != nil && old.set.cfg == set.cfg && old.set.pc.D != set.pc.D {
		p.log.Info().Int("backends", pool.Len()).Int("d", set.pc.D).Int("quorum", set.quorum).
			Msg("route.d auto: sampling a new number of candidates for the pool's size")
	}
	return nil
}

// Reload applies a new, already validated configuration: policy, weights,
// probing and backends change for the next request; in-flight requests
// finish on the backends they started on. upstream.tls, its files read
// again, applies at once: pooled https connections dialed under other
// settings or file contents are replaced at their next use (applyTLS).
// Listener addresses, upstream timeouts of existing backends and the
// scrape loop's settings take effect only on restart (for backends that
// stay).
func (p *Proxy) Reload(cfg *config.Config) error {
	set, err := p.buildSettings(cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("route: proxy is shut down")
	}
	old := p.snap.Load()
	if err := p.publish(set, old.pool); err != nil {
		p.mu.Unlock()
		return err // unreachable: buildSettings built a Picker already
	}
	ready := p.dnsReady
	p.applyTLS(set.tls, false)
	if err := p.applyBackendsLocked(cfg, old.set.cfg); err != nil {
		// Discovery could not start: keep the old settings over the
		// current pool.
		p.applyTLS(old.set.tls, false)
		perr := p.publish(old.set, p.snap.Load().pool)
		p.mu.Unlock()
		if perr != nil {
			return errors.Join(err, perr)
		}
		return err
	}
	started := p.dnsReady != ready
	ready = p.dnsReady
	p.mu.Unlock()
	p.warnProgressCut(cfg, old.set.cfg)
	if started {
		awaitDNS(ready) // a new DNS name: return with its pool
	}
	return nil
}

// applyTLS makes c the upstream TLS configuration of connections dialed
// from now on. When it changed anything (another file content or setting),
// pooled https connections are replaced at their next use, by forwarding
// (guardedConn.outdated) and by probes and scrapes (probe.HTTPFetcher).
// With insecure_skip_verify it warns, at start and on every reload that
// keeps it on.
func (p *Proxy) applyTLS(c config.ClientTLS, starting bool) {
	changed := p.tls.Store(c)
	if changed && !starting {
		p.log.Info().Msg("upstream.tls changed: pooled https connections are replaced at their next use")
	}
	if c.Config != nil && c.Config.InsecureSkipVerify {
		p.log.Warn().Str("key", "upstream.tls.insecure_skip_verify").
			Msg("INSECURE: https backends' certificates are NOT verified; anyone on the network path can impersonate a backend and read or alter requests and answers")
	}
}

// Pool returns the current pool snapshot.
func (p *Proxy) Pool() *Pool { return p.snap.Load().pool }

// Ready reports whether at least one backend is eligible and, when the
// policy scrapes, not failing its scrapes (so that a fleet that died while
// idle turns /readyz failing within one scrape interval).
func (p *Proxy) Ready() bool { return p.snap.Load().pool.anyHealthy() }

// Gatherer returns the registry the proxy's metrics are gathered from.
func (p *Proxy) Gatherer() prometheus.Gatherer { return p.gather }

// Close stops the background loops and the event loops of ServeLoops (an
// exchange on one is cut), and closes idle upstream connections. It does
// not wait for in-flight requests: use Shutdown for that.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.stopDNSLocked()
	p.stopDiscoveryLocked()
	p.mu.Unlock()
	p.stopLoops()
	p.scraper.Close()
	p.stopProgressWatch()
	p.mu.Lock()
	for _, b := range p.backends {
		p.closeIdle(b)
	}
	p.mu.Unlock()
}
