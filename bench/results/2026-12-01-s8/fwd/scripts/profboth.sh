#!/bin/bash
# profboth.sh: perf record -F 4000 -g --all-user of the proxy for 4 s under wrk -t2 -c64, base (4d97e63) then c2 (d80b902), one hold; then a 5 s pprof CPU profile of each.
cd /tmp/s8f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
PERFARGS=--all-user ./prof.sh base8-user /tmp/s8f/pg-base8
PERFARGS=--all-user ./prof.sh c2-user /tmp/s8f/pg-c2
./pprof.sh base8 /tmp/s8f/pg-base8
./pprof.sh c2 /tmp/s8f/pg-c2
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
