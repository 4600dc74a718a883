#!/bin/bash
# alt3.sh PAIRS DUR BIN...: upstreams up, then PAIRS rounds of m.sh (wrk -t2 -c64 DUR s) per binary, order rotated each round
cd /tmp/s8f
pairs=$1; dur=$2; shift 2; bins=("$@")
echo "start $(date -u +%T) $(uptime)"
./up.sh start
n=${#bins[@]}
for i in $(seq $pairs); do
  for j in $(seq 0 $((n-1))); do v=${bins[$(( (i+j) % n ))]}; ./m.sh $(basename $v) $dur -- $v -config /tmp/s8f/cfg.yaml; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
