package fleetsim

import (
	"strings"
	"time"

	"github.com/probegate/probegate/route"
)

// share is what a run's replicas know of each other, beyond what pods
// report: nothing in production (replicas share nothing), and in the
// comparison runs of the strategy suffixes below one part of a proxy's
// knowledge made fleet-wide, so that the value of each part can be
// measured (bench/HISTORY.md, issue 13 session 7). None of these is a
// signal a deployed proxy has; they bound what a signal standing for it
// could gain.
type share struct {
	// state: the replicas route over one set of route.Backend, so one
	// probe.State per pod: reports, dispatch counters (the correction
	// counts every replica's dispatches), token work in flight, learned
	// speed, prefix and LoRA tables.
	state bool
	// speed: each replica keeps its own States, but every first byte's
	// speed sample (route.load.learn_speed) is taken by every replica's
	// State of that pod, as if each proxy timed every proxy's requests.
	speed bool
	// tokens: each replica keeps its own States, but the prompt tokens
	// (and requests) any replica has dispatched to a pod and not seen
	// start streaming count in every replica's State of that pod: the
	// exact token work of the other replicas, which a proxy otherwise
	// sees only as the reported waiting count x its own mean prompt.
	tokens bool
}

// Strategy suffixes that share knowledge across replicas (fleetsim only;
// before any rules suffix: probe_sharespeed_norules).
const (
	suffixShareState  = "_sharestate"
	suffixShareSpeed  = "_sharespeed"
	suffixShareTokens = "_sharetokens"
)

// splitShare strips a share suffix from strategy (which may carry a rules
// suffix after it): the strategy without it and what its replicas share.
func splitShare(strategy string) (string, share) {
	base, rules := strategy, ""
	for _, suf := range []string{suffixNoRules, suffixNoSWR, suffixNoSlow, suffixSlowKnown} {
		if strings.HasSuffix(base, suf) {
			base, rules = strings.TrimSuffix(base, suf), suf
			break
		}
	}
	var sh share
	switch {
	case strings.HasSuffix(base, suffixShareState):
		base, sh.state = strings.TrimSuffix(base, suffixShareState), true
	case strings.HasSuffix(base, suffixShareSpeed):
		base, sh.speed = strings.TrimSuffix(base, suffixShareSpeed), true
	case strings.HasSuffix(base, suffixShareTokens):
		base, sh.tokens = strings.TrimSuffix(base, suffixShareTokens), true
	}
	return base + rules, sh
}

// shareDispatch gives the token work req's replica just counted for it
// (share.tokens) to every other replica's State of its pod.
func (s *sim) shareDispatch(req *request) {
	if !s.share.tokens {
		return
	}
	req.sharedPrefill = req.work.Prefill()
	for _, o := range s.replicas {
		if o.idx != int(req.replica) {
			o.backends[req.pod].State().AddWork(req.sharedPrefill, 0)
		}
	}
}

// shareFirstByte gives req's first byte, reaching its replica at now, to
// every other replica's State of its pod: the speed sample (share.speed;
// call it before the ticket sees the byte) and the end of the prefill work
// shareDispatch counted (share.tokens).
func (s *sim) shareFirstByte(req *request, now time.Time) {
	var elapsed time.Duration
	var waited float64
	if s.share.speed {
		elapsed, waited = req.work.SpeedSample(now)
	}
	for _, o := range s.replicas {
		if o.idx == int(req.replica) {
			continue
		}
		st := o.backends[req.pod].State()
		if s.share.tokens && !req.sharedDone {
			st.PrefillDone(req.sharedPrefill, 0, 0) // no sample
		}
		if waited > 0 {
			// AddWork and PrefillDone of nothing: a sample alone.
			st.AddWork(0, 0)
			st.PrefillDone(0, elapsed, waited)
		}
	}
	req.sharedDone = true
}

// shareFinish takes back, at req's end, the prefill work shareDispatch
// counted in the other replicas' States if no first byte came.
func (s *sim) shareFinish(req *request) {
	if !s.share.tokens || req.sharedDone {
		return
	}
	for _, o := range s.replicas {
		if o.idx != int(req.replica) {
			o.backends[req.pod].State().DoneWork(req.sharedPrefill, 0, false)
		}
	}
	req.sharedDone = true
}

// sharedBackends returns the Backends replica idx routes over: its own, or
// with share.state replica 0's.
func (s *sim) sharedBackends(idx int, own func() []*route.Backend) []*route.Backend {
	if !s.share.state || idx == 0 || len(s.replicas) == 0 {
		return own()
	}
	return s.replicas[0].backends
}
