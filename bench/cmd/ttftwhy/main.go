// Command ttftwhy asks, per request, what sets the TTFT tail of a trace
// replay on a hetero fleet: it replays the trace through bench/fleetsim (the
// production pickers in virtual time) for each strategy and, for the
// requests in the top 1% of TTFT, reports their prompt sizes, the pod they
// went to (the slow one?), the work queued there when they were dispatched,
// what the router's cache said, and the TTFT the best pod would have given
// them had nothing else arrived (the fleetsim oracle_sim's estimate): the
// part of the tail no routing could have avoided. Analysis only: runs are
// deterministic for a seed and need no bench lock (virtual time).
//
//	go run ./bench/cmd/ttftwhy -trace ../shared/traces/azure_code_2023.csv -duration 600s -seeds 3
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
	"github.com/probegate/probegate/internal/vllmsim"
)

func main() {
	trace := flag.String("trace", "", "trace (Azure schema); empty: the bench's committed slice")
	rate := flag.Float64("rate", 8.1, "offered requests/s (the live bench's trace_hetero at -trace-load 0.7: 0.7 x 11.6)")
	dur := flag.Duration("duration", 300*time.Second, "simulated arrival time per seed")
	warm := flag.Duration("warmup", 10*time.Second, "arrivals before this are not measured")
	seeds := flag.Int("seeds", 3, "seeds first-seed .. first-seed+N-1")
	first := flag.Int("first-seed", 1, "first seed (the trace workload: seed k replays the k-th window)")
	var ideal fleetsim.IdealParams
	flag.IntVar(&ideal.SizeTokens, "ideal-size", 0, "oracle_size: prompt tokens from which a slow pod must win by the margin (0: default)")
	flag.Float64Var(&ideal.SizeMargin, "ideal-margin", 0, "oracle_size: the margin (0: default)")
	flag.Float64Var(&ideal.Beta, "ideal-beta", 0, "oracle_look: weight of the own prefill time (0: default)")
	flag.DurationVar(&ideal.Lost, "ideal-lost", 0, "oracle_triage: TTFT from which a request is given up (0: default)")
	pods := flag.Int("pods", 4, "pods")
	slow := flag.Float64("slowdown", 2, "the last pod's slowdown (1: homogeneous)")
	reps := flag.String("replicas", "1,8", "replica counts")
	strats := flag.String("strategies", "least_inflight,cached,probe,probe_tokens,cached_tokens,oracle,oracle_nospeed,oracle_ttft,oracle_sim", "strategies")
	window := flag.Duration("window", 20*time.Second, "window of the per-window p99s (the live bench's run length)")
	top := flag.Float64("top", 1, "the tail analysed, in percent of requests")
	offset := flag.Duration("offset", 3*time.Minute, "trace time of the first replayed row (the live bench's -trace-offset)")
	sizes := flag.String("workload", "trace", "trace (the calibrated replay, seed k the k-th window), lognormal (Poisson arrivals, the bench's default sizes: steady_80 is 8 pods, -slowdown 1, -rate 18), prefix (the bench's prefix scenario: 8 pods, -slowdown 1, -rate 48.6) or general:SIZES[:ARRIVALS] (a size distribution and arrival process of fleetsim -general, e.g. general:decode_heavy:poisson)")
	seats := flag.Int("seats", 0, "batch seats per pod (0: fleetsim.PodSim's 4); the KV cache grows with them as in fleetsim -general -seats")
	jitter := flag.Duration("speed-jitter", 0, "fleetsim Params.SpeedJitter: mean extra delay of the replica's first-byte observation (speed sample noise)")
	jitterP := flag.Float64("speed-jitter-p", 0, "fleetsim Params.SpeedJitterP: share of first bytes observed late")
	hist := flag.Int("pod-history", 0, "long-lived pods: each pod's counters start with its share of this many earlier windows of the workload (fleetsim Config.History; 0: fresh pods, counters at 0)")
	lockstep := flag.Bool("lockstep", false, "start every replica's scrape loops at time 0, as the live bench starts its proxies (fleetsim Config.Lockstep; default: a seeded phase)")
	records := flag.String("records", "", "write one JSON line per measured request to DIR/<entry>_<strategy>_s<seed>.jsonl, in the schema of the live bench's -records (bench.ArrivalRecord; entry trace_hetero_r<R> or <workload>_r<R>), to compare one seed's decisions live and simulated")
	histRR := flag.Bool("pod-history-rr", false, "deal the history round robin over the pods (default: in proportion to their speed)")
	flag.Parse()
	params := fleetsim.LoopbackParams()
	params.SpeedJitter, params.SpeedJitterP = *jitter, *jitterP

	w, err := fleetsim.TraceWorkload(*trace)
	if err != nil {
		fail(err)
	}
	switch *sizes {
	case "lognormal":
		w = fleetsim.LognormalWorkload()
	case "prefix":
		w = fleetsim.UniformWorkload()
	default:
		if g, ok := strings.CutPrefix(*sizes, "general:"); ok {
			name, shape, _ := strings.Cut(g, ":")
			if w, err = fleetsim.GeneralWorkload(name, shape, w.Trace); err != nil {
				fail(err)
			}
			*sizes = "general"
		}
	}
	sim := fleetsim.GeneralPodSim(w, *seats)
	if sim.BlockSize == 0 {
		sim.BlockSize = vllmsim.DefaultConfig().BlockSize
	}
	ps := make([]float64, *pods)
	ps[*pods-1] = *slow
	for _, rs := range strings.Split(*reps, ",") {
		var r int
		fmt.Sscan(rs, &r)
		fmt.Printf("\n## R=%d, %d pods (pod %d %gx slow), %.2f req/s, %v x %d seeds\n\n", r, *pods, *pods-1, *slow, *rate, *dur, *seeds)
		fmt.Println("| strategy | n | p50 | p90 | p99 | p99 by seed | p99 of 20 s windows: median (min..max) | top: on slow pod | top: prompt p50 | top: queued tokens at pod p50 | top: waiting at pod p50 | top: whatif at its pod / TTFT | top: best pod's whatif / TTFT p50 | top: best whatif > p99 (unavoidable) | all: on slow pod |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, st := range strings.Split(*strats, ",") {
			var recs []*fleetsim.Record
			var bySeed []string
			var winP99 []float64
			var scrapes, probes float64 // per pod per second, summed over seeds
			for k := *first; k < *first+*seeds; k++ {
				var sr []*fleetsim.Record
				var jobs []fleetsim.Job
				switch *sizes {
				case "trace":
					jobs = fleetsim.CalibratedJobs(w.Trace, *offset, int(*rate*dur.Seconds()), k-1, *dur)
				case "prefix":
					jobs = fleetsim.PrefixJobs(*rate, *dur, int64(k), sim.BlockSize)
				}
				var history []fleetsim.Job
				for h := range *hist {
					var hj []fleetsim.Job
					idx := 1000 + (k-1)*(*hist) + h // windows no seed measures
					switch *sizes {
					case "trace":
						hj = fleetsim.CalibratedJobs(w.Trace, *offset, int(*rate*dur.Seconds()), idx, *dur)
					case "prefix":
						hj = fleetsim.PrefixJobs(*rate, *dur, int64(idx), sim.BlockSize)
					default:
						hj = fleetsim.DrawJobs(w, *rate, *dur, uint64(idx))
					}
					for _, j := range hj {
						j.At += time.Duration(h) * *dur
						history = append(history, j)
					}
				}
				cfg := fleetsim.Config{Jobs: jobs, History: history, HistoryRoundRobin: *histRR, Lockstep: *lockstep, Pods: *pods, Replicas: r, Strategy: st, Workload: w, Rate: *rate, Duration: *dur, Warmup: *warm,
					Sim: sim, Slowdown: fleetsim.BenchSlowdown, Params: params, Seed: uint64(k), PodSlowdown: ps, Ideal: ideal,
					Record: func(rec *fleetsim.Record) { sr = append(sr, rec) }}
				m, err := fleetsim.Run(cfg)
				if err != nil {
					fail(fmt.Errorf("%s seed %d: %w", st, k, err))
				}
				if *records != "" {
					entry := fmt.Sprintf("%s_r%d", *sizes, r)
					if *sizes == "trace" && *slow > 1 {
						entry = fmt.Sprintf("trace_hetero_r%d", r)
					}
					if err := writeRecords(*records, entry, st, int64(k), sr); err != nil {
						fail(err)
					}
				}
				scrapes += m.PodScrapesPerS
				probes += m.PodProbesPerS
				bySeed = append(bySeed, fmt.Sprintf("%.0f", bench.Percentile(ttfts(sr), 99)))
				for t := *warm; t < *dur; t += *window {
					var in []*fleetsim.Record
					for _, rec := range sr {
						if rec.At >= t && rec.At < t+*window {
							in = append(in, rec)
						}
					}
					if len(in) > 20 {
						winP99 = append(winP99, bench.Percentile(ttfts(in), 99))
					}
				}
				recs = append(recs, sr...)
			}
			all := ttfts(recs)
			p99 := bench.Percentile(all, 99)
			cut := bench.Percentile(all, 100-*top)
			var tops []*fleetsim.Record
			for _, rec := range recs {
				if ms(rec.TTFT) >= cut {
					tops = append(tops, rec)
				}
			}
			var onSlow, allSlow, unavoid, topHit, allHit float64
			for _, rec := range recs {
				if rec.Pods[rec.Pod].Cached > 0 {
					allHit++
				}
			}
			for _, rec := range tops {
				if rec.Pods[rec.Pod].Cached > 0 {
					topHit++
				}
			}
			if *sizes == "prefix" {
				var q, qa []float64
				for _, rec := range tops {
					q = append(q, float64(rec.Pods[rec.Pod].Running+rec.Pods[rec.Pod].Waiting))
				}
				for _, rec := range recs {
					qa = append(qa, float64(rec.Pods[rec.Pod].Running+rec.Pods[rec.Pod].Waiting))
				}
				fmt.Fprintf(os.Stderr, "%s R=%d: pod held the prefix: top %.0f%%, all %.0f%%; true queue at the pod: top p50 %.0f, all p50 %.0f p90 %.0f\n",
					st, r, 100*topHit/float64(len(tops)), 100*allHit/float64(len(recs)), bench.Percentile(q, 50), bench.Percentile(qa, 50), bench.Percentile(qa, 90))
			}
			var prompt, queued, waiting, own, best []float64
			for _, rec := range recs {
				if ps[rec.Pod] > 1 {
					allSlow++
				}
			}
			for _, rec := range tops {
				if ps[rec.Pod] > 1 {
					onSlow++
				}
				sn := rec.Pods[rec.Pod]
				prompt = append(prompt, float64(rec.Prompt))
				queued = append(queued, float64(sn.AheadTokens))
				waiting = append(waiting, float64(sn.Waiting))
				own = append(own, ms(sn.Whatif)/ms(rec.TTFT))
				b := sn.Whatif
				for _, o := range rec.Pods {
					b = min(b, o.Whatif)
				}
				best = append(best, ms(b)/ms(rec.TTFT))
				if ms(b) >= p99 {
					unavoid++
				}
			}
			fmt.Fprintf(os.Stderr, "%s R=%d: pod-side cost per pod per s (all replicas, mean over seeds): scrapes %.2f, probes %.2f\n", st, r, scrapes/float64(*seeds), probes/float64(*seeds))
			seatBound(st, r, sim.MaxNumSeqs, ps, recs, tops)
			coldStart(st, r, recs, tops)
			// The replica's learned (and pod-reported) speed of the last
			// (slow) pod over the others' mean, at each arrival (once all
			// are known).
			for _, k := range []struct {
				name string
				ns   func(*fleetsim.Snapshot) float64
			}{{"learned", func(s *fleetsim.Snapshot) float64 { return s.ViewNs }}, {"pod-reported", func(s *fleetsim.Snapshot) float64 { return s.ViewPodNs }}} {
				var ratio []float64
				for _, rec := range recs {
					sum, n, sl := 0.0, 0, 0.0
					for i := range rec.Pods {
						ns := k.ns(&rec.Pods[i])
						if i == len(rec.Pods)-1 {
							sl = ns
						} else if ns > 0 {
							sum += ns
							n++
						}
					}
					if sl > 0 && n > 0 {
						ratio = append(ratio, sl/(sum/float64(n)))
					}
				}
				if len(ratio) > 0 {
					fmt.Fprintf(os.Stderr, "%s R=%d: %s ns last pod/others p10 %.2f p50 %.2f p90 %.2f\n", st, r, k.name, bench.Percentile(ratio, 10), bench.Percentile(ratio, 50), bench.Percentile(ratio, 90))
				}
			}
			// No window with more than 20 requests (a short run or a low
			// rate): no window p99s.
			wins := "n/a"
			if len(winP99) > 0 {
				slices.Sort(winP99)
				wins = fmt.Sprintf("%.0f (%.0f..%.0f)", bench.Percentile(winP99, 50), winP99[0], winP99[len(winP99)-1])
			}
			n := float64(len(tops))
			fmt.Printf("| %s | %d | %.0f | %.0f | **%.0f** | %s | %s | %.0f%% | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f%% | %.0f%% |\n",
				st, len(all), bench.Percentile(all, 50), bench.Percentile(all, 90), p99, strings.Join(bySeed, ", "),
				wins,
				100*onSlow/n, bench.Percentile(prompt, 50), bench.Percentile(queued, 50), bench.Percentile(waiting, 50), bench.Percentile(own, 50), bench.Percentile(best, 50), 100*unavoid/n, 100*allSlow/float64(len(recs)))
		}
	}
}

