package probe

import (
	"math"
	"time"
)

// Batch seat time: how long the requests this proxy sent to a backend will
// still hold its batch seats. A request past its prefill holds a seat (and
// its KV blocks) for one engine step per output token, so a backend whose
// seats are taken by long decodes makes a newcomer wait for a seat however
// few requests it runs; the prefill work (work.go) does not show that.
//
// The whole account is one atomic word per backend (State.seat), so that a
// pick reads it with one load and turns it into the seat time left with a
// multiplication and a subtraction (seatLeftUs), lock-free and exact:
//
//	low 16 bits   n: requests past their first byte and not ended
//	high 48 bits  sum, modulo 2^48, in microseconds, of
//	              - each such request's expected end (Unix µs): its first
//	                byte plus its expected output tokens x the backend's
//	                decode time per token then (StartDecode);
//	              - each request not yet past its first byte: its whole
//	                expected decode time, priced when it was sent (HoldSeat).
//
// The seat time left at now is then sum - n x now: the decodes' time to
// their expected ends (one that ran past its end offsets the others) plus
// the whole decodes still to start. Everything is modular, so no epoch is
// needed: the result is exact whenever the true value is below 2^47 µs (4
// years) in magnitude. Each request adds one delta (a SeatHold) and takes
// exactly it back, so the low field is exactly n (n < 2^16 is kept by
// StartDecode) and never carries into the sum.
//
// The decode time per output token is learned from this proxy's completed
// streams (DecodeSample); the caller prices a request with it, or with a
// fleet-wide figure while the backend has none (route's work ticket).

const (
	seatCountBits = 16
	seatCountMask = 1<<seatCountBits - 1
	// seatMaxUs bounds one request's expected decode time, so that 2^16
	// of them stay far inside the word's range (about 18 minutes).
	seatMaxUs = 1 << 30
)

// Decode speed learning.
const (
	// minDecodeSample is the least output tokens a completed stream must
	// have produced to give a decode speed sample.
	minDecodeSample = 8
	// DecodeAlpha is the weight of one sample in the learned decode speed
	// (a backend's here; the proxy-wide mean in route uses it too).
	DecodeAlpha = 0.1
	// decodeMaxNs bounds a sample (one token per second): a stream the
	// client read slowly is not a decode speed.
	decodeMaxNs = 1e9
)

// SeatHold is what one request added to its backend's seat word: kept by
// the caller so that StartDecode can move it and EndDecode take it back
// exactly. The zero SeatHold holds nothing.
type SeatHold uint64

// decodeUs returns tokens x ns nanoseconds in microseconds, rounded and
// bounded to [0, seatMaxUs].
func decodeUs(tokens int64, ns float64) int64 {
	us := float64(tokens) * ns / 1e3
	if !(us > 0) {
		return 0
	}
	return int64(math.Round(min(us, seatMaxUs)))
}

// HoldSeat records that a request expecting tokens output tokens at ns
// nanoseconds per token was sent to the backend: until its first byte its
// whole decode time counts in the seat time. ns <= 0 (no decode speed
// known) holds nothing.
func (s *State) HoldSeat(tokens int64, ns float64) SeatHold {
	h := SeatHold(uint64(decodeUs(tokens, ns)) << seatCountBits)
	if h != 0 {
		s.seat.Add(uint64(h))
	}
	return h
}

// StartDecode records that the request holding h produced its first byte
// at t: its hold becomes a decode expected to end tokens x ns nanoseconds
// after t, whose seat time shrinks as time passes. It returns the new
// hold. With ns <= 0, or when 2^16 - 1 decodes are already counted, the
// request holds nothing from now on.
func (s *State) StartDecode(h SeatHold, tokens int64, ns float64, t time.Time) SeatHold {
	var next SeatHold
	if ns > 0 {
		next = SeatHold(uint64(t.UnixMicro()+decodeUs(tokens, ns))<<seatCountBits + 1)
	}
	for {
		old := s.seat.Load()
		n := next
		if old&seatCountMask == seatCountMask {
			n = 0 // no room to count one more decode
		}
		if s.seat.CompareAndSwap(old, old-uint64(h)+uint64(n)) {
			return n
		}
	}
}

// EndDecode takes back what the request holding h added (HoldSeat, then
// StartDecode if its first byte came).
func (s *State) EndDecode(h SeatHold) {
	if h != 0 {
		s.seat.Add(-uint64(h))
	}
}

// Seats is a backend's seat account as of one read: the word described
// above, copied with one atomic load (View.Seats, Brief.Seats).
type Seats uint64

// LeftUs returns the seat time, in microseconds, the account says is left
// at nowUs (Unix µs): its sum less n x nowUs, modulo 2^48 and read as a
// signed 48-bit number, never below 0.
func (a Seats) LeftUs(nowUs int64) int64 {
	d := uint64(a)>>seatCountBits - (uint64(a)&seatCountMask)*uint64(nowUs)
	return max(int64(d<<seatCountBits)>>seatCountBits, 0)
}

// SeatNs returns the batch seat time, in nanoseconds, this proxy's
// requests hold at the backend at now (see the account above): 0 when
// none. Lock-free: one atomic load.
func (s *State) SeatNs(now time.Time) float64 {
	return float64(Seats(s.seat.Load()).LeftUs(now.UnixMicro())) * 1e3
}

// DecodeNs returns the backend's learned decode time per output token, in
// nanoseconds (0: none yet).
func (s *State) DecodeNs() float64 { return math.Float64frombits(s.decodeNs.Load()) }

// DecodeSample learns from a completed stream whose first byte came at
// first and its last at last, having produced produced output tokens (at
// least minDecodeSample): (last - first) / (produced - 1) nanoseconds per
// token, folded into the backend's learned decode speed with weight
// DecodeAlpha. It returns the sample, or 0 when the stream gives none
// (too short, every byte at once, or slower than decodeMaxNs per token).
func (s *State) DecodeSample(first time.Time, produced int, last time.Time) float64 {
	if produced < minDecodeSample || !last.After(first) {
		return 0
	}
	ns := float64(last.Sub(first)) / float64(produced-1)
	if ns > decodeMaxNs {
		return 0
	}
	for {
		old := s.decodeNs.Load()
		next := ns
		if old != 0 {
			next = math.Float64frombits(old) + DecodeAlpha*(ns-math.Float64frombits(old))
		}
		if s.decodeNs.CompareAndSwap(old, math.Float64bits(next)) {
			return ns
		}
	}
}
