package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// Segment is a stretch of an arrival schedule with a constant mean rate.
type Segment struct {
	Rate float64       // requests per second
	Dur  time.Duration // length of the segment
}

// Arrivals returns the arrival offsets of an open-loop schedule over segs.
// Inter-arrival gaps are drawn as `vllm bench serve` draws them: from a gamma
// distribution with shape = burstiness and mean 1/rate, so burstiness 1 is a
// Poisson process and burstiness < 1 is burstier than Poisson. The draws use
// rng only, so a seed fixes the schedule.
func Arrivals(segs []Segment, burstiness float64, rng *rand.Rand) []time.Duration {
	if burstiness <= 0 {
		burstiness = 1
	}
	var out []time.Duration
	var start time.Duration
	for _, s := range segs {
		end := start + s.Dur
		if s.Rate > 0 {
			t := float64(start)
			for {
				mean := float64(time.Second) / s.Rate
				gap := mean
				if burstiness == 1 {
					gap = rng.ExpFloat64() * mean
				} else {
					gap = gammaDraw(rng, burstiness) * mean / burstiness
				}
				t += gap
				if t >= float64(end) {
					break
				}
				out = append(out, time.Duration(t))
			}
		}
		start = end
	}
	return out
}

// gammaDraw draws from Gamma(shape, 1) with the Marsaglia-Tsang method
// (shape < 1 by the boost x * U^(1/shape)).
func gammaDraw(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaDraw(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
