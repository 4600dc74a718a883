#!/bin/bash
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"; ./up.sh start
./perfrec.sh li-perf cfg-least_inflight.yaml 5 -- /tmp/probegate-base10
./perfrec.sh probe-perf cfg-probe.yaml 5 -- /tmp/probegate-base10
./up.sh stop; echo "end $(date -u +%T) $(uptime)"
