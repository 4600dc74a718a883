package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// roundOrder returns the order in which round r (from 0) of a repeated
// overhead run measures its n targets: as listed in even rounds, reversed
// in odd ones, so that a machine getting slower or faster over the run
// weighs on the first and the last targets alike.
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if r%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// measureRounds measures n targets in rounds rounds, calling measure(i, r)
// for target i in round r (from 0) in roundOrder, until ctx ends, and
// returns each target measured at least once, in target order, with the
// medians of its rounds (medianOfRounds).
func measureRounds(ctx context.Context, n, rounds int, measure func(i, r int) OverheadTarget) []OverheadTarget {
	per := make([][]OverheadTarget, n)
	for r := range rounds {
		for _, i := range roundOrder(n, r) {
			if ctx.Err() != nil {
				break
			}
			per[i] = append(per[i], measure(i, r))
		}
	}
	var out []OverheadTarget
	for _, rs := range per {
		if len(rs) > 0 {
			out = append(out, medianOfRounds(rs))
		}
	}
	return out
}

// median returns the median of the xs above 0 (a figure a round did not
// measure is 0), the mean of the middle two for an even count, 0 for none.
func median(xs []float64) float64 {
	var s []float64
	for _, x := range xs {
		if x > 0 {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return 0
	}
	return round3(Percentile(s, 50))
}

// minMax returns the smallest and largest of the xs above 0 (0, 0 for
// none).
func minMax(xs []float64) (lo, hi float64) {
	for _, x := range xs {
		if x <= 0 {
			continue
		}
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	return lo, hi
}

// each returns f of every round of rs.
func each[T any](rs []T, f func(*T) float64) []float64 {
	xs := make([]float64, len(rs))
	for i := range rs {
		xs[i] = f(&rs[i])
	}
	return xs
}

// medianQuantiles is each quantile's median over qs.
func medianQuantiles(qs []Quantiles) Quantiles {
	return Quantiles{
		P50:  median(each(qs, func(q *Quantiles) float64 { return q.P50 })),
		P90:  median(each(qs, func(q *Quantiles) float64 { return q.P90 })),
		P99:  median(each(qs, func(q *Quantiles) float64 { return q.P99 })),
		P999: median(each(qs, func(q *Quantiles) float64 { return q.P999 })),
		Mean: median(each(qs, func(q *Quantiles) float64 { return q.Mean })),
	}
}

// medianOfRounds returns one target's figures over its rounds (one per
// round, round 1 first): each figure is the median over the rounds that
// measured it (a round that failed to start the target, or whose wrk
// failed, adds nothing to the wrk figures), Go generator errors are summed,
// Error is the first round's error naming that round, and Rounds keeps the
// rounds. One round is returned as it is.
func medianOfRounds(rs []OverheadTarget) OverheadTarget {
	if len(rs) == 1 {
		return rs[0]
	}
	lat := func(f func(*OverheadTarget) Quantiles) Quantiles {
		qs := make([]Quantiles, len(rs))
		for i := range rs {
			qs[i] = f(&rs[i])
		}
		return medianQuantiles(qs)
	}
	t := OverheadTarget{
		Name:                rs[0].Name,
		WrkRPS:              median(each(rs, func(r *OverheadTarget) float64 { return r.WrkRPS })),
		WrkLatency:          lat(func(r *OverheadTarget) Quantiles { return r.WrkLatency }),
		WrkCPUusPerReq:      median(each(rs, func(r *OverheadTarget) float64 { return r.WrkCPUusPerReq })),
		GoRPS:               median(each(rs, func(r *OverheadTarget) float64 { return r.GoRPS })),
		GoLatency:           lat(func(r *OverheadTarget) Quantiles { return r.GoLatency }),
		ProbesPerRequest:    median(each(rs, func(r *OverheadTarget) float64 { return r.ProbesPerRequest })),
		CoalescedPerRequest: median(each(rs, func(r *OverheadTarget) float64 { return r.CoalescedPerRequest })),
		Rounds:              slices.Clone(rs),
	}
	for i, r := range rs {
		t.GoErrors += r.GoErrors
		if t.Error == "" && r.Error != "" {
			t.Error = fmt.Sprintf("round %d: %s", i+1, r.Error)
		}
	}
	for _, rate := range VegetaRates {
		var vs []VegetaRun
		for i := range rs {
			if v := rs[i].vegetaAt(rate); v != nil && v.Requests > 0 {
				vs = append(vs, *v)
			}
		}
		if len(vs) > 0 {
			t.Vegeta = append(t.Vegeta, medianVegeta(vs))
		}
	}
	return t
}

// medianVegeta is the median of runs at one rate, figure by figure (the
// request count too); Errors collects up to 3 distinct ones.
func medianVegeta(vs []VegetaRun) VegetaRun {
	v := VegetaRun{
		Rate:                vs[0].Rate,
		AchievedRPS:         median(each(vs, func(v *VegetaRun) float64 { return v.AchievedRPS })),
		Throughput:          median(each(vs, func(v *VegetaRun) float64 { return v.Throughput })),
		Success:             median(each(vs, func(v *VegetaRun) float64 { return v.Success })),
		Requests:            uint64(median(each(vs, func(v *VegetaRun) float64 { return float64(v.Requests) }))),
		ProbesPerRequest:    median(each(vs, func(v *VegetaRun) float64 { return v.ProbesPerRequest })),
		TimeoutsPerRequest:  median(each(vs, func(v *VegetaRun) float64 { return v.TimeoutsPerRequest })),
		CoalescedPerRequest: median(each(vs, func(v *VegetaRun) float64 { return v.CoalescedPerRequest })),
		CPUusPerReq:         median(each(vs, func(v *VegetaRun) float64 { return v.CPUusPerReq })),
		GCPer1kReq:          median(each(vs, func(v *VegetaRun) float64 { return v.GCPer1kReq })),
		Share:               medianShare(vs),
	}
	qs := make([]Quantiles, len(vs))
	for i := range vs {
		qs[i] = vs[i].Latency
		for _, e := range vs[i].Errors {
			if len(v.Errors) < 3 && !slices.Contains(v.Errors, e) {
				v.Errors = append(v.Errors, e)
			}
		}
	}
	v.Latency = medianQuantiles(qs)
	return v
}

// setRatios sets every target's ratios to nginx and to direct (from the
// medians), and in each of its rounds to the same round of nginx and
// direct.
func setRatios(ts []OverheadTarget) {
	find := func(name string) *OverheadTarget {
		for i := range ts {
			if ts[i].Name == name {
				return &ts[i]
			}
		}
		return nil
	}
	ng, dir := find("nginx"), find("direct")
	for i := range ts {
		t := &ts[i]
		t.setRatios(ng, dir)
		for k := range t.Rounds {
			t.Rounds[k].setRatios(roundOf(ng, k), roundOf(dir, k))
		}
	}
}

// roundOf returns round k of t (nil if t has no such round).
func roundOf(t *OverheadTarget, k int) *OverheadTarget {
	if t == nil || k >= len(t.Rounds) {
		return nil
	}
	return &t.Rounds[k]
}

func (t *OverheadTarget) setRatios(ng, dir *OverheadTarget) {
	if ng != nil {
		t.VsNginxWrk, t.VsNginxGo = round3(ratio(t.WrkRPS, ng.WrkRPS)), round3(ratio(t.GoRPS, ng.GoRPS))
		t.P99VsNginx = round3(ratio(t.GoLatency.P99, ng.GoLatency.P99))
	}
	if dir != nil {
		t.VsDirectWrk, t.VsDirectGo = round3(ratio(t.WrkRPS, dir.WrkRPS)), round3(ratio(t.GoRPS, dir.GoRPS))
		t.P99VsDirect = round3(ratio(t.GoLatency.P99, dir.GoLatency.P99))
	}
}

// roundRatios returns the smallest and largest, over the rounds a and b
// both have, of f(a's round) / f(b's round), skipping rounds where either
// is 0.
func roundRatios(a, b *OverheadTarget, f func(*OverheadTarget) float64) (lo, hi float64) {
	if a == nil || b == nil {
		return 0, 0
	}
	var xs []float64
	for k := range min(len(a.Rounds), len(b.Rounds)) {
		if x, y := f(&a.Rounds[k]), f(&b.Rounds[k]); x > 0 && y > 0 {
			xs = append(xs, x/y)
		}
	}
	return minMax(xs)
}

// vegetaP99 returns the p99 of t's run at rate (0 without one).
func vegetaP99(rate int) func(*OverheadTarget) float64 {
	return func(t *OverheadTarget) float64 {
		if v := t.vegetaAt(rate); v != nil {
			return v.Latency.P99
		}
		return 0
	}
}

// roundsReport renders, for a run of several rounds, the median and the
// range (min..max) over the rounds of each target's main figures.
func roundsReport(o *OverheadResult) string {
	if o.Rounds < 2 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nMedian (min..max) over the %d rounds, each target measured once per round:\n\n| target | wrk req/s | wrk p99 ms | CPU µs/req (wrk) | Go req/s | Go p99 ms |", o.Rounds)
	for _, r := range VegetaRates {
		fmt.Fprintf(&b, " vegeta %dk p99 ms |", r/1000)
	}
	b.WriteString("\n|---|---|---|---|---|---|")
	for range VegetaRates {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i := range o.Targets {
		t := &o.Targets[i]
		cell := func(format string, f func(*OverheadTarget) float64) {
			lo, hi := minMax(each(t.Rounds, f))
			if hi == 0 {
				b.WriteString(" - |")
				return
			}
			fmt.Fprintf(&b, " "+format+" ("+format+".."+format+") |", f(t), lo, hi)
		}
		fmt.Fprintf(&b, "| %s |", t.Name)
		cell("%.0f", func(r *OverheadTarget) float64 { return r.WrkRPS })
		cell("%.2f", func(r *OverheadTarget) float64 { return r.WrkLatency.P99 })
		cell("%.1f", func(r *OverheadTarget) float64 { return r.WrkCPUusPerReq })
		cell("%.0f", func(r *OverheadTarget) float64 { return r.GoRPS })
		cell("%.2f", func(r *OverheadTarget) float64 { return r.GoLatency.P99 })
		for _, rate := range VegetaRates {
			cell("%.2f", vegetaP99(rate))
		}
		b.WriteString("\n")
	}
	return b.String()
}
