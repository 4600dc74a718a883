#!/bin/bash
# final.sh: the bench's overhead scenario, s7-usertime at bd78a41 (main) beside the session's start 5f506f9 (baseline), -repeat 3 -quick, unpinned.
echo "start $(date -u +%T) $(uptime)"
env PROBEGATE_BENCH_BASELINE_BIN=/tmp/s7u/pg-base /tmp/s7u/bench-final -scenario overhead -repeat 3 -quick -no-progress -out /tmp/s7u/ov7
echo "end $(date -u +%T) $(uptime)"
