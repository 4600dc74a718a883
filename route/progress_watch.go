package route

import (
	"context"
	"sync"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// progressWatch gives the breaker's progress rule (silenceOutcome) the
// reports it needs under every policy. That rule counts a timed-out wait
// for a backend's bytes as neither success nor failure when two reports
// taken during the wait show the backend's token counters advancing: a
// non-stream request's wait for its head (firstByteTimeoutOutcome), a
// stream's wait for its first bytes after its head (failAfterHead) and a
// stream's silence midway (bodyStream.finish). The policies that read no
// reports (least_inflight, round_robin, random) have no reports, and
// probe.endpoint load reports carry no counter. So, off the request path,
// the watch looks every progressLook (the smaller of first_byte_timeout
// and idle_timeout, over 8) for backends with a request that has been
// waiting for its response's first byte longer than first_byte_timeout/2,
// or with a response body whose read has waited longer than
// idle_timeout/2 (a stream queued or preempted by vLLM, or a stuck one),
// and scrapes the /metrics of those backends only, once per look while
// the wait lasts, however many of its requests wait: a wait that reaches
// its timeout has then been seen by two to four such reports. It also
// scrapes backends whose breaker is half-open, and closes the breaker once
// their token counters advance after the trial request was admitted: a
// non-stream trial's answer comes only after its whole generation, and
// until then the trial slot keeps the backend out of every pick
// (breaker.Breaker.CloseOnTrialProgress).
//
// It reads what the upstream connections already record (deadlineConn's
// awaiting flag and the deadline its first read armed; the start of a body
// read under way): the request path pays two atomic stores per body read
// for it. A backend whose scrape loop already reads /metrics at least as
// often is skipped. The scrapes are bounded by scrape.timeout (at most the
// look interval) and their answers are Reported to the backend's State
// like any scrape's. A backend whose /metrics does not answer within the
// bound, or shows its counters standing still, gets no excuse: its
// timeouts count.
type progressWatch struct {
	stop chan struct{}
	done chan struct{}
}

// startProgressWatch starts the watch; Close stops it.
func (p *Proxy) startProgressWatch() {
	p.watch = progressWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go p.watchProgress(p.watch.stop, p.watch.done)
}

// stopProgressWatch stops the watch and waits until it returned, its
// scrapes included.
func (p *Proxy) stopProgressWatch() {
	if p.watch.stop == nil {
		return
	}
	close(p.watch.stop)
	<-p.watch.done
}

func (p *Proxy) watchProgress(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	first := p.snap.Load().set
	t := time.NewTimer(progressLook(first.firstByte, first.idle))
	defer t.Stop()
	var wg sync.WaitGroup
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		set := p.snap.Load().set
		look := progressLook(set.firstByte, set.idle)
		timeout := min(set.cfg.Scrape.Timeout.D(), look)
		ep, _ := probe.ParseEndpoint(set.cfg.Probe.Endpoint) // validated
		metricsLoop := set.reports && ep == probe.EndpointMetrics
		now := time.Now()
		pool := p.snap.Load().pool
		for _, b := range pool.backends {
			if metricsLoop {
				if iv := b.state.ScrapeInterval(); iv > 0 && iv <= look {
					continue
				}
			}
			silent := b.conns.silentSince(now.Add(-set.idle / 2))
			if !silent && !trialUnderWay(b) && !b.conns.waitingSince(now.Add(-set.firstByte/2), set.firstByte) {
				continue
			}
			wg.Go(func() { p.scrapeProgress(b, timeout, silent) })
		}
		wg.Wait()
		for _, b := range pool.backends {
			if trialUnderWay(b) && b.brk.CloseOnTrialProgress(b.state.ProgressedSince) {
				p.log.Info().Str("backend", b.addr).Msg("breaker closed: the backend's token counters advance while its half-open trial request waits for its answer")
			}
		}
		t.Reset(look)
	}
}

// progressLook is the watch's period for upstream.first_byte_timeout
// firstByte and upstream.idle_timeout idle: an eighth of the smaller, and
// never below minProgressLook.
func progressLook(firstByte, idle time.Duration) time.Duration {
	return max(min(firstByte, idle)/8, minProgressLook)
}

// minProgressLook keeps a tiny first_byte_timeout from making the watch
// spin; below it the rule sees fewer reports (and progressCut warns).
const minProgressLook = 5 * time.Millisecond

