#!/bin/bash
# hold-f.sh ROUNDS: ReduceMemoryUsage under keep-alive only: pg-ka vs pg-rmu alternated (order swapped each round), wrk -t2 -c64 4 s; then system calls per request (perf stat) for each, keep-alive and close
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/conn11/cfg-least_inflight.yaml"
for i in $(seq ${1:-6}); do
if [ $((i % 2)) = 1 ]; then order="ka rmu"; else order="rmu ka"; fi
for b in $order; do ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b $CFG; done
done
for b in ka rmu; do SYSC=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b $CFG; SYSC=1 CLOSE=1 ./cnt3.sh $b 4 64 -- /tmp/conn11/pg-$b $CFG; done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
