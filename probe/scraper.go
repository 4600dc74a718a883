package probe

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// ScrapeConfig configures a Scraper. Durations are wall-clock durations.
type ScrapeConfig struct {
	Interval    time.Duration // fixed interval; the starting interval when Adaptive
	MinInterval time.Duration // Adaptive lower bound
	MaxInterval time.Duration // Adaptive upper bound
	Timeout     time.Duration // bound of one scrape
	Adaptive    bool          // follow the request rate this proxy sends (see nextInterval)
	// StaleAfter is not used by the Scraper: it is the staleAfter callers
	// pass to State.View (scrape.stale_after), carried here so one value
	// holds the whole section.
	StaleAfter time.Duration
}

// ScrapeConfigFrom converts the scrape section of a validated
// configuration. It only converts: internal/config owns the defaults
// (config.Default) and the bounds (Config.Validate guarantees positive
// durations and, when adaptive, MinInterval <= Interval <= MaxInterval).
func ScrapeConfigFrom(c config.Scrape) ScrapeConfig {
	return ScrapeConfig{
		Interval:    c.Interval.D(),
		MinInterval: c.MinInterval.D(),
		MaxInterval: c.MaxInterval.D(),
		Timeout:     c.Timeout.D(),
		Adaptive:    c.Adaptive,
		StaleAfter:  c.StaleAfter.D(),
	}
}

// RequestsPerScrape is the adaptive scraper's target: about one scrape per
// this many requests this proxy dispatches to the backend.
//
// Why: between two reports, View corrects the last report with the requests
// this proxy dispatched and finished since, so what the correction cannot
// see (how the backend split them between running and waiting, its KV
// growth, other proxies' traffic, which scales with ours since replicas
// share the load balancer's traffic) grows with the number of requests sent
// since the report. Keeping that number near a constant keeps the error of
// the view near a constant: a busy backend is scraped often, an idle one
// rarely (MaxInterval), which is what the seed note recommends ("a lower
// interval for high QPS per model server") without scraping idle pods every
// 50 ms like EPP.
const RequestsPerScrape = 8

// nextInterval is the adaptive rule: interval = RequestsPerScrape / rate,
// clamped to [MinInterval, MaxInterval], where rate is an exponentially
// weighted average (weight 1/2) of the dispatch rate over recent scrape
// periods. The interval shortens at once when traffic rises but at most
// doubles per scrape when it falls, so a short lull does not leave a busy
// backend unscraped for MaxInterval.
func (c ScrapeConfig) nextInterval(cur time.Duration, rate float64) time.Duration {
	target := c.MaxInterval
	if rate > 0 {
		sec := RequestsPerScrape / rate
		if sec < c.MaxInterval.Seconds() {
			target = time.Duration(sec * float64(time.Second))
		}
	}
	target = min(target, 2*cur)
	return min(max(target, c.MinInterval), c.MaxInterval)
}

// Scraper runs one asynchronous scrape loop per backend, off the request
// path, and Reports each answer (Source = SourceScrape). Add, Remove and
// Close are safe for concurrent use.
type Scraper struct {
	cfg ScrapeConfig
	f   Fetcher
	ep  Endpoint
	obs Observer
	log zerolog.Logger
	now func() time.Time // stamps reports (At)

	mu     sync.Mutex // guards loops and closed
	loops  map[*State]context.CancelFunc
	closed bool
	wg     sync.WaitGroup // every loop ever started
}

// NewScraper returns a Scraper with no backends. cfg must be valid (as
// ScrapeConfigFrom of a validated configuration is): Interval and Timeout
// > 0, and with Adaptive, 0 < MinInterval <= Interval <= MaxInterval.
// obs may be nil. now stamps the reports' At; nil means time.Now. It must
// be the clock of the prober and of ORCA parsing too, since State.Report
// orders reports from every source by At. The loop's timers and the
// request rate they measure use the time package (virtualised by
// testing/synctest).
func NewScraper(cfg ScrapeConfig, f Fetcher, ep Endpoint, obs Observer, log zerolog.Logger, now func() time.Time) *Scraper {
	if obs == nil {
		obs = NopObserver{}
	}
	if now == nil {
		now = time.Now
	}
	return &Scraper{cfg: cfg, f: f, ep: ep, obs: obs, log: log, now: now, loops: make(map[*State]context.CancelFunc)}
}