// trialUnderWay reports whether b's breaker is half-open with a trial
// request under way, which may be waiting for a long answer that b's
// progress can decide earlier (breaker.Breaker.CloseOnTrialProgress).
func trialUnderWay(b *Backend) bool {
	return b.brk != nil && b.brk.TrialUnderWay()
}

// scrapeProgress fetches b's /metrics within timeout and Reports it;
// silent: b has a response body silent past idle_timeout/2.
func (p *Proxy) scrapeProgress(b *Backend, timeout time.Duration, silent bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := p.fetcher.Fetch(ctx, b.state, probe.EndpointMetrics)
	if err != nil {
		return // no report: the timeout counts, as it always did
	}
	l.Source = probe.SourceScrape
	b.state.Report(&l)
	p.metrics.progressScrapes.Inc()
	if silent {
		p.metrics.progressStreamScrapes.Inc()
	}
}

// waitingSince reports whether one of the table's connections carries a
// request that has been waiting for its response's first byte since
// before t. firstByte is the connections' upstream.first_byte_timeout: the
// first read of a request arms its deadline between firstByte and
// firstByte+firstByte/16 away (lazyDeadline), so the wait began at most
// firstByte before that deadline. It reads only atomics; a connection
// whose first read has not armed its deadline yet is not counted.
func (t *connTable) waitingSince(before time.Time, firstByte time.Duration) bool {
	found := false
	cut := before.Add(firstByte).UnixNano()
	t.m.Range(func(_, v any) bool {
		c := v.(*deadlineConn)
		if !c.awaiting.Load() {
			return true
		}
		if u := c.readBy.until.Load(); u != 0 && u <= cut {
			found = true
			return false
		}
		return true
	})
	return found
}

// silentSince reports whether one of the table's connections has a read of
// a response body under way since before t: a stream silent since then
// (deadlineConn.bodyReadSince). It reads only atomics. A connection idle
// in the pool has no read under way.
func (t *connTable) silentSince(before time.Time) bool {
	found := false
	cut := before.UnixNano()
	t.m.Range(func(_, v any) bool {
		if s := v.(*deadlineConn).bodyReadSince.Load(); s != 0 && s <= cut {
			found = true
			return false
		}
		return true
	})
	return found
}

// progressCut returns the bound of the progress watch's scrapes under
// cfg (progressLook: the smaller of first_byte_timeout and idle_timeout,
// over 8), whether it cuts them shorter than scrape.timeout allows, and
// the key of that smaller timeout.
func progressCut(cfg *config.Config) (time.Duration, bool, string) {
	fb, idle := cfg.Upstream.FirstByteTimeout.D(), cfg.Upstream.IdleTimeout.D()
	look := progressLook(fb, idle)
	key := "upstream.first_byte_timeout"
	if idle < fb {
		key = "upstream.idle_timeout"
	}
	return look, cfg.Scrape.Timeout.D() > look, key
}

// warnProgressCut logs, once per configuration that brings it (at start,
// or a reload that changes one of the keys), that the progress watch's
// scrapes are cut below scrape.timeout: a backend whose /metrics answers
// slower than the look interval then shows no progress, and its long
// non-stream generations' and silent streams' timeouts count against its
// breaker. old is the configuration replaced (nil at start).
func (p *Proxy) warnProgressCut(cfg, old *config.Config) {
	look, cut, key := progressCut(cfg)
	if !cut {
		return
	}
	if old != nil {
		if _, was, _ := progressCut(old); was && old.Upstream.FirstByteTimeout == cfg.Upstream.FirstByteTimeout &&
			old.Upstream.IdleTimeout == cfg.Upstream.IdleTimeout && old.Scrape.Timeout == cfg.Scrape.Timeout {
			return
		}
	}
	p.log.Warn().Str("key", key).Str("other_key", "scrape.timeout").
		Dur("first_byte_timeout", cfg.Upstream.FirstByteTimeout.D()).Dur("idle_timeout", cfg.Upstream.IdleTimeout.D()).Dur("scrape_timeout", cfg.Scrape.Timeout.D()).
		Msgf("%s/8 (%v) is below scrape.timeout: the breaker's progress scrapes of a backend with a long wait are cut at %v, so a backend whose /metrics answers slower shows no progress and its long non-stream generations and silent streams count as failures; raise %s or lower scrape.timeout", key, look, look, key)
}
