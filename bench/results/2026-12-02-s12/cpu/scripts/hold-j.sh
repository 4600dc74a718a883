#!/bin/bash
# hold-j.sh ROUNDS: base (b5bf8d3) vs new (idle release) alternated, order swapped each round, wrk -t2 -c64 4 s keep-alive
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
for i in $(seq ${1:-8}); do
 if [ $((i % 2)) = 1 ]; then o="base new"; else o="new base"; fi
 for b in $o; do bin=/tmp/probegate-base12; [ $b = new ] && bin=/tmp/cpu12/pg-new; ./cnt4.sh $b 4 64 -- $bin $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
