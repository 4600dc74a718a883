package route

import (
	"math"
	"sync/atomic"

	"github.com/probegate/probegate/probe"
)

// LoadModel is route.load: how a backend's view becomes the "queue" the
// scorers compare. In requests mode it is the view's corrected request
// count. In tokens mode it is the backend's expected time to first token
// for this request, expressed in requests of the mean prompt size so that
// the scorers and route.affinity_max_queue_gap keep their meaning:
//
//	ahead   = max(prefill tokens this proxy sent there and has not seen
//	              start streaming, reported waiting requests x mean prompt)
//	waiting = max(requests those tokens belong to, reported waiting)
//	running = the view's corrected queue - waiting (requests past prefill)
//	work    = ahead + own prefill (prompt tokens minus the blocks the
//	          backend is believed to have cached) + DecodeWeight x this
//	          proxy's expected output tokens in flight there
//	seat    = the batch seat time this proxy's requests still hold there
//	          (View.Seats at in.NowUs: expected output tokens not yet
//	          produced x the backend's learned ns per output token, see
//	          probe.State.SeatNs)
//	queue   = RunningWeight x running + WaitingWeight x waiting
//	          + (work x the backend's learned ns per token (the
//	            candidates' mean when not learned yet) + SeatWeight x seat)
//	            / (reference ns x mean prompt)
//
// Queued prefill is counted in tokens, since a 7,000-token prompt ahead
// delays the first token fourteen times more than a 500-token one; a
// running request is counted as a request, since it delays newcomers by
// holding a batch seat and KV blocks whatever its prompt was.
//
// The local prediction counts work the moment it is dispatched, before any
// report can show it; the report's waiting count adds the work other
// proxies and direct clients sent. Pure, no allocation.
type LoadModel struct {
	// Tokens selects tokens mode; false is requests mode.
	Tokens bool
	// DecodeWeight is the prefill-token equivalent of one expected output
	// token in flight (route.load.decode_weight).
	DecodeWeight float64
	// RunningWeight is what one request past its prefill counts, in
	// requests (route.load.running_weight).
	RunningWeight float64
	// WaitingWeight is what one request not yet past its prefill counts,
	// in requests, on top of its prefill work (route.load.waiting_weight).
	WaitingWeight float64
	// IgnoreSpeed turns route.load.learn_speed off: every backend is
	// assumed equally fast.
	IgnoreSpeed bool
	// PodSpeed is route.load.pod_speed: the weight of a backend's
	// pod-reported speed (View.PodNsPerToken) against its learned one
	// (View.NsPerToken) where both are known (see Ns).
	PodSpeed float64
	// PodSamples is route.load.pod_speed_samples: when > 0, a
	// long-lived pod's pod-reported speed (seeded from its lifetime
	// counters) weighs at least PodSamples / (PodSamples + n) against a
	// learned speed resting on n own samples, so it decides alone before
	// this proxy has timed the backend and yields as its own timings
	// arrive (see Ns).
	PodSamples float64
	// PodForeign is route.load.pod_speed_foreign: when > 0, PodSamples
	// applies to a backend only while its reports show other clients'
	// requests, a foreign share (View.ForeignShare) of at least
	// PodForeign; 0 applies it always. A lone proxy times every request
	// the pod serves, so its learned speed needs no seed; a proxy among
	// several times a fraction, whose waits include work it never saw.
	PodForeign float64
	// PodFresh is route.load.pod_speed_fresh: PodSamples applies also to
	// a pod-reported speed that did not start from lifetime counters (a
	// pod that was fresh when this proxy first read it: its speed comes
	// from windows of this proxy's reports), under the same PodForeign
	// gate. Among R replicas each times an R-th of a pod's requests, and
	// its samples' waits include work it never saw, while every replica
	// reads the pod's counters whole (see Seeded).
	PodFresh bool
	// SpeedBand is route.load.speed_band: in requests mode, the learned
	// speed ratio beyond which a backend's queue is scaled (0: never).
	SpeedBand float64
	// SeatWeight is route.load.seat_weight: the weight of the batch seat
	// time this proxy's requests hold at a backend (View.Seats: their
	// expected decode time not yet run, see probe.State.SeatNs), added to
	// the expected time to first token.
	SeatWeight float64
	// SeatFreeShare is route.load.seat_free_share: the share of the seat
	// time counted at a backend with a batch seat free (seatFree).
	SeatFreeShare float64
}

// LoadInput is what LoadModel.Queue needs beyond the view.
type LoadInput struct {
	// Own is this request's prefill at the candidate: its prompt tokens
	// minus the prefix tokens believed cached there.
	Own float64
	// MeanPrompt is the running mean prompt of this proxy's requests, in
	// tokens (> 0).
	MeanPrompt float64
	// RefNs is the reference nanoseconds per token (the mean learned speed
	// of the candidates, > 0); a candidate with no learned speed uses it.
	RefNs float64
	// NowUs is the decision's instant in Unix microseconds, the clock of
	// the candidates' seat accounts (probe.Seats.LeftUs).
	NowUs int64
}

