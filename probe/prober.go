package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// ProberConfig configures a Prober. Durations are wall-clock durations.
type ProberConfig struct {
	Endpoint Endpoint      // what to GET from each candidate
	Deadline time.Duration // Run never waits longer than this; required > 0
	// HedgeAfter is when to send hedge probes if the quorum has not
	// answered. Ignored when AutoHedge is set. A value >= Deadline disables
	// timed hedging (hedges are still sent when every probe has failed).
	HedgeAfter time.Duration
	// AutoHedge derives the hedge delay of each Run from recent probe round
	// trips, clamped to [200µs, Deadline], so that about 5% of the Runs
	// that wait hedge: the quantile of one round trip that the wait for
	// the Run's quorum exceeds 5% of the time (the p95 when it waits on one
	// probe, about the p97.5 when it waits for both of two; see
	// hedge_level.go and hedge.go).
	AutoHedge bool
	Hedges    int // spares probed after HedgeAfter; 0 disables hedging
	Quorum    int // answers to wait for; 0 = config.DefaultQuorum(len(cands))
	// FreshFor: candidates with a report younger than this are not probed
	// (up to 8x longer for a quiet backend: see Prober.freshFor).
	FreshFor time.Duration
}

// ProberConfigFrom converts the probe section of a validated configuration
// and route.d. It only converts: internal/config owns the defaults, the
// bounds, the one parser of probe.hedge_after (Probe.HedgeDelay) and the
// quorum rule (Probe.QuorumFor). It fails only on what it cannot convert.
func ProberConfigFrom(c config.Probe, d int) (ProberConfig, error) {
	ep, err := ParseEndpoint(c.Endpoint)
	if err != nil {
		return ProberConfig{}, fmt.Errorf("probe.endpoint: %w", err)
	}
	hedge, auto, err := c.HedgeDelay()
	if err != nil {
		return ProberConfig{}, fmt.Errorf("probe.hedge_after: %w", err)
	}
	return ProberConfig{
		Endpoint:   ep,
		Deadline:   c.Deadline.D(),
		HedgeAfter: hedge,
		AutoHedge:  auto,
		Hedges:     c.Hedges,
		Quorum:     c.QuorumFor(d),
		FreshFor:   c.FreshFor.D(),
	}, nil
}

// Prober runs the synchronous, hedged, deadline-bounded probes of the
// request path (DESIGN.md step 4). A Prober is safe for concurrent use: each
// request calls Run on the same Prober.
type Prober struct {
	cfg ProberConfig
	f   Fetcher
	obs Observer
	now func() time.Time
	est *hedgeEstimator
	// wallNow: now is time.Now, so its readings serve as the wall-clock
	// instants deadlines are computed from.
	wallNow bool
	waiters waiterPool
}

// NewProber returns a Prober. obs may be nil (NopObserver) and now nil
// (time.Now). now stamps reports and judges freshness; timers (HedgeAfter,
// Deadline) use the time package, so tests virtualise both with
// testing/synctest. cfg.Deadline must be > 0 (config.Validate guarantees
// it for ProberConfigFrom's result); NewProber panics otherwise.
func NewProber(cfg ProberConfig, f Fetcher, obs Observer, now func() time.Time) *Prober {
	if obs == nil {
		obs = NopObserver{}
	}
	wallNow := now == nil
	if now == nil {
		now = time.Now
	}
	if cfg.Deadline <= 0 {
		panic("probe: NewProber: ProberConfig.Deadline must be > 0")
	}
	cfg.Hedges = max(cfg.Hedges, 0)
	return &Prober{cfg: cfg, f: f, obs: obs, now: now, est: newHedgeEstimator(cfg.Deadline), wallNow: wallNow}
}

// Config returns the configuration the Prober runs with.
func (p *Prober) Config() ProberConfig { return p.cfg }

// HedgeAfter returns the hedge delay the next Run waiting on a single probe
// will use (the auto estimate when AutoHedge is set).
func (p *Prober) HedgeAfter() time.Duration { return p.HedgeAfterFor(1, 1) }

