package config

import (
	"reflect"
	"testing"
)

// TestSampling: route.d and probe.quorum auto follow the pool's size for
// the probe policy (2 of 2 below LargePool backends, 4 of 4 from it up);
// explicit values are kept as they were before the rule.
func TestSampling(t *testing.T) {
	for _, c := range []struct {
		policy       string
		d, quorum, n int
		wantD, wantQ int
	}{
		{PolicyProbe, DAuto, QuorumAuto, 0, 2, 2},
		{PolicyProbe, DAuto, QuorumAuto, 8, 2, 2},
		{PolicyProbe, DAuto, QuorumAuto, 16, 2, 2},
		{PolicyProbe, DAuto, QuorumAuto, 31, 2, 2},
		{PolicyProbe, DAuto, QuorumAuto, 32, 4, 4},
		{PolicyProbe, DAuto, QuorumAuto, 64, 4, 4},
		{PolicyProbe, DAuto, QuorumAuto, 1024, 4, 4},
		// Only the probe policy was measured.
		{PolicyLeastInflight, DAuto, QuorumAuto, 1024, 2, 2},
		{PolicyCached, DAuto, QuorumAuto, 1024, 2, 2},
		// An explicit route.d is kept, with the quorum it had (2).
		{PolicyProbe, 2, QuorumAuto, 1024, 2, 2},
		{PolicyProbe, 3, QuorumAuto, 1024, 3, 2},
		{PolicyProbe, 1, QuorumAuto, 8, 1, 2},
		{PolicyProbe, 4, 4, 8, 4, 4},
		// An explicit quorum is kept beside route.d auto; 0 is d-1.
		{PolicyProbe, DAuto, 2, 1024, 4, 2},
		{PolicyProbe, DAuto, 0, 1024, 4, 3},
		{PolicyProbe, DAuto, 0, 8, 2, 1},
		{PolicyProbe, 3, 0, 8, 3, 2},
	} {
		cfg := Default()
		cfg.Route.Policy, cfg.Route.D, cfg.Probe.Quorum = c.policy, c.d, c.quorum
		if d, q := cfg.Sampling(c.n); d != c.wantD || q != c.wantQ {
			t.Errorf("%s route.d %d probe.quorum %d over %d backends: d %d quorum %d, want %d, %d", c.policy, c.d, c.quorum, c.n, d, q, c.wantD, c.wantQ)
		}
	}
	if d := Default(); d.Route.D != DAuto || d.Probe.Quorum != QuorumAuto {
		t.Errorf("Default(): route.d %d, probe.quorum %d; want auto, auto", d.Route.D, d.Probe.Quorum)
	}
}

// TestParseAuto: `auto` and 0 select route.d's rule, `auto` probe.quorum's;
// probe.quorum 0 keeps meaning d-1 (TestParseProblems: auto is refused
// where no rule exists).
func TestParseAuto(t *testing.T) {
	for _, c := range []struct {
		yaml      string
		d, quorum int
	}{
		{base + "route:\n  d: auto\nprobe:\n  quorum: auto\n", DAuto, QuorumAuto},
		{base + "route:\n  d: 0\n", DAuto, QuorumAuto},
		{base + "route:\n  d: 4\nprobe:\n  quorum: 0\n", 4, 0},
		{base + "route:\n  d: 3\n", 3, QuorumAuto},
		{base + "probe:\n  quorum: 4\n", DAuto, 4},
		{base + "probe:\n  quorum: -1\n", DAuto, QuorumAuto}, // what yaml.Marshal writes for auto
		{base + "route:\n  d: &a auto\nprobe:\n  quorum: *a\n", DAuto, QuorumAuto},
	} {
		got, err := Parse([]byte(c.yaml))
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		want := Default()
		want.Backends.Static = got.Backends.Static
		want.Route.D, want.Probe.Quorum = c.d, c.quorum
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: route.d %d probe.quorum %d, want %d, %d", c.yaml, got.Route.D, got.Probe.Quorum, c.d, c.quorum)
		}
	}
}
