package probe

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDecodeSpeedIsLearnedFromCompletedStreams: a completed stream's time
// from first to last byte over the tokens between is a decode speed
// sample; a stream too short to time, or one whose bytes all came at
// once, is none.
func TestDecodeSpeedIsLearnedFromCompletedStreams(t *testing.T) {
	s := NewState("a:1")
	t0 := time.Unix(1_800_000_000, 0)
	if ns := s.DecodeSample(t0, 5, t0.Add(time.Second)); ns != 0 { // 5 tokens: too short
		t.Fatalf("a 5-token stream gave a sample, %v", ns)
	}
	if ns := s.DecodeSample(t0, 50, t0); ns != 0 { // every byte at once: not a decode
		t.Fatalf("a stream whose bytes came at once gave a sample, %v", ns)
	}
	if ns := s.DecodeSample(t0, 101, t0.Add(200*time.Second)); ns != 0 { // 2 s a token: a slow reader
		t.Fatalf("a stream at 2 s a token gave a sample, %v", ns)
	}
	if s.DecodeNs() != 0 {
		t.Fatalf("after untimable streams: learned %v ns per token, want none", s.DecodeNs())
	}
	if ns := s.DecodeSample(t0, 101, t0.Add(time.Second)); ns != 1e7 { // 10 ms per token
		t.Fatalf("sample %v, want 1e7", ns)
	}
	s.DecodeSample(t0, 101, t0.Add(2*time.Second)) // 20 ms: the mean moves a tenth of the way
	if ns := s.DecodeNs(); ns < 10.99e6 || ns > 11.01e6 {
		t.Fatalf("learned %v ns per token, want 1.1e7", ns)
	}
}

// TestSeatWordIsExact: requests held, started and ended in any order leave
// the seat time equal to its definition (whole decode time of the requests
// not started, time to the expected end of those started, floored at 0 in
// all) to the microsecond, at clocks near the Unix epoch, today and far
// ahead (the word has no epoch), and nothing once every request ended.
func TestSeatWordIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	for _, t0 := range []time.Time{time.Unix(0, 0), time.Unix(1_800_000_000, 0), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} {
		s := NewState("a:1")
		type req struct {
			h       SeatHold
			started bool
			us      int64 // expected decode time
			end     int64 // expected end, Unix µs, once started
		}
		var live []req
		now := t0
		for step := range 2000 {
			now = now.Add(time.Duration(r.IntN(20_000)) * time.Microsecond)
			switch k := r.IntN(3); {
			case k == 0 || len(live) == 0:
				tok, ns := int64(r.IntN(2000)), float64(1+r.IntN(50))*1e6
				live = append(live, req{h: s.HoldSeat(tok, ns), us: decodeUs(tok, ns)})
				live[len(live)-1].end = tok // keep the tokens for the start
			case k == 1:
				i := r.IntN(len(live))
				if q := &live[i]; !q.started {
					tok := q.end
					ns := float64(1+r.IntN(50)) * 1e6
					q.h = s.StartDecode(q.h, tok, ns, now)
					q.started, q.us, q.end = true, decodeUs(tok, ns), now.UnixMicro()+decodeUs(tok, ns)
				}
			default:
				i := r.IntN(len(live))
				s.EndDecode(live[i].h)
				live = append(live[:i], live[i+1:]...)
			}
			want := int64(0)
			for _, q := range live {
				if q.started {
					want += q.end - now.UnixMicro()
				} else {
					want += q.us
				}
			}
			if got := s.SeatNs(now); got != float64(max(want, 0))*1e3 {
				t.Fatalf("t0 %v step %d: seat time %v ns, want %v µs", t0, step, got, want)
			}
		}
		for _, q := range live {
			s.EndDecode(q.h)
		}
		if w := s.seat.Load(); w != 0 {
			t.Fatalf("t0 %v: every request ended, seat word %#x, want 0", t0, w)
		}
	}
}

// TestSeatCountDoesNotOverflow: with 2^16 - 1 decodes counted, one more
// holds nothing rather than carrying into the sum, and the others' seat
// time is unchanged.
func TestSeatCountDoesNotOverflow(t *testing.T) {
	s := NewState("a:1")
	t0 := time.Unix(1_800_000_000, 0)
	hs := make([]SeatHold, seatCountMask)
	for i := range hs {
		hs[i] = s.StartDecode(s.HoldSeat(10, 1e6), 10, 1e6, t0) // 10 ms each
	}
	before := s.SeatNs(t0)
	if before != float64(seatCountMask)*1e7 {
		t.Fatalf("seat time %v, want %v", before, float64(seatCountMask)*1e7)
	}
	h := s.StartDecode(s.HoldSeat(10, 1e6), 10, 1e6, t0)
	if h != 0 || s.SeatNs(t0) != before {
		t.Fatalf("one decode past the count's room: hold %#x, seat time %v, want 0 and %v", h, s.SeatNs(t0), before)
	}
	for _, h := range hs {
		s.EndDecode(h)
	}
	if w := s.seat.Load(); w != 0 {
		t.Fatalf("seat word %#x after every decode ended, want 0", w)
	}
}