// HedgeAfterFor returns the hedge delay of a Run that waits for need
// answers out of waiting probes in flight: HedgeAfter when it is fixed,
// else the auto estimate for that wait.
func (p *Prober) HedgeAfterFor(waiting, need int) time.Duration {
	if p.cfg.AutoHedge {
		return p.est.HedgeAfterFor(waiting, need)
	}
	return p.cfg.HedgeAfter
}

// Result summarises one Run.
type Result struct {
	Probed int // probes this Run sent, hedges included
	// Coalesced is how many candidates and hedges this Run did not probe
	// because a probe to them was already in flight (sent by a concurrent
	// Run): it waited for that answer instead.
	Coalesced    int
	Answered     int // probes (sent or joined) that answered before the decision
	Hedged       int // spares probed (sent or joined) after HedgeAfter
	SkippedFresh int // candidates and spares not probed because their report was fresh
	// SkippedSlow is how many candidates and spares were not waited for
	// because their last probe did not answer within Deadline (their
	// cached state stands; see Run).
	SkippedSlow int
	// SkippedRecent is how many candidates and spares were not waited for
	// because their report, no longer fresh, was younger than twice
	// FreshFor: their cached state stands and a probe no Run waits for
	// refreshes it (see Run).
	SkippedRecent int
	TimedOut      int // probes that timed out, or were still pending at the deadline
	Failed        int // probes that failed with an error other than a timeout
	Cancelled     int // probes still pending when the quorum answered (left behind)
	// SparesUsed is how many spares, from the front of the slice, were
	// hedged to or skipped as fresh or slow: spares[:SparesUsed] are
	// candidates too.
	SparesUsed int
	Waited     time.Duration // time Run spent, by the now function
}

// probe results sent to the Runs waiting on a flight.
const (
	probeOK = iota
	probeTimeout
	probeError
)

// maxWaits bounds the flights one Run tracks without allocating; more
// (a d above 12 with hedges) spill to the heap.
const maxWaits = 16

