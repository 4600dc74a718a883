package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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

// Arrival processes of -arrivals: how the steady and replicas scenarios
// spread their requests over time.
const (
	// ArrivalsPoisson: gamma gaps of shape -burstiness (1: Poisson), the
	// bench's arrivals before -arrivals existed and its default.
	ArrivalsPoisson = "poisson"
	// ArrivalsOnOff: BurstOnOff's bursts, a Poisson process whose rate
	// follows OnOff.Factor (fleetsim -general's "onoff").
	ArrivalsOnOff = "onoff"
)

// ArrivalKinds lists the accepted -arrivals values.
var ArrivalKinds = []string{ArrivalsPoisson, ArrivalsOnOff}

// OnOff is an on-off arrival process: in every Period the first On runs at
// High x the mean rate and the rest at the rate that keeps the mean,
// (1 - High x On/Period) / (1 - On/Period) x; so an offered load means the
// same work over whole periods whatever the shape. High x On must not
// exceed Period.
type OnOff struct {
	Period, On time.Duration
	High       float64
}

// BurstOnOff is the on-off process of fleetsim -general (session 11):
// 1.5 s of every 6 s at 3x the mean rate, the other 4.5 s at 1/3x. A run
// whose duration is not a whole number of periods offers a different mean:
// a 15 s run has 3 bursts in it (1.4x the mean over its last 3 s).
var BurstOnOff = OnOff{Period: 6 * time.Second, On: 1500 * time.Millisecond, High: 3}

// Factor returns the rate at t (from the start of the run) as a multiple
// of the mean rate, and the process's peak factor (High).
func (p OnOff) Factor(t time.Duration) (f, peak float64) {
	on := float64(p.On) / float64(p.Period)
	low := (1 - on*p.High) / (1 - on)
	if t%p.Period < p.On {
		return p.High, p.High
	}
	return low, p.High
}

// Arrivals returns the arrival offsets of an open-loop schedule over segs
// whose rate is each segment's Rate x p.Factor(t), t from the start of the
// schedule: a Poisson process drawn by thinning (candidate gaps at the
// peak rate, each kept with probability Factor / peak). The draws use rng
// only, so a seed fixes the schedule.
func (p OnOff) Arrivals(segs []Segment, rng *rand.Rand) []time.Duration {
	var out []time.Duration
	var start time.Duration
	for _, s := range segs {
		end := start + s.Dur
		if s.Rate > 0 {
			_, peak := p.Factor(start)
			t := float64(start)
			for {
				t += rng.ExpFloat64() / (s.Rate * peak) * float64(time.Second)
				if t >= float64(end) {
					break
				}
				if f, _ := p.Factor(time.Duration(t)); rng.Float64()*peak < f {
					out = append(out, time.Duration(t))
				}
			}
		}
		start = end
	}
	return out
}

// checkArrivals validates -arrivals (with -burstiness b).
func checkArrivals(a string, b float64) error {
	switch a {
	case "", ArrivalsPoisson:
		return nil
	case ArrivalsOnOff:
		if b > 0 && b != 1 {
			return fmt.Errorf("-arrivals onoff draws Poisson arrivals at a varying rate: -burstiness %g does not apply (leave it at 1)", b)
		}
		return nil
	}
	return fmt.Errorf("unknown -arrivals %q (have %s)", a, strings.Join(ArrivalKinds, ", "))
}
