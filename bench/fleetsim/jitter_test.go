package fleetsim

import (
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// Params.SpeedJitter delays the replica's first-byte observation, not the
// client's: one pod, requests one at a time (no work ahead), every first
// byte observed 1 s late on average. The learned time per token grows by
// about 1 s over the 2,000 tokens (0.5 ms a token), the clients' TTFTs do
// not change.
func TestSpeedJitterNoisesTheSampleNotTheClient(t *testing.T) {
	var jobs []Job
	for i := range 20 {
		jobs = append(jobs, Job{At: time.Duration(i) * 2 * time.Second, Prompt: vllmsim.Prompt{Tokens: 2000}, MaxTokens: 4})
	}
	run := func(p Params) []*Record {
		w := LognormalWorkload()
		var recs []*Record
		cfg := Config{Pods: 1, Replicas: 1, Strategy: "probe_tokens", Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
			Sim: PodSim(w), Slowdown: BenchSlowdown, Params: p, Seed: 1, Jobs: jobs,
			Record: func(r *Record) { recs = append(recs, r) }}
		if _, err := Run(cfg); err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(jobs) {
			t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
		}
		return recs
	}
	p := LoopbackParams()
	calm := run(p)
	p.SpeedJitter, p.SpeedJitterP = time.Second, 1
	noisy := run(p)
	for i := range calm {
		if calm[i].TTFT != noisy[i].TTFT {
			t.Fatalf("request %d: TTFT %v with jitter, %v without: the client must not see it", i, noisy[i].TTFT, calm[i].TTFT)
		}
	}
	c, n := calm[len(calm)-1].Pods[0].ViewNs, noisy[len(noisy)-1].Pods[0].ViewNs
	if c <= 0 || n-c < 0.1e6 {
		t.Fatalf("learned %v ns/token with 1 s jitter on every sample, %v without: want at least 0.1 ms a token more", n, c)
	}
}
