// Command ttftbound estimates how low any router that only chooses pods
// could push the p99 TTFT of the calibrated trace replay (bench/cmd/ttftwhy's
// windows) on the hetero fleet: for each window it knows every arrival in
// advance (clairvoyant) and runs a bounded local search over request-to-pod
// assignments (fleetsim.AssignFleet.Search), scored by fleetsim's exact pod
// replay, starting from the greedy oracle_sim assignment. The windows' TTFTs
// are pooled into one p99, as ttftwhy pools its strategies'. Replicas play
// no part: a fixed assignment is served the same behind any number of them.
//
// What it finds is an assignment that exists, so its p99 is reachable by a
// clairvoyant router; a search that stops above a target is a heuristic's
// failure, not a proof that the target is out of reach.
//
//	go run ./bench/cmd/ttftbound -trace ../shared/traces/azure_code_2023.csv -seeds 30 -targets 4965ms,5328ms
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/bench/fleetsim"
)

func main() {
	trace := flag.String("trace", "", "trace (Azure schema); empty: the bench's committed slice")
	rate := flag.Float64("rate", 8.1, "offered requests/s (as ttftwhy)")
	dur := flag.Duration("duration", 20*time.Second, "arrival time per window")
	first := flag.Int("first-seed", 1, "first window (seed k is the k-th window, as ttftwhy's)")
	seeds := flag.Int("seeds", 30, "windows first-seed .. first-seed+seeds-1")
	pods := flag.Int("pods", 4, "pods")
	slow := flag.Float64("slowdown", 2, "the last pod's slowdown")
	offset := flag.Duration("offset", 3*time.Minute, "trace time of the first replayed row")
	targets := flag.String("targets", "4965ms,5328ms,6400ms,6800ms", "TTFT targets, one search per target")
	iters := flag.Int("iters", 20000, "moves tried per window and target (the search's cost bound)")
	temp := flag.Duration("temp", 0, "annealing start temperature (0: descent only)")
	holds := flag.String("holds", "", "also replay an online router that holds requests for each of these (fleetsim.AssignFleet.HoldGreedy), in arrival order and smallest prompt first; e.g. 100ms,250ms")
	sights := flag.String("sights", "", "also replay a router that sees this far ahead (fleetsim.AssignFleet.Rolling, aiming at the first target), e.g. 1s,2s,5s")
	step := flag.Duration("step", time.Second, "Rolling: how often it fixes the next step's decisions")
	rollIters := flag.Int("roll-iters", 1000, "Rolling: moves tried per step and window")
	chain := flag.Bool("chain", false, "each target's search starts from the previous target's result (targets in falling order), not from the greedy")
	perWindow := flag.Bool("windows", false, "print each window's result")
	flag.Parse()

	w, err := fleetsim.TraceWorkload(*trace)
	if err != nil {
		fail(err)
	}
	ps := make([]float64, *pods)
	ps[*pods-1] = *slow
	f := fleetsim.NewAssignFleet(fleetsim.Config{Pods: *pods, Sim: fleetsim.PodSim(w), Slowdown: fleetsim.BenchSlowdown,
		Params: fleetsim.LoopbackParams(), PodSlowdown: ps})
	var ts []time.Duration
	for _, s := range strings.Split(*targets, ",") {
		t, err := time.ParseDuration(s)
		if err != nil {
			fail(err)
		}
		ts = append(ts, t)
	}
	n := int(*rate * dur.Seconds())
	var hs []time.Duration
	if *holds != "" {
		for _, s := range strings.Split(*holds, ",") {
			h, err := time.ParseDuration(s)
			if err != nil {
				fail(err)
			}
			hs = append(hs, h)
		}
	}
	holdAll := make([][2][]float64, len(hs))
	var ss []time.Duration
	if *sights != "" {
		for _, s := range strings.Split(*sights, ",") {
			h, err := time.ParseDuration(s)
			if err != nil {
				fail(err)
			}
			ss = append(ss, h)
		}
	}
	rollAll := make([][]float64, len(ss))
	var greedyAll, prompts []float64
	var bounds [][]time.Duration
	all := make([][]float64, len(ts))
	over := make([]int, len(ts))
	tried := make([]int, len(ts))
	onSlow := make([]int, len(ts))
	// Prompt tokens sent to the slow pod, and all prompt tokens: [0] the
	// greedy start, [i+1] target i's search.
	slowTok := make([]int, len(ts)+1)
	allTok := 0
	// The requests over each target: their prompts and how many on the
	// slow pod; [0] the greedy's over the first target.
	overPrompt := make([][]float64, len(ts)+1)
	overSlow := make([]int, len(ts)+1)
	took := make([]time.Duration, len(ts))
	for k := *first; k < *first+*seeds; k++ {
		jobs := fleetsim.CalibratedJobs(w.Trace, *offset, n, k-1, *dur)
		g, err := f.Greedy(jobs)
		if err != nil {
			fail(err)
		}
		gt, err := f.TTFTs(jobs, g)
		if err != nil {
			fail(err)
		}
		greedyAll = append(greedyAll, ms(gt)...)
		for j, p := range g {
			if gt[j] > ts[0] {
				overPrompt[0] = append(overPrompt[0], float64(jobs[j].Prompt.Tokens))
				if p == *pods-1 {
					overSlow[0]++
				}
			}
			allTok += jobs[j].Prompt.Tokens
			prompts = append(prompts, float64(jobs[j].Prompt.Tokens))
			if p == *pods-1 {
				slowTok[0] += jobs[j].Prompt.Tokens
			}
		}
		bounds = append(bounds, f.FluidBound(jobs, 60))
		for i, h := range ss {
			_, tt, err := f.Rolling(jobs, h, *step, fleetsim.SearchOptions{Target: ts[0], Iters: *rollIters, Seed: uint64(k), Temp: *temp})
			if err != nil {
				fail(err)
			}
			rollAll[i] = append(rollAll[i], ms(tt)...)
		}
		for i, h := range hs {
			for o, sjf := range []bool{false, true} {
				tt, err := f.HoldGreedy(jobs, h, sjf)
				if err != nil {
					fail(err)
				}
				holdAll[i][o] = append(holdAll[i][o], ms(tt)...)
			}
		}
		start := g
		for i, t := range ts {
			t0 := time.Now()
			r, err := f.Search(jobs, start, fleetsim.SearchOptions{Target: t, Iters: *iters, Seed: uint64(k), Temp: *temp})
			if err != nil {
				fail(err)
			}
			took[i] += time.Since(t0)
			if *chain {
				start = r.Assign
			}
			all[i] = append(all[i], ms(r.TTFT)...)
			over[i] += r.Over
			tried[i] += r.Tried
			for j, p := range r.Assign {
				if r.TTFT[j] > t {
					overPrompt[i+1] = append(overPrompt[i+1], float64(jobs[j].Prompt.Tokens))
					if p == *pods-1 {
						overSlow[i+1]++
					}
				}
				if p == *pods-1 {
					onSlow[i]++
					slowTok[i+1] += jobs[j].Prompt.Tokens
				}
			}
			if *perWindow {
				lb := bounds[len(bounds)-1]
				fmt.Fprintf(os.Stderr, "window %d target %v: bound worst/3rd/6th %v/%v/%v, greedy max %.0f, over %d -> %d, max %.0f, moves %d (kept %d)\n",
					k, t, lb[0].Round(time.Millisecond), lb[2].Round(time.Millisecond), lb[5].Round(time.Millisecond), slices.Max(ms(gt)), countOver(gt, t), r.Over, slices.Max(ms(r.TTFT)), r.Tried, r.Accepted)
			}
		}
	}
	nreq := len(greedyAll)
	fmt.Printf("## clairvoyant assignment search: windows %d..%d (%d requests, p99 = the %dth worst), %d pods (pod %d %gx slow), %.2f req/s\n\n",
		*first, *first+*seeds-1, nreq, nreq-int(0.99*float64(nreq)), *pods, *pods-1, *slow, *rate)
	// bench.Percentile interpolates p99 between the sorted TTFTs at
	// floor(h) and floor(h)+1, h = (n-1) x 0.99: it is at least the
	// (n - floor(h))-th worst.
	except := nreq - 1 - int(float64(nreq-1)*0.99)
	fmt.Printf("lower bound for any routing and scheduling (fleetsim.FluidBound): the %dth worst TTFT, so p99, >= **%.0f** ms\n\n", except+1, float64(fleetsim.PooledBound(bounds, except))/float64(time.Millisecond))
	fmt.Printf("greedy start (oracle_replay, the exact greedy): p50 %.0f, p99 **%.0f** ms, %d requests over the first target, %.0f%% of prompt tokens on the slow pod\n\n",
		bench.Percentile(greedyAll, 50), bench.Percentile(greedyAll, 99), countOverMs(greedyAll, ts[0]), 100*float64(slowTok[0])/float64(allTok))
	fmt.Printf("greedy's requests over the first target: prompt p50 %.0f tokens (all requests: %.0f), %d of %d on the slow pod\n\n",
		bench.Percentile(overPrompt[0], 50), bench.Percentile(prompts, 50), overSlow[0], len(overPrompt[0]))
	if len(ss) > 0 {
		fmt.Printf("foresight: every %v, the next %v's requests are placed by a %d-move search aiming at %v over the requests arriving in the next SIGHT (fleetsim.AssignFleet.Rolling)\n\n", *step, *step, *rollIters, ts[0])
		fmt.Println("| sight | requests over target | p50 | p90 | p99 |")
		fmt.Println("|---|---|---|---|---|")
		for i, h := range ss {
			a := rollAll[i]
			fmt.Printf("| %v | %d | %.0f | %.0f | **%.0f** |\n", h, countOverMs(a, ts[0]), bench.Percentile(a, 50), bench.Percentile(a, 90), bench.Percentile(a, 99))
		}
		fmt.Println()
	}
	if len(hs) > 0 {
		fmt.Println("online: hold each request to the next multiple of the hold, then dispatch the batch greedily (exact replay)")
		fmt.Println()
		fmt.Println("| hold | batch order | p50 | p90 | p99 |")
		fmt.Println("|---|---|---|---|---|")
		for i, h := range hs {
			for o, name := range []string{"arrival", "smallest prompt first"} {
				a := holdAll[i][o]
				fmt.Printf("| %v | %s | %.0f | %.0f | **%.0f** |\n", h, name, bench.Percentile(a, 50), bench.Percentile(a, 90), bench.Percentile(a, 99))
			}
		}
		fmt.Println()
	}
	fmt.Println("| target ms | requests over target (pooled) | p50 | p99 | max | requests on slow pod | prompt tokens on slow pod | over target: prompt p50 | over target: on slow pod | moves tried | search time |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for i, t := range ts {
		fmt.Printf("| %.0f | %d | %.0f | **%.0f** | %.0f | %.0f%% | %.0f%% | %.0f | %d | %d | %v |\n", float64(t)/float64(time.Millisecond), over[i],
			bench.Percentile(all[i], 50), bench.Percentile(all[i], 99), slices.Max(all[i]), 100*float64(onSlow[i])/float64(nreq),
			100*float64(slowTok[i+1])/float64(allTok), bench.Percentile(overPrompt[i+1], 50), overSlow[i+1], tried[i], took[i].Round(time.Second))
	}
}

func countOver(ts []time.Duration, t time.Duration) int { return countOverMs(ms(ts), t) }

func countOverMs(xs []float64, t time.Duration) int {
	n := 0
	for _, x := range xs {
		if x > float64(t)/float64(time.Millisecond) {
			n++
		}
	}
	return n
}

func ms(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ttftbound:", err)
	os.Exit(1)
}
