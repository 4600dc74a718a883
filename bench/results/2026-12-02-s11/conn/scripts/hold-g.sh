#!/bin/bash
# hold-g.sh ROUNDS RATE: ReduceMemoryUsage, latency at a fixed open-loop rate: pg-ka vs pg-rmu alternated (order swapped each round), openloop -rate RATE 4 s
cd /tmp/conn11
echo "start $(date -u +%T) $(uptime)"
./up.sh start
CFG="-config /tmp/conn11/cfg-least_inflight.yaml"
for i in $(seq ${1:-6}); do
if [ $((i % 2)) = 1 ]; then order="ka rmu"; else order="rmu ka"; fi
for b in $order; do ./ol3.sh $b ${2:-1000} 4s -- /tmp/conn11/pg-$b $CFG; done
done
./up.sh stop
echo "end $(date -u +%T) $(uptime)"
