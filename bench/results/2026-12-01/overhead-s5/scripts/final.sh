#!/bin/bash
# final.sh OUTDIR [extra flags]: one full overhead run with 3 rounds, baseline = session start build
out=$1; shift
cd /work/wt12
echo "start $(date -u +%T) $(uptime)" > /tmp/s5/$(basename $out).load
env PROBEGATE_BENCH_BASELINE_BIN=/tmp/probegate-base /tmp/s5/bench-final -scenario overhead -repeat 3 "$@" -no-progress -out $out > /tmp/s5/$(basename $out).log 2>&1
echo "end $(date -u +%T) $(uptime)" >> /tmp/s5/$(basename $out).load
