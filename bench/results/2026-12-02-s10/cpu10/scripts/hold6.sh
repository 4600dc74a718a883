#!/bin/bash
# hold6: N alternated pairs of m2.sh 4 s, least_inflight: base10 (session start 53b36b7) vs pg-main (main at fb7098d)
cd /tmp/c10; echo "start $(date -u +%T) $(uptime)"; ./up.sh start
for i in $(seq $1); do
 if [ $((i%2)) = 1 ]; then order="base main"; else order="main base"; fi
 for v in $order; do
  if [ $v = base ]; then b=/tmp/probegate-base10; else b=/tmp/c10/pg-main; fi
  ./m2.sh li_$v 4 -- $b -config /tmp/c10/cfg-least_inflight.yaml
 done
done
./up.sh stop; echo "end $(date -u +%T) $(uptime)"
