#!/bin/bash
# hold-m.sh ROUNDS: wrk -t2 -c64 4 s, base (b5bf8d3), new (idle release) and off (new code, release never armed) rotated
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
B=(base new off)
for i in $(seq ${1:-8}); do
 for k in 0 1 2; do b=${B[$(( (k + i) % 3 ))]}; bin=/tmp/cpu12/pg-$b; [ $b = base ] && bin=/tmp/probegate-base12; ./cnt4.sh $b 4 64 -- $bin $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
