#!/bin/bash
# alt.sh PAIRS DUR BIN_A BIN_B: upstreams up, then PAIRS alternated pairs of m.sh (wrk -t2 -c64 DUR s) for A and B
cd /tmp/s8f
pairs=$1; dur=$2; a=$3; b=$4
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in $(seq $pairs); do
  if [ $((i%2)) = 1 ]; then order="$a $b"; else order="$b $a"; fi
  for v in $order; do ./m.sh $(basename $v) $dur -- $v -config /tmp/s8f/cfg.yaml; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
