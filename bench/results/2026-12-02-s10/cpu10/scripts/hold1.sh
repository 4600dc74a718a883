#!/bin/bash
# hold1: pprof CPU+allocs of base10 least_inflight and probe; then m.sh 2 pairs li/probe, GOMAXPROCS=1 li
cd /tmp/c10
echo "start $(date -u +%T) $(uptime)"
./up.sh start
./pprof.sh li /tmp/probegate-base10 /tmp/c10/cfg-least_inflight.yaml
./pprof.sh probe /tmp/probegate-base10 /tmp/c10/cfg-probe.yaml
for i in 1 2; do
./m.sh li 5 -- /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml
./m.sh probe 5 -- /tmp/probegate-base10 -config /tmp/c10/cfg-probe.yaml
./m.sh li_gmp1 5 -- env GOMAXPROCS=1 /tmp/probegate-base10 -config /tmp/c10/cfg-least_inflight.yaml
./m.sh probe_gmp1 5 -- env GOMAXPROCS=1 /tmp/probegate-base10 -config /tmp/c10/cfg-probe.yaml
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
