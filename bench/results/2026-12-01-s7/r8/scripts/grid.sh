#!/bin/bash
# usage: grid.sh NAME [ENV=VAL...]; runs the 5 workloads with strategy probe (and probe_pod) under the given env knobs
cd /tmp/r8; T=/work/shared/traces/azure_code_2023.csv; name=$1; shift
B=${BIN:-./ttftwhy_x}; S=${STRATS:-probe}
env "$@" nice -n 19 $B -trace $T -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -strategies $S > g_${name}_th.md 2> g_${name}_th.err
env "$@" nice -n 19 $B -trace $T -slowdown 1 -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -strategies $S > g_${name}_tm.md 2> g_${name}_tm.err
env "$@" nice -n 19 $B -workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 15s -warmup 0s -seeds 30 -replicas 1,8 -strategies $S > g_${name}_l80.md 2> g_${name}_l80.err
env "$@" nice -n 19 $B -workload lognormal -pods 8 -slowdown 2 -rate 17 -duration 15s -warmup 0s -seeds 30 -replicas 1,8 -strategies $S > g_${name}_lh.md 2> g_${name}_lh.err
env "$@" nice -n 19 $B -workload prefix -pods 8 -slowdown 1 -rate 48.6 -duration 15s -warmup 2s -seeds 30 -replicas 1 -strategies $S > g_${name}_px.md 2> g_${name}_px.err