func ttfts(rs []*fleetsim.Record) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = ms(r.TTFT)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ttftwhy:", err)
	os.Exit(1)
}

// coldStart prints, by arrival time since the run started (when the
// proxies started, knowing nothing), how many requests arrived, how many
// of them are in the top (tops), and for how many the deciding replica
// had learned the last pod's speed (route.load.learn_speed) at arrival:
// in the trace replay the tail is made at the start of a window, when
// proxies at R=8 have timed few first bytes of each pod (bench/HISTORY.md,
// issue 13 session 7).
func coldStart(st string, r int, recs, tops []*fleetsim.Record) {
	bounds := []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}
	bucket := func(at time.Duration) int {
		for i, b := range bounds {
			if at < b {
				return i
			}
		}
		return len(bounds)
	}
	var all, top, known [4]int
	for _, rec := range recs {
		b := bucket(rec.At)
		all[b]++
		if rec.Pods[len(rec.Pods)-1].ViewNs > 0 {
			known[b]++
		}
	}
	for _, rec := range tops {
		top[bucket(rec.At)]++
	}
	fmt.Fprintf(os.Stderr, "%s R=%d: arrivals at 0-2/2-5/5-10/10+ s since start: all %v, top %v, last pod's learned speed known at the decision %v\n",
		st, r, all, top, known)
}

