package bench

import (
	"math"
	"sort"
	"time"
)

// Percentile returns the p-th percentile (0..100) of xs using linear
// interpolation between closest ranks (the "R-7" definition used by numpy's
// default and by most benchmark tools). xs need not be sorted; it is not
// modified. It returns 0 for an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return percentileSorted(s, p)
}

// percentileSorted is Percentile over an already sorted slice.
func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	h := (float64(len(s)) - 1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// Quantiles are the latency percentiles the results report, in milliseconds.
type Quantiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999,omitempty"`
	Mean float64 `json:"mean"`
}

// quantilesMs summarizes durations in milliseconds.
func quantilesMs(ds []time.Duration, with999 bool) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	xs := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		xs[i] = float64(d) / float64(time.Millisecond)
		sum += xs[i]
	}
	sort.Float64s(xs)
	q := Quantiles{
		P50:  round3(percentileSorted(xs, 50)),
		P90:  round3(percentileSorted(xs, 90)),
		P99:  round3(percentileSorted(xs, 99)),
		Mean: round3(sum / float64(len(xs))),
	}
	if with999 {
		q.P999 = round3(percentileSorted(xs, 99.9))
	}
	return q
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
