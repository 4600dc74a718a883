package fleetsim

import (
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// idealRun replays jobs through pods pods (the last slowed by slow) with
// strategy and returns every request's Record.
func idealRun(t *testing.T, strategy string, pods int, slow float64, jobs []Job) []*Record {
	t.Helper()
	w := LognormalWorkload()
	ps := make([]float64, pods)
	ps[pods-1] = slow
	var recs []*Record
	cfg := Config{Pods: pods, Replicas: 1, Strategy: strategy, Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1, Jobs: jobs, PodSlowdown: ps,
		Record: func(r *Record) { recs = append(recs, r) }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
	return recs
}

// Whatif replays a pod's engine forward exactly: a lone request's
// predicted TTFT is the one it gets (up to the network and proxy time,
// under a millisecond), and PodSlowdown doubles it on the slow pod.
func TestWhatifMatchesALoneRequest(t *testing.T) {
	recs := idealRun(t, "round_robin", 2, 2, []Job{{At: 0, Prompt: vllmsim.Prompt{Tokens: 2000}, MaxTokens: 5}})
	r := recs[0]
	if d := r.TTFT - r.Pods[r.Pod].Whatif; d < 0 || d > time.Millisecond {
		t.Fatalf("TTFT %v, whatif at its pod %v", r.TTFT, r.Pods[r.Pod].Whatif)
	}
	fast, slow := r.Pods[0].Whatif, r.Pods[1].Whatif
	if ratio := float64(slow) / float64(fast); ratio < 1.99 || ratio > 2.01 {
		t.Fatalf("whatif fast %v, slow %v: want the slow pod 2x", fast, slow)
	}
	// 2000 tokens x 60 us + 6 ms step, x TimeScale 2.
	if want := 2 * (6*time.Millisecond + 2000*60*time.Microsecond); fast != want {
		t.Fatalf("whatif on the idle fast pod %v, want %v", fast, want)
	}
}

// oracle_sim sends each request where whatif predicts the earliest first
// token (after four long prompts, a short one goes where the long work
// ahead ends first), and the prediction holds when nothing else arrives.
func TestOracleSimPicksTheEarliestFirstToken(t *testing.T) {
	var jobs []Job
	for i := range 4 {
		jobs = append(jobs, Job{At: time.Duration(i) * time.Microsecond, Prompt: vllmsim.Prompt{Tokens: 6000}, MaxTokens: 50})
	}
	jobs = append(jobs, Job{At: 10 * time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 500}, MaxTokens: 5})
	recs := idealRun(t, OracleSim, 4, 2, jobs)
	var last *Record
	for _, r := range recs {
		if r.Prompt == 500 {
			last = r
		}
	}
	best := last.Pods[0].Whatif
	for _, sn := range last.Pods {
		best = min(best, sn.Whatif)
	}
	if last.Pods[last.Pod].Whatif != best {
		t.Fatalf("oracle_sim sent the short request to pod %d (whatif %v), best %v", last.Pod, last.Pods[last.Pod].Whatif, best)
	}
	// Nothing arrives after it: its TTFT is the prediction (+ network).
	if d := last.TTFT - best; d < 0 || d > time.Millisecond {
		t.Fatalf("short request: TTFT %v, whatif %v", last.TTFT, best)
	}
}

// The prefix workload: prompts carry their text, so pods hit their prefix
// caches (8 system prompts of 3,000 characters, each request 750 of its
// ~850 tokens shared) and replicas route on the prompt's block hashes.
func TestPrefixJobsShareSystemPrompts(t *testing.T) {
	w := UniformWorkload()
	sim := PodSim(w)
	jobs := PrefixJobs(40, 3*time.Second, 1, vllmsim.DefaultConfig().BlockSize)
	var recs []*Record
	cfg := Config{Pods: 8, Replicas: 1, Strategy: "probe", Workload: w, Rate: 40, Duration: 3 * time.Second,
		Sim: sim, Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1, Jobs: jobs,
		Record: func(r *Record) { recs = append(recs, r) }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	hit, cached, prompt := 0, 0, 0
	for _, r := range recs {
		if r.Pods[r.Pod].Cached > 0 {
			hit++
		}
		cached += r.Pods[r.Pod].Cached
		prompt += r.Prompt
	}
	if len(recs) < 100 || hit < len(recs)*8/10 || cached < prompt/2 {
		t.Fatalf("%d requests, %d sent to a pod holding their prefix, %d of %d prompt tokens cached", len(recs), hit, cached, prompt)
	}
}
