package fleetsim

import (
	"testing"
	"time"
)

// traceWindowRun runs window k of the committed trace slice (162 rows over
// 20 s, the live bench's calibrated replay) through the bench's hetero fleet
// (4 pods, the last 2x slow) with strategy, and returns the jobs, the run's
// config and each job's pod and TTFT.
func traceWindowRun(t *testing.T, strategy string, k int) ([]Job, Config, []int, []time.Duration) {
	t.Helper()
	w, err := TraceWorkload("")
	if err != nil {
		t.Fatal(err)
	}
	jobs := CalibratedJobs(w.Trace, 0, 162, k, 20*time.Second)
	pod := make([]int, len(jobs))
	ttft := make([]time.Duration, len(jobs))
	at := make(map[time.Duration]int, len(jobs))
	for i, j := range jobs {
		at[j.At] = i
	}
	if len(at) != len(jobs) {
		t.Fatalf("window %d: arrival times not unique", k)
	}
	cfg := Config{Pods: 4, Replicas: 1, Strategy: strategy, Workload: w, Rate: 8.1, Duration: 20 * time.Second,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: uint64(k + 1), Jobs: jobs, PodSlowdown: []float64{0, 0, 0, 2},
		Record: func(r *Record) { pod[at[r.At]], ttft[at[r.At]] = r.Pod, r.TTFT }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	return jobs, cfg, pod, ttft
}

// Replaying a run's assignment pod by pod gives every request the TTFT the
// whole simulation gave it, to the nanosecond: the offline search's
// evaluator is fleetsim's model, not an approximation of it.
func TestAssignReplayMatchesFleetsim(t *testing.T) {
	for _, st := range []string{OracleSim, "least_inflight"} {
		for k := range 3 {
			jobs, cfg, pod, want := traceWindowRun(t, st, k)
			f := NewAssignFleet(cfg)
			got, err := f.TTFTs(jobs, pod)
			if err != nil {
				t.Fatal(err)
			}
			for j := range jobs {
				if got[j] != want[j] {
					t.Fatalf("%s window %d job %d (prompt %d, pod %d): replay TTFT %v, fleetsim %v", st, k, j, jobs[j].Prompt.Tokens, pod[j], got[j], want[j])
				}
			}
		}
	}
}
