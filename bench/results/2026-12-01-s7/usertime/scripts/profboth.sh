#!/bin/bash
# profboth.sh: perf record -F 4000 -g --all-user of the proxy for 4 s under wrk -t2 -c64, base (5f506f9) then final (bd78a41), one hold.
cd /tmp/s7u
echo "start $(date -u +%T) $(uptime)"
./up.sh start
PERFARGS=--all-user ./prof.sh base-final-user /tmp/s7u/pg-base
PERFARGS=--all-user ./prof.sh final-user /tmp/s7u/pg-final
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
