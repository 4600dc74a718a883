package fleetsim

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// vprober is a replica's route.Prober in virtual time. It follows
// probe.Prober.Run's control flow with the production configuration
// (probe.ProberConfigFrom) and auto hedge estimator (probe.HedgeEstimator):
//
//   - a candidate whose report is younger than FreshFor is known
//     (skipped_fresh); one younger than RecentFor (twice FreshFor) is known
//     too, and a probe no Run waits for refreshes it unless one is in the
//     air (stale-while-revalidate, skipped_recent);
//   - a candidate whose last probe missed its deadline, less than SlowHold
//     ago and with no answer in time since, is not waited for: its cached
//     state stands and a probe no Run waits for checks it unless one is in
//     the air (skipped_slow);
//   - the others are probed at once, or, when a probe to them is already in
//     the air and may still be joined (a background probe, or one whose
//     Runs still wait), that probe's answer is waited for (coalesced);
//   - after the hedge delay without a quorum (or at once when nothing is
//     left in flight) up to Hedges spares are probed, skipping fresh,
//     recent and slow ones as above; Run returns at Quorum known
//     candidates, when nothing it waits for can still answer, or at
//     Deadline.
//
// The hedge delay is the production rule for the Run's wait
// (probe.HedgeEstimator.HedgeAfterFor: probes in flight, answers still
// needed).
//
// Every probe is a flight (vflight) that lands as production's do with its
// fasthttp fetcher, which cannot abort a request: at its answer when that
// comes before the flight's deadline (the answer is Reported, its round
// trip observed by the hedge estimator, the slow mark lifted), else at the
// deadline (the backend is marked slow until SlowHold later). A flight
// lands even when the Runs that waited for it have left: a probe left
// behind at the decision that answers in time is still Reported, for the
// next request.
//
// probe.Prober.Run itself waits on goroutines and timers, which a
// single-threaded event loop cannot advance, so a Run's exchange is
// resolved here at once from drawn round trips (Params.probeLatency): the
// answers that arrive before the decision are Reported into the States,
// stamped with their arrival time, and the replica's clock is moved to the
// decision instant (Result.Waited) before the picker scores, as the wall
// clock would have moved. A flight's other effects (slow marks, the
// estimator's samples, the Reports nobody waited for) are applied by an
// event at its landing time, in time order with the rest of the fleet.
// One simplification remains: a Run sees slow marks as of its start.
type vprober struct {
	cfg   probe.ProberConfig
	est   *probe.HedgeEstimator
	rep   *replica
	s     *sim
	rng   *rand.Rand
	pend  []pending
	stats probeStats
	rules probeRules
	// Per pod: the flight its State would point at (the last one sent;
	// -1: none) and until when Runs do not wait for it (sim time; 0: not
	// slow), as probe.State's flight and probeSlowUntil.
	slot      []int32
	slowUntil []time.Duration
	// Flights in the air (and free slots of fl, reused).
	fl   []vflight
	free []int32
}

var _ route.Prober = (*vprober)(nil)

// probeRules switches the prober's two skip rules, for comparison runs
// (strategy suffixes _noswr, _noslow, _norules); production runs both.
// slowKnown (suffix _slowknown) is not production's rule: a candidate
// skipped as slow counts towards the quorum, on its cached state, as a
// recent one does (production needs a spare's answer in its place).
type probeRules struct {
	noSWR, noSlow, slowKnown bool
}

// Strategy suffixes that switch probe rules (fleetsim only).
const (
	suffixNoSWR     = "_noswr"
	suffixNoSlow    = "_noslow"
	suffixNoRules   = "_norules"
	suffixSlowKnown = "_slowknown"
)

// splitRules strips a rules suffix from strategy: the bench strategy and the
// rules its prober runs.
func splitRules(strategy string) (string, probeRules) {
	switch {
	case strings.HasSuffix(strategy, suffixNoRules):
		return strings.TrimSuffix(strategy, suffixNoRules), probeRules{noSWR: true, noSlow: true}
	case strings.HasSuffix(strategy, suffixNoSWR):
		return strings.TrimSuffix(strategy, suffixNoSWR), probeRules{noSWR: true}
	case strings.HasSuffix(strategy, suffixNoSlow):
		return strings.TrimSuffix(strategy, suffixNoSlow), probeRules{noSlow: true}
	case strings.HasSuffix(strategy, suffixSlowKnown):
		return strings.TrimSuffix(strategy, suffixSlowKnown), probeRules{slowKnown: true}
	}
	return strategy, probeRules{}
}

