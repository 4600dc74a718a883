package route

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/probe"
)

// Metrics holds the probegate_* families. It registers on an injected
// Registerer (never the global one) and implements probe.Observer so the
// prober and scraper report without importing Prometheus. Safe for
// concurrent use.
type Metrics struct {
	requestsVec     *prometheus.CounterVec
	duration        prometheus.Histogram
	firstByte       prometheus.Histogram
	probesVec       *prometheus.CounterVec
	probeDuration   prometheus.Histogram
	decisionsVec    *prometheus.CounterVec
	stateAge        prometheus.Histogram
	decideTime      prometheus.Histogram
	scrapesVec      *prometheus.CounterVec
	scrapeIntervalV *prometheus.GaugeVec
	retriesVec      *prometheus.CounterVec
	resentVec       *prometheus.CounterVec           // 5xx answers re-sent for a second opinion, by backend and code
	retries         [retryReasons]prometheus.Counter // by retryReason
	shed            prometheus.Counter
	// progressScrapes counts the progress watch's answered scrapes
	// (progress_watch.go); excused the failures the breaker was not told
	// of, by reason (excuseReason).
	progressScrapes prometheus.Counter
	// progressStreamScrapes counts those of them taken while a response
	// body on the backend was silent past upstream.idle_timeout/2.
	progressStreamScrapes prometheus.Counter
	excusedVec            *prometheus.CounterVec
	excused               [excuseOverloaded + 1]prometheus.Counter
	poison                prometheus.Counter                     // requests two backends dropped in a row (poison.go)
	probes                [len(probeOutcomes)]prometheus.Counter // by outcome (probeOutcomes' order), resolved once
	decisions             [probe.SourceOracle + 1]prometheus.Counter
	codeNames             sync.Map // int -> string, status code label cache
	noneCodes             sync.Map // int -> prometheus.Counter: backend "none", by code

	// Backends whose series were deleted (reaped) in the last goneFor,
	// guarded by goneMu so that a scrape report racing the reap cannot
	// recreate a series.
	goneMu sync.Mutex
	gone   map[string]time.Time
}

var _ probe.Observer = (*Metrics)(nil)

