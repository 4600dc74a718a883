package probe

import "time"

// A pod's prefill speed as the pod itself reports it, derived from the
// deltas of its prefill counters (Load.PrefillSeconds, Load.PrefillTokens)
// between reports. Unlike the learned speed (work.go), which each proxy
// times from its own requests' first bytes, it does not depend on which
// requests this proxy sent: every proxy in front of a pod reads the same
// counters, so with 8 replicas each sees the whole pod, not an eighth of
// it, and not only its own work.
//
// Why not the naive ratio (prefill seconds / prefill tokens): vLLM
// prefills several requests in the same steps (chunked prefill shares a
// step's token budget among them, and a new arrival joins a batch whose
// prefill is under way), and each request's prefill time spans the whole
// shared stretch, so the sum over requests counts the same second once per
// request in it: k requests prefilled together look k times slower. The
// time the pod spent prefilling is at most the window's length and at
// most the sum of the per-request times; podSpeed takes the smaller of the
// two as the busy time:
//
//	ns per token = min(delta prefill seconds, window) / delta prefill tokens
//
// Exact when prefills do not overlap (light load: the sum is the busy
// time) and when the pod prefills through the whole window (a backlog: the
// window is the busy time); between the two (bursts of overlapping
// prefills separated by idle time) it overestimates the time per token,
// at most by the overlap. The counters are observed when a request
// finishes, the time and the tokens of the same requests together, so the
// window is long (podSpeedWindow and podSpeedTokens) next to a request's
// decode.
const (
	// podSpeedWindow is the least time a speed window spans.
	podSpeedWindow = 4 * time.Second
	// podSpeedTokens is the least prefill work (computed prompt tokens) a
	// speed window covers: about ten prompts of the code trace's median
	// (1,469 tokens), so that no one request's prefill decides it.
	podSpeedTokens = 16384
	// podSpeedAlpha is the weight of a new window's speed in the estimate.
	podSpeedAlpha = 0.5
	// A window's speed outside [podSpeedMinNs, podSpeedMaxNs] nanoseconds
	// per token (a million tokens per second; one token per second) is
	// dropped as garbage: a server whose counters lie cannot make itself
	// look faster than any real one.
	podSpeedMinNs = 1e3
	podSpeedMaxNs = 1e9
)

// podSpeed is the pod-reported speed state a report carries: the window's
// anchor (the report it started at) and the estimate so far. A value; the
// zero value has no anchor and no estimate.
type podSpeed struct {
	at         time.Time // the anchor report's At; zero: no anchor
	secs, toks float64   // the anchor's counters
	ns         float64   // nanoseconds per prefill token; 0: none yet
	// seeded: the estimate started from the pod's lifetime counters in
	// the first report this proxy read (lifetimeNs): a long-lived pod.
	seeded bool
	// seen: a report has been folded in. Only the first report can seed:
	// a pod this proxy first read with counters at 0 (started with the
	// proxy, or a server without the families) is not long-lived, however
	// many tokens its counters hold a few scrapes later.
	seen bool
}

// next returns the state after report l (already accepted as newer than
// the state's anchor). A report without counters changes nothing. A
// counter that went backwards (the server restarted) or a window that
// spent no prefill time starts a new window from l; a window long enough
// (podSpeedWindow, podSpeedTokens) yields a speed, folded into the estimate
// with weight podSpeedAlpha, and l becomes the next anchor.
func (p podSpeed) next(l *Load) podSpeed {
	first := !p.seen
	p.seen = true
	if !counted(l.PrefillSeconds) || !counted(l.PrefillTokens) || (l.PrefillSeconds == 0 && l.PrefillTokens == 0) {
		return p // none reported, or garbage (NaN, infinite, negative)
	}
	anchor := podSpeed{at: l.At, secs: l.PrefillSeconds, toks: l.PrefillTokens, ns: p.ns, seeded: p.seeded, seen: true}
	if first {
		anchor.ns = lifetimeNs(l)
		anchor.seeded = anchor.ns > 0
		return anchor
	}
	if p.at.IsZero() || l.PrefillSeconds < p.secs || l.PrefillTokens < p.toks {
		return anchor
	}
	window := l.At.Sub(p.at)
	dTok := l.PrefillTokens - p.toks
	if window < podSpeedWindow || dTok < podSpeedTokens {
		return p // keep accumulating
	}
	busy := min(l.PrefillSeconds-p.secs, window.Seconds())
	if busy <= 0 {
		return anchor
	}
	ns := busy * 1e9 / dTok
	if !(ns >= podSpeedMinNs && ns <= podSpeedMaxNs) {
		return anchor
	}
	if anchor.ns > 0 {
		ns = anchor.ns + podSpeedAlpha*(ns-anchor.ns)
	}
	anchor.ns = ns
	return anchor
}

// lifetimeNs is the speed a backend's first report seeds the estimate
// with: the pod's counters since it started, when they cover at least
// podSpeedTokens (a long-lived pod: everything it prefilled before this
// proxy first read it), else 0 (a pod started moments ago, or a fresh
// one: wait for a window). There is no window to bound the busy time by,
// so it is the naive ratio, which overlapping prefills inflate (see
// podSpeed): a pod that prefilled k requests at once in its life looks up
// to k times slower than it is.
func lifetimeNs(l *Load) float64 {
	if l.PrefillTokens < podSpeedTokens {
		return 0
	}
	ns := l.PrefillSeconds * 1e9 / l.PrefillTokens
	if !(ns >= podSpeedMinNs && ns <= podSpeedMaxNs) {
		return 0
	}
	return ns
}

// counted reports whether c is a plausible cumulative counter value.
func counted(c float64) bool { return c >= 0 && c <= maxPrefillTotals }

// PodNsPerToken returns the pod-reported nanoseconds per prefill token (see
// podSpeed), or 0 when the backend's reports have not yielded one.
// Lock-free. (View.PodSeeded tells whether it started from a long-lived
// pod's lifetime counters.)
func (s *State) PodNsPerToken() float64 {
	if r := s.latest.Load(); r != nil {
		return r.pod.ns
	}
	return 0
}
