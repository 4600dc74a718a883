package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// round is one round's figures of a target: wrk req/s, wrk p99, CPU per
// request, Go req/s and vegeta's 10k p99.
func round(name string, wrk, wrkP99, cpu, goRPS, v10kP99 float64) OverheadTarget {
	t := OverheadTarget{Name: name, WrkRPS: wrk, WrkLatency: Quantiles{P50: wrkP99 / 4, P99: wrkP99}, WrkCPUusPerReq: cpu, GoRPS: goRPS, GoLatency: Quantiles{P99: 1}}
	if v10kP99 > 0 {
		t.Vegeta = []VegetaRun{{Rate: 10000, AchievedRPS: 9990, Requests: 29970, Success: 1, Latency: Quantiles{P50: 0.3, P99: v10kP99}}}
	}
	return t
}

// TestMeasureRoundsInterleaves: every round measures every target once,
// the order reversed every other round, and each target's figures are the
// median of its own rounds, in round order.
func TestMeasureRoundsInterleaves(t *testing.T) {
	var calls [][2]int
	got := measureRounds(context.Background(), 3, 3, func(i, r int) OverheadTarget {
		calls = append(calls, [2]int{i, r})
		return OverheadTarget{Name: string(rune('a' + i)), WrkRPS: float64(100*i + r + 1)}
	})
	want := [][2]int{{0, 0}, {1, 0}, {2, 0}, {2, 1}, {1, 1}, {0, 1}, {0, 2}, {1, 2}, {2, 2}}
	if !slices.Equal(calls, want) {
		t.Errorf("calls (target, round) = %v, want %v", calls, want)
	}
	if len(got) != 3 {
		t.Fatalf("%d targets, want 3", len(got))
	}
	for i, tg := range got {
		if tg.Name != string(rune('a'+i)) || len(tg.Rounds) != 3 || tg.WrkRPS != float64(100*i+2) {
			t.Errorf("target %d = %s, wrk %v, %d rounds; want median %v of 3 rounds", i, tg.Name, tg.WrkRPS, len(tg.Rounds), 100*i+2)
		}
		for r, rr := range tg.Rounds {
			if rr.WrkRPS != float64(100*i+r+1) {
				t.Errorf("target %d round %d = %v, want %v", i, r, rr.WrkRPS, 100*i+r+1)
			}
		}
	}
	// One round: the target as measured, no rounds listed (results.json
	// as before -repeat).
	one := measureRounds(context.Background(), 2, 1, func(i, r int) OverheadTarget { return round("x", 7, 1, 1, 1, 0) })
	if len(one) != 2 || one[0].Rounds != nil || one[0].WrkRPS != 7 {
		t.Errorf("one round = %+v", one)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := measureRounds(ctx, 2, 3, func(i, r int) OverheadTarget { t.Fatal("measured after cancel"); return OverheadTarget{} }); got != nil {
		t.Errorf("cancelled: %v", got)
	}
}

// TestMedianOfRounds: each figure is the median over the rounds that
// measured it (not the first, last or mean round), a round that measured
// nothing is left out of the median, errors are summed, and the spread
// table shows median (min..max).
func TestMedianOfRounds(t *testing.T) {
	rs := []OverheadTarget{
		round("probegate_least_inflight", 10000, 2, 60, 9000, 5),
		round("probegate_least_inflight", 20000, 8, 40, 0, 100),         // Go generator failed
		{Name: "probegate_least_inflight", Error: "wrk: exit status 1"}, // did not start
		round("probegate_least_inflight", 60000, 4, 30, 12000, 8),
	}
	rs[0].GoErrors, rs[3].GoErrors = 2, 3
	m := medianOfRounds(rs)
	if m.WrkRPS != 20000 || m.WrkLatency.P99 != 4 || m.WrkLatency.P50 != 1 || m.WrkCPUusPerReq != 40 {
		t.Errorf("wrk median = %v req/s, p99 %v, p50 %v, cpu %v; want 20000, 4, 1, 40", m.WrkRPS, m.WrkLatency.P99, m.WrkLatency.P50, m.WrkCPUusPerReq)
	}
	if m.GoRPS != 10500 || m.GoErrors != 5 {
		t.Errorf("Go = %v req/s, %d errors; want 10500 (median of the two rounds that ran), 5", m.GoRPS, m.GoErrors)
	}
	if v := m.vegetaAt(10000); v == nil || v.Latency.P99 != 8 || v.Requests != 29970 {
		t.Errorf("vegeta 10k = %+v, want p99 8 (median of 5, 100, 8)", v)
	}
	if len(m.Rounds) != 4 || m.Rounds[1].WrkRPS != 20000 || !strings.HasPrefix(m.Error, "round 3: wrk") {
		t.Errorf("rounds %d, error %q", len(m.Rounds), m.Error)
	}

	ng := medianOfRounds([]OverheadTarget{
		round("nginx", 20000, 1, 20, 10000, 2),
		round("nginx", 40000, 1, 25, 10000, 4),
		round("nginx", 25000, 1, 30, 10000, 4),
		round("nginx", 100000, 1, 35, 10000, 3),
	})
	o := &OverheadResult{Rounds: 4, Targets: []OverheadTarget{ng, m}}
	setRatios(o.Targets)
	li := &o.Targets[1]
	// Medians: nginx 32500 (25000 and 40000), least_inflight 20000.
	if li.VsNginxWrk != round3(20000.0/32500) {
		t.Errorf("vs nginx = %v, want %v", li.VsNginxWrk, round3(20000.0/32500))
	}
	if li.Rounds[0].VsNginxWrk != 0.5 || li.Rounds[3].VsNginxWrk != 0.6 {
		t.Errorf("per-round ratios %v, %v; want 0.5, 0.6 (against the same round of nginx)", li.Rounds[0].VsNginxWrk, li.Rounds[3].VsNginxWrk)
	}
	rep := roundsReport(o)
	for _, want := range []string{
		"over the 4 rounds",
		"| probegate_least_inflight | 20000 (10000..60000) | 4.00 (2.00..8.00) | 40.0 (30.0..60.0) | 10500 (9000..12000) | 1.00 (1.00..1.00) | - | - | 8.00 (5.00..100.00) | - |",
		"| nginx | 32500 (20000..100000) |",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if roundsReport(&OverheadResult{Rounds: 1, Targets: []OverheadTarget{ng}}) != "" {
		t.Error("a one-round run has a rounds table")
	}
}

// TestGoalsUseMedians: with several rounds the goals compare the targets'
// medians, say how many rounds, and give the per-round range.
func TestGoalsUseMedians(t *testing.T) {
	ng := medianOfRounds([]OverheadTarget{
		round("nginx", 30000, 1, 20, 30000, 10),
		round("nginx", 40000, 1, 20, 30000, 50),
		round("nginx", 20000, 1, 20, 30000, 20),
	})
	li := medianOfRounds([]OverheadTarget{
		round("probegate_least_inflight", 15000, 1, 40, 20000, 0),
		round("probegate_least_inflight", 36000, 1, 40, 20000, 0),
		round("probegate_least_inflight", 18000, 1, 40, 20000, 0),
	})
	pr := medianOfRounds([]OverheadTarget{
		round("probegate_probe", 14000, 1, 40, 20000, 30),
		round("probegate_probe", 14000, 1, 40, 20000, 60),
		round("probegate_probe", 16000, 1, 40, 20000, 35),
	})
	o := &OverheadResult{Rounds: 3, Targets: []OverheadTarget{ng, li, pr}}
	setRatios(o.Targets)
	goals := map[string]GoalCheck{}
	for _, g := range Goals(&Results{Overhead: o}) {
		goals[g.Goal] = g
	}
	// Medians: nginx 30000 wrk, 20 ms p99 at 10k; least_inflight 18000;
	// probe 14000, 35 ms.
	check := func(goal string, want, lo, hi float64, met bool) {
		t.Helper()
		g, ok := goals[goal]
		if !ok {
			t.Fatalf("no goal %q in %v", goal, goals)
		}
		if round3(g.Value) != round3(want) || g.Rounds != 3 || round3(g.Min) != round3(lo) || round3(g.Max) != round3(hi) || g.Met != met {
			t.Errorf("%s = %+v, want %.3f over 3 rounds, per round %.3f..%.3f, met %v", goal, g, want, lo, hi, met)
		}
	}
	check("req/s probegate(least_inflight)/nginx (wrk)", 0.6, 0.5, 0.9, false)
	check("req/s probegate(probe)/probegate(least_inflight) (wrk)", 14000.0/18000, 14000.0/36000, 14000.0/15000, false)
	check("p99 probegate(probe)/nginx at 10k req/s (vegeta)", 35.0/20, 1.2, 3, true)
	if m := goals["req/s probegate(least_inflight)/nginx (wrk)"].measured(); m != "0.60 (medians of 3 rounds; per round 0.50..0.90)" {
		t.Errorf("goal line says %q", m)
	}
	// One round: the value alone, as before.
	if m := (GoalCheck{Value: 0.6}).measured(); m != "0.60" {
		t.Errorf("one-round goal line says %q", m)
	}
}