func newMetrics(reg prometheus.Registerer, p *Proxy) (*Metrics, error) {
	m := &Metrics{
		requestsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_requests_total",
			Help: "Requests answered, by backend (\"none\" when no backend was reached) and HTTP status (499: the client went away).",
		}, []string{"backend", "code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probegate_request_duration_seconds",
			Help:    "Time from receiving a request to the end of its response (the whole stream).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}),
		firstByte: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probegate_first_byte_seconds",
			Help:    "Time from receiving a request to the upstream's response headers (routing, probing and the backend's time to first byte).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}),
		probesVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_probes_total",
			Help: "Synchronous probes by outcome: ok, timeout, error, cancelled (sent, then abandoned without an answer once every request waiting for it had its quorum), hedge (a hedged probe sent), skipped_fresh (cached state fresh enough), coalesced (a request waited for a probe already in flight instead of sending one), skipped_slow (a candidate whose last probe did not answer within probe.deadline was not waited for), skipped_recent (a candidate whose state was older than probe.fresh_for but younger than twice it was not waited for; a probe nobody waits for refreshed it). Probes sent = ok + timeout + error + cancelled.",
		}, []string{"outcome"}),
		probeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probegate_probe_duration_seconds",
			Help:    "Round-trip time of answered synchronous probes.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
		decisionsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_decisions_total",
			Help: "Routing decisions by the source of the winner's state: probe, orca, scrape, local (this proxy's in-flight count alone), none (a blind policy, round_robin or random, decided on no state).",
		}, []string{"source"}),
		stateAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probegate_decision_state_age_seconds",
			Help:    "Age of the load report the winning backend was judged on.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		decideTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probegate_decision_duration_seconds",
			Help:    "Time spent choosing a backend for one attempt: sampling, synchronous probes (bounded by probe.deadline) and scoring.",
			Buckets: prometheus.ExponentialBuckets(0.000005, 2, 18),
		}),
		scrapesVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_scrapes_total",
			Help: "Asynchronous scrapes by backend and outcome (ok, timeout, error).",
		}, []string{"backend", "outcome"}),
		scrapeIntervalV: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "probegate_scrape_interval_seconds",
			Help: "Current scrape interval per backend (adaptive: follows the request rate sent to it).",
		}, []string{"backend"}),
		retriesVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_retries_total",
			Help: "Attempts re-picked before any response byte reached the client, by reason of the failed attempt: connect (dial failed), reset (connection closed or reset before the first response byte, e.g. a stale keep-alive connection to a restarted pod), breaker (breaker refused), after_head (connection closed or reset after the response head, before any body byte reached the client), server_error (a 5xx answer re-sent for a second opinion), too_many_requests (a 429 answer re-sent to another backend).",
		}, []string{"reason"}),
		resentVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_resent_server_errors_total",
			Help: "5xx answers that did not reach the client because the request was re-sent to another backend for a second opinion (upstream.retries under upstream.retry_on_reset), by the backend that answered and its status: the per-backend side of retries_total{reason=\"server_error\"}, which counts the re-picks. Whether each counted against that backend's breaker follows from the other backend's answer (breaker_excused_total{reason=\"also_failed\"} when it failed too).",
		}, []string{"backend", "code"}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probegate_shed_total",
			Help: "Requests answered 429 because every candidate was saturated (route.saturation.shed).",
		}),
		progressScrapes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probegate_progress_scrapes_total",
			Help: "Answered /metrics scrapes of backends with a request waiting for its first response byte longer than upstream.first_byte_timeout/2, a response body silent longer than upstream.idle_timeout/2, or a half-open breaker's trial under way, taken so that a long generation's timeout and a queued or preempted stream's silence are judged on the backend's token counters under every policy.",
		}),
		progressStreamScrapes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probegate_progress_stream_scrapes_total",
			Help: "Of probegate_progress_scrapes_total, the scrapes taken while a response body on the backend was silent longer than upstream.idle_timeout/2 (a stream queued or preempted by the model server, or a stuck one).",
		}),
		excusedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probegate_breaker_excused_total",
			Help: "Upstream failures not counted against the backend's breaker, by reason: progress (a non-stream first-byte timeout, or a stream silent past upstream.idle_timeout before its first bytes or midway, while the backend's token counters advanced), healthy (a 5xx answer while the backend answered the proxy's one-token canary completion without a 5xx), also_failed (a 5xx answer re-sent to another backend that answered 5xx or 4xx too), overloaded (a 503 answer with Retry-After: the backend said it is overloaded).",
		}, []string{"reason"}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probegate_poison_requests_total",
			Help: "Requests dropped by two backends in a row (connection closed or reset after the request went out, before any answer byte reached the client): not re-sent again, and their body is not re-sent after a drop for 10 minutes (a request that crashes pods would crash one more with each re-send).",
		}),
	}
	m.excused[excuseProgress] = m.excusedVec.WithLabelValues("progress")
	m.excused[excuseHealthy] = m.excusedVec.WithLabelValues("healthy")
	m.excused[excuseAlsoFailed] = m.excusedVec.WithLabelValues("also_failed")
	m.excused[excuseOverloaded] = m.excusedVec.WithLabelValues("overloaded")
	for i, o := range probeOutcomes {
		m.probes[i] = m.probesVec.WithLabelValues(o)
	}
	m.retries[retryConnect] = m.retriesVec.WithLabelValues("connect")
	m.retries[retryReset] = m.retriesVec.WithLabelValues("reset")
	m.retries[retryStale] = m.retries[retryReset]
	m.retries[retryBreaker] = m.retriesVec.WithLabelValues("breaker")
	m.retries[retryAfterHead] = m.retriesVec.WithLabelValues("after_head")
	m.retries[retryServerError] = m.retriesVec.WithLabelValues("server_error")
	m.retries[retryTooMany] = m.retriesVec.WithLabelValues("too_many_requests")
	// DESIGN.md's four sources, and none (a blind policy, round_robin or
	// random, decided on no state), are always exported. The benchmark's
	// oracle series exists only in a proxy built with a view source
	// (Options.Views); elsewhere the slot is never used.
	for _, s := range []probe.Source{probe.SourceNone, probe.SourceProbe, probe.SourceORCA, probe.SourceScrape, probe.SourceLocal} {
		m.decisions[s] = m.decisionsVec.WithLabelValues(s.String())
	}
	m.decisions[probe.SourceOracle] = m.decisions[probe.SourceNone]
	if p.views != nil {
		m.decisions[probe.SourceOracle] = m.decisionsVec.WithLabelValues(probe.SourceOracle.String())
	}
	for _, c := range []prometheus.Collector{
		m.requestsVec, m.duration, m.firstByte, m.probesVec, m.probeDuration,
		m.decisionsVec, m.stateAge, m.decideTime, m.scrapesVec, m.scrapeIntervalV, m.retriesVec, m.resentVec, m.shed,
		m.progressScrapes, m.progressStreamScrapes, m.excusedVec, m.poison,
		&poolCollector{p: p},
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// requests counts one answered request; b is nil when no backend was
// reached. The counter of each (backend, code) pair is resolved once and
// cached on the Backend, so the request path skips the vector's lookup and
// its lock.
func (m *Metrics) requests(b *Backend, code int) {
	if b == nil {
		// Resolved once per code: WithLabelValues hashes the labels and
		// takes the vector's lock, and refusals come at the rate of the
		// traffic (every request while no backend is eligible). The
		// "none" series is never deleted, so the cache cannot go stale.
		m.incCached(&m.noneCodes, m.requestsVec, "none", code)
		return
	}
	m.incCached(&b.codeCounters, m.requestsVec, b.addr, code)
}

// resent counts a 5xx answer from b that was re-sent for a second opinion
// instead of reaching the client; cached on b as requests' counters are.
func (m *Metrics) resent(b *Backend, code int) {
	m.incCached(&b.resentCounters, m.resentVec, b.addr, code)
}

// incCached increments vec's (backend, code) counter, resolved once and
// kept in cache (int code -> prometheus.Counter) so that later calls skip
// the vector's label hashing and lock.
func (m *Metrics) incCached(cache *sync.Map, vec *prometheus.CounterVec, backend string, code int) {
	if c, ok := cache.Load(code); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := vec.WithLabelValues(backend, m.codeName(code))
	cache.Store(code, c)
	c.Inc()
}

func (m *Metrics) codeName(code int) string {
	if v, ok := m.codeNames.Load(code); ok {
		return v.(string)
	}
	s := strconv.Itoa(code)
	m.codeNames.Store(code, s)
	return s
}

// retried counts one re-pick.
func (m *Metrics) retried(r retryReason) {
	if r != retryNone && int(r) < len(m.retries) {
		m.retries[r].Inc()
	}
}

// decided counts one routing decision.
func (m *Metrics) decided(d Decision) {
	if int(d.Source) < len(m.decisions) {
		m.decisions[d.Source].Inc()
	}
	if d.Source != probe.SourceLocal && d.Source != probe.SourceNone {
		m.stateAge.Observe(d.Age.Seconds())
	}
}

// probeOutcomes are the outcome label values of probegate_probes_total,
// in the order of Metrics.probes.
var probeOutcomes = [...]string{probe.OutcomeSkippedFresh, probe.OutcomeSkippedRecent, probe.OutcomeOK, probe.OutcomeTimeout, probe.OutcomeError, probe.OutcomeCancelled, probe.OutcomeHedge, probe.OutcomeCoalesced, probe.OutcomeSkippedSlow}

// probeOutcome returns outcome's index in probeOutcomes, or -1. A switch,
// not a map: the probe policy reports an outcome per candidate of every
// request (skipped_fresh, mostly), and hashing the string was a tenth of
// its pick's cost.
func probeOutcome(outcome string) int {
	switch outcome {
	case probe.OutcomeSkippedFresh:
		return 0
	case probe.OutcomeSkippedRecent:
		return 1
	case probe.OutcomeOK:
		return 2
	case probe.OutcomeTimeout:
		return 3
	case probe.OutcomeError:
		return 4
	case probe.OutcomeCancelled:
		return 5
	case probe.OutcomeHedge:
		return 6
	case probe.OutcomeCoalesced:
		return 7
	case probe.OutcomeSkippedSlow:
		return 8
	}
	return -1
}

// Probe implements probe.Observer. An outcome it does not know is not
// counted.
func (m *Metrics) Probe(outcome string, d time.Duration) {
	if i := probeOutcome(outcome); i >= 0 {
		m.probes[i].Inc()
	}
	if outcome == probe.OutcomeOK {
		m.probeDuration.Observe(d.Seconds())
	}
}

// Scrape implements probe.Observer.
// Reports about a backend already forgotten (a scrape that was in flight
// when it was removed) are dropped.
func (m *Metrics) Scrape(addr, outcome string) {
	m.goneMu.Lock()
	if _, gone := m.gone[addr]; !gone {
		m.scrapesVec.WithLabelValues(addr, outcome).Inc()
	}
	m.goneMu.Unlock()
}

// ScrapeInterval implements probe.Observer, dropping reports about
// forgotten backends as Scrape does.
func (m *Metrics) ScrapeInterval(addr string, d time.Duration) {
	m.goneMu.Lock()
	if _, gone := m.gone[addr]; !gone {
		m.scrapeIntervalV.WithLabelValues(addr).Set(d.Seconds())
	}
	m.goneMu.Unlock()
}

// forget deletes every series labelled with backend addr, so that pod
// churn does not grow /metrics without bound. Called when the backend is
// reaped; a request counted on it after that (a race of microseconds)
// increments a counter that is no longer exported.
func (m *Metrics) forget(addr string) {
	now := time.Now()
	m.goneMu.Lock()
	if m.gone == nil {
		m.gone = make(map[string]time.Time)
	}
	for a, at := range m.gone {
		if now.Sub(at) > goneFor {
			delete(m.gone, a) // the table stays as small as the churn of a minute
		}
	}
	m.gone[addr] = now
	l := prometheus.Labels{"backend": addr}
	m.requestsVec.DeletePartialMatch(l)
	m.resentVec.DeletePartialMatch(l)
	m.scrapesVec.DeletePartialMatch(l)
	m.scrapeIntervalV.DeletePartialMatch(l)
	m.goneMu.Unlock()
}

// goneFor is how long reports about a forgotten backend are dropped: far
// longer than any scrape in flight when it was removed (scrape.timeout).
const goneFor = time.Minute

// revive undoes forget for a backend address that joins the pool again.
func (m *Metrics) revive(addr string) {
	m.goneMu.Lock()
	delete(m.gone, addr)
	m.goneMu.Unlock()
}

// poolCollector reports per-backend gauges read from the live pool at
// scrape time, so the request path pays nothing for them and removed
// backends disappear from /metrics.
type poolCollector struct{ p *Proxy }

var (
	inflightDesc = prometheus.NewDesc("probegate_backend_inflight",
		"Requests this proxy has in flight to each backend.", []string{"backend"}, nil)
	breakerDesc = prometheus.NewDesc("probegate_breaker_state",
		"Circuit breaker state per backend: 0 closed, 1 half-open, 2 open.", []string{"backend"}, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- breakerDesc
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.p.snap.Load()
	if snap == nil {
		return // gathered before New published the first pool
	}
	for _, b := range snap.pool.backends {
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(b.state.Inflight()), b.addr)
		st := b.brk.State()
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(breakerValue(st)), b.addr)
	}
}

func breakerValue(s breaker.State) int {
	switch s {
	case breaker.HalfOpen:
		return 1
	case breaker.Open:
		return 2
	}
	return 0
}
