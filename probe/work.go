package probe

import (
	"math"
	"time"
)

// speedAlpha is the weight of a new sample in the per-backend prefill
// speed EWMA (State.PrefillDone): about the last 10 requests count.
const speedAlpha = 0.1

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
// prefill of its prefill tokens is over. If tokens >= minSpeedTokens it is the prefill
// work the request waited for (the tokens ahead of it when it was
// dispatched plus its own), and elapsed/tokens updates the backend's
// learned speed, an EWMA of nanoseconds per prefill token.
func (s *State) PrefillDone(prefill int64, elapsed time.Duration, tokens float64) {
	s.prefillWaiting.Add(-1)
	s.prefillPending.Add(-prefill)
	if tokens < minSpeedTokens || elapsed <= 0 {
		return
	}
	sample := float64(elapsed) / tokens
	for {
		old := s.nsPerToken.Load()
		next := sample
		if old != 0 {
			next = (1-speedAlpha)*math.Float64frombits(old) + speedAlpha*sample
		}
		if s.nsPerToken.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

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