// Config returns the configuration the Scraper runs with.
func (sc *Scraper) Config() ScrapeConfig { return sc.cfg }

// Add starts the scrape loop of s; the first scrape happens at once. Adding
// a State twice, or after Close, does nothing.
func (sc *Scraper) Add(s *State) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		return
	}
	if _, ok := sc.loops[s]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc.loops[s] = cancel
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		sc.loop(ctx, s)
	}()
}

// Remove stops the scrape loop of s, if any. It does not wait for a scrape
// in progress (Close does).
func (sc *Scraper) Remove(s *State) {
	sc.mu.Lock()
	cancel, ok := sc.loops[s]
	delete(sc.loops, s)
	sc.mu.Unlock()
	if ok {
		cancel()
		s.scrapeInterval.Store(0)
		s.scrapeFailing.Store(false)
	}
}

// Len returns the number of backends being scraped.
func (sc *Scraper) Len() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.loops)
}

// Close stops every loop and waits until they have all returned. Further
// calls do nothing but wait.
func (sc *Scraper) Close() {
	sc.mu.Lock()
	loops := sc.loops
	sc.loops = nil
	sc.closed = true
	sc.mu.Unlock()
	for _, cancel := range loops {
		cancel()
	}
	sc.wg.Wait()
}

// loop scrapes s until ctx is cancelled.
func (sc *Scraper) loop(ctx context.Context, s *State) {
	addr := s.Addr()
	interval := sc.cfg.Interval
	timer := time.NewTimer(0) // first scrape at once
	defer timer.Stop()
	var (
		failing  bool
		lastT    = time.Now()
		lastDisp = s.Dispatched()
		rate     = -1.0 // requests/s, EWMA; -1 until the first period
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		err := sc.scrapeOnce(ctx, s)
		if ctx.Err() != nil {
			return // stopped during the scrape: not a backend failure
		}
		switch {
		case err != nil && !failing:
			failing = true
			s.scrapeFailing.Store(true)
			sc.log.Warn().Str("backend", addr).Err(err).Msg("scrape failing")
		case err == nil && failing:
			failing = false
			s.scrapeFailing.Store(false)
			sc.log.Info().Str("backend", addr).Msg("scrape recovered")
		}
		if sc.cfg.Adaptive {
			now, disp := time.Now(), s.Dispatched()
			if el := now.Sub(lastT).Seconds(); el > 0 {
				rate = UpdateRate(rate, float64(disp-lastDisp)/el)
			}
			lastT, lastDisp = now, disp
			interval = sc.cfg.nextInterval(interval, max(rate, 0))
		}
		sc.obs.ScrapeInterval(addr, interval)
		s.scrapeInterval.Store(int64(interval))
		timer.Reset(interval)
	}
}

// scrapeOnce fetches s within Timeout and Reports the answer, stamped with
// the receive time by the scraper's clock. A scrape cut short by the loop's own
// cancellation is not observed.
func (sc *Scraper) scrapeOnce(parent context.Context, s *State) error {
	ctx, cancel := context.WithTimeout(parent, sc.cfg.Timeout)
	defer cancel()
	l, err := sc.f.Fetch(ctx, s, sc.ep)
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case err == nil:
		l.Source = SourceScrape
		l.At = sc.now()
		s.Report(&l)
		sc.obs.Scrape(s.Addr(), OutcomeOK)
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		sc.obs.Scrape(s.Addr(), OutcomeTimeout)
	default:
		sc.obs.Scrape(s.Addr(), OutcomeError)
	}
	return err
}
