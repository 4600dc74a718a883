package probe

import (
	"math"
	"time"
)

// Batch seat time: how long the decodes this proxy sent to a backend will
// still hold its batch seats. A request past its prefill holds a seat (and
// its KV blocks) for one engine step per output token, so a backend whose
// seats are taken by long decodes makes a newcomer wait for a seat however
// few requests it runs; the prefill work (work.go) does not show that.
//
// Each request is counted from its first response byte (StartDecode) to its
// end (EndDecode) with its expected output tokens; the State keeps their
// count, their tokens and the sum of their first-byte times, so that the
// seat time left at any instant is one expression over three atomics (see
// Seats.Remaining) and no per-request record. The decode speed, in
// nanoseconds per output token, is learned from this proxy's completed
// streams: the time from first to last byte over the tokens between.

// seatEpoch is the origin of the first-byte times summed in
// State.decodingUs: microseconds since it fit in an int64 for any clock
// (a virtual one near the zero time included) and any number of requests.
var seatEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// seatUs returns t in microseconds since seatEpoch.
func seatUs(t time.Time) int64 { return t.Sub(seatEpoch).Microseconds() }

// Decode speed learning.
const (
	// minDecodeSample is the least output tokens a completed stream must
	// have produced to give a decode speed sample.
	minDecodeSample = 8
	// decodeAlpha is the weight of one sample in the learned decode speed.
	decodeAlpha = 0.1
	// decodeMaxNs bounds a sample (one token per second): a stream the
	// client read slowly is not a decode speed.
	decodeMaxNs = 1e9
)

// Seats is a backend's batch seat accounting as of one read: this proxy's
// requests past their first byte and not ended (N, their expected output
// tokens Tokens, the sum of their first-byte times SinceUs in microseconds
// since seatEpoch) and the learned decode speed (0: none yet).
type Seats struct {
	N          int
	Tokens     float64
	SinceUs    float64
	NsPerToken float64
}

// seats returns s's seat accounting. Lock-free.
func (s *State) seats() Seats {
	w := Seats{NsPerToken: math.Float64frombits(s.decodeNs.Load())}
	if n := s.decoding.Load(); n > 0 {
		w.N = int(n)
		w.Tokens = float64(max(s.decodingTok.Load(), 0))
		w.SinceUs = float64(s.decodingUs.Load())
	}
	return w
}

// Remaining returns the seat time, in nanoseconds, the decodes w counts
// still hold at nowUs (microseconds since seatEpoch, see SeatNow) if each
// produces its expected tokens at ns nanoseconds per token: the sum over
// them of tokens x ns less the time since their first byte, never below 0
// in all (a decode past its expected end offsets the others).
func (w *Seats) Remaining(nowUs int64, ns float64) float64 {
	if w.N == 0 || ns <= 0 {
		return 0
	}
	elapsed := (float64(w.N)*float64(nowUs) - w.SinceUs) * 1e3
	return max(w.Tokens*ns-elapsed, 0)
}

// SeatNow returns t as Seats.Remaining takes it.
func SeatNow(t time.Time) int64 { return seatUs(t) }

// StartDecode records that a request expecting tokens output tokens
// produced its first byte at t: it holds a batch seat until EndDecode.
func (s *State) StartDecode(tokens int64, t time.Time) {
	s.decoding.Add(1)
	s.decodingTok.Add(tokens)
	s.decodingUs.Add(seatUs(t))
}

// EndDecode takes back what StartDecode(tokens, first) added. If the
// request completed having produced produced output tokens (at least
// minDecodeSample), its last byte at last gives a decode speed sample:
// (last - first) / (produced - 1) nanoseconds per token.
func (s *State) EndDecode(tokens int64, first time.Time, produced int, last time.Time) {
	s.decoding.Add(-1)
	s.decodingTok.Add(-tokens)
	s.decodingUs.Add(-seatUs(first))
	if produced < minDecodeSample || !last.After(first) {
		return
	}
	ns := float64(last.Sub(first)) / float64(produced-1)
	if ns > decodeMaxNs {
		return
	}
	for {
		old := s.decodeNs.Load()
		next := ns
		if old != 0 {
			next = math.Float64frombits(old) + decodeAlpha*(ns-math.Float64frombits(old))
		}
		if s.decodeNs.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}
