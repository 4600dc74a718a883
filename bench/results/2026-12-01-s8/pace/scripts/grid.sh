#!/bin/bash
# usage: grid.sh NAME [ENV=VAL...]; workloads l80 lh th (+tm px with ALL=1), R=1,8
cd /tmp/pace/out; T=/work/shared/traces/azure_code_2023.csv; name=$1; shift
B=${BIN:-/tmp/pace/ttftwhy_new}; S=${STRATS:-probe}
W=${W:-"l80 lh th"}
for w in $W; do
case $w in
th) A="-trace $T -duration 20s -warmup 0s -seeds 30 -replicas 1,8";;
tm) A="-trace $T -slowdown 1 -duration 20s -warmup 0s -seeds 30 -replicas 1,8";;
l80) A="-workload lognormal -pods 8 -slowdown 1 -rate 18 -duration 15s -warmup 0s -seeds 30 -replicas 1,8";;
lh) A="-workload lognormal -pods 8 -slowdown 2 -rate 17 -duration 15s -warmup 0s -seeds 30 -replicas 1,8";;
px) A="-workload prefix -pods 8 -slowdown 1 -rate 48.6 -duration 15s -warmup 2s -seeds 30 -replicas 1";;
esac
env "$@" chrt -i 0 nice -n 19 $B $A -strategies $S > g_${name}_$w.md 2> g_${name}_$w.err
done
