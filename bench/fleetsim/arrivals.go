package fleetsim

import (
	"fmt"
	"time"

	"github.com/probegate/probegate/bench"
)

// Arrival processes of synthetic workloads (Workload.Shape). Each is a
// Poisson process whose mean rate over a run is the run's rate, so that
// a load means the same offered work whatever the shape:
//
//	poisson  a constant rate (the bench's arrivals)
//	onoff    bursts: every onOffPeriod, the first onOffOn at onOffHigh x
//	         the rate, the rest at the rate that keeps the mean (1/3 x)
//	ramp     the rate grows linearly from rampFrom x to (2 - rampFrom) x
//	         the mean over the run's arrival time
//
// A varying rate is drawn by thinning: candidate gaps at the peak rate,
// each kept with probability rate(t) / peak.
//
// onoff is bench.BurstOnOff, the live bench's -arrivals onoff.
const (
	ArrivalsPoisson = bench.ArrivalsPoisson
	ArrivalsOnOff   = bench.ArrivalsOnOff
	ArrivalsRamp    = "ramp"

	rampFrom = 0.5
)

var (
	onOffPeriod = bench.BurstOnOff.Period
	onOffOn     = bench.BurstOnOff.On
	onOffHigh   = bench.BurstOnOff.High
)

// ArrivalShapes are the arrival processes a synthetic workload can have.
var ArrivalShapes = []string{ArrivalsPoisson, ArrivalsOnOff, ArrivalsRamp}

// checkShape reports whether shape is a known arrival process.
func checkShape(shape string) error {
	switch shape {
	case "", ArrivalsPoisson, ArrivalsOnOff, ArrivalsRamp:
		return nil
	}
	return fmt.Errorf("unknown arrival process %q (want poisson, onoff or ramp)", shape)
}

// rateFactor is shape's rate at t, as a multiple of the mean, for a run
// whose arrivals end at end; peak is its largest value.
func rateFactor(shape string, t, end time.Duration) (f, peak float64) {
	switch shape {
	case ArrivalsOnOff:
		return bench.BurstOnOff.Factor(t)
	case ArrivalsRamp:
		if end <= 0 {
			return 1, 1
		}
		x := min(max(float64(t)/float64(end), 0), 1)
		return rampFrom + 2*(1-rampFrom)*x, 2 - rampFrom
	}
	return 1, 1
}

// arrive advances s.t to the next arrival of s's process; false once it
// passes the end of the run's arrivals.
func (s *source) arrive() bool {
	if s.w.Shape == "" || s.w.Shape == ArrivalsPoisson {
		s.t += time.Duration(s.rng.ExpFloat64() / s.rate * float64(time.Second))
		return true
	}
	for {
		_, peak := rateFactor(s.w.Shape, s.t, s.end)
		s.t += time.Duration(s.rng.ExpFloat64() / (s.rate * peak) * float64(time.Second))
		if s.t >= s.end {
			return false
		}
		if f, _ := rateFactor(s.w.Shape, s.t, s.end); s.rng.Float64()*peak < f {
			return true
		}
	}
}