// Queue returns the candidate's queue for the scorers (see LoadModel).
func (m *LoadModel) Queue(v *probe.View, in *LoadInput) float64 {
	if !m.Tokens {
		return m.requestQueue(v.Queue, m.viewNs(v), in)
	}
	b := v.Brief()
	return m.BriefQueue(&b, in)
}

// BriefQueue is Queue on the load fields of a view alone: Queue(v, in) ==
// BriefQueue(v.Brief(), in).
func (m *LoadModel) BriefQueue(v *probe.Brief, in *LoadInput) float64 {
	if !m.Tokens {
		return m.requestQueue(v.Queue, m.BriefNs(v), in)
	}
	if in.MeanPrompt <= 0 || in.RefNs <= 0 {
		return v.Queue
	}
	ahead, decode := v.PrefillTokens, v.DecodeTokens
	waiting := float64(v.PrefillRequests)
	if v.Source != probe.SourceLocal && v.Source != probe.SourceNone && v.Waiting > 0 {
		// The report counts every client's requests, this proxy's own
		// prediction only its own: take the larger.
		ahead = max(ahead, float64(v.Waiting)*in.MeanPrompt)
		waiting = max(waiting, float64(v.Waiting))
	}
	// Requests past their prefill hold batch seats and KV blocks until
	// they finish: each counts as RunningWeight of a request. A request
	// not past it needs a seat too (its prefill tokens alone make a short
	// prompt behind a cached prefix look nearly free): WaitingWeight.
	running := max(v.Queue-waiting, 0)
	ns := m.BriefNs(v)
	if ns <= 0 || m.IgnoreSpeed {
		ns = in.RefNs
	}
	work := ahead + max(in.Own, 0) + m.DecodeWeight*decode
	t := work * ns                        // expected time to first token, ns
	if m.SeatWeight > 0 && v.Seats != 0 { // 0: no request of this proxy there
		w := m.SeatWeight
		if m.SeatFreeShare < 1 && seatFree(v) {
			w *= m.SeatFreeShare
		}
		t += w * 1e3 * float64(v.Seats.LeftUs(in.NowUs)) // µs to ns
	}
	return m.RunningWeight*running + m.WaitingWeight*waiting + t/(in.RefNs*in.MeanPrompt)
}

// seatFree reports whether the backend v describes has a batch seat free
// for a newcomer: fewer requests (corrected running + waiting) than the
// most its reports have shown running (View.SeatLimit, 0 before any), and
// no request waiting in its latest fresh report (-1: none). A pod never
// seen running more requests than it runs now counts as full.
func seatFree(v *probe.Brief) bool {
	return v.Queue < float64(v.SeatLimit) && v.Waiting <= 0
}

// requestQueue is requests mode's queue: the corrected request count q,
// scaled by the backend's learned ns per token over the reference when
// that ratio is outside [1/SpeedBand, SpeedBand]: (q + 1) x ratio - 1, so
// that a backend prefilling twice as slowly counts its queue and the
// request itself twice.
func (m *LoadModel) requestQueue(q, ns float64, in *LoadInput) float64 {
	if m.SpeedBand < 1 || m.IgnoreSpeed || ns <= 0 || in.RefNs <= 0 {
		return q
	}
	r := ns / in.RefNs
	if r < m.SpeedBand && r*m.SpeedBand > 1 {
		return q
	}
	return (q+1)*r - 1
}

// Ns returns the ns per prefill token the model scores a backend with,
// given its learned (State.PrefillDone, the median of its latest own
// samples, n taken so far) and pod-reported (probe's podSpeed) speeds, 0
// meaning unknown, and whether the pod-reported one started from a
// long-lived pod's lifetime counters (seeded): w x pod + (1 - w) x learned
// when both are known, where w is PodSpeed or, for a seeded speed with
// PodSamples > 0, at least PodSamples / (PodSamples + n); the known one
// when only one is (the pod's only with w > 0); 0 when neither is. With
// PodSpeed 0 a pod that was not long-lived when this proxy first read it
// (no seed) is scored exactly as with the learned speed alone.
//
// The pod-reported speed is the same for every proxy in front of the pod
// (it comes from the pod's counters, a long-lived pod's from its first
// scrape on), while each proxy learns its own from the first bytes of its
// own requests: with R proxies each learns from 1/R of the samples and
// never sees the others' work, and a proxy that has just started has
// timed nobody.
func (m *LoadModel) Ns(learned, pod float64, n int, seeded bool) float64 {
	w := m.PodSpeed
	if seeded && m.PodSamples > 0 {
		w = max(w, m.PodSamples/(m.PodSamples+float64(max(n, 0))))
	}
	switch {
	case pod <= 0 || w <= 0:
		return learned
	case learned <= 0 || w >= 1:
		return pod
	}
	return w*pod + (1-w)*learned
}

