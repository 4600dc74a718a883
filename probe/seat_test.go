package probe

import (
	"testing"
	"time"
)

// TestDecodeSpeedIsLearnedFromCompletedStreams: a completed stream's time
// from first to last byte over the tokens between is a decode speed
// sample; a stream too short to time, or one whose bytes all came at
// once, is none; and the seat accounting is taken back at the end.
func TestDecodeSpeedIsLearnedFromCompletedStreams(t *testing.T) {
	s := NewState("a:1")
	t0 := time.Unix(1_800_000_000, 0)
	s.StartDecode(5, t0)
	s.EndDecode(5, t0, 5, t0.Add(time.Second)) // 5 tokens: too short
	s.StartDecode(50, t0)
	s.EndDecode(50, t0, 50, t0) // every byte at once: not a decode
	if w := s.seats(); w.NsPerToken != 0 || s.decoding.Load() != 0 || s.decodingTok.Load() != 0 || s.decodingUs.Load() != 0 {
		t.Fatalf("after untimable streams: %+v, want nothing learned or held", w)
	}
	s.StartDecode(101, t0)
	if w := s.seats(); w.N != 1 || w.Tokens != 101 {
		t.Fatalf("one decode in flight: %+v", w)
	}
	s.EndDecode(101, t0, 101, t0.Add(time.Second)) // 10 ms per token
	s.StartDecode(101, t0)
	s.EndDecode(101, t0, 101, t0.Add(2*time.Second)) // 20 ms: the mean moves a tenth of the way
	w := s.seats()
	if s.decoding.Load() != 0 || s.decodingTok.Load() != 0 || s.decodingUs.Load() != 0 {
		t.Fatalf("after every stream ended: %d decoding, %d tokens, %d µs held, want none", s.decoding.Load(), s.decodingTok.Load(), s.decodingUs.Load())
	}
	if w.NsPerToken < 10.9e6 || w.NsPerToken > 11.1e6 {
		t.Fatalf("learned %v ns per token, want 1.1e7", w.NsPerToken)
	}
}
