#!/bin/bash
# prof0.sh: base (4d97e63) under wrk -t2 -c64: perf record --all-user (4 s) and a pprof CPU profile (5 s)
cd /tmp/s8f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
PERFARGS=--all-user ./prof.sh base-user /tmp/probegate-base8
./pprof.sh base /tmp/probegate-base8
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
