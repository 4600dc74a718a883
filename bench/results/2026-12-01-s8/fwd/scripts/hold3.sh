#!/bin/bash
# hold3.sh: alt3.sh 5 5 base8 c2 c3 (wrk), then the bench's overhead scenario (-quick -repeat 3), main at 958b1af
# (bench-new) beside the session start 4d97e63 (/tmp/probegate-base8) as baseline.
cd /tmp/s8f
./alt3.sh 5 5 /tmp/s8f/pg-base8 /tmp/s8f/pg-c2 /tmp/s8f/pg-c3
echo "bench start $(date -u +%T) $(uptime)"
env PROBEGATE_BENCH_BASELINE_BIN=/tmp/probegate-base8 /tmp/s8f/bench-new -scenario overhead -repeat 3 -quick -no-progress -out /tmp/s8f/ov8
echo "bench end $(date -u +%T) $(uptime)"
