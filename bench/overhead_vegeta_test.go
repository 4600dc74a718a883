package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunVegetaOpenLoop: vegeta's library offers the overhead POST at a
// constant rate to a real loopback upstream and the run is summarised; the
// report shows it and the 10k goal compares probe's p99 with nginx's.
func TestRunVegetaOpenLoop(t *testing.T) {
	up, err := startFastUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	v := OpenLoop(context.Background(), "http://"+up.Addr()+"/v1/completions", 400, time.Second, false)
	// Open loop: never more than offered (a closed loop on this loopback
	// upstream sends thousands), and not far fewer. vegeta stops at the
	// duration whether or not it kept up, and on a starved machine it
	// did not: 163 of 400 under -race at load 5-10, p50 456 ms from an
	// upstream that answers at once. A quarter of the offered rate still
	// tells a rate per second from one per minute (7 requests).
	if v.Success != 1 || v.Requests < 100 || v.Requests > 440 || v.Latency.P99 <= 0 || v.Latency.P50 > v.Latency.P99 {
		t.Fatalf("run = %+v, want at most 400 requests and at least a quarter of them, all answered", v)
	}
	o := &OverheadResult{Targets: []OverheadTarget{
		{Name: "nginx", WrkRPS: 100, Vegeta: []VegetaRun{{Rate: 10000, AchievedRPS: 9990, Success: 1, Latency: Quantiles{P50: 1, P99: 2}}}},
		{Name: "probegate_least_inflight", WrkRPS: 90},
		{Name: "probegate_probe", WrkRPS: 80, Vegeta: []VegetaRun{{Rate: 10000, AchievedRPS: 9900, Success: 0.5, Latency: Quantiles{P50: 1, P99: 5}, CPUusPerReq: 31.5}}},
	}}
	// 1,000 requests during the run: 30 probes sent, 6 of them timed out,
	// 700 joins of a probe in flight.
	o.Targets[2].Vegeta[0].noteProbes(probeCounts{sent: 130, timeouts: 16, coalesced: 900, requests: 2000}.minus(probeCounts{sent: 100, timeouts: 10, coalesced: 200, requests: 1000}))
	rep := vegetaReport(o)
	if !strings.Contains(rep, "| probegate_probe | - | - | 9900: 1.00 / 5.00 (50.0% ok) | - |") {
		t.Errorf("report row missing:\n%s", rep)
	}
	if !strings.Contains(rep, "| probegate_probe | - | - | 31.5; 0.030 / 0.006 / 0.700 | - |") {
		t.Errorf("CPU and probe row missing:\n%s", rep)
	}
	var got []string
	for _, g := range Goals(&Results{Overhead: o}) {
		got = append(got, g.Goal)
		if strings.Contains(g.Goal, "vegeta") && (g.Value != 2.5 || g.Met) {
			t.Errorf("vegeta goal = %+v, want 2.5x, missed", g)
		}
		if strings.Contains(g.Goal, "probegate(probe)/probegate(least_inflight)") && (g.Value < 0.888 || g.Value > 0.89 || !g.Met) {
			t.Errorf("probe/least_inflight goal = %+v", g)
		}
	}
	if len(got) != 3 {
		t.Errorf("goals %q, want least_inflight/nginx, probe/least_inflight, vegeta p99", got)
	}
	// A generator that fell behind measured no latency at 10k.
	o.Targets[2].Vegeta[0].AchievedRPS = 3000
	for _, g := range Goals(&Results{Overhead: o}) {
		if strings.Contains(g.Goal, "vegeta") && (!g.Missing || g.Met) {
			t.Errorf("vegeta goal at 3k achieved = %+v, want not measured", g)
		}
	}
}
