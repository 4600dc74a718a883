#!/bin/bash
# hold 3: raw peek (pg-peek) against main (pg-main), alternating, wrk 5 s each, CPU from /proc; then perf stat one each
cd /tmp/s5
echo "start $(date -u +%T) $(uptime)"
./up.sh start
for i in 1 2 3 4; do
  if [ $((i%2)) = 1 ]; then o="main peek"; else o="peek main"; fi
  for b in $o; do ./m.sh $b 5 -- /tmp/s5/pg-$b -config /tmp/s5/cfg.yaml; done
done
for b in main peek; do PERFSTAT=1 ./m.sh ${b}_stat 5 -- /tmp/s5/pg-$b -config /tmp/s5/cfg.yaml; done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
