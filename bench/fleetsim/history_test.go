package fleetsim

import (
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// historyRun runs jobs through two pods (the second 2x slow) and one
// replica scraping them, with history as Config.History, and returns the
// records in arrival order.
func historyRun(t *testing.T, strategy string, jobs, history []Job) []*Record {
	t.Helper()
	w := LognormalWorkload()
	var recs []*Record
	cfg := Config{Pods: 2, Replicas: 1, Strategy: strategy, Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
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

// TestHistoryGivesPodsLifetimeCounters: fresh pods report no prefill
// counters at the run's start, so a replica's pod-reported speed stays
// unknown for the first seconds; pods with a history report its counters
// from the first scrape, and the slow pod's reads about 2x the fast one's
// by the run's second request.
func TestHistoryGivesPodsLifetimeCounters(t *testing.T) {
	var jobs, history []Job
	for i := range 4 {
		jobs = append(jobs, Job{At: 1500*time.Millisecond + time.Duration(i)*100*time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 500}, MaxTokens: 2})
	}
	for i := range 120 {
		history = append(history, Job{At: time.Duration(i) * 500 * time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 2000}, MaxTokens: 4})
	}
	fresh := historyRun(t, "probe_podseed8", jobs, nil)
	if ns := fresh[1].Pods[1].ViewPodNs; ns != 0 {
		t.Fatalf("fresh pods: the slow pod's pod-reported speed is %v at 1.6 s, want unknown", ns)
	}
	long := historyRun(t, "probe_podseed8", jobs, history)
	fast, slow := long[1].Pods[0].ViewPodNs, long[1].Pods[1].ViewPodNs
	if r := slow / fast; !(r >= 1.8 && r <= 2.2) {
		t.Fatalf("long-lived pods: pod-reported speeds %v and %v ns a token at 1.6 s: ratio %.2f, want about 2", fast, slow, r)
	}
}