// Run probes the candidates whose latest report is older than FreshFor
// (longer for a quiet backend, see freshFor; "fresh" below means that), in
// parallel, and Reports each answer into its State (Source = SourceProbe,
// At = receive time). A candidate that already has a probe in flight,
// sent by a concurrent Run, is not probed again: Run waits for that answer
// (Result.Coalesced, OutcomeCoalesced). It returns as soon as Quorum
// candidates are known (fresh skips plus answers, hedges included), when
// no probe it waits for can still answer, or at Deadline, whichever is
// first; it never waits past Deadline or past ctx's own deadline.
//
// A backend whose last probe did not answer within Deadline (it timed out
// or answered late) is not waited for, for at most slowHold, until a probe
// answers in time: Run counts it as skipped (Result.SkippedSlow,
// OutcomeSkippedSlow), uses its cached state, and sends it a probe that no
// Run waits for unless one is in flight, so the first answer in time lifts
// the mark. Under overload, when probes queue behind the traffic and miss
// their deadline, requests then stop paying the deadline for an answer that
// does not come (and whose wait adds to the overload), while probing goes
// on at one probe in flight per backend.
//
// A candidate whose report is no longer fresh but younger than twice
// FreshFor is not waited for either (stale-while-revalidate): Run counts it
// as known (Result.SkippedRecent, OutcomeSkippedRecent), uses its cached
// state, and sends it a probe that no Run waits for unless one is in
// flight. Under a request rate where a backend's state ages past FreshFor
// between two requests' arrivals less often than every 2 x FreshFor, no
// request waits for a probe round trip while the state stays within
// 2 x FreshFor of the backend's (plus the proxy's own dispatch corrections);
// at lower rates, Run behaves as without it.
//
// After the hedge delay without a quorum (or at once, when every probe has
// already failed or was skipped as slow), it probes up to Hedges more
// backends taken in order from spares, skipping (and counting as known)
// those that are fresh, and skipping those that are slow. The delay
// is HedgeAfterFor(probes in flight, answers still needed) once the probes
// are sent: with AutoHedge, the longer the quorum's wait, the later.
//
// A probe runs under its own context, until Deadline after the Run that
// sent it started (a hedge: after it was sent): it is cancelled when every
// Run waiting for it has returned without its answer. A probe abandoned
// that way because those Runs had their quorum, and that then ends
// without an answer, is observed as OutcomeCancelled. A late answer (a
// Fetcher like fasthttp's cannot be interrupted) is still Reported, which
// is useful to the next request. The caller then reads View of cands and
// of spares[:Result.SparesUsed].
//
// Cost: a Run whose candidates are all fresh reads the clock once and
// allocates nothing. A Run that waits allocates nothing either (its result
// channel and timer are recycled) and arms at most one timer, only when it
// may hedge or waits for a probe whose deadline is after its own (a
// hedge, another Run's): the probes' own deadlines bound the rest.
func (p *Prober) Run(ctx context.Context, cands, spares []*State) Result {
	start := p.now()
	var res Result
	quorum := p.cfg.Quorum
	if quorum <= 0 {
		quorum = config.DefaultQuorum(len(cands))
	}

	// Freshness is judged once, at start; fresh[i] remembers whether
	// cands[i] is known without waiting (fresh or recent).
	var buf [config.MaxD]bool // cands never exceed route.d
	fresh := buf[:0]
	for _, s := range cands {
		fresh = append(fresh, p.known(s, start, &res))
	}
	known := res.SkippedFresh + res.SkippedRecent
	if known >= quorum {
		return res
	}

	wall := p.wallAt(start)
	wallNs := wall.UnixNano()
	w := p.waiters.get(len(cands) - known + p.cfg.Hedges)
	w.deadline = wall.Add(p.cfg.Deadline)
	defer func() {
		// Leave every flight that has not answered us (the last waiter
		// to leave cancels it), then recycle the channel and timer.
		w.release(known >= quorum)
	}()
	outstanding := 0
	launch := func(s *State, deadline time.Time, d time.Duration) {
		outstanding++
		f, sent := p.await(s, w.results, deadline, d)
		w.add(f)
		if sent {
			res.Probed++
		} else {
			res.Coalesced++
			p.obs.Probe(OutcomeCoalesced, 0)
		}
	}
	// slow skips a backend whose probes are slow, and probes it in the
	// background; it reports whether it did.
	slow := func(s *State) bool {
		if s.probeSlowUntil.Load() <= wallNs {
			return false
		}
		res.SkippedSlow++
		p.obs.Probe(OutcomeSkippedSlow, 0)
		p.refresh(s, w.deadline)
		return true
	}
	for i, s := range cands {
		if !fresh[i] && !slow(s) {
			launch(s, w.deadline, p.cfg.Deadline)
		}
	}

	hedgesLeft := p.cfg.Hedges
	// hedge sends the hedge probes; it reports whether any spare was used.
	// A hedge probe gets a full Deadline from its send (another Run may
	// join it), so the Run then needs its own deadline timer.
	hedge := func() bool {
		used := false
		var hedgeDeadline time.Time
		for hedgesLeft > 0 && res.SparesUsed < len(spares) && known < quorum {
			s := spares[res.SparesUsed]
			res.SparesUsed++
			used = true
			if p.known(s, start, &res) {
				known++
				continue
			}
			if slow(s) {
				continue
			}
			hedgesLeft--
			res.Hedged++
			p.obs.Probe(OutcomeHedge, 0)
			if hedgeDeadline.IsZero() {
				hedgeDeadline = time.Now().Add(p.cfg.Deadline)
			}
			launch(s, hedgeDeadline, p.cfg.Deadline)
		}
		hedgesLeft = 0 // hedge once per Run
		return used
	}
	// timerC is the Run's one timer: first the hedge delay (hedging), then,
	// when needed, its own deadline.
	var timerC <-chan time.Time
	hedging := false
	if hedgesLeft > 0 && len(spares) > 0 {
		if ha := p.HedgeAfterFor(outstanding, quorum-known); ha < p.cfg.Deadline {
			timerC, hedging = w.arm(ha), true
		}
	}
	// afterHedge re-arms the timer for the Run's own deadline when a
	// flight it now waits for ends later.
	afterHedge := func() {
		hedging = false
		timerC = nil
		if w.late {
			timerC = w.arm(time.Until(w.deadline))
		}
	}
	if !hedging && w.late {
		timerC = w.arm(time.Until(w.deadline))
	}

wait:
	for known < quorum {
		if outstanding == 0 {
			// Nothing in flight can still answer: hedge now or give up
			// (at once when Run's deadline has come: the probes' own
			// deadlines are not later than it).
			if !time.Now().Before(w.deadline) || !hedge() || outstanding == 0 {
				break
			}
			afterHedge()
			continue
		}
		select {
		case r := <-w.results:
			outstanding--
			switch r {
			case probeOK:
				res.Answered++
				known++
			case probeTimeout:
				res.TimedOut++
			default:
				res.Failed++
			}
		case <-timerC:
			if hedging {
				hedge()
				afterHedge()
				continue
			}
			res.TimedOut += outstanding
			outstanding = 0
			break wait
		case <-ctx.Done():
			res.TimedOut += outstanding
			outstanding = 0
			break wait
		}
	}
	res.Cancelled = outstanding
	res.Waited = p.now().Sub(start)
	return res
}

