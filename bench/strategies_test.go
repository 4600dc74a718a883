package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probegate/probegate/internal/config"
)

// TestStrategyConfigs: every strategy name the bench accepts builds a valid
// configuration, and the d/quorum variants decide on every candidate.
func TestStrategyConfigs(t *testing.T) {
	urls := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	for _, s := range append(append([]string(nil), AllStrategies...), ExtraStrategies...) {
		if _, err := StrategyConfig(s, urls); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	// The probe_dXqY variants pin d and quorum whatever the fleet's size;
	// probe follows route.d auto.
	for s, dq := range map[string][2]int{"probe_d2q2": {2, 2}, "probe_d3q3": {3, 3}, "probe_d4q2": {4, 2}, "probe_d4q4": {4, 4}, "probe_d8q8": {8, 8}, "probe_q2": {2, 2}} {
		cfg, err := StrategyConfig(s, urls)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{8, 1024} {
			if d, q := cfg.Sampling(n); d != dq[0] || q != dq[1] || cfg.Route.Policy != "probe" {
				t.Errorf("%s over %d pods: d %d quorum %d policy %s, want %d, %d, probe", s, n, d, q, cfg.Route.Policy, dq[0], dq[1])
			}
		}
	}
	cfg, err := StrategyConfig(Probe, urls)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Route.D != config.DAuto || cfg.Probe.Quorum != config.QuorumAuto {
		t.Errorf("probe: route.d %d probe.quorum %d, want the defaults (auto)", cfg.Route.D, cfg.Probe.Quorum)
	}
	// probe_podseedK is probe with route.load.pod_speed_samples K and no
	// gate; probe_podgateK the same with pod_speed_foreign's default.
	for _, k := range []float64{0, 1, 4, 8, 16, 32} {
		name := fmt.Sprintf("probe_podseed%g", k)
		sc, err := StrategyConfig(name, urls)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Route.Policy != config.PolicyProbe || sc.Route.Load.PodSpeedSamples != k || sc.Route.Load.PodSpeed != 0 || (k > 0 && sc.Route.Load.PodSpeedForeign != 0) {
			t.Errorf("%s: policy %s, pod_speed_samples %v, pod_speed %v, pod_speed_foreign %v; want probe, %v, 0, 0", name, sc.Route.Policy, sc.Route.Load.PodSpeedSamples, sc.Route.Load.PodSpeed, sc.Route.Load.PodSpeedForeign, k)
		}
	}
	for _, k := range []float64{8, 16} {
		name := fmt.Sprintf("probe_podgate%g", k)
		sc, err := StrategyConfig(name, urls)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Route.Policy != config.PolicyProbe || sc.Route.Load.PodSpeedSamples != k || sc.Route.Load.PodSpeedForeign != config.DefaultPodSpeedForeign || config.DefaultPodSpeedForeign <= 0 {
			t.Errorf("%s: policy %s, pod_speed_samples %v, pod_speed_foreign %v; want probe, %v, %v > 0", name, sc.Route.Policy, sc.Route.Load.PodSpeedSamples, sc.Route.Load.PodSpeedForeign, k, config.DefaultPodSpeedForeign)
		}
	}
	// probe_scrape100 is probe with every scrape loop at 100 ms.
	sc, err := StrategyConfig("probe_scrape100", urls)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Route.Policy != "probe" || time.Duration(sc.Scrape.MaxInterval) != 100*time.Millisecond || time.Duration(sc.Scrape.Interval) != 100*time.Millisecond || sc.Scrape.ForeignChange != 0 {
		t.Errorf("probe_scrape100: policy %s, scrape interval %v, max %v, foreign_change %v; want probe, 100ms, 100ms, 0", sc.Route.Policy, sc.Scrape.Interval, sc.Scrape.MaxInterval, sc.Scrape.ForeignChange)
	}
	// probe_ownpace is probe with the adaptive scrape following this
	// proxy's own rate alone (the rule before issue 13 session 8).
	op, err := StrategyConfig("probe_ownpace", urls)
	if err != nil {
		t.Fatal(err)
	}
	if op.Route.Policy != "probe" || !op.Scrape.Adaptive || op.Scrape.ForeignChange != 0 || cfg.Scrape.ForeignChange <= 0 {
		t.Errorf("probe_ownpace: policy %s, adaptive %v, foreign_change %v (probe's %v); want probe, true, 0 (probe's > 0)", op.Route.Policy, op.Scrape.Adaptive, op.Scrape.ForeignChange, cfg.Scrape.ForeignChange)
	}
	// probe_fresh and probe_nofresh are probe with pod_speed_fresh set
	// either way, whatever its default.
	for name, want := range map[string]bool{"probe_fresh": true, "probe_nofresh": false} {
		fc, err := StrategyConfig(name, urls)
		if err != nil {
			t.Fatal(err)
		}
		if fc.Route.Policy != config.PolicyProbe || fc.Route.Load.PodSpeedFresh != want {
			t.Errorf("%s: policy %s, pod_speed_fresh %v; want probe, %v", name, fc.Route.Policy, fc.Route.Load.PodSpeedFresh, want)
		}
	}
	// probe_budget and probe_nobudget are probe with scrape.foreign_budget
	// at its default value and at 0, whatever the default.
	for name, want := range map[string]float64{"probe_budget": config.DefaultForeignBudget, "probe_nobudget": 0} {
		bc, err := StrategyConfig(name, urls)
		if err != nil {
			t.Fatal(err)
		}
		if bc.Route.Policy != config.PolicyProbe || bc.Scrape.ForeignBudget != want || bc.Scrape.ForeignChange != cfg.Scrape.ForeignChange || config.DefaultForeignBudget <= 0 {
			t.Errorf("%s: policy %s, foreign_budget %v, foreign_change %v; want probe, %v (> 0 for probe_budget), %v", name, bc.Route.Policy, bc.Scrape.ForeignBudget, bc.Scrape.ForeignChange, want, cfg.Scrape.ForeignChange)
		}
	}
	if _, err := StrategyConfig("probe_d9q9", urls); err == nil {
		t.Error("unknown strategy accepted")
	}
}

// TestReadProxyStatsScrapes: the background scrapes of every backend and
// outcome are summed (results' scrapes_per_request).
func TestReadProxyStatsScrapes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "probegate_scrapes_total", Help: "x"}, []string{"backend", "outcome"})
	reg.MustRegister(c)
	c.WithLabelValues("a", "ok").Add(7)
	c.WithLabelValues("b", "ok").Add(5)
	c.WithLabelValues("b", "timeout").Add(1)
	st, err := ReadProxyStats(reg)
	if err != nil || st.Scrapes != 13 {
		t.Fatalf("scrapes %v (%v), want 13", st.Scrapes, err)
	}
	var sum ProxyStats
	sum.Add(st)
	sum.Add(st)
	if sum.Scrapes != 26 {
		t.Errorf("two replicas: %v scrapes, want 26", sum.Scrapes)
	}
}
