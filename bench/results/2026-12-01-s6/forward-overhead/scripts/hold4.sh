#!/bin/bash
# hold 4: revert (main d38c7de with 9c603e1 reverted) vs new (d38c7de), wrk 4 pairs alternating + perf stat each; then BenchmarkForward (bfwd.sh)
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
R="./m.sh revert 4 -- /tmp/s6f/pg-revert -config /tmp/s6f/cfg.yaml"
N="./m.sh new 4 -- /tmp/s6f/pg-new -config /tmp/s6f/cfg.yaml"
$R; $N; $N; $R; $R; $N; $N; $R
PERFSTAT=1 ./m.sh revert_stat 5 -- /tmp/s6f/pg-revert -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh new_stat 5 -- /tmp/s6f/pg-new -config /tmp/s6f/cfg.yaml
./up.sh stop
echo "end wrk $(date -u +%T) $(uptime)"
./bfwd.sh
