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
	Adaptive    bool          // follow the backend's pace of change (see pace.next)
	// ForeignChange is the adaptive rule's target for the change in the
	// backend's queue that this proxy did not cause (other clients'
	// requests arriving and finishing) between two scrapes, in requests;
	// 0 leaves the interval to this proxy's own rate alone.
	ForeignChange float64
	// ForeignBudget bounds what ForeignChange costs the backend: the
	// scrapes it adds to those of this proxy's own pace, per request this
	// proxy sends the backend (see pace). 0: no bound.
	ForeignBudget float64
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
		Interval:      c.Interval.D(),
		MinInterval:   c.MinInterval.D(),
		MaxInterval:   c.MaxInterval.D(),
		Timeout:       c.Timeout.D(),
		Adaptive:      c.Adaptive,
		StaleAfter:    c.StaleAfter.D(),
		ForeignChange: c.ForeignChange,
		ForeignBudget: c.ForeignBudget,
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

// pace is the adaptive rule's state for one backend's scrape loop: the
// interval, and the two rates it follows.
//
// The second rate is the other clients' (foreign) pace of change: between
// two scrapes, the backend's queue (running + waiting) beyond this proxy's
// own in-flight requests moves by what other clients sent and what
// finished of theirs. View corrects a report with this proxy's own
// dispatches and finishes, so that foreign move is the error a report
// gathers as it ages. Keeping it near ForeignChange per scrape scrapes a
// pod that other clients keep changing (one of many replicas behind a load
// balancer) as often as it changes, a pod only this proxy uses (a lone
// proxy: its queue never exceeds this proxy's in-flight count) at this
// proxy's own rate, and an idle one at MaxInterval.
//
// The foreign pace scrapes as often as the pod changes, which does not
// depend on how much of its traffic this proxy sends: behind R replicas
// each scrapes a busy pod at about the same pace, so the pod pays R times
// it. ForeignBudget bounds that: each request this proxy sends the pod
// earns ForeignBudget scrapes of credit, and each scrape sooner than the
// own pace would make it (the target of RequestsPerScrape over this
// proxy's rate) spends the share of a scrape it adds. With no credit left
// the interval follows the own pace alone. So over any span, the scrapes
// beyond the own pace's are at most ForeignBudget per request this proxy
// sent the pod in that span, plus the credit held at its start (at most
// ForeignBudget * RequestsPerScrape) and the back-off's few scrapes; all
// replicas together add at most ForeignBudget per request the pod serves
// them, however many they are. Every input is what one replica observes:
// its own dispatches and the pod's reported queue.
type pace struct {
	interval time.Duration
	rate     float64 // this proxy's dispatch rate, requests/s (EWMA); -1 before the first period
	lastDisp uint64
	foreign  float64 // the foreign change rate, requests/s (EWMA); -1 before the first period
	lastF    int     // the foreign queue at the last scrape that knew the queue; -1: none
	credit   float64 // ForeignBudget's scrapes left to spend; below 0: overspent by the back-off
}

// newPace returns the state of a loop that has not scraped yet.
func newPace(c ScrapeConfig, disp uint64) pace {
	return pace{interval: c.Interval, rate: -1, lastDisp: disp, foreign: -1, lastF: -1}
}

// next returns the interval after a scrape that ended el after the
// previous one, when this proxy had dispatched disp requests in all and
// had inflight of them unfinished, and the scrape reported queue
// requests at the backend (-1: unknown, a failed scrape).
//
// The interval is the shorter of RequestsPerScrape over this proxy's rate
// (nextInterval) and ForeignChange over the foreign change rate, under the
// same clamps: at most twice the last interval, within [MinInterval,
// MaxInterval]. The foreign rate is |F - F'| / el averaged with weight 1/2
// (UpdateRate), where F = max(queue - inflight, 0) is the foreign queue at
// this scrape and F' at the previous one that knew it. A scrape that does
// not know the queue leaves the foreign rate as it was. With ForeignBudget
// > 0 the foreign target applies only while credit is left (see pace).
func (p *pace) next(c ScrapeConfig, el time.Duration, disp uint64, inflight, queue int) time.Duration {
	sec := el.Seconds()
	sent := float64(disp - p.lastDisp)
	if sec > 0 {
		p.rate = UpdateRate(p.rate, sent/sec)
	}
	p.lastDisp = disp
	if queue >= 0 {
		f := max(queue-inflight, 0)
		if p.lastF >= 0 && sec > 0 {
			d := f - p.lastF
			p.foreign = UpdateRate(p.foreign, float64(max(d, -d))/sec)
		}
		p.lastF = f
	}
	own := max(p.rate, 0)
	rate := own
	if c.ForeignChange > 0 && p.foreign > 0 {
		// The foreign target in requests of our own rate: the shorter
		// interval wins in nextInterval.
		rate = max(rate, RequestsPerScrape*p.foreign/c.ForeignChange)
	}
	if c.ForeignBudget <= 0 {
		p.interval = c.nextInterval(p.interval, rate)
		return p.interval
	}
	p.credit = min(p.credit+c.ForeignBudget*sent, c.ForeignBudget*RequestsPerScrape)
	if p.credit <= 0 {
		rate = own
	}
	p.interval = c.nextInterval(p.interval, rate)
	// The own pace's target, without the back-off's doubling clamp: an
	// interval I in its place adds 1 - I/target of a scrape.
	target := c.nextInterval(c.MaxInterval, own)
	p.credit -= 1 - p.interval.Seconds()/target.Seconds()
	return p.interval
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
		failing bool
		lastT   = time.Now()
		p       = newPace(sc.cfg, s.Dispatched())
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		queue, err := sc.scrapeOnce(ctx, s)
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
			now := time.Now()
			interval = p.next(sc.cfg, now.Sub(lastT), s.Dispatched(), s.Inflight(), queue)
			lastT = now
		}
		sc.obs.ScrapeInterval(addr, interval)
		s.scrapeInterval.Store(int64(interval))
		timer.Reset(interval)
	}
}

// scrapeOnce fetches s within Timeout and Reports the answer, stamped with
// the receive time by the scraper's clock, and returns the answer's queue
// (Load.Queue; -1 when the scrape failed or the answer has none). A scrape
// cut short by the loop's own cancellation is not observed.
func (sc *Scraper) scrapeOnce(parent context.Context, s *State) (int, error) {
	ctx, cancel := context.WithTimeout(parent, sc.cfg.Timeout)
	defer cancel()
	l, err := sc.f.Fetch(ctx, s, sc.ep)
	switch {
	case parent.Err() != nil:
		return -1, parent.Err()
	case err == nil:
		l.Source = SourceScrape
		l.At = sc.now()
		s.Report(&l)
		sc.obs.Scrape(s.Addr(), OutcomeOK)
		return l.Queue(), nil
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		sc.obs.Scrape(s.Addr(), OutcomeTimeout)
	default:
		sc.obs.Scrape(s.Addr(), OutcomeError)
	}
	return -1, err
}