// vflight is one probe in the air (production's flight).
type vflight struct {
	pod  int32
	sent time.Duration // sim time
	// land is when the flight ends: the answer's arrival when ok, else the
	// flight's deadline.
	land time.Duration
	ok   bool // answered before its deadline
	// background: sent with no waiter (refresh); later Runs may join it
	// until it lands.
	background bool
	// release is when the last Run that waited for it decided: a
	// foreground flight cannot be joined after (production's abandoned
	// flight: join fails, a new probe is sent).
	release  time.Duration
	reported bool       // its answer is already Reported (by a Run that waited for it)
	load     probe.Load // the answer: the pod as the probe found it
}

// pending is one flight a Run waits for: it lands at at (from Run's start).
type pending struct {
	fi   int32
	at   time.Duration
	ok   bool
	done bool
}

// probeStats counts outcomes as probegate_probes_total does.
type probeStats struct {
	Sent, OK, Timeout, Hedge, SkippedFresh, Cancelled int64
	Coalesced, SkippedRecent, SkippedSlow, Background int64
}

func newVprober(cfg probe.ProberConfig, r *replica, s *sim, rng *rand.Rand, rules probeRules, pods int) *vprober {
	p := &vprober{cfg: cfg, est: probe.NewHedgeEstimator(cfg.Deadline), rep: r, s: s, rng: rng, rules: rules,
		slot: make([]int32, pods), slowUntil: make([]time.Duration, pods)}
	for i := range p.slot {
		p.slot[i] = -1
	}
	return p
}

// Run implements route.Prober.
func (p *vprober) Run(_ context.Context, cands, spares []*probe.State) probe.Result {
	start := p.rep.clock.now()
	t0 := p.s.now + p.rep.clock.offset
	var res probe.Result
	quorum := p.cfg.Quorum
	if quorum <= 0 {
		quorum = config.DefaultQuorum(len(cands))
	}
	var buf [config.MaxD]bool
	fresh := buf[:0]
	for _, st := range cands {
		fresh = append(fresh, p.known(st, start, t0, t0, &res))
	}
	known := res.SkippedFresh + res.SkippedRecent
	if known >= quorum {
		return res
	}
	deadline := p.cfg.Deadline
	p.pend = p.pend[:0]
	outstanding := 0
	launch := func(pod int32, now, dl time.Duration) {
		fi, sent := p.await(pod, t0+now, t0+dl)
		f := &p.fl[fi]
		p.pend = append(p.pend, pending{fi: fi, at: f.land - t0, ok: f.ok})
		outstanding++
		if sent {
			res.Probed++
		} else {
			res.Coalesced++
			p.stats.Coalesced++
		}
	}
	// slow skips a pod whose probes are slow and probes it in the
	// background; it reports whether it did.
	slow := func(pod int32, now time.Duration) bool {
		if p.rules.noSlow || p.slowUntil[pod] <= t0 {
			return false
		}
		res.SkippedSlow++
		p.stats.SkippedSlow++
		p.refresh(pod, t0+now, t0+deadline)
		if p.rules.slowKnown {
			known++
		}
		return true
	}
	for i, st := range cands {
		if pod := p.rep.podOf[st]; !fresh[i] && !slow(pod, 0) {
			launch(pod, 0, deadline)
		}
	}
	hedgesLeft := p.cfg.Hedges
	hedge := func(now time.Duration) bool {
		used := false
		for hedgesLeft > 0 && res.SparesUsed < len(spares) && known < quorum {
			st := spares[res.SparesUsed]
			res.SparesUsed++
			used = true
			if p.known(st, start, t0, t0+now, &res) {
				known++
				continue
			}
			pod := p.rep.podOf[st]
			if slow(pod, now) {
				continue
			}
			hedgesLeft--
			res.Hedged++
			p.stats.Hedge++
			launch(pod, now, now+deadline) // a hedge gets a full deadline from its send
		}
		hedgesLeft = 0
		return used
	}
	hedgeAt := time.Duration(-1)
	if hedgesLeft > 0 && len(spares) > 0 {
		if ha := p.hedgeAfter(outstanding, quorum-known); ha < deadline {
			hedgeAt = ha
		}
	}
	now := time.Duration(0)
wait:
	for known < quorum {
		if outstanding == 0 {
			// Nothing in flight can still answer: hedge now or give up.
			if now >= deadline || !hedge(now) || outstanding == 0 {
				break
			}
			hedgeAt = -1
			continue
		}
		next := -1
		for i := range p.pend {
			if !p.pend[i].done && (next < 0 || p.pend[i].at < p.pend[next].at) {
				next = i
			}
		}
		at := p.pend[next].at
		switch {
		case hedgeAt >= 0 && hedgeAt < at && hedgeAt < deadline:
			now, hedgeAt = hedgeAt, -1
			hedge(now)
		case at <= deadline:
			now = at
			pe := &p.pend[next]
			pe.done = true
			outstanding--
			if !pe.ok {
				res.TimedOut++
				p.stats.Timeout++
				continue
			}
			p.report(&p.fl[pe.fi])
			res.Answered++
			p.stats.OK++
			known++
		default:
			now = deadline
			res.TimedOut += outstanding
			p.stats.Timeout += int64(outstanding)
			outstanding = 0
			break wait
		}
	}
	res.Cancelled = outstanding
	p.stats.Cancelled += int64(outstanding)
	// The Run leaves the flights it waited for: from its decision on, a
	// foreground flight can no longer be joined.
	for i := range p.pend {
		if f := &p.fl[p.pend[i].fi]; !f.background {
			f.release = max(f.release, t0+now)
		}
	}
	res.Waited = now
	p.rep.clock.offset = now
	return res
}

