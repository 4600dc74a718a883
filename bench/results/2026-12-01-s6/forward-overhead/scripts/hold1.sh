#!/bin/bash
# hold 1: base (main 52d3dab) vs new1 (held request sent from the first read), 4 pairs alternating, then perf stat each
cd /tmp/s6f
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then ./m.sh base 4 -- /tmp/s6f/pg-base -config /tmp/s6f/cfg.yaml; ./m.sh new1 4 -- /tmp/s6f/pg-new1 -config /tmp/s6f/cfg.yaml
  else ./m.sh new1 4 -- /tmp/s6f/pg-new1 -config /tmp/s6f/cfg.yaml; ./m.sh base 4 -- /tmp/s6f/pg-base -config /tmp/s6f/cfg.yaml; fi
done
PERFSTAT=1 ./m.sh base_stat 5 -- /tmp/s6f/pg-base -config /tmp/s6f/cfg.yaml
PERFSTAT=1 ./m.sh new1_stat 5 -- /tmp/s6f/pg-new1 -config /tmp/s6f/cfg.yaml
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
