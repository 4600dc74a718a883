#!/bin/bash
# final.sh: the overhead scenario, -repeat 3, unpinned, beside the baseline = main d38c7de with 9c603e1 reverted
cd /work/wt-forward
echo "start $(date -u +%T) $(uptime)"
env PROBEGATE_BENCH_BASELINE_BIN=/tmp/s6f/pg-revert /tmp/s6f/bench-final -scenario overhead -repeat 3 -no-progress -out bench/results/2026-12-01-s6/forward-overhead
echo "end $(date -u +%T) $(uptime)"
