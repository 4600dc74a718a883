package bench

import (
	"context"
	"sort"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// LoopWindow is one window of an open-loop run (OpenLoopWindows): the
// requests sent in it, their latency quantiles in ms, how many failed,
// and how many requests were in flight (sent, not yet answered) at the
// window's end.
type LoopWindow struct {
	StartMS  float64 `json:"start_ms"`
	Sent     int     `json:"sent"`
	Errors   int     `json:"errors"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	InFlight int     `json:"in_flight_at_end"`
}

// OpenLoopWindows is OpenLoop that also splits the run by send time into
// windows of length w, to show how latency moves within a run (a queue
// that forms and drains, or one that stays). maxWorkers > 0 bounds the
// requests in flight, and so the generator's connections, instead of the
// overhead scenario's 512 (see NewLoopGen). The run follows a warm-up of
// warmup at the same rate on the same connections, not measured (see
// LoopGen.Warm; 0: none, the generator starts with no connection).
func OpenLoopWindows(ctx context.Context, url string, rate int, dur, w time.Duration, netHTTP bool, maxWorkers int, warmup time.Duration) (VegetaRun, []LoopWindow) {
	type sent struct {
		ts     time.Time
		lat    time.Duration
		failed bool
	}
	var all []sent
	var t0 time.Time
	g := NewLoopGen(url, netHTTP, maxWorkers)
	defer g.Close()
	g.Warm(ctx, rate, warmup)
	run := g.Run(ctx, rate, dur, func(r *vegeta.Result) {
		if t0.IsZero() || r.Timestamp.Before(t0) {
			t0 = r.Timestamp
		}
		all = append(all, sent{ts: r.Timestamp, lat: r.Latency, failed: r.Error != ""})
	})
	if len(all) == 0 {
		return run, nil
	}
	n := int(dur/w) + 1
	wins := make([]LoopWindow, n)
	lats := make([][]float64, n)
	for _, s := range all {
		at := s.ts.Sub(t0)
		i := int(at / w)
		if i >= n {
			i = n - 1
		}
		wins[i].Sent++
		if s.failed {
			wins[i].Errors++
		}
		lats[i] = append(lats[i], float64(s.lat)/float64(time.Millisecond))
		// In flight at the end of each window it spans.
		for j := i; j < n && time.Duration(j+1)*w < at+s.lat; j++ {
			if time.Duration(j+1)*w > at {
				wins[j].InFlight++
			}
		}
	}
	for i := range wins {
		wins[i].StartMS = float64(time.Duration(i)*w) / float64(time.Millisecond)
		l := lats[i]
		if len(l) == 0 {
			continue
		}
		sort.Float64s(l)
		q := func(p float64) float64 { return round3(l[int(p*float64(len(l)-1))]) }
		wins[i].P50, wins[i].P99, wins[i].Max = q(0.5), q(0.99), round3(l[len(l)-1])
	}
	return run, wins
}
