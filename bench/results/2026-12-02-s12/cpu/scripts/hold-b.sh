#!/bin/bash
# hold-b.sh: CPU profile (4 s) and a 1 s runtime trace of probegate (base) under wrk -t2 -c64
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
PROF=1 ./cnt4.sh base-prof 4 64 -- /tmp/probegate-base12 $CFG
TRACE=1 ./cnt4.sh base-trace 2 64 -- /tmp/probegate-base12 $CFG
PROF=1 ./cnt4.sh min-prof 4 64 -- /tmp/cpu12/minproxy -admin
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
