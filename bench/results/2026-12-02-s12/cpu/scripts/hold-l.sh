#!/bin/bash
# hold-l.sh ROUNDS: wrk -t2 -c64 4 s, five builds rotated: base (b5bf8d3), new (idle release 1 s), off (new code,
# release never armed: listener without the Proxy), r90 (release after 90 s: the idle deadline base arms), new2 (new rebuilt)
cd /tmp/cpu12
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/cpu12/cfg-least_inflight.yaml"
B=(base new off r90 new2)
for i in $(seq ${1:-3}); do
 for k in 0 1 2 3 4; do b=${B[$(( (k + i) % 5 ))]}; bin=/tmp/cpu12/pg-$b; [ $b = base ] && bin=/tmp/probegate-base12; ./cnt4.sh $b 4 64 -- $bin $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
