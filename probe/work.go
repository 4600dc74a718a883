package probe

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// speedWindow is how many of a backend's latest speed samples its learned
// speed is the median of (State.PrefillDone).
const speedWindow = 16

// speedSamples is the ring of a backend's latest speed samples, in
// nanoseconds per prefill token. Writers claim a slot with an atomic add;
// no lock.
type speedSamples struct {
	n     atomic.Uint64              // samples taken so far
	slots [speedWindow]atomic.Uint64 // float64 bits; 0: not written yet
}

// minSpeedTokens is the least prefill work a speed sample must cover: the
// time to first byte of a short prompt is network, scheduling and seat
// waits, not prefill, and would make the per-token speed noise.
const minSpeedTokens = 256

// AddWork records the token work of a request this proxy is dispatching to
// the backend: prefill prompt tokens (after any expected prefix-cache hit)
// and decode expected output tokens. Every AddWork must be followed by
// PrefillDone (at the first response byte, if any) and DoneWork (when the
// request ends), which together take back exactly what AddWork added.
// This is the local prediction of NVIDIA Dynamo's KV router, kept per
// proxy: work is counted the moment it is sent, before any report can
// show it, and corrected when the first token (prefill finished) and the
// end of the request arrive.
func (s *State) AddWork(prefill, decode int64) {
	s.prefillWaiting.Add(1)
	s.prefillPending.Add(prefill)
	s.decodePending.Add(decode)
}

// PrefillDone records that a request's first response byte arrived:
// prefill of its prefill tokens is over. If tokens >= minSpeedTokens it is
// the prefill work the request waited for (the tokens ahead of it when it
// was dispatched plus its own), and elapsed/tokens is a speed sample: the
// backend's learned speed becomes the median of its latest speedWindow
// samples, in nanoseconds per prefill token.
//
// A median, not a mean: a sample is a time to first byte, and one that a
// scheduling stall, a GC pause or work this proxy could not see (other
// clients' requests in prefill) made several times too long would move a
// mean by a tenth of its excess for the next ten requests; the median
// moves only once such samples are half the window. It does not allocate
// and takes no lock; concurrent calls may publish their medians out of
// order, each over a window at most a few samples apart.
func (s *State) PrefillDone(prefill int64, elapsed time.Duration, tokens float64) {
	s.prefillWaiting.Add(-1)
	s.prefillPending.Add(-prefill)
	if tokens < minSpeedTokens || elapsed <= 0 {
		return
	}
	sp := &s.speed
	i := sp.n.Add(1) - 1
	sp.slots[i%speedWindow].Store(math.Float64bits(float64(elapsed) / tokens))
	var buf [speedWindow]float64
	n := 0
	for j := range sp.slots {
		if b := sp.slots[j].Load(); b != 0 {
			buf[n] = math.Float64frombits(b)
			n++
		}
	}
	w := buf[:n]
	slices.Sort(w)
	med := w[n/2]
	if n%2 == 0 {
		med = (w[n/2-1] + med) / 2
	}
	s.nsPerToken.Store(math.Float64bits(med))
}

// SpeedSamples returns how many speed samples this proxy has taken of the
// backend so far (the learned speed is the median of the latest
// speedWindow of them). Lock-free.
func (s *State) SpeedSamples() int { return int(min(s.speed.n.Load(), math.MaxInt32)) }

// DoneWork records the end of a request: prefill and decode are what
// AddWork added; prefillDone tells whether PrefillDone already took the
// prefill back (the first byte arrived).
func (s *State) DoneWork(prefill, decode int64, prefillDone bool) {
	if !prefillDone {
		s.prefillWaiting.Add(-1)
		s.prefillPending.Add(-prefill)
	}
	s.decodePending.Add(-decode)
}

// Work returns the pending prefill and decode tokens (never negative) and
// the learned nanoseconds per prefill token (0: none yet). Lock-free.
func (s *State) Work() (prefill, decode, ns float64) {
	prefill = float64(max(s.prefillPending.Load(), 0))
	decode = float64(max(s.decodePending.Load(), 0))
	return prefill, decode, math.Float64frombits(s.nsPerToken.Load())
}
