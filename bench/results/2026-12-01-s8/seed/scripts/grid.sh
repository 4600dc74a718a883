#!/bin/bash
# fleetsim grid for issue 13 (seed, session 8): fresh pods (-pod-history 0)
# and long-lived pods (-pod-history 3: each pod's counters start with its
# speed-weighted share of three earlier 20 s / 15 s windows of the same
# workload), 30 windows, R=1 and R=8, SCHED_IDLE.
# usage: grid.sh TTFTWHY OUTDIR STRATEGIES
W=$1; O=$2; S=$3; T=/work/shared/traces/azure_code_2023.csv
mkdir -p $O
run() { name=$1; shift; chrt -i 0 nice -n 19 $W "$@" -strategies $S > $O/$name.md 2> $O/$name.err; }
for h in 0 3; do
  run th_h$h  -trace $T -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history $h &
  run tm_h$h  -trace $T -slowdown 1 -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history $h &
  run l80_h$h -workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 15s -warmup 0s -seeds 30 -replicas 1,8 -pod-history $h &
  run lh_h$h  -workload lognormal -pods 8 -slowdown 2 -rate 17 -duration 15s -warmup 0s -seeds 30 -replicas 1,8 -pod-history $h &
  run px_h$h  -workload prefix -pods 8 -slowdown 1 -rate 48.6 -duration 15s -warmup 2s -seeds 30 -replicas 1 -pod-history $h &
  wait
done
run th_h3rr -trace $T -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history 3 -pod-history-rr &
run th_h1   -trace $T -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history 1 &
wait
