#!/bin/bash
# hold-k.sh: perf record of base and new under wrk -t2 -c64 3 s (find what the new build spends more on)
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
./cnt5.sh base-rec2 3 64 -- /tmp/probegate-base12 $CFG
./cnt5.sh new-rec2 3 64 -- /tmp/cpu12/pg-new $CFG
./cnt5.sh base-rec3 3 64 -- /tmp/probegate-base12 $CFG
./cnt5.sh new-rec3 3 64 -- /tmp/cpu12/pg-new $CFG
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