// wallAt returns the wall-clock instant of the time package (timers use
// it) for start, read from p.now: start itself when p.now is the wall
// clock, else the time package's now.
func (p *Prober) wallAt(start time.Time) time.Time {
	if p.wallNow {
		return start
	}
	return time.Now()
}

// known reports whether s's state is used without waiting for a probe,
// counting it in res and the observer: fresh (its report is younger than
// freshFor(s): FreshFor, longer for a quiet backend), or recent (younger
// than twice that; a probe no Run waits for is then sent unless one is in
// flight, ending Deadline after now).
func (p *Prober) known(s *State, now time.Time, res *Result) bool {
	if p.cfg.FreshFor <= 0 {
		return false
	}
	l := s.Latest()
	if l == nil {
		return false
	}
	fresh := p.freshFor(s)
	switch age := now.Sub(l.At); {
	case age < fresh:
		res.SkippedFresh++
		p.obs.Probe(OutcomeSkippedFresh, 0)
		return true
	case age < 2*fresh:
		res.SkippedRecent++
		p.obs.Probe(OutcomeSkippedRecent, 0)
		p.refresh(s, p.wallAt(now).Add(p.cfg.Deadline))
		return true
	}
	return false
}

// await subscribes results to s's answer: it joins the probe in flight to
// s, or sends one (sent = true) when there is none, which ends at deadline
// (d from now). Either way exactly one result will arrive on results,
// unless the caller leaves the flight first.
func (p *Prober) await(s *State, results chan<- int, deadline time.Time, d time.Duration) (f *flight, sent bool) {
	for {
		if f = s.flight.Load(); f != nil {
			if f.join(results) {
				return f, false
			}
			// It landed or was abandoned: forget it and look again.
			s.flight.CompareAndSwap(f, nil)
			continue
		}
		f = newFlight(s, deadline, d, results)
		if s.flight.CompareAndSwap(nil, f) {
			go p.fly(f, s)
			return f, true
		}
		f.leave(results, false) // another Run started one first: join it
	}
}

// recentFor is the age below which a report that is no longer fresh is
// used without waiting (stale-while-revalidate): twice FreshFor, for a
// backend that is not quiet (see freshFor).
func (c *ProberConfig) recentFor() time.Duration { return 2 * c.FreshFor }

// quietMaxShift bounds the back-off of a quiet backend's freshness:
// FreshFor doubles with each probe answer in a row that reported exactly
// what the report before it said, up to 2^quietMaxShift x FreshFor (16 ms
// fresh and 32 ms recent at the default 2 ms).
const quietMaxShift = 3