// viewNs is Ns of the speeds v carries.
func (m *LoadModel) viewNs(v *probe.View) float64 {
	return m.Ns(v.NsPerToken, v.PodNsPerToken, v.SpeedSamples, m.Seeded(v.PodSeeded, v.ForeignShare))
}

// BriefNs is the ns per prefill token the model scores the backend b
// describes with: Ns of b's speeds, seeded as Seeded says.
func (m *LoadModel) BriefNs(b *probe.Brief) float64 {
	return m.Ns(b.NsPerToken, b.PodNsPerToken, b.SpeedSamples, m.Seeded(b.PodSeeded, b.ForeignShare))
}

// Seeded reports whether Ns gives a backend's pod-reported speed
// PodSamples' weight: it started from the pod's lifetime counters
// (podSeeded: a long-lived pod) or PodFresh is set, and, with PodForeign >
// 0, the backend's reports show a foreign share of at least PodForeign.
func (m *LoadModel) Seeded(podSeeded bool, foreignShare float64) bool {
	return (podSeeded || m.PodFresh) && (m.PodForeign <= 0 || foreignShare >= m.PodForeign)
}

// RefNs returns the mean over views of the speed the model scores them
// with (Ns), or 1 when none is known (every candidate then uses the same
// speed).
func (m *LoadModel) RefNs(views []probe.View) float64 {
	sum, n := 0.0, 0
	for i := range views {
		if ns := m.viewNs(&views[i]); ns > 0 {
			sum += ns
			n++
		}
	}
	return refMean(sum, n)
}

// briefRefNs is RefNs over briefs.
func (m *LoadModel) briefRefNs(briefs []probe.Brief) float64 {
	sum, n := 0.0, 0
	for i := range briefs {
		if ns := m.BriefNs(&briefs[i]); ns > 0 {
			sum += ns
			n++
		}
	}
	return refMean(sum, n)
}

func refMean(sum float64, n int) float64 {
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}

// OwnPrefill is a request's prefill tokens at a backend that holds matched
// of its blocks blocks of blockChars characters: the prompt minus the
// cached prefix, never below one token.
func OwnPrefill(promptTokens, matched, blockChars int) float64 {
	cached := matched * blockChars / charsPerToken
	return float64(max(promptTokens-cached, 1))
}

// ewma is a lock-free exponentially weighted mean of float64 samples,
// safe for concurrent use; zero value: no sample yet.
type ewma struct{ bits atomic.Uint64 }

// observe folds x in with weight alpha (the first sample is taken as is).
func (e *ewma) observe(x, alpha float64) {
	for {
		old := e.bits.Load()
		next := x
		if old != 0 {
			next = (1-alpha)*math.Float64frombits(old) + alpha*x
		}
		if e.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// value returns the mean, or def when there has been no sample.
func (e *ewma) value(def float64) float64 {
	if b := e.bits.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return def
}

// outputSlots is the size of the per-model output-length table.
const outputSlots = 64

// outputEstimator is the running per-model estimate of output tokens for
// requests that do not fix their output length (no ignore_eos): an EWMA
// of observed output tokens per model, in a fixed table indexed by the
// model hash (a collision shares a slot: an estimate, not an account).
// Safe for concurrent use, no allocation.
type outputEstimator struct {
	slots [outputSlots]struct {
		model atomic.Uint64
		mean  ewma
	}
}

// expected returns the output tokens to count for a request for model
// (hash) with maxTokens (0: none) and ignoreEOS: maxTokens when ignoreEOS,
// else the model's running mean (def before any sample), capped by
// maxTokens.
func (o *outputEstimator) expected(model uint64, maxTokens int, ignoreEOS bool, def float64) float64 {
	if ignoreEOS && maxTokens > 0 {
		return float64(maxTokens)
	}
	e := def
	s := &o.slots[model%outputSlots]
	if s.model.Load() == model {
		e = s.mean.value(def)
	}
	if maxTokens > 0 && e > float64(maxTokens) {
		e = float64(maxTokens)
	}
	return e
}

// observe records that a request for model produced n output tokens.
func (o *outputEstimator) observe(model uint64, n int) {
	s := &o.slots[model%outputSlots]
	if s.model.Load() != model {
		// A new model takes the slot over: start its mean afresh.
		s.model.Store(model)
		s.mean.bits.Store(0)
	}
	s.mean.observe(float64(n), 0.05)
}