// known is probe.Prober's known: whether st's state is used without waiting
// (a report younger than FreshFor, or, stale-while-revalidate, younger than
// RecentFor: then a background probe is sent at sendAt, sim time, unless one
// is in the air, ending Deadline after the Run's start t0), counted in res.
func (p *vprober) known(st *probe.State, start time.Time, t0, sendAt time.Duration, res *probe.Result) bool {
	if p.cfg.FreshFor <= 0 {
		return false
	}
	l := st.Latest()
	if l == nil {
		return false
	}
	switch age := start.Sub(l.At); {
	case age < p.cfg.FreshFor:
		res.SkippedFresh++
		p.stats.SkippedFresh++
		return true
	case age < p.cfg.RecentFor() && !p.rules.noSWR:
		res.SkippedRecent++
		p.stats.SkippedRecent++
		p.refresh(p.rep.podOf[st], sendAt, t0+p.cfg.Deadline)
		return true
	}
	return false
}

// await is probe.Prober.await at sim time now: it joins the flight in the
// air to pod when one may be joined, or sends one ending at deadline.
func (p *vprober) await(pod int32, now, deadline time.Duration) (fi int32, sent bool) {
	if fi = p.slot[pod]; fi >= 0 {
		if f := &p.fl[fi]; f.land > now && (f.background || f.release > now) {
			return fi, false
		}
	}
	return p.send(pod, now, deadline, false), true
}

// refresh is probe.Prober.refresh: a probe no Run waits for, sent at now
// and ending at deadline, unless a flight to pod is in the air.
func (p *vprober) refresh(pod int32, now, deadline time.Duration) {
	if fi := p.slot[pod]; fi >= 0 && p.fl[fi].land > now {
		return
	}
	if deadline <= now {
		return
	}
	p.send(pod, now, deadline, true)
	p.stats.Background++
}

// send starts a flight to pod at sim time now that ends at deadline, makes
// it the pod's flight and schedules its landing.
func (p *vprober) send(pod int32, now, deadline time.Duration, background bool) int32 {
	ans := now + p.s.probeLatency(pod, p.rng)
	f := vflight{pod: pod, sent: now, land: ans, ok: ans < deadline, background: background, release: now,
		load: p.s.pods[pod].load(time.Time{}, probe.SourceProbe)}
	if !f.ok {
		f.land = deadline
	}
	var fi int32
	if n := len(p.free); n > 0 {
		fi = p.free[n-1]
		p.free = p.free[:n-1]
		p.fl[fi] = f
	} else {
		fi = int32(len(p.fl))
		p.fl = append(p.fl, f)
	}
	p.slot[pod] = fi
	p.s.podProbed(pod)
	p.stats.Sent++
	p.s.q.push(event{at: f.land, kind: evProbeLand, a: int32(p.rep.idx), b: fi})
	return fi
}

// report Reports f's answer to its pod's State, once: a Run that waited
// for it, or its landing, whichever comes first.
func (p *vprober) report(f *vflight) {
	if f.reported {
		return
	}
	f.reported = true
	l := f.load
	l.At = epoch.Add(f.land)
	p.rep.backends[f.pod].State().Report(&l)
}

// land applies flight fi's end, now (probe.Prober.fly): an answer in time
// is Reported (unless a Run already did), observed by the hedge estimator
// and lifts the slow mark; no answer by the deadline marks the pod slow.
func (p *vprober) land(fi int32) {
	f := &p.fl[fi]
	if f.ok {
		p.report(f)
		p.est.Observe(f.land - f.sent)
		p.slowUntil[f.pod] = 0
	} else {
		p.slowUntil[f.pod] = f.land + probe.SlowHold
	}
	if p.slot[f.pod] == fi {
		p.slot[f.pod] = -1
	}
	p.free = append(p.free, fi)
}

// hedgeAfter is probe.Prober.HedgeAfterFor: the delay of a Run waiting for
// need answers out of waiting probes in flight.
func (p *vprober) hedgeAfter(waiting, need int) time.Duration {
	if p.cfg.AutoHedge {
		return p.est.HedgeAfterFor(waiting, need)
	}
	return p.cfg.HedgeAfter
}
