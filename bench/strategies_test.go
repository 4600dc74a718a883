package bench

import "testing"

// TestStrategyConfigs: every strategy name the bench accepts builds a valid
// configuration, and the d/quorum variants decide on every candidate.
func TestStrategyConfigs(t *testing.T) {
	urls := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	for _, s := range append(append([]string(nil), AllStrategies...), ExtraStrategies...) {
		if _, err := StrategyConfig(s, urls); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for s, d := range map[string]int{"probe_d3q3": 3, "probe_d4q4": 4, "probe_d8q8": 8} {
		cfg, err := StrategyConfig(s, urls)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Route.D != d || cfg.Probe.QuorumFor(cfg.Route.D) != d || cfg.Route.Policy != "probe" {
			t.Errorf("%s: d %d quorum %d policy %s, want d = quorum = %d, probe", s, cfg.Route.D, cfg.Probe.QuorumFor(cfg.Route.D), cfg.Route.Policy, d)
		}
	}
	if _, err := StrategyConfig("probe_d9q9", urls); err == nil {
		t.Error("unknown strategy accepted")
	}
}