// seatBound prints, for all requests and for the top ones (tops), how
// often the pod a request was sent to had every batch seat taken at its
// arrival (running >= seats) or requests waiting, how often another pod
// then had a seat free and none waiting (a newcomer would have started at
// once there), and how often the chosen pod was a slow one: where
// requests hold seats for long decodes, the time to first token is the
// wait for a seat.
func seatBound(st string, r, seats int, slow []float64, recs, tops []*fleetsim.Record) {
	count := func(rs []*fleetsim.Record) (full, freeElsewhere, onSlow int) {
		for _, rec := range rs {
			sn := rec.Pods[rec.Pod]
			if slow[rec.Pod] > 1 {
				onSlow++
			}
			if sn.Running < seats && sn.Waiting == 0 {
				continue
			}
			full++
			for i, o := range rec.Pods {
				if i != rec.Pod && o.Running < seats && o.Waiting == 0 {
					freeElsewhere++
					break
				}
			}
		}
		return
	}
	af, ae, as := count(recs)
	tf, te, ts := count(tops)
	fmt.Fprintf(os.Stderr, "%s R=%d: sent to a pod with no free seat: all %d/%d (a free seat elsewhere %d), top %d/%d (elsewhere %d); on a slow pod: all %d, top %d\n",
		st, r, af, len(recs), ae, tf, len(tops), te, as, ts)
}
