package fleetsim

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// vprober is a replica's route.Prober in virtual time. It follows
// probe.Prober.Run's contract with the production configuration
// (probe.ProberConfigFrom) and auto hedge estimator (probe.HedgeEstimator):
// candidates whose report is younger than FreshFor are skipped and count as
// known; the others are probed at once; after HedgeAfter without a quorum (or
// at once when nothing is left in flight) up to Hedges spares are probed;
// Run returns at Quorum answers or at Deadline. The hedge delay is the
// production rule for the Run's wait (probe.HedgeEstimator.HedgeAfterFor:
// probes in flight, answers still needed). Probes still in flight at the
// decision are not waited for; those that would answer within their own
// deadline are observed by the estimator, as production observes late
// answers (observeLate).
//
// probe.Prober.Run itself waits on goroutines and timers, which a
// single-threaded event loop cannot advance, so the exchange is resolved
// here from drawn round trips (Params.probeLatency): the answers that arrive
// before the decision are Reported into the States, stamped with their
// arrival time, and the replica's clock is moved to the decision instant
// (Result.Waited) before the picker scores, as the wall clock would have
// moved.
type vprober struct {
	cfg   probe.ProberConfig
	est   *probe.HedgeEstimator
	rep   *replica
	s     *sim
	rng   *rand.Rand
	pend  []pending
	stats probeStats
}

var _ route.Prober = (*vprober)(nil)

// pending is one probe in flight, sent at sent and answered at at (both
// from Run's start).
type pending struct {
	sent time.Duration
	at   time.Duration
	pod  int32
	st   *probe.State
	done bool
}

// probeStats counts outcomes as probegate_probes_total does.
type probeStats struct {
	Sent, OK, Timeout, Hedge, SkippedFresh, Cancelled int64
}

// Run implements route.Prober.
func (p *vprober) Run(_ context.Context, cands, spares []*probe.State) probe.Result {
	start := p.rep.clock.now()
	var res probe.Result
	quorum := p.cfg.Quorum
	if quorum <= 0 {
		quorum = max(len(cands)-1, 1)
	}
	known := 0
	p.pend = p.pend[:0]
	launch := func(st *probe.State, at time.Duration) {
		pod := p.rep.podOf[st]
		p.s.podProbed(pod)
		p.pend = append(p.pend, pending{sent: at, at: at + p.s.params.probeLatency(p.rng), pod: pod, st: st})
		res.Probed++
		p.stats.Sent++
	}
	for _, st := range cands {
		if p.fresh(st, start) {
			res.SkippedFresh++
			p.stats.SkippedFresh++
			known++
			continue
		}
		launch(st, 0)
	}
	if known >= quorum {
		return res
	}
	deadline := p.cfg.Deadline
	hedgesLeft := p.cfg.Hedges
	hedgeAt := time.Duration(-1)
	if hedgesLeft > 0 && len(spares) > 0 {
		if ha := p.hedgeAfter(len(p.pend), quorum-known); ha < deadline {
			hedgeAt = ha
		}
	}
	hedge := func(now time.Duration) bool {
		used := false
		for hedgesLeft > 0 && res.SparesUsed < len(spares) && known < quorum {
			st := spares[res.SparesUsed]
			res.SparesUsed++
			used = true
			if p.fresh(st, start) {
				res.SkippedFresh++
				p.stats.SkippedFresh++
				known++
				continue
			}
			hedgesLeft--
			res.Hedged++
			p.stats.Hedge++
			launch(st, now)
		}
		hedgesLeft = 0
		return used
	}
	now := time.Duration(0)
	for known < quorum {
		next := -1
		for i := range p.pend {
			if !p.pend[i].done && (next < 0 || p.pend[i].at < p.pend[next].at) {
				next = i
			}
		}
		if next < 0 {
			if !hedge(now) || p.outstanding() == 0 {
				break
			}
			hedgeAt = -1
			continue
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
			l := p.s.pods[pe.pod].load(p.rep.clock.at(start, at), probe.SourceProbe)
			pe.st.Report(&l)
			p.est.Observe(at - pe.sent)
			res.Answered++
			p.stats.OK++
			known++
		default:
			now = deadline
			n := p.outstanding()
			res.TimedOut += n
			p.stats.Timeout += int64(n)
			p.observeLate() // a hedge sent late may answer within its own deadline
			for i := range p.pend {
				p.pend[i].done = true
			}
		}
	}
	res.Cancelled = p.outstanding()
	p.stats.Cancelled += int64(res.Cancelled)
	p.observeLate()
	res.Waited = now
	p.rep.clock.offset = now
	return res
}

func (p *vprober) outstanding() int {
	n := 0
	for i := range p.pend {
		if !p.pend[i].done {
			n++
		}
	}
	return n
}

// hedgeAfter is probe.Prober.HedgeAfterFor: the delay of a Run waiting for
// need answers out of waiting probes in flight.
func (p *vprober) hedgeAfter(waiting, need int) time.Duration {
	if p.cfg.AutoHedge {
		return p.est.HedgeAfterFor(waiting, need)
	}
	return p.cfg.HedgeAfter
}

// observeLate gives the hedge estimator the round trips of the probes left
// in flight at the decision that would have answered within their own
// deadline: production's fetcher cannot abandon a request in flight, so
// such a late answer still arrives and is observed (probe.Prober.fly).
// Leaving them out would bias the estimate towards the fast probes, the
// more so the more Runs hedge. The observation is made at the decision
// rather than at the answer's arrival (the same sample, a few hundred
// microseconds early); the late answer itself is not Reported (at 1,024
// pods, the chance that the replica samples that pod again while the
// report is fresh is negligible).
func (p *vprober) observeLate() {
	for i := range p.pend {
		if pe := &p.pend[i]; !pe.done && pe.at-pe.sent <= p.cfg.Deadline {
			p.est.Observe(pe.at - pe.sent)
		}
	}
}

// fresh is probe.Prober's freshness rule: a report younger than FreshFor.
func (p *vprober) fresh(st *probe.State, now time.Time) bool {
	if p.cfg.FreshFor <= 0 {
		return false
	}
	l := st.Latest()
	return l != nil && now.Sub(l.At) < p.cfg.FreshFor
}
