#!/bin/bash
# hold-e.sh ROUNDS: base (b5bf8d3) vs new (idle release) alternated, order swapped each round:
# wrk -t2 -c64 4 s keep-alive; then openloop 1000 req/s 4 s (ol4.sh)
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
for i in $(seq ${1:-6}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for b in $o; do bin=/tmp/probegate-base12; [ $b = new ] && bin=/tmp/cpu12/pg-new; ./cnt4.sh $b 4 64 -- $bin $CFG; done
done
for i in $(seq ${1:-6}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for b in $o; do bin=/tmp/probegate-base12; [ $b = new ] && bin=/tmp/cpu12/pg-new; ./ol4.sh ol-$b 1000 4s -- $bin $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
