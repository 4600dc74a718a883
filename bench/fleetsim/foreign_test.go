package fleetsim

import (
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// gateRun runs jobs through two long-lived pods (the second 2x slow,
// each with its share of history) behind replicas replicas with
// strategy, and returns the records in arrival order.
func gateRun(t *testing.T, strategy string, replicas int, jobs, history []Job) []*Record {
	t.Helper()
	w := LognormalWorkload()
	var recs []*Record
	cfg := Config{Pods: 2, Replicas: replicas, Strategy: strategy, Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1, Jobs: jobs, PodSlowdown: []float64{1, 2},
		History: history, Record: func(r *Record) { recs = append(recs, r) }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
	return recs
}

// TestPodSpeedSeedWaitsForOtherClients: with long-lived pods, the gated
// seed (probe_podgate8: route.load.pod_speed_samples 8 with
// pod_speed_foreign) behind one replica routes every request exactly as
// probe without the seed (probe_podseed0), since the pods hold none but that replica's
// requests (its foreign share stays 0), while the ungated seed
// (probe_podseed8) routes differently. Behind four replicas the pods'
// reports show the other replicas' requests, the gate opens, and the
// gated seed routes unlike probe without it.
func TestPodSpeedSeedWaitsForOtherClients(t *testing.T) {
	var jobs, history []Job
	for i := range 160 {
		jobs = append(jobs, Job{At: 200*time.Millisecond + time.Duration(i)*60*time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 600 + 400*(i%5)}, MaxTokens: 8})
	}
	for i := range 120 {
		history = append(history, Job{At: time.Duration(i) * 500 * time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 2000}, MaxTokens: 4})
	}
	pods := func(rs []*Record) []int {
		out := make([]int, len(rs))
		for i, r := range rs {
			out[i] = r.Pod
		}
		return out
	}
	same := func(a, b []int) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	for _, replicas := range []int{1, 4} {
		base := pods(gateRun(t, "probe_podseed0", replicas, jobs, history))
		gatedRecs := gateRun(t, "probe_podgate8", replicas, jobs, history)
		gated := pods(gatedRecs)
		ungated := pods(gateRun(t, "probe_podseed8", replicas, jobs, history))
		open := 0
		for _, r := range gatedRecs {
			if p := r.Pods[r.Pod]; p.ViewForeign >= 0.25 {
				open++
			}
		}
		t.Logf("R=%d: gate open at %d of %d arrivals", replicas, open, len(gatedRecs))
		switch replicas {
		case 1:
			if open != 0 || !same(base, gated) {
				t.Errorf("one replica: gate open at %d arrivals, gated seed routes as probe: %v; want 0, true", open, same(base, gated))
			}
			if same(base, ungated) {
				t.Errorf("one replica: the ungated seed routes exactly as probe: this workload cannot tell the gate's effect")
			}
		default:
			if open < len(gatedRecs)/2 || same(base, gated) {
				t.Errorf("%d replicas: gate open at %d of %d arrivals, gated seed routes as probe: %v; want most, false", replicas, open, len(gatedRecs), same(base, gated))
			}
		}
	}
}