// freshFor is how long s's latest report is fresh (and twice that,
// recent): FreshFor, doubled for each of the last probe answers in a row
// that changed nothing the pick reads and nothing that shows work (queue,
// KV use, the token counters; see sameLoad), at most quietMaxShift times:
// a pod doing nothing is not asked again every FreshFor. The first answer
// that differs restores FreshFor. This proxy's own dispatches since the
// report still correct the view (State.View), so a quiet pod this proxy
// sends to is seen loaded at once; what a quiet pod's report can miss for
// longer is other clients' load that arrived since, for at most twice the
// backed-off freshness.
func (p *Prober) freshFor(s *State) time.Duration {
	return p.cfg.FreshFor << min(s.quiet.Load(), quietMaxShift)
}

// noteQuiet records whether the probe answer l, just Reported over prev
// (nil: none), reported exactly what prev did (see freshFor).
func (s *State) noteQuiet(prev, l *Load) {
	if prev == nil || !sameLoad(prev, l) {
		if s.quiet.Load() != 0 {
			s.quiet.Store(0)
		}
		return
	}
	if q := s.quiet.Load(); q < quietMaxShift {
		s.quiet.CompareAndSwap(q, q+1)
	}
}

// sameLoad reports whether a and b say the same of a backend's load and
// work: queue signals, KV use and the token counters, which a pod doing
// anything moves.
func sameLoad(a, b *Load) bool {
	return a.Running == b.Running && a.Waiting == b.Waiting && a.ServerLoad == b.ServerLoad &&
		a.KVUse == b.KVUse && a.Tokens == b.Tokens && a.PrefillTokens == b.PrefillTokens
}

// slowHold bounds how long a backend whose probe missed the deadline is not
// waited for when no probe answers in time since (a backend probed again
// only after a quiet spell is waited for again).
const slowHold = time.Second

// markSlow records that a probe of s had no answer at wall-clock instant
// at, past its deadline: Runs do not wait for s until slowHold after at or
// until a probe answers in time.
func (s *State) markSlow(at time.Time) {
	s.probeSlowUntil.Store(at.Add(slowHold).UnixNano())
}

// refresh sends a probe to s that no Run waits for (a background flight),
// unless one is in flight: it ends at deadline (probe.deadline from the
// Run's start) and its answer, Reported, lifts the slow mark if in time.
func (p *Prober) refresh(s *State, deadline time.Time) {
	if s.flight.Load() != nil {
		return
	}
	f := newFlight(s, deadline, p.cfg.Deadline, nil)
	if s.flight.CompareAndSwap(nil, f) {
		go p.fly(f, s)
		return
	}
	f.drop()
}

// fly sends the probe of flight f to s, Reports the answer, observes the
// outcome and lands the flight (which delivers the result to its waiters).
func (p *Prober) fly(f *flight, s *State) {
	t0 := p.now()
	l, err := p.f.Fetch(f, s, p.cfg.Endpoint)
	at := p.now()
	rtt := at.Sub(t0)
	r := probeOK
	switch {
	case err == nil:
		l.Source = SourceProbe
		l.At = at
		prev := s.Latest()
		if s.Report(&l) {
			s.noteQuiet(prev, &l)
		}
		p.est.Observe(rtt)
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		r = probeTimeout
	default:
		r = probeError
	}
	// Stop sharing it before landing, so that a Run arriving now sends a
	// fresh probe rather than joining one that is over.
	s.flight.CompareAndSwap(f, nil)
	abandoned := f.land(r)
	// Mark the backend slow when its probe did not answer within the
	// deadline (whether or not a Run still waited), unmark it when one
	// answered or failed in time; a probe cut short by its waiters leaving
	// says nothing.
	wallAt := p.wallAt(at)
	switch late := !wallAt.Before(f.deadline); {
	case late || (r == probeTimeout && !abandoned):
		s.markSlow(wallAt)
	case r != probeTimeout && s.probeSlowUntil.Load() != 0:
		s.probeSlowUntil.Store(0)
	}
	switch {
	case r == probeOK:
		p.obs.Probe(OutcomeOK, rtt)
	case abandoned:
		p.obs.Probe(OutcomeCancelled, rtt)
	case r == probeTimeout:
		p.obs.Probe(OutcomeTimeout, rtt)
	default:
		p.obs.Probe(OutcomeError, rtt)
	}
}
