package fleetsim

import (
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// paramRun is idealRun with the non-greedy strategies' parameters, and
// returns each job's pod in job order (jobs' arrival times unique).
func paramRun(t *testing.T, strategy string, pods int, slow float64, p IdealParams, jobs []Job) []int {
	t.Helper()
	w := LognormalWorkload()
	ps := make([]float64, pods)
	ps[pods-1] = slow
	at := make(map[time.Duration]int, len(jobs))
	for i, j := range jobs {
		at[j.At] = i
	}
	pod := make([]int, len(jobs))
	cfg := Config{Pods: pods, Replicas: 1, Strategy: strategy, Workload: w, Rate: 1, Duration: jobs[len(jobs)-1].At + time.Millisecond,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: LoopbackParams(), Seed: 1, Jobs: jobs, PodSlowdown: ps, Ideal: p,
		Record: func(r *Record) { pod[at[r.At]] = r.Pod }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	return pod
}

func job(at time.Duration, prompt, out int) Job {
	return Job{At: at, Prompt: vllmsim.Prompt{Tokens: prompt}, MaxTokens: out}
}

// Three 7,000-token prompts fill the fast pods; a 6,000-token one 10 ms
// later gets its first token soonest on the idle 2x slow pod (1.46 s
// against 1.57 s), so the greedy rule sends it there. oracle_size keeps it
// off (its 1.46 s is not under 0.7 x 1.57 s), and so does oracle_look (1.46
// + 0.5 x 1.46 s of slow-pod time > 1.57 + 0.5 x 0.73 s); a 500-token
// prompt in its place still goes to the slow pod under both.
func TestNonGreedyKeepLargePromptsOffTheSlowPod(t *testing.T) {
	jobs := func(last int) []Job {
		return []Job{job(0, 7000, 1), job(time.Microsecond, 7000, 1), job(2*time.Microsecond, 7000, 1), job(10*time.Millisecond, last, 1)}
	}
	if pod := paramRun(t, OracleReplay, 4, 2, IdealParams{}, jobs(6000)); pod[3] != 3 {
		t.Fatalf("oracle_replay sent the large prompt to pod %d, want the slow pod 3 (earliest first token)", pod[3])
	}
	for _, st := range []string{OracleSize, OracleLook} {
		if pod := paramRun(t, st, 4, 2, IdealParams{}, jobs(6000)); pod[3] == 3 {
			t.Errorf("%s sent the 6,000-token prompt to the slow pod", st)
		}
		if pod := paramRun(t, st, 4, 2, IdealParams{}, jobs(500)); pod[3] != 3 {
			t.Errorf("%s sent the 500-token prompt to pod %d, want the idle slow pod", st, pod[3])
		}
	}
}

// Two equal pods: an 8,000-token prompt at 0 s on pod 0 (first token at
// 0.97 s), a 6,500-token one at 0.3 s on pod 1 (first token at 1.09 s, a
// TTFT of 0.79 s). A short prompt at 0.4 s gets its first token sooner on
// pod 0 (0.59 s against 0.71 s), where greedy sends it; oracle_tail sends
// it to pod 1, where the worst TTFT queued with it is 0.79 s, not 0.97 s.
func TestOracleTailAvoidsThePodWithTheWorstQueued(t *testing.T) {
	jobs := []Job{job(0, 8000, 1), job(300*time.Millisecond, 6500, 1), job(400*time.Millisecond, 100, 1)}
	if pod := paramRun(t, OracleReplay, 2, 1, IdealParams{}, jobs); pod[0] != 0 || pod[1] != 1 || pod[2] != 0 {
		t.Fatalf("oracle_replay pods %v, want [0 1 0]", pod)
	}
	if pod := paramRun(t, OracleTail, 2, 1, IdealParams{}, jobs); pod[0] != 0 || pod[1] != 1 || pod[2] != 1 {
		t.Fatalf("oracle_tail pods %v, want [0 1 1]", pod)
	}
}

// Two equal pods busy with 8,000-token prompts (from 0 s and 0.2 s): a
// third at 0.3 s waits at least 1.64 s anywhere. Past a Lost of 1 s,
// oracle_triage gives it up to the pod whose queue ends last (pod 1),
// where greedy takes the earliest (pod 0); under a Lost of 2 s it is
// greedy.
func TestOracleTriageParksALostRequest(t *testing.T) {
	jobs := []Job{job(0, 8000, 1), job(200*time.Millisecond, 8000, 1), job(300*time.Millisecond, 8000, 1)}
	if pod := paramRun(t, OracleReplay, 2, 1, IdealParams{}, jobs); pod[2] != 0 {
		t.Fatalf("oracle_replay sent the third prompt to pod %d, want 0", pod[2])
	}
	if pod := paramRun(t, OracleTriage, 2, 1, IdealParams{Lost: time.Second}, jobs); pod[2] != 1 {
		t.Fatalf("oracle_triage (lost 1 s) sent the third prompt to pod %d, want 1", pod[2])
	}
	if pod := paramRun(t, OracleTriage, 2, 1, IdealParams{Lost: 2 * time.Second}, jobs); pod[2] != 0 {
		t.Fatalf("oracle_triage (lost 2 s) sent the third prompt to pod %d, want 0", pod[2])
	}
}

// oracle_replay in a full simulation makes exactly AssignFleet.Greedy's
// choices on trace windows, and its requests get the replayed TTFTs.
func TestOracleReplayIsTheExactGreedy(t *testing.T) {
	for k := range 3 {
		jobs, cfg, pod, ttft := traceWindowRun(t, OracleReplay, k)
		f := NewAssignFleet(cfg)
		g, err := f.Greedy(jobs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.TTFTs(jobs, g)
		if err != nil {
			t.Fatal(err)
		}
		for j := range jobs {
			if pod[j] != g[j] || ttft[j] != want[j] {
				t.Fatalf("window %d job %d: oracle_replay pod %d TTFT %v, Greedy pod %d TTFT %v", k, j, pod[j], ttft[j], g[j], want[j])
			}
		}
	}
}

// oracle_pack is oracle_triage for large prompts only: the same lost
// 8,000-token prompt is parked when large prompts start at 4,000 tokens,
// and sent greedily when they start at 9,000.
func TestOraclePackParksOnlyLargePrompts(t *testing.T) {
	jobs := []Job{job(0, 8000, 1), job(200*time.Millisecond, 8000, 1), job(300*time.Millisecond, 8000, 1)}
	if pod := paramRun(t, OraclePack, 2, 1, IdealParams{Lost: time.Second, SizeTokens: 4000}, jobs); pod[2] != 1 {
		t.Fatalf("oracle_pack (large from 4,000) sent the lost prompt to pod %d, want 1", pod[2])
	}
	if pod := paramRun(t, OraclePack, 2, 1, IdealParams{Lost: time.Second, SizeTokens: 9000}, jobs); pod[2] != 0 {
		t.Fatalf("oracle_pack (large from 9,000) sent the prompt to pod %d, want 0 (greedy)", pod[2])
	}
}
