package fleetsim

import (
	"slices"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// shareRun runs jobs through one pod and two replicas (request i to
// replica i mod 2) with strategy and returns the records in arrival order
// and the sim, drained.
func shareRun(t *testing.T, strategy string, jobs []Job) ([]*Record, *sim) {
	t.Helper()
	w := LognormalWorkload()
	var recs []*Record
	cfg := Config{Pods: 1, Replicas: 2, Strategy: strategy, Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1, Jobs: jobs,
		Record: func(r *Record) { recs = append(recs, r) }}
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(); err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(jobs) {
		t.Fatalf("%s: %d records for %d jobs", strategy, len(recs), len(jobs))
	}
	slices.SortFunc(recs, func(a, b *Record) int { return int(a.At - b.At) })
	return recs, s
}

// _sharespeed: replica 1's first decision, after replica 0's request to
// the pod streamed its first byte, already knows the pod's speed (replica
// 0's sample); on its own it has timed nothing yet. Both replicas then
// learn the same samples.
func TestShareSpeedTimesOtherReplicasFirstBytes(t *testing.T) {
	var jobs []Job
	for i := range 6 {
		jobs = append(jobs, Job{At: time.Duration(i) * 2 * time.Second, Prompt: vllmsim.Prompt{Tokens: 2000}, MaxTokens: 4})
	}
	own, _ := shareRun(t, "probe_tokens", jobs)
	if ns := own[1].Pods[0].ViewNs; ns != 0 {
		t.Fatalf("without sharing, replica 1's first decision knew a speed (%v ns/token) before timing any request", ns)
	}
	shared, s := shareRun(t, "probe_tokens_sharespeed", jobs)
	if ns := shared[1].Pods[0].ViewNs; ns <= 0 {
		t.Fatalf("_sharespeed: replica 1's first decision knew no speed after replica 0's first byte")
	}
	_, _, a := s.replicas[0].backends[0].State().Work()
	_, _, b := s.replicas[1].backends[0].State().Work()
	if a <= 0 || a != b {
		t.Fatalf("_sharespeed: the replicas learned %v and %v ns/token from the same first bytes", a, b)
	}
}

// _sharetokens: a 4,000-token prompt that replica 0 sent and that has not
// streamed yet counts in replica 1's view of the pod, and every replica's
// count is back to 0 once all requests are done.
func TestShareTokensCountsOtherReplicasPendingPrompts(t *testing.T) {
	jobs := []Job{
		{At: 0, Prompt: vllmsim.Prompt{Tokens: 4000}, MaxTokens: 4},
		{At: time.Millisecond, Prompt: vllmsim.Prompt{Tokens: 100}, MaxTokens: 4},
		{At: 3 * time.Second, Prompt: vllmsim.Prompt{Tokens: 100}, MaxTokens: 4},
	}
	own, _ := shareRun(t, "probe_tokens", jobs)
	if p := own[1].Pods[0].ViewPrefill; p != 0 {
		t.Fatalf("without sharing, replica 1 counted %v pending tokens it never sent", p)
	}
	shared, s := shareRun(t, "probe_tokens_sharetokens", jobs)
	if p := shared[1].Pods[0].ViewPrefill; p != 4000 {
		t.Fatalf("_sharetokens: replica 1 counted %v pending tokens at the pod, want replica 0's 4000", p)
	}
	for _, r := range s.replicas {
		st := r.backends[0].State()
		if p, _, _ := st.Work(); p != 0 || st.View(epoch, 0).PrefillRequests != 0 {
			t.Fatalf("_sharetokens: replica %d still counts %v tokens in %d requests after every request ended", r.idx, p, st.View(epoch, 0).PrefillRequests)
		}
	}
}

// _sharestate: every replica routes over replica 0's Backends (one State
// per pod); a rules suffix after it still applies.
func TestShareStateOneSetOfStates(t *testing.T) {
	w := LognormalWorkload()
	for _, st := range []string{"probe", "probe_sharestate", "probe_sharestate_norules"} {
		s, err := newSim(Config{Pods: 3, Replicas: 3, Strategy: st, Workload: w, Rate: 1, Duration: time.Second,
			Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		same := s.replicas[1].backends[2] == s.replicas[0].backends[2] && s.replicas[2].backends[0] == s.replicas[0].backends[0]
		if want := st != "probe"; same != want {
			t.Fatalf("%s: replicas share Backends %v, want %v", st, same, want)
		}
		if st == "probe_sharestate_norules" && !s.replicas[1].prober.rules.noSWR {
			t.Fatalf("%s: the rules suffix was lost", st)
		}
	}
}
